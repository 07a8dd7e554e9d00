"""Who may reach the job's Ray cluster and the MLflow server (pure manifest builders; the training and tracking
components create them).

Ray's job API and dashboard (8265), GCS (6379) and client server (10001) ask for the job's token (every RayJob sets
`authOptions.mode: token`; training/rayjob.py), but the job API runs any command on the GPU nodes for whoever holds
it; MLflow (5000) accepts any write. So each gets an Ingress NetworkPolicy that admits only the pods that must reach
it:

| target | from | ports |
|---|---|---|
| Ray pods of the job (head, workers) | each other (`ray_peers`) | all (GCS, raylets, object manager, NCCL) |
| | the K8sJobMode submitter pod | 8265 |
| | the KubeRay operator (it polls the job's status on the dashboard; HTTPMode submits there) | 8265 |
| MLflow | Ray pods in namespaces labelled `verl-ack/tracking-client: "true"` (set on the namespace the program | 5000 |
| | creates for a job's Ray pods: an experiment's, beside the platform's; RDMA Ray pods' own) | |
| | on the host network (multi-node Lingjun): the GPU nodes' CIDRs (`ray_peers`) | 5000 |

and, where the job downloads nothing at start (`job_needs_internet`), an Egress policy that lets its Ray pods reach
only DNS, each other, MLflow, the sandbox manager's MCP port and the cloud's in-region endpoints
(`ray_egress_policy_manifest`).

Ray pods carry their template labels `app.kubernetes.io/name: verl-trainer` and `verl-ack/rayjob: <job>` (one
RayJob's pods: a sweep's variants share a namespace, and each variant's GCS, dashboard and job API admit only its own
pods); the submitter pod KubeRay's
`ray.io/originated-from-cr-name: <job>` and `ray.io/originated-from-crd: RayJob`.

SidecarMode submits from inside the head pod (127.0.0.1), so it needs no rule. `kubectl port-forward` reaches a
pod through the kubelet inside the pod's own network namespace, so the exported port-forward commands keep working.
KubeRay's labels and default ports: ray-project/kuberay v1.7.0 ray-operator/controllers/ray/utils/constant.go and
rayjob_controller.go (getSubmitterTemplate); the operator chart's pod label: helm-chart/kuberay-operator
templates/_helpers.tpl. Policies are enforced only where Terway has NetworkPolicy on (components/cloud/cluster.py).

Host-network Ray pods (multi-node Lingjun: RDMA needs the host network) are matched by no pod selector: their
traffic leaves from the node's address ("NetworkPolicy and hostNetwork pods",
https://kubernetes.io/docs/concepts/services-networking/network-policies/#networkpolicy-and-hostnetwork-pods). A
policy that admits Ray pods admits `ray_peers(s)`: the pod selector plus, on the host network, an ipBlock per GPU
node CIDR (`job.host_network_cidrs`, derived from the VPC this stack creates). Every process on those nodes then
qualifies, not only Ray; the policy that *selects* Ray pods does not apply to them at all (docs/cloud.md).
"""

from __future__ import annotations

import yaml

from components.config import Settings
from components.wiring import MLFLOW_PORT, MLFLOW_SERVICE, TRACKING_CLIENT_LABEL, ray_namespace, ray_pods_use_rdma
from components.workloads.sandbox.manifests import METADATA_CIDR, manager_selector

# KubeRay v1.7.0 utils/constant.go.
RAY_DASHBOARD_PORT = 8265
RAY_GCS_PORT = 6379
RAY_CLIENT_PORT = 10001
RAY_METRICS_PORT = 8080  # DefaultMetricsPort: KubeRay sets metrics-export-port on every Ray pod
RAY_DASHBOARD_AGENT_PORT = 52365  # DefaultDashboardAgentListenPort: set on every Ray pod (probes use it)
# The ports a Ray pod listens on at a fixed number, by the rayStartParams key that moves each one, with the value it
# has when the key is absent, and which pods listen (`head` or every Ray pod): GCS `port` (common/pod.go
# GetHeadPort), `dashboard-port` (the dashboard and job API), `ray-client-server-port` (Ray client) on the head;
# `metrics-export-port` and `dashboard-agent-listen-port` on every pod (common/pod.go setMissingRayStartParams).
# Ray picks the raylet's, object manager's and workers' ports at random; token authentication covers those.
RAY_PORT_PARAMS: dict[str, tuple[str, int]] = {
    "port": ("head", RAY_GCS_PORT),
    "dashboard-port": ("head", RAY_DASHBOARD_PORT),
    "ray-client-server-port": ("head", RAY_CLIENT_PORT),
    "metrics-export-port": ("all", RAY_METRICS_PORT),
    "dashboard-agent-listen-port": ("all", RAY_DASHBOARD_AGENT_PORT),
}


