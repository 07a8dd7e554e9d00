"""The sandbox pool, its MCP Service and its isolation, from the pure functions in components/workloads/sandbox.py.

Shared helpers for the other workload tests live here too: `assert_valid_core` (kubernetes-validate, strict, at
the stack's schema_version) and `crd_errors` (the SandboxSet CRD's openAPIV3Schema, as ../shared/tools/crdcheck.py
checks it).
"""

from __future__ import annotations

import ipaddress

import kubernetes_validate
import pytest

from components.config import SettingsError
from components.model import parse_settings
from components.workloads import sandbox as sb
from tests.conftest import STACKS, stack_settings
from tests.crd import SANDBOXSET_CRD
from tests.crd import crd_errors as shared_crd_errors
from tests.snapshot import assert_snapshot


def settings(stack: str = "dev", overrides: dict | None = None):
    return parse_settings(stack_settings(stack, overrides))


# --------------------------------------------------------------------------------------------- helpers
def assert_valid_core(obj: dict, version: str) -> None:
    """Validate a core Kubernetes object against the strict (no unknown fields) schema of `version`."""
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as err:
        raise AssertionError(f"{obj['kind']} {obj['metadata'].get('name')}: {err.message} at "
                             f"{'/'.join(map(str, err.absolute_path))}") from None


def as_pod_template(template: dict) -> dict:
    """A PodTemplateSpec wrapped as a core v1 PodTemplate, the kind kubernetes-validate knows."""
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": template}


def crd_errors(obj: dict, crd=SANDBOXSET_CRD, version: str = "v1alpha1") -> list[str]:
    return shared_crd_errors(obj, crd, version)


def addresses_in(cidrs: list[str]) -> list[ipaddress.IPv4Network]:
    return [ipaddress.ip_network(c) for c in cidrs]


def egress_allows(policy: dict, ip: str, port: int = 443, protocol: str = "TCP") -> bool:
    """NetworkPolicy egress semantics for an ipBlock destination: any rule whose ipBlock contains the address
    (and not one of its excepts) and whose ports match. Rules that only name namespaces/pods never match a
    bare IP outside the cluster."""
    addr = ipaddress.ip_address(ip)
    for rule in policy["spec"].get("egress", []):
        ports = rule.get("ports")
        if ports and not any(p["port"] == port and p.get("protocol", "TCP") == protocol for p in ports):
            continue
        for peer in rule.get("to", []):
            block = peer.get("ipBlock")
            if block and addr in ipaddress.ip_network(block["cidr"]) and not any(
                    addr in n for n in addresses_in(block.get("except", []))):
                return True
    return False


# --------------------------------------------------------------------------------------------- SandboxSet
VARIANTS = [
    ("dev", None),
    ("dev", {"sandbox": {"allow_internet": True, "cpu": "500m", "memory": "1Gi"}}),
    ("existing-ecs", None),
    ("multinode", None),
]


@pytest.mark.parametrize("stack,overrides", VARIANTS)
def test_sandboxset_validates_against_the_v0_3_0_crd(stack, overrides):
    s = settings(stack, overrides)
    manifest = sb.sandboxset_manifest(s)
    assert crd_errors(manifest) == []


@pytest.mark.parametrize("stack,overrides", VARIANTS)
def test_sandbox_pod_template_is_a_valid_core_pod_template_at_the_schema_version(stack, overrides):
    s = settings(stack, overrides)
    assert_valid_core(as_pod_template(sb.sandboxset_manifest(s)["spec"]["template"]), s.cluster.schema_version)


def test_crd_check_catches_a_misspelt_field_so_the_test_above_can_fail():
    bad = sb.sandboxset_manifest(settings())
    bad["spec"]["replica"] = bad["spec"].pop("replicas")
    assert any("replica" in e for e in crd_errors(bad))


