"""Bad cloud settings are refused before anything is declared, each message naming the field, the rule and the
fix; and the add-on table merges a stack's partial overrides into the built-in roles."""

from __future__ import annotations

import pytest

from components.config import DEFAULT_ADDONS, SettingsError
from components.model import parse_settings
from tests.components.cloud.test_common import ECS_POOL, EXISTING_VPC, settings_of
from tests.conftest import stack_settings


def problems(overrides: dict, stack: str = "dev") -> list[str]:
    with pytest.raises(SettingsError) as info:
        parse_settings(stack_settings(stack, overrides))
    return [str(p) for p in info.value.problems]


BAD = [
    # (case, stack, overrides, field prefix of the message, text in the message)
    ("lingjun pool without its eflo ids", "dev", {"gpu_pool": {"lingjun": None}}, "gpu_pool", "eflo_cluster_id"),
    ("lingjun pool with a blank eflo id", "dev", {"gpu_pool": {"lingjun": {"eflo_node_group_id": " "}}},
     "gpu_pool.lingjun.eflo_node_group_id", "must not be empty"),
    ("gpu zone not in zones", "dev", {"gpu_pool": {"zone": "ap-southeast-1c"}}, "gpu_pool.zone", "is not one of zones"),
    ("bucket name with capitals", "dev", {"storage": {"bucket_name": "My_Bucket"}}, "storage.bucket_name",
     "OSS bucket name"),
    ("bucket name too short", "dev", {"storage": {"bucket_name": "ab"}}, "storage.bucket_name", "3-63"),
    ("bucket name with a double hyphen", "dev", {"storage": {"bucket_name": "verl--data"}}, "storage.bucket_name",
     "single hyphens"),
    ("domain with certificate_id source but no id", "dev", {"sandbox": {"tls": {"source": "certificate_id"}}},
     "sandbox.tls", "needs certificate_id"),
    ("certificate id with the site suffix", "dev",
     {"sandbox": {"tls": {"source": "certificate_id", "certificate_id": "123-cn-hangzhou"}}},
     "sandbox.tls.certificate_id", "digits only"),
    ("existing cluster without its id", "existing-ecs", {"cluster": {"existing_cluster_id": None}}, "cluster",
     "mode=existing needs existing_cluster_id"),
    ("existing cluster without its vpc", "existing-ecs", {"cluster": {"network": None}}, "cluster.network.vpc_id",
     "mode=existing needs cluster.network.vpc_id"),
    ("lingjun stack on kubernetes 1.30", "dev", {"cluster": {"kubernetes_version": "1.30.7-aliyun.1"}},
     "cluster.kubernetes_version", ">= 1.31"),
    ("new cluster in a given vpc without pod vswitches", "dev",
     {"cluster": {"network": {"vpc_id": "vpc-x", "node_vswitch_ids": ["vsw-a", "vsw-b"], "pod_vswitch_ids": []}}},
     "cluster.network.pod_vswitch_ids",
     "pod_vswitch_ids needs one Terway pod vSwitch per zone"),
    ("domain with the open-source manager, which serves no E2B ingress", "dev",
     {"sandbox": {"manager": "open-source", "mcp_port": 8082}}, "sandbox.domain", "bills by the hour for nothing"),
    ("domain with sandboxes disabled", "dev", {"sandbox": {"enabled": False}}, "sandbox.domain",
     "served only by the ACK sandbox manager add-on"),
    ("domain with one zone", "dev", {"zones": ["ap-southeast-1a"], "cluster": {"network": {
        "node_vswitch_ids": ["vsw-a"], "pod_vswitch_ids": ["vsw-p"]}}}, "zones", "ALB needs two zones"),
    ("domain at the dns zone apex", "dev", {"sandbox": {"domain": "example.com"}}, "sandbox.domain",
     "where a CNAME cannot live"),
    ("ecs min nodes above nodes", "dev", {**ECS_POOL, "gpu_pool": {**ECS_POOL["gpu_pool"], "ecs": {
        "instance_types": ["ecs.gn7i-c16g1.4xlarge"], "min_nodes": 2}}}, "gpu_pool", "exceeds nodes"),
    ("too many extra tags for OSS", "dev", {"tags": {f"k{i}": "v" for i in range(8)}}, "tags", "at most 7"),
    ("unknown add-on role", "dev", {"versions": {"addons": {"kuberay_operator": {"name": "x"}}}}, "versions.addons",
     "unknown add-on role"),
    ("disabling a required add-on", "dev", {"versions": {"addons": {"csi_plugin": {"enabled": False}}}},
     "versions.addons.csi_plugin.enabled", "csi-plugin cannot be disabled: the program needs it always"),
    ("disabling a needed conditional add-on", "dev", {"versions": {"addons": {"rdma": {"enabled": False}}}},
     "versions.addons.rdma.enabled", "ack-rdma-device-plugin cannot be disabled: the program needs it when "
     "`gpu_pool.kind: lingjun`"),
    ("forcing on an add-on whose condition does not hold", "dev", {"versions": {"addons": {"kube_queue": {"enabled": True}}}},
     "versions.addons.kube_queue.enabled", "ack-kube-queue is installed only when `kind: platform` and `queue.enabled: true`"),
    ("kubeconfig ttl beyond what ACK issues", "dev", {"cluster": {"kubeconfig_ttl_minutes": 10000}},
     "cluster.kubeconfig_ttl_minutes", "4320"),
    ("lingjun stack with terway-eniip older than ACK's floor", "dev",
     {"versions": {"addons": {"terway": {"version": "v1.16.7"}}}}, "versions.addons.terway.version",
     "versions.addons.terway.version v1.16.7 is below v1.16.8, the oldest terway-eniip ACK supports with Lingjun"),
    ("lingjun stack with an old csi-plugin", "dev", {"versions": {"addons": {"csi_plugin": {"version": "v1.30.1"}}}},
     "versions.addons.csi_plugin.version", "below v1.32.2"),
    ("lingjun stack with the self-managed csi-provisioner too old", "dev",
     {"versions": {"addons": {"csi_provisioner": {"name": "csi-provisioner", "version": "v1.31.9-aliyun.1"}}}},
     "versions.addons.csi_provisioner.version", "below v1.32.2, the oldest csi-provisioner"),
    ("lingjun stack with an old pod identity webhook", "dev",
     {"versions": {"addons": {"pod_identity": {"version": "v0.2.0"}}}}, "versions.addons.pod_identity.version",
     "pin v0.2.1 or newer, or leave the version empty"),
    ("sandbox manager config key that is not a path", "dev",
     {"versions": {"sandbox_manager_config_keys": {"domain": "sandbox manager/domain"}}},
     "versions.sandbox_manager_config_keys.domain", "dotted key path"),
]