def ray_listen_ports(rayjob_spec: dict) -> list[int]:
    """Every fixed port the Ray pods of a RayJob's spec listen on (rendered or recorded), sorted: each group's
    rayStartParams, with KubeRay's values where a key is absent. The security-group fence of a Lingjun pool
    (components/cloud/nodepools.py) closes these; a test holds every stack's rendered RayJobs to it."""
    cluster = rayjob_spec.get("rayClusterSpec") or {}
    groups = [("head", cluster.get("headGroupSpec") or {})]
    groups += [("worker", g) for g in cluster.get("workerGroupSpecs") or []]
    ports: set[int] = set()
    for role, group in groups:
        params = group.get("rayStartParams") or {}
        for key, (who, default) in RAY_PORT_PARAMS.items():
            if who == "all" or role == who:
                ports.add(int(params.get(key, default)))
    return sorted(ports)


# What a RayJob that moves no port listens on: the ports the cloud layer fences before any RayJob exists.
RAY_DEFAULT_PORTS = tuple(ray_listen_ports({"rayClusterSpec": {"headGroupSpec": {}}}))
ORIGINATED_FROM_CR_NAME = "ray.io/originated-from-cr-name"
ORIGINATED_FROM_CRD = "ray.io/originated-from-crd"
# The Ray pods' own template label (components/workloads/training/rayjob.py gpu_pod_template).
RAY_POD_LABELS = {"app.kubernetes.io/name": "verl-trainer"}
# ...and the one RayJob's: `<job>-ray-ingress` selects and admits only the pods of its own job.
RAYJOB_LABEL = "verl-ack/rayjob"


def ray_job_pod_labels(job_name: str) -> dict[str, str]:
    return {**RAY_POD_LABELS, RAYJOB_LABEL: job_name}
# The upstream operator chart labels its pods with the chart name; the Helm release runs in this namespace
# (components/cloud/addons.py KUBERAY_NAMESPACE, repeated here so workloads do not import the cloud layer).
KUBERAY_OPERATOR_LABELS = {"app.kubernetes.io/name": "kuberay-operator"}
KUBERAY_HELM_NAMESPACE = "kuberay-system"
PART_OF = {"app.kubernetes.io/part-of": "verl-ack"}


def _namespace_selector(name: str) -> dict:
    return {"matchLabels": {"kubernetes.io/metadata.name": name}}


def kuberay_operator_peer(s: Settings) -> dict:
    """The operator's pods. The Helm chart's namespace is known; the ACK add-on's is not published, so with
    `versions.kuberay_source: addon` any namespace's pods carrying the chart's label qualify (docs/facts.md)."""
    if s.versions.kuberay_source == "helm":
        return {"namespaceSelector": _namespace_selector(KUBERAY_HELM_NAMESPACE),
                "podSelector": {"matchLabels": dict(KUBERAY_OPERATOR_LABELS)}}
    return {"namespaceSelector": {}, "podSelector": {"matchLabels": dict(KUBERAY_OPERATOR_LABELS)}}


def ray_host_network_cidrs(s: Settings) -> list[str]:
    """The CIDRs host-network Ray pods' traffic comes from, or [] when the Ray pods use the pod network. A Lingjun
    stack runs in its machines' VPC, so the settings require them (components/config/root.py
    `_host_network_sources`)."""
    return list(s.job.host_network_cidrs) if ray_pods_use_rdma(s) else []


def ray_peers(s: Settings, namespace_selector: dict | None = None, labels: dict[str, str] | None = None) -> list[dict]:
    """NetworkPolicy `from` peers that match the job's Ray pods wherever they run: their label (in the namespaces
    `namespace_selector` selects; None = the policy's own), plus their nodes' CIDRs on the host network. Every
    policy the program renders that admits Ray pods uses it: `<job>-ray-ingress` and `mlflow-ingress`. The
    sandbox manager's MCP port has no policy of the program's (docs/sandbox.md), so nothing rendered drops the Ray
    pods' MCP calls; a policy added there must take its `from` from here."""
    pod: dict = {"podSelector": {"matchLabels": dict(labels or RAY_POD_LABELS)}}
    if namespace_selector is not None:
        pod = {"namespaceSelector": namespace_selector, **pod}
    return [pod, *({"ipBlock": {"cidr": c}} for c in ray_host_network_cidrs(s))]


