"""The pre-pull DaemonSet meets the restricted Pod Security level in every container, and in multi-node Lingjun only
the Ray pods sit in a privileged namespace."""

from __future__ import annotations

from components.wiring import gpu_scheduling
from components.workloads.prepull import prepull_daemonset
from tests.components.workloads.test_sandbox_hardening import pss_violations
from tests.conftest import record


def test_the_prepull_pod_including_its_init_container_meets_restricted(stack_name):
    from tests.components.workloads.test_sandbox import settings

    s = settings(stack_name)
    pod = prepull_daemonset(s, "registry.example/verl:1", gpu_scheduling(s), "verl")["spec"]["template"]["spec"]
    assert pss_violations(pod, "restricted") == [], stack_name
    (init,) = pod["initContainers"]
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert init["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_recorded_multinode_prepull_meets_restricted():
    rec = record("multinode")
    (ds,) = [r for r in rec.by_type("kubernetes:apps/v1:DaemonSet") if "prepull" in r.name]
    assert pss_violations(ds.inputs["spec"]["template"]["spec"], "restricted") == []


def test_in_multinode_only_the_ray_pods_are_in_a_privileged_namespace_every_other_pod_meets_restricted_where_enforced():
    # The host-network RDMA Ray pods need `privileged` (wiring.ray_namespace_pod_security): they get a namespace of
    # their own, so the job namespace enforces restricted on everything else and admission, not only the manifests,
    # keeps MLflow, the data Jobs, the node gate and the pre-pull restricted.
    rec = record("multinode")
    enforce = {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"].get("pod-security.kubernetes.io/enforce")
               for r in rec.by_type("kubernetes:core/v1:Namespace")}
    rayjob = rec.get("kubernetes:ray.io/v1:RayJob", "train-rayjob").inputs
    ray_ns = rayjob["metadata"]["namespace"]
    assert enforce[ray_ns] == "privileged"
    assert [name for name, level in enforce.items() if level == "privileged"] == [ray_ns]
    checked = []
    for r in rec.resources:
        meta = r.inputs.get("metadata") or {}
        kind = r.type.rsplit(":", 1)[-1]
        if kind not in ("Job", "DaemonSet", "Deployment", "StatefulSet"):
            continue
        ns = meta.get("namespace")
        assert ns != ray_ns, f"{r.name} runs beside the privileged Ray pods"
        if ns in enforce:  # the namespaces this stack labels (the sandbox's is the add-on's)
            assert enforce[ns] in ("restricted", "baseline"), r.name
            assert pss_violations(r.inputs["spec"]["template"]["spec"], enforce[ns]) == [], r.name
            checked.append(r.name)
    assert {"data-dataset", "data-model", "prepull-daemonset", "tracking-server", "train-gate"} <= set(checked)
    assert enforce[rec.get("kubernetes:apps/v1:Deployment", "tracking-server").inputs["metadata"]["namespace"]] \
        == "restricted"
