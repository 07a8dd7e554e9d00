"""Sandboxes run model-written code: their pods against the Pod Security Standards, the sandboxed runtime, the
dedicated tainted pool, the namespace's admission labels and the open-source manager's narrowed RBAC.

`pss_violations` re-implements the checks of https://kubernetes.io/docs/concepts/security/pod-security-standards/
that a pod template can fail (baseline, and restricted on top), so a test fails the way admission would.
"""

from __future__ import annotations

import pytest

from components.config import SettingsError
from components.wiring import SANDBOX_TAINT_KEY, pod_security_labels, sandbox_namespace_pod_security
from components.workloads import sandbox as sb
from tests.components.workloads.test_sandbox import as_pod_template, assert_valid_core, crd_errors, settings
from tests.conftest import STACKS, record

BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
NON_ROOT_UID = 10001
DEDICATED = {"instance_types": ["ecs.g7.2xlarge"], "nodes": 2, "cpus_per_node": 8, "memory_gib_per_node": 32}
RUNV_POOL = {"instance_types": ["ecs.ebmg7.32xlarge"], "nodes": 1, "cpus_per_node": 128,
             "memory_gib_per_node": 512, "runtime_name": "Sandboxed-Container.runv"}


def pss_violations(pod: dict, level: str) -> list[str]:
    containers = [*pod.get("initContainers", []), *pod.get("containers", [])]
    psc = pod.get("securityContext") or {}
    out = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            out.append(key)
    if any("hostPath" in v for v in pod.get("volumes", [])):
        out.append("hostPath volume")
    for c in containers:
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"{c['name']}: privileged")
        added = set((sc.get("capabilities") or {}).get("add", []))
        if added - BASELINE_CAPABILITIES:
            out.append(f"{c['name']}: capabilities {sorted(added - BASELINE_CAPABILITIES)} beyond baseline")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"{c['name']}: hostPort")
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"{c['name']}: seccomp Unconfined")
    if (psc.get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append("pod seccomp Unconfined")
    if level == "baseline":
        return out
    for v in pod.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {v['name']}: {sorted(kinds)}")
    for c in containers:
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{c['name']}: allowPrivilegeEscalation not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):
            out.append(f"{c['name']}: capabilities not dropped")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{c['name']}: adds {sorted(set(caps.get('add', [])) - {'NET_BIND_SERVICE'})}")
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            out.append(f"{c['name']}: runAsNonRoot not true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            out.append(f"{c['name']}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{c['name']}: seccomp {seccomp}")
    return out


def pod_of(s) -> dict:
    return sb.sandboxset_manifest(s)["spec"]["template"]["spec"]


# --------------------------------------------------------------------------------------------- the pod
def test_the_checker_catches_what_admission_would_refuse_so_the_tests_below_can_fail():
    bad = {"hostNetwork": True, "containers": [{"name": "c", "securityContext": {"privileged": True,
                                                                                 "capabilities": {"add": ["NET_ADMIN"]}}}]}
    assert len(pss_violations(bad, "baseline")) == 3
    assert "c: runAsNonRoot not true" in pss_violations({"containers": [{"name": "c"}]}, "restricted")


def test_the_root_code_interpreter_pod_meets_baseline_and_every_restricted_control_but_non_root():
    pod = pod_of(settings())
    assert pss_violations(pod, "baseline") == []
    left = pss_violations(pod, "restricted")
    assert "sandbox: runAsNonRoot not true" in left and "init: runAsNonRoot not true" in left
    assert all("runAsNonRoot" in v or "adds" in v for v in left), left
    (box,) = pod["containers"]
    assert set(box["securityContext"]["capabilities"]["add"]) == set(sb.ROOT_SANDBOX_CAPABILITIES)
    assert "NET_RAW" not in box["securityContext"]["capabilities"]["add"]


def test_with_a_non_root_uid_the_sandbox_pod_meets_restricted():
    s = settings("dev", {"sandbox": {"run_as_user": NON_ROOT_UID}})
    pod = pod_of(s)
    assert pss_violations(pod, "restricted") == []
    assert pod["securityContext"]["runAsUser"] == NON_ROOT_UID and pod["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("overrides", [None, {"sandbox": {"run_as_user": NON_ROOT_UID}}])
def test_every_sandbox_container_is_never_privileged_never_escalates_and_gets_no_api_token(overrides):
    pod = pod_of(settings("dev", overrides))
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in [*pod["initContainers"], *pod["containers"]]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False, c["name"]
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"], c["name"]
        assert not c["securityContext"].get("privileged"), c["name"]


@pytest.mark.parametrize("overrides", [
    {"sandbox": {"run_as_user": NON_ROOT_UID}},
    {"sandbox": {"runtime_class": "runv", "dedicated_pool": RUNV_POOL}},
    {"sandbox": {"dedicated_pool": DEDICATED}},
])
def test_hardened_variants_stay_valid_pod_templates_and_sandboxsets(overrides):
    s = settings("dev", overrides)
    manifest = sb.sandboxset_manifest(s)
    assert crd_errors(manifest) == []
    assert_valid_core(as_pod_template(manifest["spec"]["template"]), s.cluster.schema_version)


def test_a_runtime_class_puts_every_sandbox_in_its_own_vm_and_none_is_the_default():
    assert "runtimeClassName" not in pod_of(settings())
    s = settings("dev", {"sandbox": {"runtime_class": "runv", "dedicated_pool": RUNV_POOL}})
    assert pod_of(s)["runtimeClassName"] == "runv"


def test_a_dedicated_pool_takes_the_sandboxes_off_the_system_pool_and_sizes_the_warm_pool():
    s = settings("dev", {"sandbox": {"dedicated_pool": DEDICATED}})
    pod = pod_of(s)
    assert pod["nodeSelector"] == {"verl-ack/pool": "sandbox"}
    assert pod["tolerations"] == [{"key": SANDBOX_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    p = sb.pool_size(s)
    assert (p.system_cpus, p.system_memory_gib, p.host_pool) == (16, 64, "sandbox pool")
    # The manager and the controller stay on the system pool.
    assert sb.controller_chart_values(s)["nodeSelector"] == {"verl-ack/pool": "system"}


def test_the_dedicated_pool_is_tainted_labelled_and_the_pool_waits_for_it():
    rec = record("dev", {"sandbox": {"dedicated_pool": RUNV_POOL, "runtime_class": "runv"}})
    pool = rec.get("alicloud:cs/nodePool:NodePool", "pools-sandbox").inputs
    assert pool["taints"] == [{"key": SANDBOX_TAINT_KEY, "value": "true", "effect": "NoSchedule"}]
    assert pool["labels"] == [{"key": "verl-ack/pool", "value": "sandbox"}]
    assert pool["runtimeName"] == "Sandboxed-Container.runv"
    assert pool["instanceChargeType"] == "PostPaid" and pool["desiredSize"] == "1"
    sandbox_set = rec.get("kubernetes:agents.kruise.io/v1alpha1:SandboxSet", "sandbox-pool")
    assert rec.get("alicloud:cs/nodePool:NodePool", "pools-sandbox").urn in sandbox_set.dependencies
    shared = record("dev", {"sandbox": {"dedicated_pool": None}})
    assert "pools-sandbox" not in {r.name for r in shared.by_type("alicloud:cs/nodePool:NodePool")}


@pytest.mark.parametrize("sandbox,message", [
    ({"runtime_class": "runv"}, "dedicated_pool"),
    ({"runtime_class": "runv", "dedicated_pool": DEDICATED}, "runtime_name"),
    ({"dedicated_pool": RUNV_POOL}, "runtime_class: runv"),
    ({"enabled": False, "dedicated_pool": DEDICATED}, "bill"),
    ({"run_as_user": 0}, "run_as_user"),
    ({"dedicated_pool": {**DEDICATED, "instance_types": ["g7.2xlarge"]}}, "ECS instance type"),
])
def test_sandbox_isolation_settings_that_cannot_work_are_refused_with_the_fix(sandbox, message):
    with pytest.raises(SettingsError, match=message):
        settings("dev", {"sandbox": sandbox})


# --------------------------------------------------------------------------------------------- namespace, RBAC
def test_the_open_source_namespace_enforces_what_the_sandboxes_meet_and_warns_below_restricted():
    s = settings("existing-ecs")
    ns = sb.sandbox_namespace_manifest(s)
    assert ns["metadata"]["name"] == "sandbox-system"
    assert ns["metadata"]["labels"].items() >= pod_security_labels("baseline", s).items()
    tight = settings("existing-ecs", {"sandbox": {"run_as_user": NON_ROOT_UID}})
    assert sandbox_namespace_pod_security(tight) == "restricted"
    assert sb.sandbox_namespace_manifest(tight)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == \
        "restricted"
    assert_valid_core(ns, s.cluster.schema_version)


def test_the_manager_pod_meets_restricted_so_a_restricted_namespace_admits_it():
    pod = sb.manager_deployment_manifest(settings("existing-ecs"))["spec"]["template"]["spec"]
    assert pss_violations(pod, "restricted") == []


def test_the_manager_reads_secrets_and_configmaps_only_in_its_own_namespace():
    manifests = sb.manager_rbac_manifests(settings("existing-ecs"))
    cluster_wide = [r for m in manifests if m["kind"] == "ClusterRole" for r in m["rules"]]
    assert not [r for r in cluster_wide if {"secrets", "configmaps"} & set(r["resources"])]
    config = [m for m in manifests if m["kind"] == "Role" and m["metadata"]["name"] == sb.MANAGER_CONFIG_ROLE]
    assert config and config[0]["metadata"]["namespace"] == "sandbox-system"
    assert config[0]["rules"] == [{"apiGroups": [""], "resources": ["secrets", "configmaps"],
                                   "verbs": ["get", "list", "watch"]}]


def test_the_rbac_objects_keep_their_logical_names_and_the_config_role_is_new():
    rec = record("existing-ecs")
    names = {r.name for r in rec.resources if r.type.startswith("kubernetes:rbac.authorization.k8s.io/")}
    assert names == {"sandbox-manager-cluster-role", "sandbox-manager-cluster-role-binding",
                     "sandbox-manager-key-store-role", "sandbox-manager-key-store-role-binding",
                     "sandbox-manager-config-role", "sandbox-manager-config-role-binding"}


# --------------------------------------------------------------------------------------------- disk
def _empty_dirs(value, where: str = "") -> list[tuple[str, dict]]:
    """Every emptyDir volume anywhere in a resource's inputs (pod templates, SandboxSets, RayJobs, chart values)."""
    if isinstance(value, dict):
        found = [(where, value)] if "emptyDir" in value else []
        return found + [x for k, v in value.items() for x in _empty_dirs(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _empty_dirs(v, f"{where}[{i}]")]
    return []


@pytest.mark.parametrize("stack", STACKS)
def test_every_empty_dir_of_every_rendered_resource_has_a_size_limit(stack):
    """An emptyDir without sizeLimit lets one pod fill the node's disk and get its neighbours evicted."""
    rec = record(stack)
    for r in rec.resources:
        for where, volume in _empty_dirs(r.inputs):
            assert (volume["emptyDir"] or {}).get("sizeLimit"), f"{r.urn}{where}: emptyDir {volume.get('name')}"


@pytest.mark.parametrize("stack", STACKS)
def test_every_sandbox_container_requests_and_is_limited_to_ephemeral_storage(stack):
    for sandbox_set in record(stack).by_type("kubernetes:agents.kruise.io/v1alpha1:SandboxSet"):
        pod = sandbox_set.inputs["spec"]["template"]["spec"]
        for c in [*pod.get("initContainers", []), *pod["containers"]]:
            res = c.get("resources") or {}
            assert (res.get("limits") or {}).get("ephemeral-storage"), f"{sandbox_set.urn}: {c['name']}"
            assert res["requests"]["ephemeral-storage"] == res["limits"]["ephemeral-storage"], c["name"]


def test_the_size_checks_see_a_volume_without_a_limit():
    pod = sb.sandboxset_manifest(settings())["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "scratch", "emptyDir": {}})
    assert [v["name"] for _, v in _empty_dirs(pod) if not v["emptyDir"].get("sizeLimit")] == ["scratch"]


@pytest.mark.parametrize("stack", [s for s in STACKS if settings(s).kind != "experiment"])
def test_by_default_sandboxes_get_a_small_tainted_pool_of_their_own_that_the_plan_prices(stack):
    s = settings(stack)
    rec = record(stack)
    pool = rec.get("alicloud:cs/nodePool:NodePool", "pools-sandbox").inputs
    assert pool["taints"] == [{"key": SANDBOX_TAINT_KEY, "value": "true", "effect": "NoSchedule"}]
    assert pool["desiredSize"] == str(s.sandbox.dedicated_pool.nodes)
    for sandbox_set in rec.by_type("kubernetes:agents.kruise.io/v1alpha1:SandboxSet"):
        assert sandbox_set.inputs["spec"]["template"]["spec"]["nodeSelector"] == {"verl-ack/pool": "sandbox"}
