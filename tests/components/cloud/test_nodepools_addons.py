"""Node pools (system + Lingjun or autoscaled ECS GPU) and the add-ons, KubeRay and sandbox add-ons."""

from __future__ import annotations

import asyncio
import json

import pulumi
import pytest

from components.cloud.addons import (
    ALB_ADDON_CONFIG,
    base_addons,
    kuberay_helm_values,
    sandbox_manager_config,
    sandbox_manager_config_json,
)
from components.cloud.nodepools import gpu_pool_labels, gpu_pool_taints
from components.wiring import GPU_TAINT_KEY, POOL_LABEL, gpu_scheduling
from tests.charts import chart_values, dotted_paths, unknown_keys
from tests.components.cloud.test_common import ECS_POOL, depends_on, json_input, labels, settings_of
from tests.conftest import record

POOL = "alicloud:cs/nodePool:NodePool"
ADDON = "alicloud:cs/kubernetesAddon:KubernetesAddon"


# ------------------------------------------------------------------------------------------------ pools
def test_the_system_pool_is_small_pay_as_you_go_cpu_labelled_system_and_untainted():
    rec = record("dev")
    s = settings_of("dev")
    pool = rec.get(POOL, "pools-system")
    assert labels(pool) == {POOL_LABEL: "system"}
    assert "taints" not in pool.inputs
    assert pool.inputs["instanceChargeType"] == "PostPaid"
    assert pool.inputs["desiredSize"] == "2", "desired_size is a string in pulumi_alicloud 4.0.0"
    assert pool.inputs["instanceTypes"] == s.system_pool.instance_types
    assert len(pool.inputs["vswitchIds"]) == 2


def test_the_gpu_pool_is_tainted_so_only_training_lands_there():
    for stack in ("dev", "existing-ecs"):
        s = settings_of(stack)
        pool = record(stack).get(POOL, "pools-gpu")
        assert pool.inputs["taints"] == [{"key": GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}]
        assert labels(pool)[POOL_LABEL] == "gpu"
        assert labels(pool)["verl-ack/gpus-per-node"] == str(s.gpu_pool.gpus_per_node)
        # What the pool carries is exactly what wiring tells the training job to select and tolerate.
        sched = gpu_scheduling(s)
        assert all(labels(pool)[k] == v for k, v in sched.node_selector.items())
        assert any(t["key"] == GPU_TAINT_KEY and t["effect"] == "NoSchedule" for t in sched.tolerations)


def test_a_lingjun_pool_joins_the_eflo_node_group_from_the_settings():
    pool = record("dev").get(POOL, "pools-gpu")
    assert pool.inputs["type"] == "lingjun"
    assert pool.inputs["efloNodeGroup"] == {"clusterId": "i118191730000000000", "groupId": "i127062910000000000"}
    assert "scalingConfig" not in pool.inputs and "instanceTypes" not in pool.inputs
    assert labels(pool)["verl-ack/max-nodes"] == "1", "no NodePool field states a Lingjun pool's size"


def test_an_ecs_gpu_pool_is_pay_as_you_go_without_spot_and_scales_from_zero_to_nodes():
    rec = record("existing-ecs")
    pool = rec.get(POOL, "pools-gpu")
    assert pool.inputs["instanceChargeType"] == "PostPaid" and pool.inputs["spotStrategy"] == "NoSpot"
    assert pool.inputs["scalingConfig"] == {"enable": True, "minSize": 0, "maxSize": 2, "type": "gpu"}
    assert "desiredSize" in pool.options["ignore_changes"], "the autoscaler owns the node count"
    assert "desiredSize" not in pool.inputs
    assert pool.inputs["vswitchIds"] == ["vsw-bp1existingh000000000"], "the vSwitch of the GPU zone"


def test_only_a_cluster_this_stack_owns_gets_its_autoscaler_configured():
    assert not record("existing-ecs").by_type("alicloud:cs/autoscalingConfig:AutoscalingConfig")
    rec = record("dev", ECS_POOL)
    auto = rec.get("alicloud:cs/autoscalingConfig:AutoscalingConfig", "pools-autoscaler")
    assert auto.inputs["scaleUpFromZero"] is True and auto.inputs["scaleDownEnabled"] is True
    assert rec.get(POOL, "pools-gpu").inputs["vswitchIds"] == [
        rec.get(POOL, "pools-system").inputs["vswitchIds"][0]], "ap-southeast-1a is the first zone"