def test_strict_core_validation_catches_an_unknown_pod_field_so_the_test_above_can_fail():
    template = sb.sandboxset_manifest(settings())["spec"]["template"]
    template["spec"]["containers"][0]["startupProbes"] = {}
    with pytest.raises(AssertionError, match="startupProbes"):
        assert_valid_core(as_pod_template(template), "1.34")


def test_init_envd_annotation_is_on_the_sandboxset_only_never_on_the_pod_template():
    m = sb.sandboxset_manifest(settings())
    assert m["metadata"]["annotations"] == {sb.SHOULD_INIT_ENVD: "true"}
    template_meta = m["spec"]["template"]["metadata"]
    # The validating webhook rejects e2b.agents.kruise.io/ keys on the template's labels and annotations.
    for key in [*template_meta.get("labels", {}), *template_meta.get("annotations", {})]:
        assert not key.startswith(sb.E2B_PREFIX), key


def test_sandbox_pod_follows_the_tutorials_runtime_wiring_with_settings_images():
    s = settings()
    spec = sb.sandboxset_manifest(s)["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    (box,) = spec["containers"]
    assert init["image"] == s.versions.sandbox_runtime_image
    assert init["restartPolicy"] == "Always"  # a native sidecar
    assert {"name": "ENVD_DIR", "value": "/mnt/envd"} in init["env"]
    assert box["image"] == s.sandbox_image()
    assert box["lifecycle"]["postStart"]["exec"]["command"] == ["bash", "/mnt/envd/envd-run.sh"]
    probe = box["startupProbe"]["httpGet"]
    assert (probe["path"], probe["port"]) == ("/health", 49999)
    shared = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    assert {m["name"] for m in init["volumeMounts"]} & {m["name"] for m in box["volumeMounts"]} & shared


def test_sandbox_pod_has_no_api_token_no_service_links_fast_termination_and_its_own_tainted_pool():
    s = settings()
    spec = sb.sandboxset_manifest(s)["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert spec["terminationGracePeriodSeconds"] == 1
    assert spec["nodeSelector"] == {"verl-ack/pool": "sandbox"}, "off the pool of the platform's own services"
    assert {"key": "verl-ack/sandbox", "operator": "Exists", "effect": "NoSchedule"} \
        in spec["tolerations"]
    shared = sb.sandboxset_manifest(settings("dev", {"sandbox": {"dedicated_pool": None}}))
    assert shared["spec"]["template"]["spec"]["nodeSelector"] == {"verl-ack/pool": "system"}, "explicit opt-out"


@pytest.mark.parametrize("cpu,memory", [("1", "2Gi"), ("500m", "768Mi")])
def test_sandbox_requests_equal_limits_from_settings(cpu, memory):
    s = settings("dev", {"sandbox": {"cpu": cpu, "memory": memory}})
    res = sb.sandboxset_manifest(s)["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"] == res["limits"] == {"cpu": cpu, "memory": memory,
                                                "ephemeral-storage": s.sandbox.ephemeral_storage}


# --------------------------------------------------------------------------------------------- pool size
POOLS = [
    # batch, n, parallel calls, pool_min, pool_cap -> replicas
    (16, 16, 1, 3, 64, 64),  # the tutorial's 256 in-flight calls, capped
    (4, 2, 1, 12, 64, 12),  # small demand: the floor keeps a warm pool
    (4, 4, 2, 3, 64, 32),  # parallel tool calls multiply the demand
    (8, 8, 1, 3, 64, 64),  # exactly the cap
    (64, 8, 1, 0, 256, 256),  # multinode-sized run with a raised cap
    (16, 16, 1, 1, 1, 1),  # cap of one
]


@pytest.mark.parametrize("batch,n,calls,pool_min,cap,expected", POOLS)
def test_pool_size_is_batch_times_n_times_parallel_calls_clamped(batch, n, calls, pool_min, cap, expected):
    s = settings("dev", {"training": {"train_batch_size": batch, "rollout_n": n, "max_parallel_calls": calls,
                                      "ppo_mini_batch_size": batch, "agent_num_workers": 1},
                         "dataset": {"use_subsets": False},
                         "sandbox": {"pool_min": pool_min, "pool_cap": cap}})
    p = sb.pool_size(s)
    assert p.demand == batch * n * calls
    assert p.replicas == expected
    assert p.capped == (batch * n * calls > cap)
    assert sb.sandboxset_manifest(s)["spec"]["replicas"] == expected


def test_pool_capacity_estimate_counts_the_whole_system_pool():
    s = settings("dev", {"system_pool": {"nodes": 3, "cpus_per_node": 8, "memory_gib_per_node": 32},
                         "sandbox": {"cpu": "500m", "memory": "1Gi", "dedicated_pool": None}})
    p = sb.pool_size(s)
    assert (p.system_cpus, p.system_memory_gib) == (24, 96)
    assert p.fit_on_system_pool == 48  # 24 / 0.5 CPU


# --------------------------------------------------------------------------------------------- MCP Service
def test_mcp_service_selects_the_ack_manager_without_the_helm_placeholder_label():
    svc = sb.mcp_service_manifest(settings())
    assert svc["spec"]["selector"] == {"app.kubernetes.io/name": "ack-sandbox-manager", "component": "sandbox-manager"}
    assert "app.kubernetes.io/instance" not in svc["spec"]["selector"]


def test_mcp_service_exposes_the_mcp_port_in_cluster_only():
    s = settings("dev", {"sandbox": {"mcp_port": 18083}})
    svc = sb.mcp_service_manifest(s)
    assert svc["metadata"] == {**svc["metadata"], "name": "sandbox-mcp", "namespace": "sandbox-system"}
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "http-mcp", "protocol": "TCP", "port": 18083, "targetPort": 18083}]


