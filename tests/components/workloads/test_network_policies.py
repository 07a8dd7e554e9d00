"""Who may reach the Ray cluster's unauthenticated job API, GCS and client server, and MLflow: the Ingress
NetworkPolicies of the job namespace, checked with NetworkPolicy semantics (`admits`) against the pods that really
exist (the RayJob's pod templates, the KubeRay submitter's labels, the operator chart's labels)."""

from __future__ import annotations

import pytest

from components.cloud.addons import KUBERAY_NAMESPACE
from components.model.layout import resolve_layout
from components.wiring import ray_pods_use_rdma
from components.workloads import network_policies as np_
from components.workloads.tracking import LABELS as MLFLOW_LABELS
from components.workloads.tracking import deployment_manifest
from components.workloads.training.rayjob import uses_rdma
from tests.components.workloads.test_sandbox import settings
from tests.conftest import STACKS, record

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
JOB = "verl-grpo"
SUBMITTER = {np_.ORIGINATED_FROM_CR_NAME: JOB, np_.ORIGINATED_FROM_CRD: "RayJob"}
OPERATOR = ({"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/instance": "kuberay-operator"},
            "kuberay-system")
RAY_PORTS = (np_.RAY_DASHBOARD_PORT, np_.RAY_GCS_PORT, np_.RAY_CLIENT_PORT)


def _matches(selector: dict | None, labels: dict) -> bool:
    return selector is not None and (selector.get("matchLabels") or {}).items() <= labels.items()


def admits(policy: dict, pod_labels: dict, namespace: str, port: int) -> bool:
    """Whether an Ingress policy lets a pod (labels, namespace) reach `port` of the pods it selects."""
    own_ns = policy["metadata"]["namespace"]
    for rule in policy["spec"].get("ingress", []):
        if rule.get("ports") and not any(p["port"] == port for p in rule["ports"]):
            continue
        for peer in rule.get("from", []):
            ns_sel = peer.get("namespaceSelector")
            ns_ok = namespace == own_ns if ns_sel is None else (
                ns_sel == {} or _matches(ns_sel, {"kubernetes.io/metadata.name": namespace}))
            pod_ok = "podSelector" not in peer or _matches(peer["podSelector"], pod_labels)
            if ns_ok and pod_ok:
                return True
    return False


def ray_pod_labels(stack: str = "dev") -> list[dict]:
    spec = record(stack).get("kubernetes:ray.io/v1:RayJob", "train-rayjob").inputs["spec"]["rayClusterSpec"]
    groups = [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]
    return [g["template"]["metadata"]["labels"] for g in groups]


# --------------------------------------------------------------------------------------------- Ray
def test_the_policy_selects_every_ray_pod_of_the_job(stack_name):
    pol = np_.ray_network_policy_manifest(settings(stack_name))
    labels = ray_pod_labels(stack_name)
    assert labels and all(_matches(pol["spec"]["podSelector"], lab) for lab in labels)
    assert pol["spec"]["policyTypes"] == ["Ingress"]


@pytest.mark.parametrize("port", RAY_PORTS)
def test_ray_pods_reach_each_other_on_every_port(port):
    s = settings()
    pol = np_.ray_network_policy_manifest(s)
    assert admits(pol, np_.ray_job_pod_labels(s.job.name), "verl", port)


@pytest.mark.parametrize("labels,namespace", [
    ({"app.kubernetes.io/name": "mlflow"}, "verl"),  # the tracking server
    ({"app.kubernetes.io/name": "code-interpreter"}, "sandbox-system"),  # model-written code
    ({"app": "dataset"}, "verl"),  # a data Job
    ({}, "default"),  # anything else in the cluster
    ({"app.kubernetes.io/name": "verl-trainer"}, "another-experiment"),  # another job's Ray pods
    ({"app.kubernetes.io/name": "verl-trainer", "verl-ack/rayjob": "verl-grpo-v1a2b3c"}, "verl"),  # a sweep sibling
])
@pytest.mark.parametrize("port", RAY_PORTS)
def test_nothing_else_reaches_the_job_api_gcs_or_client_server(labels, namespace, port):
    pol = np_.ray_network_policy_manifest(settings())
    assert not admits(pol, labels, namespace, port)


