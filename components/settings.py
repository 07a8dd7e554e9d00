"""The typed contract between stack files and code.

A stack file (`stacks/Pulumi.<stack>.yaml`) carries one structured key, `verl-ack:settings`, validated by
`Settings` below; secrets are separate secret config keys (`SECRET_KEYS`). Every default lives here, every
field is described (the descriptions become `stacks/stack.schema.json` for editors), and every cross-field
rule names the field, the rule and the fix. GPU-layout rules that need the model preset live in
`components/layout.py` and run right after this model validates (`load_settings`).
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from components.presets import PRESETS

PROJECT = "verl-ack"
SETTINGS_KEY = f"{PROJECT}:settings"
REPO_ROOT = Path(__file__).resolve().parent.parent
STACKS_DIR = REPO_ROOT / "stacks"

# Secret config keys (`pulumi config set --secret <key> ...`). They never enter the settings object, so
# they cannot leak into a ConfigMap, a label or the plan by accident; the program reads them as secret
# Outputs (`config.get_secret`) and only Kubernetes Secrets carry them into the cluster.
SECRET_KEYS: dict[str, str] = {
    "sandboxApiKey": "Admin API key of the sandbox manager (E2B/MCP). Required when sandbox.enabled.",
    "hfToken": "Hugging Face token for the dataset and model downloads (optional for public repos).",
    "modelscopeToken": "ModelScope token for the model download (optional for public models).",
    "tlsCertificate": "PEM certificate chain for the sandbox domain (when sandbox.tls.source=upload).",
    "tlsPrivateKey": "PEM private key for the sandbox domain (when sandbox.tls.source=upload).",
    "ossAccessKeyId": "Fallback OSS AccessKey id, only when storage.auth=access_key (RRSA is the default).",
    "ossAccessKeySecret": "Fallback OSS AccessKey secret, only when storage.auth=access_key.",
}

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# OSS bucket naming rules: 3-63 characters, lowercase letters, digits and hyphens, starting and ending
# with a letter or digit (https://www.alibabacloud.com/help/en/oss/user-guide/bucket-naming-conventions).
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+(-\d+)?$")
# Ray-on-K8s: the RayJob name feeds the RayCluster and Service names; KubeRay rejects > 47 characters
# (ray-operator controllers/ray/utils/validation.go, 53 - 6 for the generated suffix).
RAYJOB_NAME_MAX = 47


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)


def _cidr(v: str) -> str:
    ipaddress.ip_network(v, strict=True)
    return v


Cidr = Annotated[str, Field(description="An IPv4 CIDR block, e.g. 10.1.0.0/16.")]
Port = Annotated[int, Field(ge=1, le=65535)]
# Kubernetes label syntax (apimachinery validation: qualified name key, value <= 63 characters).
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
CPU_QUANTITY = re.compile(r"^(\d+(\.\d+)?|\d+m)$")
MEMORY_QUANTITY = re.compile(r"^\d+(Ki|Mi|Gi|Ti)$")
PIN = re.compile(r"^\d+(\.\d+)*([a-z]+\d+)?(\.post\d+)?$")


def _quantity(v: str, pattern: re.Pattern, what: str) -> str:
    if not pattern.fullmatch(v) or re.fullmatch(r"0+(\.0+)?m?|0+(Ki|Mi|Gi|Ti)", v):
        raise ValueError(f"{v!r} is not {what} (and not zero)")
    return v


# Kubernetes resource quantities as settings types: one rule, every CPU/memory field.
CpuQuantity = Annotated[str, AfterValidator(lambda v: _quantity(v, CPU_QUANTITY, "a CPU quantity like 1, 500m or 2.5"))]
MemoryQuantity = Annotated[str, AfterValidator(lambda v: _quantity(v, MEMORY_QUANTITY, "a memory quantity like 2Gi or 512Mi"))]


def _storage_class(v: str) -> str:
    if not DNS1123_SUBDOMAIN.fullmatch(v):
        raise ValueError(f"{v!r} is not a StorageClass name (DNS-1123 subdomain)")
    return v


StorageClassName = Annotated[str, AfterValidator(_storage_class)]
# Empty passes here so the section's own rule ("tracking.enabled needs storage_class") names the problem.
StorageClassNameOrEmpty = Annotated[str, AfterValidator(lambda v: _storage_class(v) if v else v)]


# --------------------------------------------------------------------------------------------- network
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


# --------------------------------------------------------------------------------------------- sandbox
class TlsSettings(Strict):
    source: Literal["upload", "certificate_id"] = Field(
        "upload", description="`upload` sends tlsCertificate/tlsPrivateKey secret config to Certificate Management; "
        "`certificate_id` uses a certificate already there.")
    certificate_id: str | None = Field(None, description="Certificate Management (CAS) cert id when source=certificate_id.")
    certificate_id_suffix: Literal["cn-hangzhou", "ap-southeast-1"] | None = Field(
        None, description="Suffix the AlbConfig appends to the CAS cert id: `cn-hangzhou` for certificates in the "
        "Chinese-mainland CAS site, `ap-southeast-1` outside it. Empty = derived from `region` (cn-* except "
        "cn-hongkong -> cn-hangzhou, else ap-southeast-1).")

    @field_validator("certificate_id")
    @classmethod
    def _cert_id(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"\d{1,20}", v):
            raise ValueError(f"{v!r} is not a CAS certificate id: digits only, without a -cn-hangzhou style suffix "
                             "(certificate_id_suffix adds it)")
        return v

    @model_validator(mode="after")
    def _id(self) -> TlsSettings:
        if self.source == "certificate_id" and not self.certificate_id:
            raise ValueError("source=certificate_id needs certificate_id (the CAS certificate id, digits)")
        return self


class SandboxSettings(Strict):
    enabled: bool = Field(True, description="Deploy the code sandboxes and the MCP tool the training job calls.")
    manager: Literal["ack-addon", "open-source"] = Field(
        "ack-addon", description="`ack-addon` installs ack-agent-sandbox-controller + the sandbox manager add-on; "
        "`open-source` deploys an OpenKruise Agents sandbox manager built with MCP support.")
    namespace: str = Field("sandbox-system", description="Namespace of the sandbox manager and the SandboxSet.")
    domain: str | None = Field(
        None, description="E2B domain (api.<domain>, *.<domain>) served by the ALB with TLS. Required with manager "
        "ack-addon (the add-on serves the E2B API there); not allowed otherwise (open-source: in-cluster MCP only).")
    dns_zone: str | None = Field(
        None, description="Alibaba Cloud DNS zone that holds `domain` (e.g. example.com); adds the wildcard record.")
    tls: TlsSettings = Field(default_factory=TlsSettings, description="Certificate for the sandbox domain.")
    template_name: str = Field("code-interpreter", description="SandboxSet name = the E2B template the MCP server claims from.")
    mcp_port: Port = Field(
        18082, description="Sandbox manager MCP port. ACK's image uses 18082 (tutorial), open-source PR #165 uses 8082.")
    mcp_path: str = Field("/mcp", description="HTTP path of the MCP Streamable-HTTP endpoint.")
    service_name: str = Field("sandbox-mcp", description="In-cluster Service name the training job reaches MCP at.")
    manager_selector: Optional[dict[str, str]] = Field(
        None, description="Pod labels of the sandbox manager (the MCP Service selects them; only they may reach "
        "sandboxes). Empty = the default for `manager`: ack-addon {app.kubernetes.io/name: ack-sandbox-manager, "
        "component: sandbox-manager} (the tutorial's selector without the Helm placeholder "
        "app.kubernetes.io/instance: release-name); open-source {app.kubernetes.io/name: sandbox-manager, "
        "component: sandbox-manager} (upstream config/sandbox-manager). Check: "
        "`kubectl -n <namespace> get pods --show-labels`.")
    manager_replicas: int = Field(
        1, ge=1, le=10, description="Sandbox manager replicas (manager=open-source only; peers sync MCP sessions).")
    manager_cpu: CpuQuantity = Field("1", description="CPU request and limit of the open-source sandbox manager.")
    manager_memory: MemoryQuantity = Field("2Gi", description="Memory request and limit of the open-source sandbox manager.")
    pool_cap: int = Field(
        24, description="Upper bound on the warm sandbox pool (SandboxSet replicas); size it to what the system pool "
        "can hold (the plan warns when it cannot).")
    pool_min: int = Field(3, ge=0, description="Lower bound on the warm sandbox pool.")
    allow_internet: bool = Field(False, description="Let sandboxes reach the public internet (DNS is always allowed).")
    cpu: CpuQuantity = Field("500m", description="CPU request and limit of one sandbox (a Jupyter kernel running short snippets).")
    memory: MemoryQuantity = Field("1Gi", description="Memory request and limit of one sandbox.")

    @field_validator("pool_cap")
    @classmethod
    def _cap(cls, v: int) -> int:
        if v < 1:
            raise ValueError("pool_cap must be at least 1: every run_code_once call needs a warm sandbox")
        return v

    @field_validator("namespace", "template_name", "service_name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not DNS1123_LABEL.fullmatch(v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a DNS-1123 label (lowercase letters, digits, '-', at most 63)")
        return v

    @field_validator("service_name")
    @classmethod
    def _service_name(cls, v: str) -> str:
        # The API server validates Service names as DNS-1035 labels: a leading digit is refused at apply time.
        if not DNS1035.fullmatch(v):
            raise ValueError(f"{v!r} is not a Service name: a DNS-1035 label must start with a letter")
        return v

    @field_validator("mcp_port", mode="before")
    @classmethod
    def _mcp_port(cls, v):
        if isinstance(v, int) and not 1 <= v <= 65535:
            raise ValueError(f"mcp_port {v} is not a TCP port: use 1-65535 (18082 for the ACK add-on, 8082 upstream)")
        return v

    @field_validator("mcp_path")
    @classmethod
    def _mcp_path(cls, v: str) -> str:
        if not re.fullmatch(r"/[A-Za-z0-9._~/-]*", v):
            raise ValueError(f"mcp_path {v!r} must be a URL path starting with '/' (e.g. /mcp)")
        return v

    @field_validator("manager_selector")
    @classmethod
    def _selector(cls, v: Optional[dict[str, str]]) -> Optional[dict[str, str]]:
        if v is not None:
            if not v:
                raise ValueError("manager_selector must not be empty (it would select every pod); leave it unset "
                                 "for the default of `manager`")
            for key, value in v.items():
                if not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
                    raise ValueError(f"{key}: {value} is not a valid Kubernetes label (key [prefix/]name, value at "
                                     "most 63 letters, digits, '-', '_' or '.')")
        return v

    @model_validator(mode="after")
    def _pool(self) -> SandboxSettings:
        if self.pool_min > self.pool_cap:
            raise ValueError(f"pool_min {self.pool_min} exceeds pool_cap {self.pool_cap}; raise pool_cap or lower pool_min")
        if self.dns_zone and not self.domain:
            raise ValueError("dns_zone is set but domain is empty; set sandbox.domain (a name inside dns_zone)")
        if self.domain and self.dns_zone and not (self.domain == self.dns_zone or self.domain.endswith("." + self.dns_zone)):
            raise ValueError(f"domain {self.domain!r} is not inside dns_zone {self.dns_zone!r}")
        if self.manager == "open-source" and self.mcp_path != "/mcp":
            raise ValueError(f"mcp_path {self.mcp_path!r}: the open-source MCP server (PR openkruise/agents#165) "
                             "serves a fixed /mcp path; set mcp_path: /mcp")
        return self


# --------------------------------------------------------------------------------------------- data & model
class DatasetSettings(Strict):
    name: Literal["openai/gsm8k"] = Field(
        "openai/gsm8k", description="Dataset the pipeline preprocesses (only GSM8K is supported).")
    config: str = Field("main", description="Dataset config name.")
    train_subset: int = Field(20, ge=1, description="Rows in the small train subset (train<N>.parquet) smoke stacks use.")
    test_subset: int = Field(100, ge=1, description="Rows in the small test subset (test<N>.parquet).")
    use_subsets: bool = Field(True, description="Train on the small subsets (smoke runs) instead of the full splits.")
    full_train_rows: int = Field(7473, description="Rows in the full GSM8K train split (openai/gsm8k main).")
    full_test_rows: int = Field(1319, description="Rows in the full GSM8K test split.")
    job_cpu: CpuQuantity = Field("2", description="CPU request and limit of the dataset and model staging Jobs.")
    job_memory: MemoryQuantity = Field("8Gi", description="Memory request and limit of the dataset and model staging Jobs.")
    backoff_limit: int = Field(2, ge=0, le=10, description="Pod retries of the dataset and model staging Jobs.")
    active_deadline_seconds: int = Field(
        7200, ge=60, description="Hard limit on one data Job's run time (a large model download included); "
        "`pulumi up` waits this long (plus 5 minutes) for the Jobs to complete.")
    ttl_seconds_after_finished: int = Field(
        86400, ge=0,
        description="Seconds a finished data Job (and its pod and logs) stays before Kubernetes deletes it.")
    staging_storage_class: StorageClassName = Field(
        "alicloud-disk-topology-alltype", description="StorageClass of the scratch disk the model staging Job "
        "downloads into (a generic ephemeral volume, deleted with the pod). The topology class binds in the pod's "
        "zone (WaitForFirstConsumer); check `kubectl get storageclass`.")

    @field_validator("name", mode="before")
    @classmethod
    def _supported(cls, v):
        from pipeline.gsm8k import SUPPORTED_DATASETS  # the pipeline's own list: one source of truth

        if v not in SUPPORTED_DATASETS:
            raise ValueError(f"dataset {v!r} is not supported: the dataset Job only preprocesses "
                             f"{', '.join(SUPPORTED_DATASETS)} into verl's tool-agent format")
        return v

    @model_validator(mode="after")
    def _subsets_fit(self) -> "DatasetSettings":
        for split, n, rows in (("train", self.train_subset, self.full_train_rows),
                               ("test", self.test_subset, self.full_test_rows)):
            if n > rows:
                raise ValueError(f"{split}_subset {n} exceeds the {rows} rows of the {split} split (the dataset "
                                 f"Job would fail); use at most {rows}")
        return self


class ModelSettings(Strict):
    preset: Literal[tuple(PRESETS)] = Field(  # type: ignore[valid-type]
        "qwen2.5-3b-instruct", description="Model preset (architecture facts and default parallelism).")
    source: Literal["huggingface", "modelscope"] = Field(
        "huggingface", description="Hub the model staging job downloads from (ModelScope is faster in mainland regions).")
    rollout_tp: int | None = Field(None, ge=1, description="Override: vLLM tensor parallel size.")
    actor_param_offload: bool | None = Field(None, description="Override: FSDP actor parameter offload.")
    actor_optimizer_offload: bool | None = Field(None, description="Override: FSDP actor optimizer offload.")
    ref_param_offload: bool | None = Field(None, description="Override: reference policy parameter offload.")
    gpu_memory_utilization: float | None = Field(None, gt=0, lt=1, description="Override: vLLM gpu_memory_utilization.")
    ppo_micro_batch_size_per_gpu: int | None = Field(None, ge=1, description="Override: actor micro batch per GPU.")
    log_prob_micro_batch_size_per_gpu: int | None = Field(None, ge=1, description="Override: log-prob micro batch per GPU.")


# --------------------------------------------------------------------------------------------- training
class TrainingSettings(Strict):
    algorithm: Literal["grpo", "gae", "rloo", "reinforce_plus_plus", "remax", "grpo_passk", "gpg"] = Field(
        "grpo", description="verl algorithm.adv_estimator.")
    train_batch_size: int = Field(16, ge=1, description="Prompts per step (data.train_batch_size).")
    ppo_mini_batch_size: int = Field(8, ge=1, description="Prompts per PPO mini batch (actor.ppo_mini_batch_size).")
    rollout_n: int = Field(16, ge=1, description="Responses sampled per prompt (rollout.n).")
    max_prompt_length: int = Field(1024, ge=16, description="data.max_prompt_length (tokens).")
    max_response_length: int = Field(1024, ge=16, description="data.max_response_length (tokens).")
    lr: float = Field(1e-6, gt=0, lt=1, description="Actor learning rate.")
    use_kl_loss: bool = Field(True, description="KL loss against the reference policy (needs a ref model).")
    kl_loss_coef: float = Field(0.001, ge=0, description="KL loss coefficient.")
    kl_loss_type: Literal["low_var_kl", "kl", "abs", "mse", "full"] = Field("low_var_kl", description="KL estimator.")
    use_kl_in_reward: bool = Field(False, description="algorithm.use_kl_in_reward.")
    entropy_coeff: float = Field(0.0, ge=0, description="Entropy bonus coefficient.")
    loss_agg_mode: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = Field(
        "token-mean", description="actor.loss_agg_mode.")
    use_dynamic_bsz: bool = Field(False, description="Token-based dynamic batch sizes (micro batch rules then do not apply).")
    ppo_max_token_len_per_gpu: int = Field(16384, ge=256, description="Token budget per GPU when use_dynamic_bsz.")
    ulysses_sequence_parallel_size: int = Field(1, ge=1, description="Ulysses sequence parallel size of the actor.")
    total_training_steps: int | None = Field(1, ge=1, description="Stop after this many steps (empty = epochs decide).")
    total_epochs: int = Field(1, ge=1, description="Epochs over the train set.")
    save_freq: int = Field(1, description="Checkpoint every N steps (-1 = never; a last-step checkpoint is written when > 0).")
    test_freq: int = Field(-1, description="Validate every N steps (-1 = never; when > 0 it also validates at the last step).")
    val_before_train: bool = Field(False, description="Validate before the first step (off for smoke runs: it costs a full pass).")
    max_assistant_turns: int = Field(5, ge=1, description="multi_turn.max_assistant_turns.")
    max_parallel_calls: int = Field(1, ge=1, description="multi_turn.max_parallel_calls: tool calls one turn may run at once.")
    agent_num_workers: int = Field(8, ge=1, description="rollout.agent.num_workers (agent-loop worker processes).")
    rollout_engine: Literal["vllm", "sglang"] = Field("vllm", description="Rollout engine (rollout.name).")
    logger: list[Literal["console", "mlflow", "tensorboard", "wandb", "swanlab", "file"]] = Field(
        default_factory=lambda: ["console", "mlflow"], min_length=1, description="trainer.logger backends.")
    trace_backend: Literal["mlflow", "weave"] | None = Field(
        "mlflow", description="rollout.trace.backend (rollout traces); empty disables tracing.")
    project_name: str = Field("gsm8k-tool-agent", description="trainer.project_name (MLflow experiment).")
    experiment_name: str = Field("qwen2.5-3b-grpo-tool-agent", description="trainer.experiment_name (MLflow run).")
    save_contents: list[Literal["model", "optimizer", "extra", "hf_model"]] = Field(
        default_factory=lambda: ["model", "optimizer", "extra", "hf_model"],
        description="Checkpoint contents. model+optimizer+extra make a resume restore optimizer and dataloader state.")
    max_actor_ckpt_to_keep: int | None = Field(None, ge=1, description="Keep only the newest N actor checkpoints.")

    tool_timeout_seconds: int = Field(
        120, ge=1, le=3600, description="Timeout of one run_code_once call through the sandbox manager's MCP server.")

    @field_validator("project_name", "experiment_name")
    @classmethod
    def _shell_safe(cls, v: str) -> str:
        # These go into the Hydra overrides and the checkpoint path; the entrypoint passes two shells.
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", v):
            raise ValueError(f"{v!r} must be letters, digits, '.', '_' or '-' (it becomes a path and a shell word)")
        return v

    @field_validator("save_contents")
    @classmethod
    def _resumable(cls, v: list[str]) -> list[str]:
        # resume_mode=auto loads `model` from the newest checkpoint; without it a rerun starts from the base
        # weights while skipping the steps already done.
        if "model" not in v:
            raise ValueError("save_contents must include 'model' (resume_mode=auto restores it); keep "
                             "model, optimizer, extra so a resume also restores optimizer and dataloader state")
        if len(set(v)) != len(v):
            raise ValueError("save_contents lists an entry twice")
        return v


# --------------------------------------------------------------------------------------------- job
class JobSettings(Strict):
    name: str = Field("verl-grpo", description="RayJob name (DNS-1035 label, at most 47 characters).")
    namespace: str = Field("verl", description="Namespace of the training job, its volumes and configs.")
    submission_mode: Literal["K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode"] = Field(
        "SidecarMode", description="KubeRay submission mode. SidecarMode needs KubeRay >= 1.5.0.")
    active_deadline_seconds: int = Field(86400, gt=0, description="Hard limit on the job's run time; KubeRay stops it after.")
    pre_running_deadline_seconds: int | None = Field(
        3600, gt=0, description="Fail if the job is not Running within this time (KubeRay >= 1.6.0).")
    ttl_seconds_after_finished: int = Field(
        300, ge=0, description="Seconds the finished Ray cluster stays for log inspection before it is deleted.")
    backoff_limit: int = Field(0, ge=0, description="RayJob retries; each creates a new Ray cluster (GPU time).")
    shm_gib: int | None = Field(
        None, ge=1, description="Size of the memory-backed /dev/shm of each Ray pod (vLLM, NCCL), GiB; it counts "
        "against the pod's memory. Empty = a quarter of the pod's memory, at most 64.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment variables of every Ray pod, e.g. NCCL_SOCKET_IFNAME or NCCL_IB_HCA for RDMA. "
        "The right values depend on the node type's NICs (not preset: check `ibv_devices` / `ip link` on a node). "
        "NCCL_DEBUG defaults to WARN and may be overridden here.")
    gpu_pod_resources: dict[str, str] = Field(
        default_factory=dict,
        description="Extended resources each GPU pod requests besides nvidia.com/gpu (e.g. an RDMA device-plugin "
        "resource). Empty = none; the resource name depends on the node type's device plugin.")

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        reserved = {"PYTHONPATH", "MLFLOW_TRACKING_URI"}
        for name in v:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, digits, '_')")
            if name in reserved:
                raise ValueError(f"{name} is set by the program (tool module path / tracking server); remove it")
        return v

    @field_validator("gpu_pod_resources")
    @classmethod
    def _resources(cls, v: dict[str, str]) -> dict[str, str]:
        for name, qty in v.items():
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", name):
                raise ValueError(f"{name!r} is not an extended resource name (<domain>/<name>)")
            if name == "nvidia.com/gpu":
                raise ValueError(f"{name} is set from gpu_pool.gpus_per_node; remove it")
            if not re.fullmatch(r"[1-9]\d*", qty):
                raise ValueError(f"{name}: {qty!r} must be a positive whole number (extended resources are counts)")
        return v

    @field_validator("name")
    @classmethod
    def _rayjob_name(cls, v: str) -> str:
        if len(v) > RAYJOB_NAME_MAX or not DNS1035.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a valid RayJob name: KubeRay needs a DNS-1035 label of at most {RAYJOB_NAME_MAX} "
                "characters (lowercase letters, digits, '-', starting with a letter)")
        return v

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        if not DNS1123_LABEL.fullmatch(v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a valid namespace name (DNS-1123 label)")
        return v


# --------------------------------------------------------------------------------------------- versions
# What each data Job pip-installs (pipeline/gsm8k.py, pipeline/stage_model.py and pipeline/oss_client.py import
# these); each needs a pin in versions.pipeline_packages.
PIPELINE_IMPORTS: dict[str, tuple[str, ...]] = {
    "dataset": ("datasets", "pyarrow", "alibabacloud-oss-v2", "alibabacloud-credentials"),
    "model-huggingface": ("huggingface-hub", "alibabacloud-oss-v2", "alibabacloud-credentials"),
    "model-modelscope": ("modelscope", "alibabacloud-oss-v2", "alibabacloud-credentials"),
}


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


class VersionSettings(Strict):
    verl: str = Field("0.9.1", description="verl release installed in the job (pip) or baked into the built image.")
    verl_image: str = Field(
        "verlai/verl:vllm024.latest",
        description="Base training image (Docker Hub verlai/verl; ships verl's dependencies, not verl). verl 0.9.x "
        "pins vllm==0.24.0 in its [vllm] extra and needs transformers>=5.5.3, so the vllm012 images of the "
        "tutorial cannot run it (verl docker/README.md names verlai/verl:vllm024.latest).")
    ray: str = Field(
        "2.52.1", description="Ray version inside verl_image, for RayCluster rayVersion. Verify: "
        "`docker run --rm <image> ray --version`.")
    transformers: str = Field(
        "5.5.3", description="transformers pin installed beside verl (verl 0.9.1 needs >=5.5.3,<5.11, the vllm024 image "
        "ships 5.3.0; 5.5.3 is verl's own CI pin). Keep it equal to image/requirements-nodeps.txt.")
    mlflow: str = Field(
        "3.17.2", description="mlflow pip pin for the job (tracking client; verl does not depend on it). 3.18.0 needs "
        "mlflow-skinny 3.18.0, which the package index did not serve when this was pinned; keep it equal to "
        "image/requirements.txt.")
    fastmcp: str = Field(
        "2.14.7", description="fastmcp pip pin for the job: the MCP client of the run_code_once tool "
        "(agent_tools/verl_ack_tools.py; verl 0.9 has no MCP client of its own). Keep it equal to image/requirements.txt.")
    kuberay: str = Field("1.7.0", description="KubeRay operator version (decides which RayJob features are valid).")
    kuberay_source: Literal["addon", "helm"] = Field(
        "helm", description="Install KubeRay from the ACK add-on (`addons.kuberay`) or the upstream Helm chart.")
    kuberay_chart_repo: str = Field("https://ray-project.github.io/kuberay-helm/", description="KubeRay Helm repository.")
    mlflow_image: str = Field("ghcr.io/mlflow/mlflow:v3.18.0", description="MLflow tracking server image.")
    dataset_image: str = Field("python:3.11-slim", description="Image of the dataset and model staging Jobs.")
    sandbox_runtime_image: str = Field(
        "registry-cn-hangzhou.ack.aliyuncs.com/acs/agent-runtime:v0.0.1", description="Sandbox runtime (envd) init image.")
    code_interpreter_image: str = Field(
        "acs-image-test-01-registry.cn-hangzhou.cr.aliyuncs.com/e2b/code-interpreter:v1.6",
        description="Code-interpreter sandbox image (the tutorial's).")
    sandbox_manager_image: str = Field(
        "openkruise/sandbox-manager:v0.3.0",
        description="Open-source sandbox manager image. It MUST be built with MCP support (unmerged PR "
        "openkruise/agents#165, commit 136236a8): the released images have no --mcp-enabled flag and exit on it.")
    sandbox_chart_repo: str = Field(
        "https://openkruise.github.io/charts/", description="Helm repository of the open-source agent-sandbox charts.")
    sandbox_controller_chart: str = Field(
        "agents-sandbox-controller", description="Chart of the open-source agent-sandbox controller (CRDs, webhooks). "
        "The published index names it agents-sandbox-controller; the source folder is "
        "kruise-agents-sandbox-controller.")
    sandbox_controller_chart_version: str = Field(
        "0.2.0", description="Chart version (0.2.0 installs controller v0.2.0, the newest in the published index; "
        "check `helm search repo openkruise/agents-sandbox-controller --versions`).")
    pipeline_packages: dict[str, str] = Field(
        default_factory=lambda: {
            "datasets": "5.2.0",
            "pyarrow": "26.0.1",
            "alibabacloud-oss-v2": "1.4.1",
            "alibabacloud-credentials": "1.0.12",
            "huggingface-hub": "2.4.0",
            "modelscope": "1.40.2",
        },
        description="Exact pip pins the dataset and model staging Jobs install (package -> version). Their own "
        "dependencies are resolved by pip at run time.")
    pip_index_url: Optional[str] = Field(
        None, description="pip index for the data Jobs (e.g. https://mirrors.aliyun.com/pypi/simple/ in mainland "
        "regions). Empty = PyPI.")
    addons: dict[str, AddonSetting] = Field(
        default_factory=lambda: {role: AddonSetting(name=name) for role, name in DEFAULT_ADDONS.items()},
        description="ACK add-ons by role (" + ", ".join(DEFAULT_ADDONS) + "). A stack lists only the roles and "
        "keys it changes; the rest keep the built-in names. Names marked uncertain in docs/cloud.md must be checked "
        "per region with cs.get_kubernetes_addons.")
    sandbox_manager_config_keys: SandboxManagerAddonKeys = Field(
        default_factory=SandboxManagerAddonKeys,
        description="Key paths of the sandbox manager add-on config (shape unverified; see docs/cloud.md).")

    @field_validator("addons", mode="before")
    @classmethod
    def _merge_addons(cls, v):
        given = dict(v or {})
        unknown = sorted(set(given) - set(DEFAULT_ADDONS))
        if unknown:
            raise ValueError(f"unknown add-on role(s) {unknown}; roles are {sorted(DEFAULT_ADDONS)}")
        merged = {}
        for role, name in DEFAULT_ADDONS.items():
            entry = given.get(role) or {}
            entry = entry.model_dump() if isinstance(entry, AddonSetting) else dict(entry)
            merged[role] = {**entry, "name": entry.get("name") or name}
        return merged

    @field_validator("addons")
    @classmethod
    def _required_addons(cls, v: dict[str, AddonSetting]) -> dict[str, AddonSetting]:
        off = sorted(role for role, a in v.items() if not a.enabled and role not in OPTIONAL_ADDONS)
        if off:
            raise ValueError(f"add-on role(s) {off} cannot be disabled (only {list(OPTIONAL_ADDONS)} are optional); "
                             "remove `enabled: false`")
        return v

    @field_validator("verl", "kuberay", "ray", "sandbox_controller_chart_version")
    @classmethod
    def _semver(cls, v: str) -> str:
        if not re.fullmatch(r"\d+\.\d+\.\d+", v):
            raise ValueError(f"{v!r} must be an exact version like 1.7.0 (pins, not ranges)")
        return v

    @field_validator("pipeline_packages")
    @classmethod
    def _pins(cls, v: dict[str, str]) -> dict[str, str]:
        missing = sorted({pkg for pkgs in PIPELINE_IMPORTS.values() for pkg in pkgs} - set(v))
        if missing:
            raise ValueError(f"pipeline_packages lacks {', '.join(missing)}: the data Jobs import them")
        for name, version in v.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or not PIN.fullmatch(version):
                raise ValueError(f"{name}: {version!r} must be an exact version like 1.4.1 (pins, not ranges)")
        return v

    @field_validator("pip_index_url", "sandbox_chart_repo")
    @classmethod
    def _https(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not re.fullmatch(r"https://[^\s'\"]+", v):
            raise ValueError(f"{v!r} must be an https:// URL")
        return v

    def kuberay_tuple(self) -> tuple[int, int, int]:
        return tuple(int(x) for x in self.kuberay.split("."))  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------- image
class ImageSettings(Strict):
    source: Literal["official", "built"] = Field(
        "official", description="`official`: versions.verl_image plus a runtime pip install of verl, mlflow and fastmcp "
        "(slow start); `built`: the image built from image/ and pushed to the registry below (no runtime install).")
    registry: Literal["personal", "enterprise", "existing"] = Field(
        "personal", description="Where a built image lives: an ACR Personal Edition namespace/repository this program "
        "creates, a repository it creates in an existing ACR Enterprise instance, or an existing repository.")
    namespace: str = Field("verl-ack", description="ACR namespace (personal/enterprise).")
    repository: str = Field("verl", description="ACR repository name (personal/enterprise).")
    enterprise_instance_id: str | None = Field(None, description="ACR Enterprise instance id (cri-...) when registry=enterprise.")
    registry_host: str | None = Field(
        None, description="Registry host nodes pull from. Default for personal: registry-vpc.<region>.aliyuncs.com "
        "(VPC endpoint). Required for enterprise (e.g. <instance>-registry-vpc.<region>.cr.aliyuncs.com) and existing.")
    existing_repository: str | None = Field(
        None, description="Full repository path (host/namespace/repo) when registry=existing.")
    tag: str | None = Field(None, description="Image tag. Empty = the content hash of image/ (what the build workflow pushes).")
    credential_helper: bool = Field(
        True, description="Install managed-aliyun-acr-credential-helper so nodes pull private ACR images without "
        "imagePullSecrets (built images only).")
    credential_helper_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Config JSON of the credential helper add-on (empty = its defaults). UNVERIFIED shape: the helper "
        "serves only the namespaces/service accounts and ACR instances its config names, so set them (job namespace, "
        "service accounts verl-train and default) after reading `cs.get_kubernetes_addon_metadata(cluster_id, "
        "'managed-aliyun-acr-credential-helper', version).config_schema`.")
    prepull: bool = Field(
        True, description="Pull the training image onto each GPU node as soon as it joins (a DaemonSet), "
        "overlapping model and data staging.")
    pause_image: str = Field(
        "registry.k8s.io/pause:3.10",
        description="Tiny image the pre-pull DaemonSet idles in after pulling. Mainland regions may need a mirror of it.")

    @field_validator("namespace", "repository")
    @classmethod
    def _acr_name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,63}", v):
            raise ValueError(f"{v!r} is not a valid ACR name (2-64 lowercase letters, digits, '.', '_' or '-')")
        return v

    @model_validator(mode="after")
    def _registry(self) -> ImageSettings:
        if self.registry == "enterprise" and not (self.enterprise_instance_id and self.registry_host):
            raise ValueError("registry=enterprise needs enterprise_instance_id and registry_host "
                             "(copy both from the ACR Enterprise console)")
        if self.registry == "existing" and not self.existing_repository:
            raise ValueError("registry=existing needs existing_repository (host/namespace/repo)")
        return self


# --------------------------------------------------------------------------------------------- tracking
class TrackingSettings(Strict):
    enabled: bool = Field(True, description="Run an MLflow tracking server that outlives the job.")
    storage_class: StorageClassNameOrEmpty | None = Field(
        "alicloud-disk-topology-alltype",
        description="StorageClass of the tracking server's backend-store disk (sqlite). The topology class creates "
        "the disk in the zone the pod lands in (WaitForFirstConsumer); ACK's alicloud-disk-essd binds Immediately, in "
        "the provisioner's zone, which a multi-zone system pool may not reach. Check `kubectl get storageclass`.")
    disk_gib: int = Field(20, ge=20, description="Backend-store disk size (ESSD minimum is 20 GiB).")
    cpu: CpuQuantity = Field("1", description="CPU request and limit of the MLflow server.")
    memory: MemoryQuantity = Field("2Gi", description="Memory request and limit of the MLflow server.")

    @model_validator(mode="after")
    def _storage(self) -> TrackingSettings:
        if self.enabled and not self.storage_class:
            raise ValueError("tracking.enabled needs storage_class (e.g. alicloud-disk-topology-alltype) for its "
                             "backend store; set one or set tracking.enabled: false")
        return self


# --------------------------------------------------------------------------------------------- latency
# Typical creation minutes per kind of resource; components/latency.py maps type tokens to these kinds.
# ack_cluster is documented ("about 15 minutes", pulumi_alicloud cs/managed_kubernetes.py; the CS API docs
# say 10-20). Every other value is an ESTIMATE (../shared/research/alicloud.md §8 and §10.12: node pools
# "several minutes", NAT 1-3, ALB "a few", add-ons 1-5, certificates seconds); docs/latency.md lists each.
DEFAULT_CREATE_MINUTES: dict[str, float] = {
    "ack_cluster": 15.0, "gpu_node_pool": 10.0, "node_pool": 6.0, "addon": 3.0, "nat_gateway": 2.0, "eip": 0.5,
    "vpc": 0.5, "load_balancer": 3.0, "certificate": 0.1, "cloud_api": 0.2, "helm_release": 2.0,
    "k8s_object": 0.05, "k8s_workload": 1.0, "ingress": 2.0, "default": 1.0,
}


class LatencySettings(Strict):
    create_minutes: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_CREATE_MINUTES),
        description="Typical creation minutes per kind (ack_cluster, gpu_node_pool, node_pool, addon, nat_gateway, "
        "eip, vpc, load_balancer, certificate, cloud_api, helm_release, k8s_object, k8s_workload, ingress, default). "
        "Keys you give replace the built-in estimates; the rest keep them (docs/latency.md gives each source).")
    hub_download_mbps: float = Field(
        400, gt=0, description="Model/dataset download rate from the hub, Mbit/s (estimate). Capped by "
        "cluster.network.nat_bandwidth_mbps when this stack creates the NAT gateway.")
    oss_upload_mbps: float = Field(800, gt=0, description="Upload rate from a pod to OSS (intranet endpoint), Mbit/s (estimate).")
    oss_read_mbps: float = Field(
        800, gt=0, description="Rate a GPU node reads the model from the OSS volume at verl start, Mbit/s (estimate).")
    node_pull_mbps: float = Field(
        1000, gt=0, description="Image pull rate of one node including layer extraction, Mbit/s (estimate). Pulls "
        "from registries outside *.aliyuncs.com go through the NAT and share its bandwidth.")
    training_image_gib: float = Field(
        25, gt=0, description="Size of the training image to pull, GiB (estimate: verl's vLLM images are 20+ GB; "
        "check with `docker manifest inspect` or the registry's UI).")
    dataset_mib: float = Field(10, gt=0, description="Size of the raw dataset the dataset Job downloads, MiB (GSM8K is a few MB).")
    job_start_minutes: float = Field(
        2, ge=0, description="Start of a data Job's pod: scheduling, small image pull, pip install (estimate).")
    ray_start_minutes: float = Field(2, ge=0, description="Ray head and workers up once the image is on the nodes (estimate).")
    job_submit_minutes: float = Field(
        3, ge=0, description="RayJob submission: submitter start and the job's runtime_env (pip) setup (estimate).")
    verl_init_minutes: float = Field(
        5, ge=0, description="verl start excluding the model read: workers, FSDP wrap, vLLM engine and CUDA graphs "
        "(estimate). The model read from OSS (params x 2 bytes / oss_read_mbps) is added on top.")

    @field_validator("create_minutes", mode="before")
    @classmethod
    def _merge_minutes(cls, v):
        unknown = sorted(set(v or {}) - set(DEFAULT_CREATE_MINUTES))
        if unknown:
            raise ValueError(f"unknown kind(s) {unknown} in latency.create_minutes; use {sorted(DEFAULT_CREATE_MINUTES)}")
        return {**DEFAULT_CREATE_MINUTES, **(v or {})}

    @field_validator("create_minutes")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: m for k, m in v.items() if m < 0}
        if bad:
            raise ValueError(f"latency.create_minutes must be >= 0 minutes; fix {bad}")
        return v


# --------------------------------------------------------------------------------------------- cost
# ROUGH pay-as-you-go list-price approximations in USD (per hour unless the key says otherwise), recalled
# from Alibaba Cloud's international price pages, never read from a live price list: estimates, not quotes.
# Override them with your account's prices in `cost.prices` and state `cost.prices_taken_on`.
# Keys: `ecs.<type>` and `ack.pro.<spec>` are per instance/cluster hour; the named keys are below.
PRICE_KEYS: dict[str, str] = {
    "lingjun_node_hour": "one Lingjun GPU node, per hour (bills while the node exists, job or not)",
    "nat_gateway_hour": "Enhanced NAT gateway instance plus one capacity unit, per hour",
    "eip_hour": "pay-by-traffic EIP holding fee, per hour",
    "eip_egress_gib": "outbound internet traffic through the EIP, per GiB (inbound is not billed)",
    "alb_hour": "ALB instance, per hour",
    "alb_lcu_hour": "ALB capacity unit (LCU), per LCU-hour",
    "oss_gib_month": "OSS standard storage, per GiB-month",
    "disk_gib_month": "ESSD cloud disk, per GiB-month",
}
DEFAULT_PRICES_USD: dict[str, float] = {
    "ack.pro.small": 0.09, "ecs.g7.2xlarge": 0.37, "ecs.g8i.2xlarge": 0.40, "ecs.gn7i-c16g1.4xlarge": 1.90,
    "lingjun_node_hour": 28.0, "nat_gateway_hour": 0.10, "eip_hour": 0.005, "eip_egress_gib": 0.12,
    "alb_hour": 0.03, "alb_lcu_hour": 0.04, "oss_gib_month": 0.02, "disk_gib_month": 0.14,
}
ITEM_PRICE_KEY = re.compile(r"^(ecs|ack)\.[a-z0-9][a-z0-9.-]*$")


class CostSettings(Strict):
    currency: Literal["USD", "CNY"] = Field(
        "USD", description="Currency of `prices`. The built-in prices are USD; with CNY give every named price.")
    prices: dict[str, float] = Field(
        default_factory=dict,
        description="Prices by key: `ecs.<instance type>` and `ack.pro.<spec>` per hour, plus lingjun_node_hour, "
        "nat_gateway_hour, eip_hour, eip_egress_gib, alb_hour, alb_lcu_hour, oss_gib_month, disk_gib_month. Keys you "
        "give replace the built-in USD defaults (DEFAULT_PRICES_USD, listed in docs/cost.md: rough list-price "
        "approximations, not quotes); the rest keep them.")
    prices_taken_on: str | None = Field(
        None, pattern=r"^\d{4}-\d{2}-\d{2}$",
        description="Date (YYYY-MM-DD) you read the prices in `prices` from your account's price list.")
    seconds_per_step: float = Field(600, gt=0, description="Wall time of one training step you expect, seconds.")
    seconds_per_validation: float = Field(300, ge=0, description="Wall time of one validation pass, seconds.")
    alb_lcus: float = Field(1.0, ge=0, description="Average ALB capacity units in use (sandbox traffic is light).")
    egress_gib: float = Field(1.0, ge=0, description="Outbound internet traffic of one run through the NAT EIP, GiB.")
    scale_down_minutes: float = Field(
        10, ge=0, description="Minutes an idle autoscaled ECS node lives before scale-down (cluster-autoscaler "
        "--scale-down-unneeded-time default 10m).")

    @field_validator("prices", mode="before")
    @classmethod
    def _merge_prices(cls, v, info):
        v = dict(v or {})
        bad = sorted(k for k in v if k not in PRICE_KEYS and not ITEM_PRICE_KEY.fullmatch(k))
        if bad:
            raise ValueError(f"unknown price key(s) {bad} in cost.prices; use `ecs.<instance type>`, "
                             f"`ack.pro.<spec>` or one of {sorted(PRICE_KEYS)}")
        if info.data.get("currency", "USD") == "USD":
            return {**DEFAULT_PRICES_USD, **v}
        missing = sorted(set(PRICE_KEYS) - set(v))
        if missing:
            raise ValueError(f"cost.currency is {info.data.get('currency')} but the built-in prices are USD: give "
                             f"{missing} (and your instance types and ACK spec) in cost.prices")
        return v

    @field_validator("prices")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: p for k, p in v.items() if p < 0}
        if bad:
            raise ValueError(f"prices must be >= 0; fix {bad}")
        return v


# --------------------------------------------------------------------------------------------- root
class Settings(Strict):
    name: str = Field(description="Short name of this environment; prefixes cloud resource names (e.g. verl-dev).")
    region: str = Field(description="Alibaba Cloud region id, e.g. ap-southeast-1 or cn-hangzhou.")
    zones: list[str] = Field(min_length=1, description="Zones of the node vSwitches; the GPU zone first is usual.")
    tags: dict[str, str] = Field(default_factory=dict, description="Extra cost tags on every taggable cloud resource.")
    ttl_hours: int | None = Field(
        None, ge=1, description="Hours after the last deploy when the scheduled teardown may destroy this stack.")
    deploy_on_merge: bool = Field(False, description="`pulumi up` this stack when a PR touching it merges to main.")
    cluster: ClusterSettings = Field(default_factory=ClusterSettings, description="ACK cluster.")
    gpu_pool: GpuPoolSettings = Field(description="GPU node pool the training job runs on.")
    system_pool: SystemPoolSettings = Field(default_factory=SystemPoolSettings, description="CPU pool for everything else.")
    storage: StorageSettings = Field(description="OSS bucket for datasets, models and checkpoints.")
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings, description="Code sandboxes behind the MCP tool.")
    dataset: DatasetSettings = Field(default_factory=DatasetSettings, description="Training data.")
    model: ModelSettings = Field(default_factory=ModelSettings, description="Model preset and parallelism overrides.")
    training: TrainingSettings = Field(default_factory=TrainingSettings, description="verl trainer settings.")
    job: JobSettings = Field(default_factory=JobSettings, description="RayJob lifecycle.")
    versions: VersionSettings = Field(default_factory=VersionSettings, description="Pinned versions of images, charts, add-ons.")
    tracking: TrackingSettings = Field(default_factory=TrackingSettings, description="MLflow tracking server.")
    image: ImageSettings = Field(
        default_factory=ImageSettings, description="Training image: official + pip, or built and pushed to ACR.")
    latency: LatencySettings = Field(
        default_factory=LatencySettings, description="Durations of the time-to-first-step model (components/latency.py).")
    cost: CostSettings = Field(
        default_factory=CostSettings, description="Prices and run assumptions of the cost ESTIMATE (components/cost.py).")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9-]{1,22}[a-z0-9]", v):
            raise ValueError(f"{v!r} must be 3-24 lowercase letters, digits or '-', starting with a letter")
        return v

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not REGION.fullmatch(v):
            raise ValueError(f"{v!r} is not an Alibaba Cloud region id like ap-southeast-1 or cn-hangzhou")
        return v

    @model_validator(mode="after")
    def _cross(self) -> Settings:
        if self.gpu_pool.zone not in self.zones:
            raise ValueError(
                f"gpu_pool.zone {self.gpu_pool.zone!r} is not one of zones {self.zones}; add it to zones or pick one of them")
        for z in self.zones:
            if not z.startswith(self.region):
                raise ValueError(f"zone {z!r} is not in region {self.region!r}; zones look like {self.region}a")
        net = self.cluster.network
        if self.cluster.mode == "new" and net.vpc_id is None:
            for field in ("node_cidrs", "pod_cidrs"):
                if len(getattr(net, field)) < len(self.zones):
                    raise ValueError(f"cluster.network.{field} needs one CIDR per zone ({len(self.zones)} zones)")
        if net.vpc_id is not None and len(net.node_vswitch_ids) != len(self.zones):
            raise ValueError("cluster.network.node_vswitch_ids needs one vSwitch id per zone, in zones order")
        if self.gpu_pool.kind == "lingjun":
            minor = self.cluster.minor_version()
            if minor is not None and minor < 31:
                raise ValueError(
                    f"cluster.kubernetes_version {self.cluster.kubernetes_version} is too old for a Lingjun node pool "
                    "(ACK requires >= 1.31); pick 1.31 or newer or leave it empty for the newest")
        if self.sandbox.enabled and self.sandbox.domain is None and self.sandbox.manager == "ack-addon":
            raise ValueError(
                "sandbox.manager=ack-addon needs sandbox.domain: the ACK sandbox manager add-on serves the E2B API on "
                "that domain through the ALB; set a domain or use manager: open-source")
        if self.job.submission_mode == "SidecarMode" and self.versions.kuberay_tuple() < (1, 5, 0):
            raise ValueError(
                f"job.submission_mode SidecarMode needs KubeRay >= 1.5.0 but versions.kuberay is "
                f"{self.versions.kuberay}; use K8sJobMode or upgrade KubeRay")
        if self.job.pre_running_deadline_seconds is not None and self.versions.kuberay_tuple() < (1, 6, 0):
            raise ValueError(
                f"job.pre_running_deadline_seconds needs KubeRay >= 1.6.0 (versions.kuberay is {self.versions.kuberay}); "
                "remove it or upgrade KubeRay")
        if not self.tracking.enabled and ("mlflow" in self.training.logger or self.training.trace_backend == "mlflow"):
            raise ValueError(
                "training.logger/trace_backend use mlflow but tracking.enabled is false: verl would log to a pod-local "
                "sqlite file that is deleted with the Ray cluster; enable tracking or drop mlflow from both")
        return self

    @model_validator(mode="after")
    def _cloud(self) -> Settings:
        """Rules of the cloud layer (components/network.py ... ingress.py) that span sections."""
        net = self.cluster.network
        if self.cluster.mode == "existing" and not net.vpc_id:
            raise ValueError(
                "cluster.mode=existing needs cluster.network.vpc_id and node_vswitch_ids (the cluster's VPC and one "
                "vSwitch per zone, in zones order): the node pools and the ALB are placed in them")
        if self.cluster.mode == "new" and net.vpc_id and len(net.pod_vswitch_ids) != len(self.zones):
            raise ValueError(
                f"cluster.network.pod_vswitch_ids needs one Terway pod vSwitch per zone ({len(self.zones)}) when a new "
                "cluster reuses vpc_id; Lingjun nodes need one in the GPU zone")
        if self.sandbox.domain and not (self.sandbox.enabled and self.sandbox.manager == "ack-addon"):
            raise ValueError(
                "sandbox.domain is served only by the ACK sandbox manager add-on (sandbox.enabled with manager: "
                "ack-addon); otherwise nothing routes from the ALB, which bills by the hour for nothing. Remove "
                "sandbox.domain and sandbox.dns_zone, or use manager: ack-addon")
        if self.sandbox.domain and len(self.zones) < 2:
            raise ValueError("sandbox.domain puts an ALB in front of the sandboxes and ALB needs two zones: list at "
                             "least two zones (with their vSwitches)")
        if self.sandbox.domain and self.sandbox.domain == self.sandbox.dns_zone:
            raise ValueError(
                f"sandbox.domain {self.sandbox.domain!r} is the dns_zone apex, where a CNAME cannot live next to the "
                "zone's SOA/NS records (RFC 1034 3.6.2); use a subdomain such as sandbox." + self.sandbox.domain)
        if len(self.tags) > 7:
            raise ValueError(f"tags has {len(self.tags)} entries; OSS buckets take at most 10 tags and project, stack "
                             "and environment use 3, so give at most 7")
        return self

    @property
    def preset(self):
        return PRESETS[self.model.preset]

    def cloud_tags(self, stack: str) -> dict[str, str]:
        """Cost tags every taggable cloud resource carries."""
        return {"project": PROJECT, "stack": stack, "environment": self.name, **self.tags}


# --------------------------------------------------------------------------------------------- loading
class Problem(BaseModel):
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class SettingsError(Exception):
    """All problems found in a stack's settings, each naming the field, the rule and a fix."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("invalid verl-ack settings:\n" + "\n".join(f"  - {p}" for p in problems))