def test_mcp_service_selects_the_open_source_manager_pods_it_deploys():
    s = settings("existing-ecs")
    pod_labels = sb.manager_deployment_manifest(s)["spec"]["template"]["metadata"]["labels"]
    selector = sb.mcp_service_manifest(s)["spec"]["selector"]
    assert selector.items() <= pod_labels.items()


def test_manager_selector_can_be_overridden_in_settings():
    custom = {"app.kubernetes.io/instance": "ack-sandbox-manager", "component": "sandbox-manager"}
    s = settings("dev", {"sandbox": {"manager_selector": custom}})
    assert sb.mcp_service_manifest(s)["spec"]["selector"] == custom
    assert sb.network_policy_manifest(s)["spec"]["ingress"][0]["from"][0] == {"podSelector": {"matchLabels": custom}}


# --------------------------------------------------------------------------------------------- isolation
@pytest.mark.parametrize("allow_internet", [False, True])
@pytest.mark.parametrize("stack", ["dev", "existing-ecs"])
def test_network_policy_blocks_the_metadata_service_and_the_cluster_ranges(stack, allow_internet):
    s = settings(stack, {"sandbox": {"allow_internet": allow_internet}})
    pol = sb.network_policy_manifest(s)
    net = s.cluster.network
    assert not egress_allows(pol, "100.100.100.200", 80)
    for cidr in [net.vpc_cidr, *net.node_cidrs, *net.pod_cidrs, net.service_cidr]:
        first_host = str(next(ipaddress.ip_network(cidr).hosts()))
        for port in (53, 80, 443, 6443, 10250):
            assert not egress_allows(pol, first_host, port), (cidr, port)
    assert egress_allows(pol, "8.8.8.8", 443) is allow_internet