@pytest.mark.parametrize("case,stack,overrides,field,text", BAD, ids=[b[0] for b in BAD])
def test_bad_cloud_settings_are_refused_naming_the_field_and_the_fix(case, stack, overrides, field, text):
    found = problems(overrides, stack)
    assert any(p.startswith(field) and text in p for p in found), found


def test_a_stack_overrides_one_addon_key_and_keeps_every_built_in_role():
    s = settings_of("dev", {"versions": {"addons": {"alb": {"version": "v2.19.0"}}}})
    assert set(s.versions.addons) == set(DEFAULT_ADDONS)
    assert (s.versions.addons["alb"].name, s.versions.addons["alb"].version) == ("alb-ingress-controller", "v2.19.0")
    assert s.versions.addons["kuberay"].name == "ack-kuberay-operator"


def test_lingjun_addon_floors_accept_equal_newer_or_unpinned_versions_and_do_not_apply_to_ecs_pools():
    ok = {"terway": {"version": "v1.16.8"}, "csi_plugin": {"version": "v1.32.2-aliyun.1"},
          "pod_identity": {"version": "v0.3.0"}, "csi_provisioner": {"name": "csi-provisioner", "version": "v1.33.0"}}
    assert settings_of("dev", {"versions": {"addons": ok}}).versions.addons["terway"].version == "v1.16.8"
    assert settings_of("dev").versions.addons["terway"].version is None, "unpinned: ACK installs its own"
    old = {"terway": {"version": "v1.10.0"}}
    assert settings_of("dev", {**ECS_POOL, "versions": {"addons": old}}).gpu_pool.kind == "ecs"


def test_the_good_variants_the_cloud_layer_supports_validate():
    assert settings_of("dev", EXISTING_VPC).cluster.network.vpc_id == "vpc-given"
    assert settings_of("dev", ECS_POOL).gpu_pool.ecs.min_nodes == 0
    assert settings_of("dev", {"sandbox": {"tls": {"source": "certificate_id", "certificate_id": "9"}}})
    assert settings_of("existing-ecs").cluster.network.node_vswitch_ids
