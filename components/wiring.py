"""What the components hand to each other.

The cloud layer (cluster, node pools, bucket, RRSA identities) produces these; the workloads (volumes,
verl configs, RayJob, sandboxes, data jobs, tracking) consume them. Keeping the hand-over typed and in one
place means no file repeats a taint, a label, a service-account name or an endpoint literal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from components.settings import Settings

# Labels and taints the program puts on its node pools. The GPU taint keeps everything but training off
# the GPUs; Lingjun nodes additionally carry ACK's own `node-role.alibabacloud.com/lingjun` taint (the
# tutorial's RayJob tolerates it), which training pods must tolerate too.
POOL_LABEL = "verl-ack/pool"
GPU_TAINT_KEY = "verl-ack/gpu"
LINGJUN_TAINT_KEY = "node-role.alibabacloud.com/lingjun"


@dataclass(frozen=True)
class Scheduling:
    """Where a workload runs: the node selector and tolerations of one pool."""

    node_selector: dict[str, str]
    tolerations: list[dict] = field(default_factory=list)


def gpu_scheduling(s: Settings) -> Scheduling:
    tolerations = [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    if s.gpu_pool.kind == "lingjun":
        tolerations.append({"key": LINGJUN_TAINT_KEY, "operator": "Exists"})
    return Scheduling(node_selector={POOL_LABEL: "gpu"}, tolerations=tolerations)


def system_scheduling(s: Settings) -> Scheduling:
    return Scheduling(node_selector={POOL_LABEL: "system"}, tolerations=[])


def oss_endpoint(region: str, internal: bool = True) -> str:
    """OSS endpoint of a region; pods use the free intranet endpoint
    (https://www.alibabacloud.com/help/en/oss/user-guide/regions-and-endpoints)."""
    return f"oss-{region}{'-internal' if internal else ''}.aliyuncs.com"


# Service accounts of the workloads that reach OSS through RRSA (one RAM role each, least privilege).
DATASET_SERVICE_ACCOUNT = "verl-data"
TRAINING_SERVICE_ACCOUNT = "verl-train"
TRACKING_SERVICE_ACCOUNT = "verl-mlflow"


@dataclass
class ClusterRefs:
    """The cluster every Kubernetes object is applied to."""

    cluster_id: pulumi.Input[str]
    k8s_provider: pulumi.ProviderResource
    # Resources Kubernetes objects must wait for (e.g. the node pools, so pods have somewhere to run).
    ready: list[pulumi.Resource] = field(default_factory=list)


@dataclass
class StorageRefs:
    """The OSS bucket and how pods authenticate to it."""

    bucket_name: pulumi.Input[str]
    endpoint: str  # intranet endpoint for pods
    auth: str  # "rrsa" | "access_key"
    csi_role_name: pulumi.Input[str] | None = None  # RAM role the OSS CSI fuse pods assume (rrsa)
    access_key_secret_name: str | None = None  # k8s Secret with akId/akSecret (access_key fallback)


@dataclass
class WorkloadIdentity:
    """Namespace and RRSA-annotated service accounts of the training side."""

    namespace: str
    dataset_service_account: str = DATASET_SERVICE_ACCOUNT
    training_service_account: str = TRAINING_SERVICE_ACCOUNT
    tracking_service_account: str = TRACKING_SERVICE_ACCOUNT
    # The Namespace/ServiceAccount resources, for depends_on of objects placed in them.
    resources: list[pulumi.Resource] = field(default_factory=list)
