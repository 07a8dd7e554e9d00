"""Settings of the cloud layer: network, cluster, node pools, storage and ACK add-ons."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from components.config.types import BUCKET_NAME, Cidr, Strict, _cidr


class NetworkSettings(Strict):
    vpc_id: str | None = Field(None, description="Existing VPC id. Leave empty to create a VPC (new clusters only).")
    node_vswitch_ids: list[str] = Field(
        default_factory=list, description="Existing node vSwitch ids, one per zone in `zones` order (with vpc_id).")
    pod_vswitch_ids: list[str] = Field(
        default_factory=list, description="Existing Terway pod vSwitch ids, one per zone (with vpc_id).")
    vpc_cidr: Cidr = Field("10.0.0.0/8", description="CIDR of a new VPC.")
    node_cidrs: list[Cidr] = Field(
        default_factory=lambda: ["10.1.0.0/16", "10.2.0.0/16"],
        description="CIDRs of the node vSwitches a new VPC gets, one per zone in `zones` order.")
    pod_cidrs: list[Cidr] = Field(
        default_factory=lambda: ["10.4.0.0/16", "10.5.0.0/16"],
        description="CIDRs of the Terway pod vSwitches a new VPC gets, one per zone in `zones` order.")
    service_cidr: Cidr = Field("192.168.0.0/16", description="Kubernetes Service CIDR; must not overlap VPC or pods.")
    nat_bandwidth_mbps: int = Field(
        100, ge=1, le=10000, description="Bandwidth of the NAT gateway's pay-as-you-go EIP (PayByTraffic), Mbit/s.")

    @field_validator("vpc_cidr", "service_cidr")
    @classmethod
    def _is_cidr(cls, v: str) -> str:
        return _cidr(v)

    @field_validator("node_cidrs", "pod_cidrs")
    @classmethod
    def _are_cidrs(cls, v: list[str]) -> list[str]:
        return [_cidr(c) for c in v]

    @model_validator(mode="after")
    def _no_overlap(self) -> NetworkSettings:
        svc = ipaddress.ip_network(self.service_cidr)
        for c in [self.vpc_cidr, *self.node_cidrs, *self.pod_cidrs]:
            if ipaddress.ip_network(c).overlaps(svc):
                raise ValueError(
                    f"service_cidr {self.service_cidr} overlaps {c}; Kubernetes Services need their own range "
                    "(pick e.g. 192.168.0.0/16 or 172.16.0.0/16)")
        vpc = ipaddress.ip_network(self.vpc_cidr)
        for c in [*self.node_cidrs, *self.pod_cidrs]:
            if self.vpc_id is None and not ipaddress.ip_network(c).subnet_of(vpc):
                raise ValueError(f"vSwitch CIDR {c} is not inside vpc_cidr {self.vpc_cidr}; move it into the VPC range")
        if bool(self.vpc_id) != bool(self.node_vswitch_ids):
            raise ValueError("vpc_id and node_vswitch_ids go together: give both to reuse a network, or neither")
        return self


# --------------------------------------------------------------------------------------------- cluster
class ClusterSettings(Strict):
    mode: Literal["new", "existing"] = Field(
        "new", description="`new` creates an ACK Pro cluster; `existing` uses the cluster `existing_cluster_id`.")
    existing_cluster_id: str | None = Field(
        None, description="ACK cluster id (c...) to use when mode=existing; read, never managed or deleted.")
    kubernetes_version: str | None = Field(
        None,
        description="ACK Kubernetes version (e.g. 1.34.1-aliyun.1). Empty = the newest ACK offers at creation. "
        "Lingjun pools need >= 1.31. List: `aliyun cs GET /api/v1/metadata/versions` or cs.get_kubernetes_version.")
    schema_version: str = Field(
        "1.34", description="Kubernetes minor version the offline conformance tests validate manifests against.")
    cluster_spec: Literal["ack.pro.small", "ack.pro.xlarge", "ack.pro.2xlarge", "ack.pro.4xlarge"] = Field(
        "ack.pro.small", description="ACK Pro control-plane size (Lingjun node pools need ACK Pro).")
    deletion_protection: bool = Field(
        False, description="Cluster deletion protection. Off by default so `pulumi destroy` leaves nothing billing.")
    public_api: bool = Field(
        True, description="Expose the API server on an internet SLB so Pulumi and kubectl can reach it from outside the VPC.")
    network: NetworkSettings = Field(default_factory=NetworkSettings, description="VPC and vSwitches of a new cluster.")
    create_timeout_minutes: int = Field(
        60, ge=20, le=180,
        description="How long `pulumi up` waits for a new cluster (ACK: typically 10-20 min; provider default 90).")
    kubeconfig_ttl_minutes: Optional[int] = Field(
        4320, ge=15, le=4320,
        description="Validity of the client certificate in the kubeconfig Pulumi fetches on every run (15-4320). "
        "Empty = ACK's long-lived default (years); a short one means `pulumi destroy --run-program` after it expires.")
    k8s_delete_unreachable: bool = Field(
        False,
        description="Let the Kubernetes provider drop objects of a cluster that no longer answers (set true only to "
        "finish a destroy after the cluster was deleted outside Pulumi).")

    @field_validator("existing_cluster_id")
    @classmethod
    def _cluster_id(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"c[0-9a-z]{8,40}", v):
            raise ValueError(f"{v!r} is not an ACK cluster id (c followed by 8-40 lowercase letters/digits)")
        return v

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"1\.\d+\.\d+(-aliyun\.\d+)?", v):
            raise ValueError(f"{v!r} is not an ACK version string like 1.34.1-aliyun.1")
        return v

    @model_validator(mode="after")
    def _existing_needs_id(self) -> ClusterSettings:
        if self.mode == "existing" and not self.existing_cluster_id:
            raise ValueError("mode=existing needs existing_cluster_id (the ACK cluster id, e.g. c1234567890abcdef)")
        if self.mode == "new" and self.existing_cluster_id:
            raise ValueError("existing_cluster_id is set but mode=new; set mode: existing to use that cluster")
        return self

    def minor_version(self) -> int | None:
        return int(self.kubernetes_version.split(".")[1]) if self.kubernetes_version else None


# --------------------------------------------------------------------------------------------- node pools
class LingjunSettings(Strict):
    eflo_cluster_id: str = Field(description="Lingjun (EFLO) cluster id that holds the GPU nodes (console: Lingjun > Clusters).")
    eflo_node_group_id: str = Field(description="Lingjun node-group id whose nodes join this pool (immutable after creation).")

    @field_validator("eflo_cluster_id", "eflo_node_group_id")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty: copy the id from the Lingjun console")
        return v


class EcsGpuSettings(Strict):
    instance_types: list[str] = Field(
        min_length=1, description="ECS GPU instance types, in order of preference (e.g. ecs.gn8v.8xlarge).")
    system_disk_gib: int = Field(200, ge=40, le=2048, description="System disk per GPU node (holds the training image).")
    system_disk_category: Literal["cloud_essd", "cloud_auto", "cloud_efficiency"] = Field(
        "cloud_essd", description="System disk category.")
    min_nodes: int = Field(0, ge=0, description="Autoscaler floor. 0 lets the pool scale to zero so GPUs stop billing.")

    @field_validator("instance_types")
    @classmethod
    def _ecs_types(cls, v: list[str]) -> list[str]:
        for t in v:
            if not t.startswith("ecs."):
                raise ValueError(f"{t!r} is not an ECS instance type (they start with 'ecs.', e.g. ecs.gn8v.8xlarge)")
        return v


class GpuPoolSettings(Strict):
    kind: Literal["lingjun", "ecs"] = Field(description="`lingjun` joins Lingjun nodes via EFLO ids; `ecs` creates ECS GPU nodes.")
    lingjun: LingjunSettings | None = Field(None, description="Lingjun node group (kind=lingjun).")
    ecs: EcsGpuSettings | None = Field(None, description="ECS GPU instance settings (kind=ecs).")
    zone: str = Field(description="Zone of the GPU nodes; must be one of `zones`.")
    nodes: int = Field(ge=1, le=256, description="GPU nodes the training job uses (trainer.nnodes).")
    gpus_per_node: int = Field(8, ge=1, le=16, description="GPUs per node (trainer.n_gpus_per_node).")
    gpu_memory_gib: int = Field(ge=8, le=288, description="Memory of one GPU in GiB (used by the memory-fit estimate).")
    cpus_per_node: int = Field(ge=4, description="vCPUs per GPU node; the Ray pod requests most of them.")
    memory_gib_per_node: int = Field(ge=16, description="Host memory per GPU node in GiB.")
    gpu_model: str = Field("", description="Free-text GPU model, shown in the plan and as a node label (e.g. GU8TF, H20).")

    @model_validator(mode="after")
    def _kind_section(self) -> GpuPoolSettings:
        if self.kind == "lingjun" and self.lingjun is None:
            raise ValueError("kind=lingjun needs a `lingjun:` section with eflo_cluster_id and eflo_node_group_id")
        if self.kind == "ecs" and self.ecs is None:
            raise ValueError("kind=ecs needs an `ecs:` section with instance_types")
        if self.kind == "lingjun" and self.ecs is not None:
            raise ValueError("kind=lingjun but an `ecs:` section is set; remove it or set kind: ecs")
        if self.kind == "ecs" and self.lingjun is not None:
            raise ValueError("kind=ecs but a `lingjun:` section is set; remove it or set kind: lingjun")
        if self.ecs is not None and self.ecs.min_nodes > self.nodes:
            raise ValueError(
                f"ecs.min_nodes {self.ecs.min_nodes} exceeds nodes {self.nodes} (the autoscaler's maximum); "
                "lower min_nodes (0 scales the GPUs to zero) or raise nodes")
        return self


class SystemPoolSettings(Strict):
    instance_types: list[str] = Field(
        default_factory=lambda: ["ecs.g7.2xlarge", "ecs.g8i.2xlarge"], min_length=1,
        description="CPU instance types for controllers, sandboxes, tracking and data jobs.")
    nodes: int = Field(2, ge=1, le=50, description="Nodes in the CPU system pool.")
    system_disk_gib: int = Field(120, ge=40, description="System disk per system node, GiB.")
    cpus_per_node: int = Field(8, ge=2, description="vCPUs per system node (for sandbox capacity and the plan).")
    memory_gib_per_node: int = Field(32, ge=4, description="Memory per system node, GiB.")


# --------------------------------------------------------------------------------------------- storage
class StorageSettings(Strict):
    mode: Literal["new", "existing"] = Field("new", description="`new` creates the bucket; `existing` uses `bucket_name` as is.")
    bucket_name: str = Field(description="OSS bucket for datasets, models and checkpoints (globally unique).")
    keep_on_destroy: bool = Field(
        True, description="Keep the bucket and its checkpoints on `pulumi destroy` (retain_on_delete + protect).")
    versioning: bool = Field(True, description="Enable object versioning on a new bucket.")
    sse_algorithm: Literal["AES256", "KMS"] = Field("AES256", description="Server-side encryption of a new bucket.")
    kms_key_id: str | None = Field(None, description="KMS key id when sse_algorithm=KMS (empty = OSS-managed KMS key).")
    auth: Literal["rrsa", "access_key"] = Field(
        "rrsa", description="How pods reach OSS. `access_key` uses the ossAccessKeyId/Secret secret config as a fallback.")
    datasets_prefix: str = Field("datasets/", description="Key prefix of processed datasets.")
    models_prefix: str = Field("models/", description="Key prefix of staged model weights.")
    checkpoints_prefix: str = Field("checkpoints/", description="Key prefix of training checkpoints.")
    kept_prefix: str = Field("kept/", description="Key prefix teardown copies the latest checkpoint to.")
    tracking_prefix: str = Field("mlflow/", description="Key prefix of MLflow artifacts.")
    scratch_prefix: str = Field("scratch/", description="Key prefix for temporary files, expired by a lifecycle rule.")
    scratch_expire_days: int = Field(7, ge=1, description="Days before objects under scratch_prefix expire.")
    abort_multipart_days: int = Field(3, ge=1, description="Days before incomplete multipart uploads are aborted.")
    noncurrent_expire_days: int = Field(
        30, ge=1, description="Days a replaced or deleted object version is kept when versioning is on; then it "
        "expires, so deleted checkpoints stop billing.")
    volume_capacity_gib: int = Field(
        1024, ge=1, description="Nominal capacity of the OSS PersistentVolumes (OSS does not enforce it).")

    @field_validator("bucket_name")
    @classmethod
    def _bucket(cls, v: str) -> str:
        if not BUCKET_NAME.fullmatch(v) or "--" in v:
            raise ValueError(
                f"{v!r} is not a valid OSS bucket name: 3-63 characters, lowercase letters, digits and single "
                "hyphens, starting and ending with a letter or digit")
        return v

    @field_validator("datasets_prefix", "models_prefix", "checkpoints_prefix", "kept_prefix",
                     "tracking_prefix", "scratch_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not re.fullmatch(r"([a-z0-9][a-z0-9._-]*/)+", v):
            raise ValueError(f"{v!r} must be a key prefix like 'checkpoints/' (lowercase, ends with '/', no leading '/')")
        return v

    @model_validator(mode="after")
    def _distinct(self) -> StorageSettings:
        prefixes = [self.datasets_prefix, self.models_prefix, self.checkpoints_prefix, self.kept_prefix,
                    self.tracking_prefix, self.scratch_prefix]
        for a in prefixes:
            for b in prefixes:
                if a is not b and b.startswith(a):
                    raise ValueError(f"prefix {b!r} lies inside {a!r}; give each kind of data its own top-level prefix")
        if self.kms_key_id and self.sse_algorithm != "KMS":
            raise ValueError("kms_key_id is set but sse_algorithm is AES256; set sse_algorithm: KMS")
        return self




class AddonSetting(Strict):
    name: str = Field("", description="ACK add-on API name (check with cs.get_kubernetes_addons). Empty = the "
                      "built-in name of the role, so a stack may override only `version`.")
    version: str | None = Field(None, description="Add-on version; empty = the version ACK installs by default.")
    enabled: bool = Field(
        True, description="Install this add-on. Only the optional roles (monitoring, node_problem_detector) may be "
        "turned off; the others are needed by the program.")


# ACK add-ons by role (docs/cloud.md lists how certain each name is). `terway*` and the CSI pair are also
# passed to a NEW cluster at creation (network plugin and storage must exist before any node joins).
DEFAULT_ADDONS: dict[str, str] = {
    "terway_controlplane": "terway-controlplane",
    "terway": "terway-eniip",
    "csi_plugin": "csi-plugin",
    "csi_provisioner": "managed-csiprovisioner",
    "alb": "alb-ingress-controller",
    "kuberay": "ack-kuberay-operator",
    "sandbox_controller": "ack-agent-sandbox-controller",
    "sandbox_manager": "ack-sandbox-manager",
    "node_problem_detector": "ack-node-problem-detector",
    "pod_identity": "ack-pod-identity-webhook",
    "monitoring": "arms-prometheus",
}
OPTIONAL_ADDONS = ("monitoring", "node_problem_detector")


class SandboxManagerAddonKeys(Strict):
    """Where the sandbox manager add-on's `config` JSON takes each value. The ACK console names the parameters
    className, domain and adminApiKey (tutorial); their nesting in the API config is UNVERIFIED: read
    `cs.get_kubernetes_addon_metadata(cluster_id, name, version).config_schema` and set dotted paths here
    (e.g. `sandboxManager.domain`)."""

    domain: str = Field("domain", description="Dotted path of the E2B domain in the add-on config.")
    ingress_class: str = Field("className", description="Dotted path of the ingress class (alb) in the add-on config.")
    admin_api_key: str = Field("adminApiKey", description="Dotted path of the admin API key (secret) in the add-on config.")

    @field_validator("domain", "ingress_class", "admin_api_key")
    @classmethod
    def _path(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*", v):
            raise ValueError(f"{v!r} is not a dotted key path like sandboxManager.domain")
        return v