def test_the_kuberay_operator_reaches_only_the_dashboard_where_the_helm_chart_runs_it():
    s = settings()
    pol = np_.ray_network_policy_manifest(s)
    assert np_.KUBERAY_HELM_NAMESPACE == KUBERAY_NAMESPACE
    assert admits(pol, *OPERATOR, np_.RAY_DASHBOARD_PORT)
    assert not admits(pol, *OPERATOR, np_.RAY_GCS_PORT) and not admits(pol, *OPERATOR, np_.RAY_CLIENT_PORT)
    assert not admits(pol, OPERATOR[0], "elsewhere", np_.RAY_DASHBOARD_PORT)
    addon = np_.ray_network_policy_manifest(settings("dev", {"versions": {"kuberay_source": "addon"}}))
    assert admits(addon, OPERATOR[0], "kube-system", np_.RAY_DASHBOARD_PORT), "the add-on's namespace is unpublished"


def test_only_k8s_job_mode_admits_its_submitter_and_only_to_the_dashboard():
    sidecar = np_.ray_network_policy_manifest(settings())  # dev: SidecarMode submits from inside the head
    assert not admits(sidecar, SUBMITTER, "verl", np_.RAY_DASHBOARD_PORT)
    job = np_.ray_network_policy_manifest(settings("dev", {"job": {"submission_mode": "K8sJobMode"}}))
    assert admits(job, SUBMITTER, "verl", np_.RAY_DASHBOARD_PORT)
    assert not admits(job, SUBMITTER, "verl", np_.RAY_GCS_PORT)
    assert not admits(job, {**SUBMITTER, np_.ORIGINATED_FROM_CR_NAME: "other-job"}, "verl", np_.RAY_DASHBOARD_PORT)


def test_the_recorded_policy_lives_in_the_namespace_of_the_ray_pods_it_guards_in_every_stack():
    for stack in STACKS:
        rec = record(stack)
        pols = [r for r in rec.by_type(POLICY) if r.name == "train-ray-ingress"]
        if not pols:
            continue  # a platform stack runs no job
        s = settings(stack)
        rayjob = rec.get("kubernetes:ray.io/v1:RayJob", "train-rayjob")
        assert pols[0].inputs["metadata"]["namespace"] == rayjob.inputs["metadata"]["namespace"], stack
        expected = "verl-ray" if stack == "multinode" else s.job.namespace
        assert rayjob.inputs["metadata"]["namespace"] == expected, stack


def test_in_multinode_the_ray_pods_reach_each_other_and_mlflow_from_their_own_namespace():
    rec = record("multinode")
    ray_ns = rec.get("kubernetes:ray.io/v1:RayJob", "train-rayjob").inputs["metadata"]["namespace"]
    ray_pol = next(r for r in rec.by_type(POLICY) if r.name == "train-ray-ingress").inputs
    mlflow = rec.get(POLICY, "tracking-ingress").inputs
    assert mlflow["metadata"]["namespace"] != ray_ns
    for labels in ray_pod_labels("multinode"):
        assert all(admits(ray_pol, labels, ray_ns, port) for port in RAY_PORTS)
        assert not admits(ray_pol, labels, mlflow["metadata"]["namespace"], np_.RAY_GCS_PORT)
        assert admits(mlflow, labels, ray_ns, 5000)


# --------------------------------------------------------------------------------------------- MLflow
def test_mlflow_is_reachable_only_by_ray_pods_on_its_port():
    s = settings()
    pol = np_.mlflow_network_policy_manifest(s, MLFLOW_LABELS)
    server = deployment_manifest(s, "verl-mlflow")["spec"]["template"]["metadata"]["labels"]
    assert _matches(pol["spec"]["podSelector"], server)
    ray = {"app.kubernetes.io/name": "verl-trainer"}
    assert admits(pol, ray, "verl", 5000)
    assert admits(pol, ray, "an-experiment", 5000), "an experiment stack's job runs in its own namespace"
    assert not admits(pol, ray, "verl", 22)
    for other in ({"app.kubernetes.io/name": "code-interpreter"}, {"app": "dataset"}, {}):
        assert not admits(pol, other, "verl", 5000)


def test_the_recorded_mlflow_policy_guards_the_recorded_server():
    rec = record("dev")
    pol = rec.get(POLICY, "tracking-ingress").inputs
    server = rec.get("kubernetes:apps/v1:Deployment", "tracking-server").inputs
    assert _matches(pol["spec"]["podSelector"], server["spec"]["template"]["metadata"]["labels"])


# --------------------------------------------------------------------------------------------- RDMA rule
@pytest.mark.parametrize("stack", STACKS)
def test_the_namespace_rule_and_the_rayjob_agree_on_which_jobs_use_rdma(stack):
    s = settings(stack)
    assert ray_pods_use_rdma(s) == uses_rdma(s, resolve_layout(s))


