"""The Ray pods run an unauthenticated job API and the model's rollouts: no capability, the runtime's seccomp
profile, no privilege escalation, no Kubernetes API token; root only where RDMA needs it. RRSA keeps working
because the pod identity webhook mounts its own projected token."""

from __future__ import annotations

import pytest

from components.cloud.identity import INJECTION_LABEL, ROLE_NAME_ANNOTATION
from components.workloads.training.rayjob import RDMA_CAPABILITIES, ray_pod_security
from tests.components.workloads.test_sandbox_hardening import pss_violations
from tests.components.workloads.training.test_rayjob import build, crd_errors, pod_templates, settings_for
from tests.conftest import OFFICIAL_IMAGE, record


@pytest.mark.parametrize("stack", ["dev", "existing-ecs"])
def test_single_node_ray_pods_drop_every_capability_and_get_no_api_token(stack):
    _, manifest = build(stack)
    for t in pod_templates(manifest):
        spec = t["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in spec["containers"]:  # the Ray container and the model prefetch
            assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
        assert pss_violations(spec, "baseline") == []


def test_rdma_ray_pods_run_as_root_with_exactly_the_two_capabilities_it_needs():
    s, manifest = build("multinode")
    assert (s.gpu_pool.kind, s.gpu_pool.nodes > 1) == ("lingjun", True)
    for t in pod_templates(manifest):
        c, *others = t["spec"]["containers"]
        sc = c["securityContext"]
        # The model prefetch copies files: the same user (the copy's owner), none of RDMA's capabilities.
        assert [o["securityContext"] for o in others] == [{**sc, "capabilities": {"drop": ["ALL"]}}] * len(others)
        assert sc["capabilities"] == {"drop": ["ALL"], "add": list(RDMA_CAPABILITIES)}
        assert sc["runAsUser"] == 0 and sc["allowPrivilegeEscalation"] is False
        assert set(RDMA_CAPABILITIES) == {"IPC_LOCK", "SYS_RESOURCE"}


def test_the_built_image_must_run_as_non_root_unless_rdma_needs_root():
    built = settings_for("dev", {"image": {"source": "built"}})
    pod, container = ray_pod_security(built, rdma=False)
    assert pod["runAsNonRoot"] is True and "runAsUser" not in container
    pod, container = ray_pod_security(built, rdma=True)
    assert "runAsNonRoot" not in pod and container["runAsUser"] == 0
    official, _ = ray_pod_security(settings_for("dev", OFFICIAL_IMAGE), rdma=False)
    assert "runAsNonRoot" not in official, "the official verl image runs as root"


@pytest.mark.parametrize("stack", ["dev", "multinode"])
def test_the_hardened_rayjob_still_validates_against_kuberays_crd(stack):
    _, manifest = build(stack)
    assert crd_errors(manifest) == []


def test_rrsa_still_reaches_the_ray_pods_through_the_webhook_not_the_api_token():
    """The webhook injects its own projected volume (rrsa-tokens) for pods of an annotated service account in a
    labelled namespace; automountServiceAccountToken governs only the API token (docs/facts.md)."""
    rec = record("dev")
    ns = rec.get("kubernetes:core/v1:Namespace", "identity-namespace").inputs["metadata"]
    assert ns["labels"][INJECTION_LABEL] == "on"
    sa = rec.get("kubernetes:core/v1:ServiceAccount", "identity-sa-train").inputs["metadata"]
    assert ROLE_NAME_ANNOTATION in sa["annotations"]
    _, manifest = build("dev")
    assert all(t["spec"]["serviceAccountName"] == sa["name"] for t in pod_templates(manifest))


def test_rdma_pods_use_the_host_network_because_the_rdma_plugin_serves_only_those_on_ipv4_clusters():
    from components.model.layout import resolve_layout
    from components.workloads.training.rayjob import uses_rdma
    from tests.components.workloads.training.test_rayjob import build

    s, manifest = build("multinode")
    assert uses_rdma(s, resolve_layout(s))
    specs = [manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"],
             *[g["template"]["spec"] for g in manifest["spec"]["rayClusterSpec"].get("workerGroupSpecs", [])]]
    for spec in specs:
        assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    _, single_node = build("dev")
    assert "hostNetwork" not in single_node["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