def ray_network_policy_manifest(s: Settings) -> dict:
    j = s.job
    dashboard = [{"protocol": "TCP", "port": RAY_DASHBOARD_PORT}]
    ingress: list[dict] = [
        # Head and workers talk on every port Ray and NCCL open (GCS, raylet, object manager, worker ports). On the
        # host network no pod is selected by this policy at all, so the node CIDRs only keep the peers uniform.
        {"from": ray_peers(s, labels=ray_job_pod_labels(j.name))},
        {"from": [kuberay_operator_peer(s)], "ports": dashboard},
    ]
    if j.submission_mode == "K8sJobMode":
        # The submitter Job's pod runs `ray job submit/logs --address http://<head>:8265` (KubeRay common/job.go).
        ingress.append({"from": [{"podSelector": {"matchLabels": {ORIGINATED_FROM_CR_NAME: j.name,
                                                                  ORIGINATED_FROM_CRD: "RayJob"}}}],
                        "ports": dashboard})
    return _ray_pods_policy(s, "Ingress", ingress)


def tracking_client_namespaces() -> dict:
    """The namespaces whose Ray pods may reach MLflow: those the program created for a job's Ray pods and labelled
    (components/cloud/identity.py), an experiment's included; not every namespace of the cluster."""
    return {"matchLabels": {TRACKING_CLIENT_LABEL: "true"}}


def mlflow_network_policy_manifest(s: Settings, server_labels: dict[str, str]) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "mlflow-ingress", "namespace": s.job.namespace, "labels": dict(PART_OF)},
        "spec": {
            "podSelector": {"matchLabels": dict(server_labels)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": ray_peers(s, namespace_selector=tracking_client_namespaces()),
                         "ports": [{"protocol": "TCP", "port": MLFLOW_PORT}]}],
        },
    }


# --------------------------------------------------------------------------------------------- Ray pods' egress
# Alibaba Cloud's in-region service endpoints (OSS `-internal`, STS over the VPC for RRSA) answer on the shared range
# 100.64.0.0/10, which also holds the ECS metadata service (100.100.100.200: the node's RAM credentials), excepted
# (components/workloads/sandbox/manifests.py ALWAYS_BLOCKED names the same ranges; docs/uncertain-facts.md).
CLOUD_SERVICES_CIDR = "100.64.0.0/10"
RUNTIME_ENV_INSTALLERS = ("pip", "uv", "conda")  # Ray runtime_env fields that download packages when the job starts


def job_needs_internet(rayjob_spec: dict) -> bool:
    """Whether a RayJob (rendered or recorded) downloads anything from the internet: its runtime env installs packages
    at start (the official image's pip list); the built image ships everything, the model and data come from OSS."""
    env = yaml.safe_load(rayjob_spec.get("runtimeEnvYAML") or "") or {}
    return any(env.get(k) for k in RUNTIME_ENV_INSTALLERS)


def ray_egress_policy_manifest(s: Settings, rayjob_spec: dict) -> dict | None:
    """Default-deny egress for the Ray pods of a job that needs no internet (job_needs_internet), admitting only what
    the job reaches: cluster DNS, its own Ray pods (GCS, raylets, object manager, NCCL), MLflow (5000), the sandbox
    manager's MCP port, and the cloud's in-region endpoints (OSS, STS) except the metadata service. None where the job
    installs packages at start. Ray pods call no Kubernetes API (automountServiceAccountToken: false), and image pulls
    and OSS mounts are the node's, not the pod's. Like every policy here it binds only pods NetworkPolicy covers (not
    host-network or Terway exclusive-ENI pods; docs/cloud.md)."""
    if job_needs_internet(rayjob_spec):
        return None
    j = s.job
    egress: list[dict] = [
        {"to": [{"namespaceSelector": _namespace_selector("kube-system")}],
         "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        {"to": ray_peers(s, labels=ray_job_pod_labels(j.name))},
        {"to": [{"ipBlock": {"cidr": CLOUD_SERVICES_CIDR, "except": [METADATA_CIDR]}}],
         "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 80}]},
    ]
    if s.tracking.enabled:  # the platform's MLflow, in whichever namespace it runs
        egress.append({"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {
            "app.kubernetes.io/name": MLFLOW_SERVICE, **PART_OF}}}],
            "ports": [{"protocol": "TCP", "port": MLFLOW_PORT}]})
    if s.sandbox.enabled:  # run_code_once's MCP calls reach the manager pods behind the MCP Service
        egress.append({"to": [{"namespaceSelector": _namespace_selector(s.sandbox.namespace),
                               "podSelector": {"matchLabels": manager_selector(s)}}],
                       "ports": [{"protocol": "TCP", "port": s.sandbox.mcp_port}]})
    return _ray_pods_policy(s, "Egress", egress)


def _ray_pods_policy(s: Settings, direction: str, rules: list[dict]) -> dict:
    """A NetworkPolicy of the job's Ray pods (`<job>-ray-ingress` / `<job>-ray-egress`) holding `rules`."""
    j = s.job
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{j.name}-ray-{direction.lower()}", "namespace": ray_namespace(s),
                     "labels": dict(PART_OF)},
        "spec": {"podSelector": {"matchLabels": ray_job_pod_labels(j.name)}, "policyTypes": [direction],
                 direction.lower(): rules},
    }