def test_label_and_taint_changes_reach_the_nodes_already_in_every_pool():
    for stack in ("dev", "existing-ecs"):
        for reg in record(stack).by_type(POOL):
            assert reg.inputs["updateNodes"] is True, reg.urn


def test_a_free_text_gpu_model_becomes_a_label_only_when_it_is_a_valid_label_value():
    assert {"key": "verl-ack/gpu-model", "value": "GU8TF"} in gpu_pool_labels(settings_of("dev"))
    odd = settings_of("dev", {"gpu_pool": {"gpu_model": "8x H20 (96 GB)"}})
    assert "verl-ack/gpu-model" not in {x["key"] for x in gpu_pool_labels(odd)}
    assert gpu_pool_taints(odd) == [{"key": GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}]


# ------------------------------------------------------------------------------------------------ add-ons
def test_addons_use_the_names_from_settings_and_wait_for_the_system_pool_but_not_the_gpu_pool():
    rec = record("dev")
    s = settings_of("dev")
    system, gpu = rec.get(POOL, "pools-system"), rec.get(POOL, "pools-gpu")
    for spec in base_addons(s):
        reg = rec.get(ADDON, f"addons-{spec.role.replace('_', '-')}")
        assert reg.inputs["name"] == s.versions.addons[spec.role].name
        # Their pods run on the system pool; waiting for GPU nodes would delay data staging for nothing.
        assert depends_on(reg, system) and not depends_on(reg, gpu), reg.name
    assert rec.get(ADDON, "addons-pod-identity").inputs["name"] == "ack-pod-identity-webhook"


def test_the_alb_controller_does_not_create_its_own_albconfig():
    reg = record("dev").get(ADDON, "addons-alb")
    assert json_input(reg, "config") == {"albIngress": {"CreateDefaultALBConfig": False}} == ALB_ADDON_CONFIG


def test_a_stack_without_a_domain_installs_no_alb_controller():
    rec = record("existing-ecs")
    assert "addons-alb" not in {r.name for r in rec.by_type(ADDON)}


def test_optional_addons_can_be_turned_off_and_versions_pinned_per_role():
    rec = record("dev", {"versions": {"addons": {"monitoring": {"enabled": False},
                                                 "csi_plugin": {"version": "v1.32.2"}}}})
    names = {r.name for r in rec.by_type(ADDON)}
    assert "addons-monitoring" not in names
    assert rec.get(ADDON, "addons-csi-plugin").inputs["version"] == "v1.32.2"


def test_in_an_existing_cluster_every_addon_is_kept_on_destroy_because_it_may_predate_this_stack():
    for reg in record("existing-ecs").by_type(ADDON):
        assert reg.options["retain_on_delete"] is True, reg.name


def test_in_a_new_cluster_only_the_create_time_addons_are_left_for_the_cluster_deletion():
    kept = {r.name for r in record("dev").by_type(ADDON) if r.options["retain_on_delete"]}
    assert kept == {"addons-csi-plugin", "addons-csi-provisioner"}


def test_kuberay_defaults_to_the_pinned_upstream_chart_on_the_system_pool():
    rec = record("dev")
    rel = rec.get("kubernetes:helm.sh/v3:Release", "addons-kuberay")
    assert rel.inputs["chart"] == "kuberay-operator" and rel.inputs["version"] == "1.7.0"
    assert rel.inputs["repositoryOpts"] == {"repo": "https://ray-project.github.io/kuberay-helm/"}
    assert rel.inputs["values"] == {"nodeSelector": {POOL_LABEL: "system"}} == kuberay_helm_values(settings_of("dev"))
    assert "addons-kuberay" not in {r.name for r in rec.by_type(ADDON)}


def test_kuberay_from_the_ack_addon_replaces_the_chart():
    rec = record("dev", {"versions": {"kuberay_source": "addon"}})
    assert rec.get(ADDON, "addons-kuberay").inputs["name"] == "ack-kuberay-operator"
    assert not rec.by_type("kubernetes:helm.sh/v3:Release")