def test_network_policy_blocks_cluster_ranges_that_lie_outside_the_private_blocks():
    # A VPC and pods on public-looking ranges (some enterprises do this) are still excepted explicitly.
    s = settings("dev", {"sandbox": {"allow_internet": True}, "cluster": {"network": {
        "vpc_cidr": "30.0.0.0/8", "node_cidrs": ["30.1.0.0/16", "30.2.0.0/16"],
        "pod_cidrs": ["30.4.0.0/16", "30.5.0.0/16"], "service_cidr": "40.96.0.0/16"}}})
    pol = sb.network_policy_manifest(s)
    for ip in ("30.1.0.10", "30.4.7.7", "40.96.0.1", "100.100.100.200", "169.254.169.254", "10.0.0.1"):
        assert not egress_allows(pol, ip), ip
    assert egress_allows(pol, "1.1.1.1")


def test_without_internet_egress_is_dns_to_kube_system_only():
    pol = sb.network_policy_manifest(settings())
    (dns,) = pol["spec"]["egress"]
    assert dns["to"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}]
    assert sorted((p["protocol"], p["port"]) for p in dns["ports"]) == [("TCP", 53), ("UDP", 53)]
    assert pol["spec"]["policyTypes"] == ["Ingress", "Egress"]


def test_network_policy_selects_exactly_the_sandbox_pods_and_admits_only_the_manager_and_the_gateway():
    s = settings()
    pol = sb.network_policy_manifest(s)
    template_labels = sb.sandboxset_manifest(s)["spec"]["template"]["metadata"]["labels"]
    assert pol["spec"]["podSelector"]["matchLabels"].items() <= template_labels.items()
    assert pol["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": sb.manager_selector(s)}},
                                                {"podSelector": {"matchLabels": sb.gateway_selector(s)}}]}]


def test_the_policy_check_itself_sees_an_open_rule():
    # The helper must report an allow when a rule allows, or the blocking tests above prove nothing.
    pol = {"spec": {"egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}}
    assert egress_allows(pol, "100.100.100.200")


# --------------------------------------------------------------------------------------------- open-source
def test_open_source_manager_runs_with_the_mcp_flags_and_the_admin_key_from_a_secret():
    s = settings("existing-ecs")
    dep = sb.manager_deployment_manifest(s)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["image"] == s.versions.sandbox_manager_image
    for flag in ("--e2b-admin-key=$(E2B_ADMIN_KEY)", "--e2b-enable-auth=true", "--mcp-enabled=true",
                 f"--mcp-port={s.sandbox.mcp_port}", f"--system-namespace={s.sandbox.namespace}"):
        assert flag in c["args"]
    env = {e["name"]: e for e in c["env"]}
    assert env["E2B_ADMIN_KEY"]["valueFrom"]["secretKeyRef"] == {"name": sb.ADMIN_KEY_SECRET, "key": sb.ADMIN_KEY_ITEM}
    assert env["INFRA"]["value"] == "sandbox-cr"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert {"containerPort": s.sandbox.mcp_port, "name": "http-mcp", "protocol": "TCP"} in c["ports"]


def test_peer_selector_matches_the_managers_own_pod_labels():
    s = settings("existing-ecs")
    (c,) = sb.manager_deployment_manifest(s)["spec"]["template"]["spec"]["containers"]
    (peer,) = [a.split("=", 1)[1] for a in c["args"] if a.startswith("--peer-selector=")]
    labels = sb.manager_deployment_manifest(s)["spec"]["template"]["metadata"]["labels"]
    assert dict(kv.split("=") for kv in peer.split(",")).items() <= labels.items()


def test_manager_rbac_lets_it_claim_sandboxes_and_read_only_its_key_store_secret():
    s = settings("existing-ecs")
    role, binding, key_role, key_binding, config_role, config_binding = sb.manager_rbac_manifests(s)
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    for resource in ("sandboxes", "sandboxsets"):
        for verb in ("get", "list", "watch", "create", "update", "delete"):
            assert ("agents.kruise.io", resource, verb) in granted
    assert not any(v in ("create", "update", "delete") for g, r, v in granted if r == "secrets")
    assert key_role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["e2b-key-store"],
                                  "verbs": ["get", "list", "watch", "update", "patch"]}]
    assert config_role["metadata"]["namespace"] == config_binding["metadata"]["namespace"] == "sandbox-system"
    for b in (binding, key_binding, config_binding):
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "sandbox-manager", "namespace": "sandbox-system"}]
    assert sb.manager_deployment_manifest(s)["spec"]["template"]["spec"]["serviceAccountName"] == "sandbox-manager"