# --------------------------------------------------------------------------------------------- host network
def admits_address(policy: dict, address: str, port: int) -> bool:
    """Whether an Ingress policy admits traffic from a node address (what host-network pods' traffic is)."""
    import ipaddress

    for rule in policy["spec"].get("ingress", []):
        if rule.get("ports") and not any(p["port"] == port for p in rule["ports"]):
            continue
        for peer in rule.get("from", []):
            block = peer.get("ipBlock")
            if block and ipaddress.ip_address(address) in ipaddress.ip_network(block["cidr"]) and not any(
                    ipaddress.ip_address(address) in ipaddress.ip_network(x) for x in block.get("except", [])):
                return True
    return False


def test_multinode_mlflow_admits_the_host_network_ray_pods_from_their_gpu_nodes():
    # multinode runs in its Lingjun machines' VPC: the nodes' CIDRs are given (job.host_network_cidrs)
    s = settings("multinode")
    rec = record("multinode")
    spec = rec.get("kubernetes:ray.io/v1:RayJob", "train-rayjob").inputs["spec"]["rayClusterSpec"]
    assert spec["headGroupSpec"]["template"]["spec"]["hostNetwork"] is True
    pol = rec.get(POLICY, "tracking-ingress").inputs
    node = s.job.host_network_cidrs[0].rsplit(".", 2)[0] + ".3.7"  # an address inside the GPU nodes' vSwitch
    assert admits_address(pol, node, 5000)
    assert not admits_address(pol, node, 22)
    assert not admits_address(pol, "172.16.0.9", 5000)  # nothing outside the GPU nodes' vSwitch


def test_a_pod_network_job_admits_no_address_only_ray_pods(stack_name):
    s = settings(stack_name)
    if ray_pods_use_rdma(s) or s.kind == "platform":
        return
    pol = np_.mlflow_network_policy_manifest(s, MLFLOW_LABELS)
    assert not any("ipBlock" in peer for rule in pol["spec"]["ingress"] for peer in rule["from"]), stack_name


def test_the_host_network_policies_admit_exactly_the_gpu_nodes_cidrs_the_stack_names():
    # the settings refuse a multi-node Lingjun stack without them (tests/components/config/test_bad_input.py)
    given = settings("multinode", {"job": {"host_network_cidrs": ["192.168.40.0/24"]}})
    pol = np_.mlflow_network_policy_manifest(given, MLFLOW_LABELS)
    assert admits_address(pol, "192.168.40.20", 5000) and not admits_address(pol, "10.1.3.7", 5000)


def _admits_ray_by_label(rule: dict) -> bool:
    return any(((peer.get("podSelector") or {}).get("matchLabels") or {}).get("app.kubernetes.io/name")
               == "verl-trainer" for peer in rule.get("from", []))


def test_every_multinode_policy_that_admits_ray_pods_admits_their_gpu_nodes_on_the_same_ports():
    # Every NetworkPolicy the program renders for the stack, not a list of known ones: a new policy that admits
    # Ray pods by label only would drop the host-network pods' traffic, as mlflow-ingress once did.
    s = settings("multinode")
    policies = [r.inputs for r in record("multinode").by_type(POLICY)]
    inside = s.job.host_network_cidrs[0].rsplit(".", 2)[0] + ".3.7"
    checked = 0
    for pol in policies:
        for rule in pol["spec"].get("ingress", []):
            if not _admits_ray_by_label(rule):
                continue
            checked += 1
            ports = [p["port"] for p in rule.get("ports", [])] or list(RAY_PORTS)
            single = {**pol, "spec": {**pol["spec"], "ingress": [rule]}}
            for port in ports:
                assert admits_address(single, inside, port), (pol["metadata"]["name"], port)
                assert not admits_address(single, "172.16.0.9", port), (pol["metadata"]["name"], port)
    assert checked >= 2  # <job>-ray-ingress and mlflow-ingress


def test_no_policy_of_the_program_stands_between_the_ray_pods_and_the_sandbox_managers_mcp_port(stack_name):
    # The isolation policy selects the sandbox pods only; the manager (MCP, sandbox.mcp_port) is selected by no
    # policy the program renders, so host-network Ray pods reach it as pod-network ones do (docs/sandbox.md).
    s = settings(stack_name)
    if not s.sandbox.enabled:
        return
    from components.workloads.sandbox.manifests import manager_selector

    for reg in record(stack_name).by_type(POLICY):
        pol = reg.inputs
        if pol["metadata"]["namespace"] == s.sandbox.namespace:
            assert not _matches(pol["spec"]["podSelector"], manager_selector(s)), pol["metadata"]["name"]