def test_the_sandbox_manager_addon_config_stays_secret_and_waits_for_the_alb_configuration():
    rec = record("dev")
    ctrl = rec.get(ADDON, "sandbox-addons-controller")
    mgr = rec.get(ADDON, "sandbox-addons-manager")
    assert ctrl.inputs["name"] == "ack-agent-sandbox-controller" and mgr.inputs["name"] == "ack-sandbox-manager"
    assert mgr.inputs["config"] == "[secret]", "the admin API key is in it"
    assert depends_on(mgr, ctrl)
    assert depends_on(mgr, rec.get("kubernetes:alibabacloud.com/v1:AlbConfig", "ingress-albconfig"))
    assert depends_on(mgr, rec.get("kubernetes:networking.k8s.io/v1:IngressClass", "ingress-class"))


def test_the_open_source_sandbox_manager_installs_no_sandbox_addons():
    assert not [r for r in record("existing-ecs").resources if r.name.startswith("sandbox-addons")]


@pytest.mark.parametrize("keys,expected", [
    ({}, {"e2b": {"domain": "sandbox.example.com", "adminApiKey": "K"}, "ingress": {"className": "alb"}}),
    ({"domain": "domain", "ingress_class": "className", "admin_api_key": "adminApiKey"},
     {"domain": "sandbox.example.com", "className": "alb", "adminApiKey": "K"}),
    ({"domain": "sandboxManager.domain", "ingress_class": "sandboxManager.className",
      "admin_api_key": "sandboxManager.adminApiKey"},
     {"sandboxManager": {"domain": "sandbox.example.com", "className": "alb", "adminApiKey": "K"}}),
])
def test_the_sandbox_manager_config_puts_each_value_at_its_configured_key_path(keys, expected):
    s = settings_of("dev", {"versions": {"sandbox_manager_config_keys": keys}})
    assert sandbox_manager_config(s, "K") == expected


def test_the_sandbox_managers_ingress_is_patched_to_serve_https_only():
    rec = record("dev")
    patch = rec.get("kubernetes:networking.k8s.io/v1:IngressPatch", "sandbox-addons-https")
    meta = patch.inputs["metadata"]
    assert (meta["name"], meta["namespace"]) == ("sandbox-manager", "sandbox-system")
    assert "alb.ingress.kubernetes.io/ssl-redirect" not in meta["annotations"], "there is no HTTP listener"
    assert meta["annotations"]["alb.ingress.kubernetes.io/listen-ports"] == '[{"HTTPS": 443}]'
    assert meta["annotations"]["pulumi.com/patchForce"] == "true"
    assert depends_on(patch, rec.get(ADDON, "sandbox-addons-manager")), "the add-on creates the Ingress"


def test_the_sandbox_manager_config_sent_to_the_addon_is_nested_json_with_the_key_still_a_secret():
    s = settings_of("dev")

    async def sent():
        out = sandbox_manager_config_json(s, pulumi.Output.secret("the-admin-key"))
        return json.loads(await out.future()), await out.is_secret()

    config, secret = asyncio.run(sent())
    assert config == {"e2b": {"domain": "sandbox.example.com", "adminApiKey": "the-admin-key"},
                      "ingress": {"className": "alb"}}
    assert secret, "the admin API key must stay a secret Output end to end"


def test_every_key_path_sent_to_the_sandbox_manager_exists_in_the_upstream_charts_values():
    values = chart_values()[("agents-sandbox-manager", "0.2.0")]
    sent = sandbox_manager_config(settings_of("dev"), "K")
    assert sorted(dotted_paths(sent)) == ["e2b.adminApiKey", "e2b.domain", "ingress.className"]
    assert unknown_keys(sent, values) == []
    for path in dotted_paths(sent):  # each one a leaf of the chart, not a section
        node = values
        for key in path.split("."):
            node = node[key]
        assert not isinstance(node, dict), path


def test_sandbox_manager_key_paths_must_not_overlap():
    from components.config import SettingsError

    with pytest.raises(SettingsError, match=r"admin_api_key \(e2b.adminApiKey\) lies at or under domain \(e2b\)"):
        settings_of("dev", {"versions": {"sandbox_manager_config_keys": {"domain": "e2b"}}})


def test_lingjun_stacks_install_the_rdma_device_plugin_and_ecs_stacks_do_not():
    for stack in ("dev", "multinode"):
        reg = record(stack).get(ADDON, "addons-rdma")
        assert reg.inputs["name"] == "ack-rdma-device-plugin"
        assert "config" not in reg.inputs, "the add-on's defaults: shared mode, resource rdma/hca"
    assert "addons-rdma" not in {r.name for r in record("existing-ecs").by_type(ADDON)}
    assert "rdma" not in {a.role for a in base_addons(settings_of("dev", ECS_POOL))}