def _pydantic_problems(err: ValidationError) -> list[Problem]:
    out = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "settings"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown setting (check the spelling against stacks/stack.schema.json)"
        out.append(Problem(field=loc, message=msg))
    return out


def parse_settings(raw: dict) -> Settings:
    """Validate raw settings and the GPU layout rules; raise SettingsError listing every problem."""
    from components.layout import check_layout  # layout imports Settings; import here to avoid a cycle

    try:
        settings = Settings.model_validate(raw)
    except ValidationError as err:
        raise SettingsError(_pydantic_problems(err)) from None
    errors = [p for p in check_layout(settings) if p.severity == "error"]
    if errors:
        raise SettingsError([Problem(field=p.field, message=p.message) for p in errors])
    return settings


def stack_file(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    return STACKS_DIR / f"Pulumi.{name_or_path}.yaml"


def read_stack_config(name_or_path: str | Path) -> dict:
    """The `config:` map of a stack file (secure values stay encrypted dicts)."""
    path = stack_file(name_or_path)
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path}; stacks are stacks/Pulumi.<name>.yaml")
    doc = yaml.safe_load(path.read_text()) or {}
    return doc.get("config") or {}


def load_stack(name_or_path: str | Path) -> Settings:
    """Settings of a stack file, validated (used by plan.py, teardown.py and the tests)."""
    raw = read_stack_config(name_or_path).get(SETTINGS_KEY)
    if raw is None:
        raise SettingsError([Problem(field=SETTINGS_KEY, message="missing: the stack file needs this structured key")])
    return parse_settings(raw)


