"""Who may reach the Ray cluster's job API, GCS and client server, and MLflow, and what the Ray pods may reach: the
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


def admits(policy: dict, pod_labels: dict, namespace: str, port: int, ns_labels: dict | None = None,
           direction: str = "ingress") -> bool:
    """Whether an Ingress policy lets a pod (labels, namespace with `ns_labels`) reach `port` of the pods it selects
    (direction egress: whether the selected pods may reach that pod's `port`)."""
    own_ns = policy["metadata"]["namespace"]
    for rule in policy["spec"].get(direction, []):
        if rule.get("ports") and not any(p["port"] == port for p in rule["ports"]):
            continue
        for peer in rule.get("from" if direction == "ingress" else "to", []):
            if "ipBlock" in peer:
                continue
            ns_sel = peer.get("namespaceSelector")
            ns_ok = namespace == own_ns if ns_sel is None else (
                ns_sel == {} or _matches(ns_sel, {"kubernetes.io/metadata.name": namespace, **(ns_labels or {})}))
            pod_ok = "podSelector" not in peer or _matches(peer["podSelector"], pod_labels)
            if ns_ok and pod_ok:
                return True
    return False


def namespace_labels(stack: str, name: str) -> dict:
    """The labels the program gives a namespace it creates in a stack ({} for one it does not create)."""
    for ns in record(stack).by_type("kubernetes:core/v1:Namespace"):
        if ns.inputs["metadata"]["name"] == name:
            return dict(ns.inputs["metadata"].get("labels") or {})
    return {}


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
        assert admits(mlflow, labels, ray_ns, 5000, namespace_labels("multinode", ray_ns))


# --------------------------------------------------------------------------------------------- MLflow
def test_mlflow_is_reachable_only_by_ray_pods_on_its_port():
    s = settings()
    pol = np_.mlflow_network_policy_manifest(s, MLFLOW_LABELS)
    server = deployment_manifest(s, "verl-mlflow")["spec"]["template"]["metadata"]["labels"]
    assert _matches(pol["spec"]["podSelector"], server)
    ray = {"app.kubernetes.io/name": "verl-trainer"}
    client = {np_.TRACKING_CLIENT_LABEL: "true"}
    assert admits(pol, ray, "verl", 5000, client)
    assert admits(pol, ray, "an-experiment", 5000, client), "an experiment stack's job runs in its own namespace"
    assert not admits(pol, ray, "someone-elses", 5000), "a pod labelled verl-trainer in an unlabelled namespace"
    assert not admits(pol, ray, "verl", 22, client)
    for other in ({"app.kubernetes.io/name": "code-interpreter"}, {"app": "dataset"}, {}):
        assert not admits(pol, other, "verl", 5000, client)


@pytest.mark.parametrize("stack", [s for s in STACKS if s != "dev-platform"])
def test_the_namespace_the_program_creates_for_a_jobs_ray_pods_is_one_mlflow_admits(stack):
    """Every stack's (experiments' too) Ray namespace carries the label the platform's MLflow policy names."""
    rec = record(stack)
    mlflow = record("dev-platform" if settings(stack).kind == "experiment" else stack).get(POLICY, "tracking-ingress")
    for job in rec.by_type("kubernetes:ray.io/v1:RayJob"):
        ns = job.inputs["metadata"]["namespace"]
        labels = job.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["metadata"]["labels"]
        assert admits(mlflow.inputs, labels, ns, 5000, namespace_labels(stack, ns)), job.urn


def test_the_platform_labels_no_namespace_of_its_own_as_a_tracking_client():
    assert all(np_.TRACKING_CLIENT_LABEL not in (ns.inputs["metadata"].get("labels") or {})
               for ns in record("dev-platform").by_type("kubernetes:core/v1:Namespace"))


# --------------------------------------------------------------------------------------------- Ray pods' egress
@pytest.mark.parametrize("stack", STACKS)
def test_a_job_that_downloads_nothing_at_start_gets_a_default_deny_egress_for_its_ray_pods(stack):
    rec = record(stack)
    for job in rec.by_type("kubernetes:ray.io/v1:RayJob"):
        name = job.inputs["metadata"]["name"]
        pols = [p.inputs for p in rec.by_type(POLICY) if p.inputs["metadata"]["name"] == f"{name}-ray-egress"]
        if np_.job_needs_internet(job.inputs["spec"]):
            assert pols == [], f"{job.urn}: its runtime env installs packages from the index at start"
            continue
        (pol,) = pols
        assert pol["spec"]["policyTypes"] == ["Egress"]
        assert pol["metadata"]["namespace"] == job.inputs["metadata"]["namespace"]
        for group in job.inputs["spec"]["rayClusterSpec"].get("workerGroupSpecs", []) + [
                job.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]]:
            assert _matches(pol["spec"]["podSelector"], group["template"]["metadata"]["labels"])
        blocks = [p["ipBlock"] for r in pol["spec"]["egress"] for p in r["to"] if "ipBlock" in p]
        assert all(b["cidr"] != "0.0.0.0/0" for b in blocks), "no route to the internet"
        assert any(np_.METADATA_CIDR in b.get("except", []) for b in blocks), "never the node's metadata service"


def test_the_egress_policy_admits_what_the_job_reaches_and_nothing_else():
    s = settings("dev")
    rec = record("dev")
    job = rec.get("kubernetes:ray.io/v1:RayJob", "train-rayjob").inputs
    pol = np_.ray_egress_policy_manifest(s, job["spec"])
    ray = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["metadata"]["labels"]
    mlflow = rec.get("kubernetes:apps/v1:Deployment", "tracking-server").inputs["spec"]["template"]["metadata"]["labels"]
    from components.workloads.sandbox.manifests import manager_selector

    def reaches(labels, ns, port):
        return admits(pol, labels, ns, port, direction="egress")

    assert reaches(ray, "verl", np_.RAY_GCS_PORT) and reaches(ray, "verl", 29500), "its own pods, NCCL included"
    assert reaches(mlflow, "verl", 5000) and reaches(mlflow, "verl-dev-grpo", 5000)
    assert reaches(manager_selector(s), s.sandbox.namespace, s.sandbox.mcp_port)
    assert reaches({"k8s-app": "kube-dns"}, "kube-system", 53)
    assert not reaches(manager_selector(s), s.sandbox.namespace, 7788), "not the E2B API's admin port"
    assert not reaches({"app.kubernetes.io/name": "code-interpreter"}, s.sandbox.namespace, 49999), "no sandbox"
    assert not reaches({"app.kubernetes.io/name": "kuberay-operator"}, "kuberay-system", 8080)
    assert not reaches({"app.kubernetes.io/name": "verl-trainer", "verl-ack/rayjob": "other"}, "verl", 6379)


def test_a_runtime_env_that_installs_packages_needs_the_internet():
    assert np_.job_needs_internet({"runtimeEnvYAML": "pip:\n- verl==0.9.1\n"})
    assert not np_.job_needs_internet({"runtimeEnvYAML": "env_vars:\n  A: b\n"})
    assert not np_.job_needs_internet({})


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