def test_controller_chart_values_place_it_on_the_system_pool_in_the_sandbox_namespace():
    s = settings("existing-ecs")
    v = sb.controller_chart_values(s)
    assert v == {"namespace": {"name": "sandbox-system"}, "nodeSelector": {"verl-ack/pool": "system"},
                 "tolerations": []}


@pytest.mark.parametrize("stack", STACKS)
def test_every_core_sandbox_object_validates_strictly(stack):
    s = settings(stack, {"sandbox": {"manager": "open-source", "mcp_port": 8082, "domain": None, "dns_zone": None},
                         "versions": {"sandbox_manager_image": "registry.example.com/agents/sandbox-manager:pr165"}})
    objs = [sb.mcp_service_manifest(s), sb.network_policy_manifest(s), sb.manager_service_account_manifest(s),
            *sb.manager_rbac_manifests(s), sb.key_store_secret_manifest(s), sb.admin_key_secret_manifest(s),
            sb.manager_deployment_manifest(s)]
    for obj in objs:
        assert_valid_core(obj, s.cluster.schema_version)


# --------------------------------------------------------------------------------------------- snapshots
def test_dev_sandbox_manifests_match_their_snapshot():
    s = settings()
    assert_snapshot("dev.sandbox.yaml", [sb.sandboxset_manifest(s), sb.mcp_service_manifest(s),
                                         sb.network_policy_manifest(s)])


def test_open_source_manager_manifests_match_their_snapshot():
    s = settings("existing-ecs")
    assert_snapshot("existing-ecs.sandbox-manager.yaml", [
        sb.manager_deployment_manifest(s), *sb.manager_rbac_manifests(s), sb.controller_chart_values(s)])


# --------------------------------------------------------------------------------------------- bad input
BAD = [
    ({"sandbox": {"pool_cap": 0}}, "sandbox.pool_cap", "at least 1"),
    ({"sandbox": {"pool_cap": -5}}, "sandbox.pool_cap", "at least 1"),
    ({"sandbox": {"mcp_port": 0}}, "sandbox.mcp_port", "1-65535"),
    ({"sandbox": {"mcp_port": 65536}}, "sandbox.mcp_port", "1-65535"),
    ({"sandbox": {"mcp_path": "mcp"}}, "sandbox.mcp_path", "starting with '/'"),
    ({"sandbox": {"service_name": "1-mcp"}}, "sandbox.service_name", "must start with a letter"),
    ({"sandbox": {"manager": "open-source", "mcp_path": "/v1/mcp"}}, "sandbox", "fixed /mcp"),
    ({"sandbox": {"manager_selector": {}}}, "sandbox.manager_selector", "must not be empty"),
    ({"sandbox": {"manager_selector": {"bad key!": "x"}}}, "sandbox.manager_selector", "label"),
    ({"sandbox": {"cpu": "lots"}}, "sandbox.cpu", "CPU quantity"),
    ({"sandbox": {"memory": "0Gi"}}, "sandbox.memory", "not zero"),
    ({"sandbox": {"pool_min": 10, "pool_cap": 5}}, "sandbox", "exceeds pool_cap"),
]


@pytest.mark.parametrize("overrides,field,text", BAD, ids=[str(b[0]) for b in BAD])
def test_bad_sandbox_settings_are_refused_naming_the_field(overrides, field, text):
    with pytest.raises(SettingsError) as info:
        settings("dev", overrides)
    found = [str(p) for p in info.value.problems]
    assert any(p.startswith(field) and text in p for p in found), found
