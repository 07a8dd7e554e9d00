"""The pre-pull DaemonSet meets the restricted Pod Security level in every container, so a privileged job namespace
(multi-node Lingjun) is not what keeps it safe."""

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


def test_the_recorded_multinode_prepull_meets_restricted_in_its_privileged_namespace():
    rec = record("multinode")
    (ds,) = [r for r in rec.by_type("kubernetes:apps/v1:DaemonSet") if "prepull" in r.name]
    assert pss_violations(ds.inputs["spec"]["template"]["spec"], "restricted") == []


def test_in_multinodes_privileged_job_namespace_every_pod_but_the_ray_pods_meets_restricted():
    # The namespace enforces `privileged` for the host-network RDMA Ray pods (wiring.job_namespace_pod_security), so
    # admission checks nothing there: each other workload must meet restricted by itself.
    from components.wiring import job_namespace_pod_security
    from tests.components.workloads.test_sandbox import settings

    s = settings("multinode")
    assert job_namespace_pod_security(s) == "privileged"
    rec = record("multinode")
    checked = []
    for r in rec.resources:
        meta = r.inputs.get("metadata") or {}
        kind = r.type.rsplit(":", 1)[-1]
        if meta.get("namespace") != s.job.namespace or kind not in ("Job", "DaemonSet", "Deployment", "StatefulSet"):
            continue
        assert pss_violations(r.inputs["spec"]["template"]["spec"], "restricted") == [], r.name
        checked.append(r.name)
    assert {"data-dataset", "data-model", "prepull-daemonset", "tracking-server", "train-gate"} <= set(checked)
