"""Durations by resource: each recorded resource's kind from its TYPE TOKEN, and the kind's creation minutes.

`kind_of`: `alicloud:cs/managedKubernetes:...` is an `ack_cluster`, any `kubernetes:` object a `k8s_object`, an
unknown custom type `default`, a component or a provider nothing; the minutes come from
`settings.latency.create_minutes`, a data Job's from its data size (docs/latency.md "How the model works").
"""

from __future__ import annotations

import json

from components.cloud.registry import runtime_pip_packages
from components.cloud.registry import training_image as configured_image
from components.config import Settings
from components.model.wait import mbit_minutes, model_bytes, nat_cap_mbps
from components.wiring import GPU_TAINT_KEY, LINGJUN_TAINT_KEY, POOL_LABEL, ROLE_LABEL
from components.workloads.training.rayjob import model_prefetch_of
from offline.engine import Recording, Registration

RAYJOB_TYPE = "kubernetes:ray.io/v1:RayJob"  # pulumi_kubernetes CustomResource: f"kubernetes:{apiVersion}:{kind}"
JOB_TYPE = "kubernetes:batch/v1:Job"
DAEMONSET_TYPE = "kubernetes:apps/v1:DaemonSet"
NODE_POOL_TYPE = "alicloud:cs/nodePool:NodePool"
PREPULL_ROLE = "prepull"
SKIP_AWAIT = "pulumi.com/skipAwait"

# Exact type tokens -> kind (a key of latency.create_minutes, or a data-sized kind handled below).
TYPE_KINDS: dict[str, str] = {
    "alicloud:cs/managedKubernetes:ManagedKubernetes": "ack_cluster",
    NODE_POOL_TYPE: "node_pool",  # `gpu_node_pool` when the pool is the GPU pool (is_gpu_pool)
    "alicloud:cs/kubernetesAddon:KubernetesAddon": "addon",
    "alicloud:vpc/natGateway:NatGateway": "nat_gateway",
    "alicloud:ecs/eipAddress:EipAddress": "eip",
    "alicloud:ecs/eipAssociation:EipAssociation": "eip",
    "alicloud:vpc/network:Network": "vpc",
    "alicloud:vpc/switch:Switch": "vpc",
    "alicloud:alb/loadBalancer:LoadBalancer": "load_balancer",
    "alicloud:cas/serviceCertificate:ServiceCertificate": "certificate",
    "kubernetes:helm.sh/v3:Release": "helm_release",
    "kubernetes:apps/v1:Deployment": "k8s_workload",
    "kubernetes:apps/v1:StatefulSet": "k8s_workload",
    DAEMONSET_TYPE: "k8s_workload",
    "kubernetes:networking.k8s.io/v1:Ingress": "ingress",
    JOB_TYPE: "job",
    RAYJOB_TYPE: "k8s_object",  # creating the object is quick; the training phases follow it
}
# Prefixes for the rest of a package: control-plane API calls that finish in seconds.
PREFIX_KINDS: list[tuple[str, str]] = [
    ("alicloud:vpc/", "vpc"),
    ("alicloud:ram/", "cloud_api"),
    ("alicloud:oss/", "cloud_api"),
    ("alicloud:dns/", "cloud_api"),
    ("alicloud:alidns/", "cloud_api"),
    ("alicloud:ecs/", "cloud_api"),
    ("alicloud:alb/", "cloud_api"),
    ("kubernetes:", "k8s_object"),
]
# Kinds with no creation time of their own.
INSTANT = {"component", "provider"}
# The staging Jobs whose prefixes the staging cache holds (components/workloads/cache.py).
STAGING_KINDS = ("model_job", "dataset_job")


def labels_of(reg: Registration) -> dict[str, str]:
    meta = reg.inputs.get("metadata") or {}
    return meta.get("labels") or {} if isinstance(meta, dict) else {}


def annotations_of(reg: Registration) -> dict[str, str]:
    meta = reg.inputs.get("metadata") or {}
    return meta.get("annotations") or {} if isinstance(meta, dict) else {}


def is_gpu_pool(reg: Registration) -> bool:
    """The GPU node pool: labelled `verl-ack/pool: gpu`, tainted with the GPU or Lingjun taint, or a Lingjun pool."""
    if reg.type != NODE_POOL_TYPE:
        return False
    labels = {x.get("key"): x.get("value") for x in reg.inputs.get("labels") or [] if isinstance(x, dict)}
    taints = {x.get("key") for x in reg.inputs.get("taints") or [] if isinstance(x, dict)}
    return (labels.get(POOL_LABEL) == "gpu" or bool(taints & {GPU_TAINT_KEY, LINGJUN_TAINT_KEY})
            or reg.inputs.get("type") == "lingjun")