def stack_json_schema() -> dict:
    """JSON Schema of a stack file, for editors (yaml-language-server) and reviewers."""
    settings_schema = Settings.model_json_schema()
    defs = settings_schema.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "verl-ack stack file",
        "description": "stacks/Pulumi.<stack>.yaml: `verl-ack:settings` is validated by components/settings.py",
        "type": "object",
        "properties": {
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
            "config": {
                "type": "object",
                "properties": {
                    SETTINGS_KEY: settings_schema,
                    **{f"{PROJECT}:{k}": {"description": v + " (secret: `pulumi config set --secret`)",
                                          "type": "object", "required": ["secure"]} for k, v in SECRET_KEYS.items()},
                },
                "required": [SETTINGS_KEY],
            },
        },
        "$defs": defs,
    }


SCHEMA_PATH = STACKS_DIR / "stack.schema.json"


def render_schema() -> str:
    return json.dumps(stack_json_schema(), indent=2, sort_keys=True) + "\n"


def _default_text(field) -> str:
    if field.is_required():
        return "**required**"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
        return ", ".join(f"{k}: `{v.name}`" for k, v in value.items())
    return f"`{json.dumps(value)}`"


def settings_rows(model: type[BaseModel] = None, prefix: str = "") -> list[tuple[str, str, str]]:
    """(path, default, description) for every setting, sections expanded depth-first."""
    model = model or Settings
    rows = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        ann = field.annotation
        inner = [a for a in getattr(ann, "__args__", (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)]
        rows.append((path, _default_text(field), (field.description or "").replace("|", "\\|")))
        if inner:
            rows += settings_rows(inner[0], path + ".")
    return rows


SETTINGS_TABLE_START = "<!-- settings-table:start (generated by `python -m components.settings`) -->"
SETTINGS_TABLE_END = "<!-- settings-table:end -->"


def render_settings_table() -> str:
    lines = ["| setting | default | description |", "|---|---|---|"]
    lines += [f"| `{p}` | {d} | {desc} |" for p, d, desc in settings_rows()]
    return "\n".join(lines)


PRESETS_TABLE_START = "<!-- presets-table:start (generated by `python -m components.settings`) -->"
PRESETS_TABLE_END = "<!-- presets-table:end -->"


def render_presets_table() -> str:
    from components.presets import allowed_rollout_tp

    def yn(b: bool) -> str:
        return "yes" if b else "no"

    lines = ["| preset | params | layers / hidden | heads / KV heads | rollout TP (vLLM-valid up to 64) "
             "| offload actor / optim / ref | gpu_mem | micro (actor / log-prob) |", "|---|---|---|---|---|---|---|---|"]
    for p in PRESETS.values():
        tps = ", ".join(str(t) for t in allowed_rollout_tp(p))
        lines.append(
            f"| {p.key} | {p.params_billion} B | {p.layers} / {p.hidden_size} | {p.attention_heads} / {p.kv_heads} "
            f"| {p.rollout_tp} ({tps}) | {yn(p.actor_param_offload)} / {yn(p.actor_optimizer_offload)} / "
            f"{yn(p.ref_param_offload)} | {p.gpu_memory_utilization} | {p.ppo_micro_batch_size_per_gpu} / "
            f"{p.log_prob_micro_batch_size_per_gpu} |")
    return "\n".join(lines)


def _replace_block(text: str, start: str, end: str, body: str) -> str:
    head, found, rest = text.partition(start)
    if not found:
        return text
    _, _, tail = rest.partition(end)
    return f"{head}{start}\n{body}\n{end}{tail}"


def refresh_readme(text: str) -> str:
    text = _replace_block(text, SETTINGS_TABLE_START, SETTINGS_TABLE_END, render_settings_table())
    return _replace_block(text, PRESETS_TABLE_START, PRESETS_TABLE_END, render_presets_table())


if __name__ == "__main__":  # python -m components.settings  -> regenerate the schema and the README table
    SCHEMA_PATH.write_text(render_schema())
    readme = REPO_ROOT / "README.md"
    if readme.exists():
        readme.write_text(refresh_readme(readme.read_text()))
    print(f"wrote {SCHEMA_PATH.relative_to(REPO_ROOT)} and the README settings and presets tables")