def is_prepull(reg: Registration) -> bool:
    return reg.type == DAEMONSET_TYPE and (
        labels_of(reg).get(ROLE_LABEL) == PREPULL_ROLE or "prepull" in reg.name.replace("-", ""))


def job_kind(reg: Registration) -> str:
    """`gate_job` (the GPU node gate), `model_job` (model staging), `dataset_job` or `job`, from the role label (`verl-ack/role` or
    `app.kubernetes.io/component`), the command (`pipeline.stage_model`, `pipeline.gsm8k`), or the name."""
    labels = labels_of(reg)
    role = labels.get(ROLE_LABEL) or labels.get("app.kubernetes.io/component") or ""
    text = json.dumps(reg.inputs.get("spec") or {})
    if "pipeline.node_gate" in text:
        return "gate_job"
    if role.startswith("model") or "pipeline.stage_model" in text:
        return "model_job"
    if role.startswith("data") or "pipeline.gsm8k" in text:
        return "dataset_job"
    if "model" in reg.name:
        return "model_job"
    if "data" in reg.name:
        return "dataset_job"
    return "job"


def kind_of(reg: Registration) -> str:
    if reg.type.startswith("pulumi:providers:"):
        return "provider"
    if not reg.custom:
        return "component"
    if (getattr(reg, "options", None) or {}).get("read"):
        return "read"  # `Resource.get` of something that exists (an existing cluster): one API read
    kind = TYPE_KINDS.get(reg.type)
    if kind is None:
        kind = next((k for prefix, k in PREFIX_KINDS if reg.type.startswith(prefix)), "default")
    if kind == "node_pool" and is_gpu_pool(reg):
        return "gpu_node_pool"
    if kind == "job":
        return job_kind(reg)
    return kind


def hub_mbps(s: Settings) -> float:
    cap = nat_cap_mbps(s)
    return min(s.latency.hub_download_mbps, cap) if cap else s.latency.hub_download_mbps


def job_minutes(s: Settings, kind: str, cached: bool = False) -> float:
    """A data Job, awaited by Pulumi until complete: pod start, download from the hub, upload to OSS. `cached`: its
    prefix is complete already, so the Job only starts and reads the marker (pipeline/marker.py)."""
    L = s.latency
    if kind == "gate_job":
        return L.gate_job_minutes
    if cached and kind in STAGING_KINDS:
        return L.job_start_minutes
    if kind == "model_job":
        size = model_bytes(s)
    elif kind == "dataset_job":
        size = L.dataset_mib * 2**20
    else:
        return L.job_start_minutes
    return L.job_start_minutes + mbit_minutes(size, hub_mbps(s)) + mbit_minutes(size, L.oss_upload_mbps)


def model_prefetched(recording: Recording) -> bool:
    """Whether the recorded RayJob's head pod copies the model into memory while Ray starts (its `model-prefetch`
    container, components/workloads/training/rayjob.py)."""
    rayjobs = recording.by_type(RAYJOB_TYPE)
    return bool(rayjobs) and model_prefetch_of(rayjobs[0].inputs.get("spec") or {}) is not None


def submit_minutes(s: Settings) -> float:
    """RayJob submission: with a runtime_env pip install (official image) or without one (built image)."""
    L = s.latency
    return L.job_submit_minutes if runtime_pip_packages(s) else L.job_submit_no_pip_minutes


def create_minutes(s: Settings, kind: str, cached: bool = False) -> float:
    if kind in INSTANT:
        return 0.0
    if kind in ("model_job", "dataset_job", "gate_job", "job"):
        return job_minutes(s, kind, cached)
    if kind == "read":
        return s.latency.create_minutes["cloud_api"]
    return s.latency.create_minutes.get(kind, s.latency.create_minutes["default"])


def training_image(s: Settings, recording: Recording) -> str:
    """The image of the RayJob's head pod as recorded, else the one the settings name (a platform stack has no
    RayJob)."""
    for reg in recording.by_type(RAYJOB_TYPE):
        try:
            containers = reg.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
            image = containers[0].get("image") if containers else None
            if isinstance(image, str) and not image.startswith("["):  # not "[unknown]" / "[secret]"
                return image
        except (KeyError, TypeError):
            continue
    return configured_image(s)
