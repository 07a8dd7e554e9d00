"""Settings of the cloud layer: network, cluster, node pools, storage and ACK add-ons."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal, Optional

from pydantic import Field, model_validator

from components.config.addons import ACK_MANAGED_ADDONS, OPTIONAL_ADDONS, lingjun_min_addon_versions
from components.config.security import SlsProjectName
from components.config.types import (
    AddonVersion,
    BucketName,
    Cidr,
    CloudId,
    ClusterId,
    Dns1123LabelOrEmpty,
    DottedKeyPath,
    InstanceType,
    KeyPrefix,
    KubernetesMinor,
    KubernetesVersion,
    ShortText,
    Strict,
    VpcId,
    VSwitchId,
    ZoneId,
    _text,
)

# Host memory kept for node daemons on every GPU node (components/model/layout.py NODE_RESERVED_MEMORY_GIB is the
# same number; a test compares them): the Ray pod gets the rest, and its /dev/shm counts against that.
GPU_NODE_RESERVED_MEMORY_GIB = 16
# A PayAsYouGo + PayByTraffic EIP (the NAT's, components/cloud/network.py) accepts 1..200 Mbit/s
# (terraform-provider-alicloud@ace5bcf website/docs/r/eip_address.html.markdown:76, `bandwidth`).
PAY_BY_TRAFFIC_EIP_MAX_MBPS = 200

# The settings ACK or the provider reads only at creation; components/cloud/create_only.py holds why and the manual
# step of each, keyed by these paths.
CreateOnlySetting = Literal["cluster.public_api", "zones", "cluster.network.node_cidrs", "cluster.network.pod_cidrs",
                            "cluster.network.pod_vswitch_ids", "tracking.backend_disk"]


class NetworkSettings(Strict):
    vpc_id: VpcId | None = Field(None, description="Existing VPC id. Leave empty to create a VPC (new clusters only).")
    node_vswitch_ids: list[VSwitchId] = Field(
        default_factory=list, description="Existing node vSwitch ids, one per zone in `zones` order (with vpc_id).")
    pod_vswitch_ids: list[VSwitchId] = Field(
        default_factory=list, description="Existing Terway pod vSwitch ids, one per zone (with vpc_id).")
    vpc_cidr: Cidr = Field("10.0.0.0/8", description="CIDR of a new VPC.")
    node_cidrs: list[Cidr] = Field(
        default_factory=lambda: ["10.1.0.0/16", "10.2.0.0/16"], max_length=64,
        description="CIDRs of the node vSwitches a new VPC gets, one per zone in `zones` order.")
    pod_cidrs: list[Cidr] = Field(
        default_factory=lambda: ["10.4.0.0/16", "10.5.0.0/16"], max_length=64,
        description="CIDRs of the Terway pod vSwitches a new VPC gets, one per zone in `zones` order.")
    service_cidr: Cidr = Field("192.168.0.0/16", description="Kubernetes Service CIDR; must not overlap VPC or pods.")
    nat_bandwidth_mbps: int = Field(
        100, ge=1, le=2**31 - 1, description="Bandwidth cap of the NAT gateway's pay-as-you-go, pay-by-traffic EIP the "
        "program creates, Mbit/s: 1 to 200, the range Alibaba Cloud allows for that billing method. With vpc_id "
        "(nothing created) the egress of that VPC's own NAT, which the latency model assumes for hub downloads.")

    @model_validator(mode="after")
    def _eip_bandwidth(self) -> NetworkSettings:
        # Only the EIP this program creates is bound by the pay-by-traffic range; an existing VPC's NAT is the
        # user's own (it may have a pay-by-bandwidth EIP), so its figure is only a latency-model input.
        v = self.nat_bandwidth_mbps
        if self.vpc_id is None and v > PAY_BY_TRAFFIC_EIP_MAX_MBPS:
            raise ValueError(
                f"nat_bandwidth_mbps {v} Mbit/s is above the {PAY_BY_TRAFFIC_EIP_MAX_MBPS} Mbit/s a pay-as-you-go, "
                f"pay-by-traffic EIP allows, so the first `pulumi up` would fail; set {PAY_BY_TRAFFIC_EIP_MAX_MBPS} or "
                "less (traffic, not the cap, is billed)")
        if v > 10000:
            raise ValueError(f"nat_bandwidth_mbps {v} Mbit/s is beyond any NAT egress (at most 10000); set what the "
                             "VPC's NAT really has")
        return self

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
    existing_cluster_id: ClusterId | None = Field(
        None, description="ACK cluster id (c...) to use when mode=existing; read, never managed or deleted.")
    kubernetes_version: KubernetesVersion | None = Field(
        None,
        description="ACK Kubernetes version (e.g. 1.34.1-aliyun.1). Empty = the newest ACK offers at creation. "
        "Lingjun pools need >= 1.31. List: `aliyun cs GET /api/v1/metadata/versions` or cs.get_kubernetes_version.")
    schema_version: KubernetesMinor = Field(
        "1.34", description="Kubernetes minor version the offline conformance tests validate manifests against.")
    cluster_spec: Literal["ack.pro.small", "ack.pro.xlarge", "ack.pro.2xlarge", "ack.pro.4xlarge"] = Field(
        "ack.pro.small", description="ACK Pro control-plane size (Lingjun node pools need ACK Pro).")
    deletion_protection: bool = Field(
        False, description="Cluster deletion protection. Off by default so `pulumi destroy` leaves nothing billing.")
    public_api: bool = Field(
        False, description="Expose the API server on the internet (an EIP on its load balancer) so Pulumi and kubectl "
        "can reach it from outside the VPC. Off by default: then run Pulumi from inside the VPC. When on, restrict "
        "the 6443 listener with an access-control list (docs/cloud.md: pulumi_alicloud has no argument for it).")
    audit_log: bool = Field(
        True, description="API server audit logging to SLS (a new cluster's audit_log_config). Who did what through "
        "the API, e.g. who read the sandbox admin key. destroy deletes the logs with the cluster (delete_options).")
    audit_log_project: Optional[SlsProjectName] = Field(
        None, description="SLS project of the audit logs. Empty = the project ACK creates for the cluster.")
    secrets_kms_key_id: Optional[CloudId] = Field(
        None, description="KMS key that encrypts Kubernetes Secrets at rest (a new cluster's encryption_provider_key; "
        "ACK Pro). Empty = etcd's default. The key must be an enabled KMS key of the cluster's region; ACK needs "
        "the AliyunCSManagedSecurityRole authorised to use it (docs/cloud.md).")
    network: NetworkSettings = Field(default_factory=NetworkSettings, description="VPC and vSwitches of a new cluster.")
    allow_create_only_changes: list[CreateOnlySetting] = Field(
        default_factory=list, description="Create-only settings whose change from the last deployed value this "
        "preview accepts. Without it such a change fails the preview naming the setting and the manual step "
        "(components/cloud/create_only.py); list one after doing that step, for one `pulumi up`, then remove it.")
    create_timeout_minutes: int = Field(
        60, ge=20, le=180,
        description="How long `pulumi up` waits for a new cluster (ACK: typically 10-20 min; provider default 90).")
    kubeconfig_ttl_minutes: Optional[int] = Field(
        4320, ge=15, le=4320,
        description="Validity of the client certificate in the kubeconfig each stack fetches for its own Kubernetes "
        "provider on every run (15-4320); no stack exports it, an experiment fetches its own for the platform's "
        "cluster. Empty = ACK's long-lived default (years); a short one means `pulumi destroy --run-program` after it "
        "expires.")
    k8s_delete_unreachable: bool = Field(
        False,
        description="Let the Kubernetes provider drop objects of a cluster that no longer answers (set true only to "
        "finish a destroy after the cluster was deleted outside Pulumi).")

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
# Lingjun (EFLO) node ids as Alibaba's examples write them (e01-cn-smw4d1bzd0a: pulumi_alicloud eflo/node_group_attachment.py
# and TF website/docs/r/eflo_node_group_attachment.html.markdown); an ECS instance id (i-...) is refused by name.
LingjunNodeId = Annotated[str, _text(
    r"[a-z][a-z0-9]*-[a-z0-9][a-z0-9-]{2,62}", "a Lingjun node id",
    "copy it from the Lingjun console > Nodes (it looks like e01-cn-smw4d1bzd0a)",
    also=lambda v: "that is an ECS instance id; a Lingjun pool takes the EFLO node ids of its node group"
    if v.startswith("i-") else None)]
SecurityGroupId = Annotated[str, _text(r"sg-[a-z0-9]{1,64}", "a security group id",
                                       "copy it from the Lingjun console > cluster > network, e.g. sg-bp1abc")]
# Terway's node label for exclusive-ENI mode (AliyunContainerService/terway types/k8s.go ExclusiveENIModeLabel,
# ExclusiveENIOnly; ACK "Configure exclusive ENI mode for a node pool": set it when the pool is created).
EXCLUSIVE_ENI_LABEL = ("k8s.aliyun.com/exclusive-mode-eni-type", "eniOnly")


class LingjunSettings(Strict):
    eflo_cluster_id: CloudId = Field(
        description="Lingjun (EFLO) cluster id that holds the GPU nodes (console: Lingjun > Clusters).")
    eflo_node_group_id: CloudId = Field(
        description="Lingjun node-group id whose nodes join this pool. Create-only in the provider (sent once, never "
        "read back), so a change REPLACES the pool (the old pool is deleted first: a node sits in one pool only).")
    node_ids: list[LingjunNodeId] = Field(
        min_length=1, max_length=100, description="The EFLO node ids (e01-...) of the node group's machines this pool "
        "holds, one per `gpu_pool.nodes`. They must sit in the cluster's VPC (cluster.network.vpc_id). With join: "
        "attach they become the pool's `instances` (AttachInstancesToNodePool, max 100); a change replaces the pool, "
        "because the provider's own removal path calls DeleteClusterNodes with release_node=true (docs/cloud.md).")
    join: Literal["attach", "console"] = Field(
        "attach", description="How the bought machines become nodes of the pool. `attach`: the provider's `instances` "
        "(AttachInstancesToNodePool right after the pool is created); UNVERIFIED that ACK accepts EFLO node ids there "
        "(its API page describes ECS instances), but a refusal fails `pulumi up` at the pool instead of leaving it "
        "empty. `console`: the pool is created empty and the preview names the console step that adds the nodes.")
    terway_exclusive_eni: bool = Field(
        True, description="Label the pool's nodes k8s.aliyun.com/exclusive-mode-eni-type=eniOnly: ACK supports "
        "Lingjun node pools in Terway exclusive-ENI mode only. Create-time: Terway refuses a mode change on a node, so "
        "changing it replaces the pool. Exclusive-ENI pods are not subject to NetworkPolicy (docs/cloud.md).")
    security_group_id: SecurityGroupId | None = Field(
        None, description="Security group of the Lingjun nodes (the Lingjun cluster's network), taken to be the group "
        "of their pods' exclusive ENIs too (docs/uncertain-facts.md). Required for a pool this stack owns with "
        "several nodes (the Ray pods use the host network and listen on the nodes' VPC addresses) or with "
        "terway_exclusive_eni (NetworkPolicy does not cover exclusive-ENI pods): the program adds rules to this group "
        "that admit the Ray ports (GCS 6379, dashboard/job API 8265, client 10001, metrics 8080, dashboard agent "
        "52365) only from the group itself and `ray_admit_cidrs`, and drop them from anywhere else.")
    ray_admit_cidrs: list[Cidr] = Field(
        default_factory=list, max_length=20, description="Besides the GPU nodes themselves, the CIDRs admitted to the "
        "Ray ports of the pool: at least the Terway pod vSwitch CIDRs of the system pool, where the KubeRay operator "
        "polls the job on 8265 (and Prometheus scrapes 8080). Required with security_group_id.")

    @model_validator(mode="after")
    def _distinct(self) -> LingjunSettings:
        dup = sorted({n for n in self.node_ids if self.node_ids.count(n) > 1})
        if dup:
            raise ValueError(f"gpu_pool.lingjun.node_ids lists {dup} more than once; each machine joins once")
        if self.security_group_id and not self.ray_admit_cidrs:
            raise ValueError("gpu_pool.lingjun.security_group_id needs ray_admit_cidrs: the KubeRay operator (system "
                             "pool, Terway pod vSwitches) polls the Ray head on 8265; list those vSwitch CIDRs")
        return self


class EcsGpuSettings(Strict):
    instance_types: list[InstanceType] = Field(
        min_length=1, max_length=20, description="ECS GPU instance types, in order of preference (e.g. ecs.gn8v.8xlarge).")
    system_disk_gib: int = Field(200, ge=40, le=2048, description="System disk per GPU node (holds the training image).")
    system_disk_category: Literal["cloud_essd", "cloud_auto", "cloud_efficiency"] = Field(
        "cloud_essd", description="System disk category.")
    min_nodes: int = Field(0, ge=0, le=256, description="Autoscaler floor. 0 lets the pool scale to zero so GPUs stop billing.")


class GpuPoolSettings(Strict):
    kind: Literal["lingjun", "ecs"] = Field(description="`lingjun` joins Lingjun nodes via EFLO ids; `ecs` creates ECS GPU nodes.")
    lingjun: LingjunSettings | None = Field(None, description="Lingjun node group (kind=lingjun).")
    ecs: EcsGpuSettings | None = Field(None, description="ECS GPU instance settings (kind=ecs).")
    zone: ZoneId = Field(description="Zone of the GPU nodes; must be one of `zones`.")
    nodes: int = Field(ge=1, le=256, description="GPU nodes the training job uses (trainer.nnodes).")
    gpus_per_node: int = Field(8, ge=1, le=16, description="GPUs per node (trainer.n_gpus_per_node).")
    gpu_memory_gib: int = Field(ge=8, le=288, description="Memory of one GPU in GiB (used by the memory-fit estimate).")
    cpus_per_node: int = Field(ge=4, le=4096, description="vCPUs per GPU node; the Ray pod requests most of them.")
    memory_gib_per_node: int = Field(ge=16, le=65536, description="Host memory per GPU node in GiB.")
    gpu_model: ShortText = Field("", description="Free-text GPU model, shown in the plan and as a node label (e.g. GU8TF, H20).")
    owner: Literal["experiment", "platform"] = Field(
        "experiment", description="Split stacks only (kind platform/experiment; a single stack owns everything): which "
        "stack creates the GPU node pool and its image pre-pull. `experiment` (default): each experiment creates and "
        "destroys its own pool, so pay-as-you-go ECS GPU nodes stop billing with the run. `platform`: the platform "
        "keeps the pool joined with the training image pre-pulled, so an experiment starts on warm nodes (no pool "
        "join, no pull); it costs nothing extra for Lingjun, whose EFLO machines are bought separately (usually by "
        "subscription) and bill whether or not a pool holds them, but an ECS pool then bills while the platform "
        "lives. Both stacks of a pair must say the same (the experiment checks the platform's `gpu_pool_owner`).")

    @model_validator(mode="after")
    def _kind_section(self) -> GpuPoolSettings:
        if self.kind == "lingjun" and self.lingjun is None:
            raise ValueError("kind=lingjun needs a `lingjun:` section with eflo_cluster_id, eflo_node_group_id and node_ids")
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
    instance_types: list[InstanceType] = Field(
        default_factory=lambda: ["ecs.g7.2xlarge", "ecs.g8i.2xlarge"], min_length=1, max_length=20,
        description="CPU instance types for controllers, sandboxes, tracking and data jobs.")
    nodes: int = Field(2, ge=1, le=50, description="Nodes in the CPU system pool.")
    system_disk_gib: int = Field(120, ge=40, le=2048, description="System disk per system node, GiB.")
    cpus_per_node: int = Field(8, ge=2, le=4096, description="vCPUs per system node (for sandbox capacity and the plan).")
    memory_gib_per_node: int = Field(32, ge=4, le=65536, description="Memory per system node, GiB.")


# --------------------------------------------------------------------------------------------- storage
class StorageSettings(Strict):
    mode: Literal["new", "existing"] = Field("new", description="`new` creates the bucket; `existing` uses `bucket_name` as is.")
    bucket_name: BucketName = Field(description="OSS bucket for datasets, models and checkpoints (globally unique).")
    keep_on_destroy: bool = Field(
        True, description="Keep the bucket and its checkpoints on `pulumi destroy` (retain_on_delete + protect).")
    versioning: bool = Field(True, description="Enable object versioning on a new bucket.")
    sse_algorithm: Literal["AES256", "KMS"] = Field("AES256", description="Server-side encryption of a new bucket.")
    kms_key_id: CloudId | None = Field(None, description="KMS key id when sse_algorithm=KMS (empty = OSS-managed KMS key).")
    auth: Literal["rrsa", "access_key"] = Field(
        "rrsa", description="How pods reach OSS. `access_key` uses the ossAccessKeyId/Secret secret config as a fallback.")
    ram_names: Literal["regional", "legacy"] = Field(
        "regional", description="Physical names of the RRSA RAM roles and policies. RAM is global per account, so "
        "`regional` (`<name>-<region>-<role>`) lets the same `name` run in two regions; `legacy` (`<name>-<role>`) "
        "keeps the names of stacks created before 2026-12, whose roles a switch would replace (docs/cloud.md).")
    datasets_prefix: KeyPrefix = Field("datasets/", description="Key prefix of processed datasets.")
    models_prefix: KeyPrefix = Field("models/", description="Key prefix of staged model weights.")
    checkpoints_prefix: KeyPrefix = Field("checkpoints/", description="Key prefix of training checkpoints.")
    kept_prefix: KeyPrefix = Field("kept/", description="Key prefix teardown copies the latest checkpoint to.")
    tracking_prefix: KeyPrefix = Field("mlflow/", description="Key prefix of MLflow artifacts.")
    scratch_prefix: KeyPrefix = Field("scratch/", description="Key prefix for temporary files, expired by a lifecycle rule.")
    scratch_expire_days: int = Field(7, ge=1, le=3650, description="Days before objects under scratch_prefix expire.")
    abort_multipart_days: int = Field(3, ge=1, le=3650, description="Days before incomplete multipart uploads are aborted.")
    noncurrent_expire_days: int = Field(
        30, ge=1, le=3650, description="Days a replaced or deleted object version is kept when versioning is on; then it "
        "expires, so deleted checkpoints stop billing.")
    volume_capacity_gib: int = Field(
        1024, ge=1, le=1048576, description="Nominal capacity of the OSS PersistentVolumes (OSS does not enforce it).")
    require_https: bool = Field(
        True, description="A new bucket's policy denies every request not made over HTTPS (acs:SecureTransport), and "
        "the OSS volumes mount over https:// (the CSI driver would use http:// for the internal endpoint).")
    vpc_only: bool = Field(
        False, description="A new bucket's policy also denies object reads, writes and deletes from outside the "
        "cluster's VPC (acs:SourceVpc), the bucket owner included: teardown.py and uploads from a laptop then fail. "
        "Bucket management (Pulumi) is not affected.")
    access_logging: bool = Field(
        True, description="Write a new bucket's access logs (who read or deleted which checkpoint) into the bucket "
        "itself under access_log_prefix.")
    access_log_prefix: KeyPrefix = Field("access-logs/", description="Key prefix of the bucket's access logs.")
    access_log_expire_days: int = Field(
        90, ge=1, le=3650, description="Days before access log objects expire (a lifecycle rule), so logs stop billing.")

    @model_validator(mode="after")
    def _distinct(self) -> StorageSettings:
        prefixes = [self.datasets_prefix, self.models_prefix, self.checkpoints_prefix, self.kept_prefix,
                    self.tracking_prefix, self.scratch_prefix, self.access_log_prefix]
        for a in prefixes:
            for b in prefixes:
                if a is not b and b.startswith(a):
                    raise ValueError(f"prefix {b!r} lies inside {a!r}; give each kind of data its own top-level prefix")
        if self.kms_key_id and self.sse_algorithm != "KMS":
            raise ValueError("kms_key_id is set but sse_algorithm is AES256; set sse_algorithm: KMS")
        if self.vpc_only and self.mode == "existing":
            raise ValueError("vpc_only writes the policy of a bucket this stack creates; an existing bucket is never "
                             "touched: set its policy yourself or use storage.mode: new")
        return self




class AddonSetting(Strict):
    name: Dns1123LabelOrEmpty = Field("", description="ACK add-on API name (check with cs.get_kubernetes_addons). Empty = the "
                      "built-in name of the role, so a stack may override only `version`.")
    version: AddonVersion | None = Field(None, description="Add-on version; empty = the version ACK installs by default.")
    enabled: Optional[bool] = Field(
        None, description="Empty = installed when the role's condition holds (docs/cloud.md \"Add-ons\"). `false` "
        "turns off an optional role (" + ", ".join(OPTIONAL_ADDONS) + "), or states that a role whose condition "
        "does not hold is off; `true` is accepted only where the condition holds.")


# The add-ons, their default names, which may be turned off and which ACK manages: components/config/addons.py.
# cs.KubernetesAddon is Optional+Computed and a pin is compared with the live version on every update
# (terraform-provider-alicloud@ace5bcf resource_alicloud_cs_kubernetes_addon.go :43-47, :264): after ACK upgrades
# one it manages, a pin shows a diff and `pulumi up` asks ACK for a downgrade, which it refuses. So those are never
# pinned.


def is_ack_managed_addon(name: str) -> bool:
    return name.startswith("managed-") or name in ACK_MANAGED_ADDONS


# Minimum add-on versions ACK requires for a Lingjun node pool, by add-on name (docs/facts.md §4:
# https://www.alibabacloud.com/help/zh/ack/ack-managed-and-ack-dedicated/user-guide/create-and-manage-a-lingjun-node-pool).
# Kube Scheduler v1.31 follows the cluster version (root.py refuses a Lingjun stack below 1.31); the program installs
# no scheduler add-on of its own. `managed-csiprovisioner` (the default) is versioned by ACK; the floor is for the
# self-managed `csi-provisioner` a stack may name instead. Declared per role in components/config/addons.py.
LINGJUN_MIN_ADDON_VERSIONS: dict[str, str] = lingjun_min_addon_versions()
LINGJUN_NODE_POOL_DOC = ("https://www.alibabacloud.com/help/zh/ack/ack-managed-and-ack-dedicated/user-guide/"
                         "create-and-manage-a-lingjun-node-pool")


def addon_version_tuple(version: str) -> tuple[int, ...]:
    """The numeric part of an add-on version (v1.16.8-aliyun.1 -> (1, 16, 8)), zero-padded to four parts."""
    digits = re.match(r"v?([0-9]+(?:\.[0-9]+)*)", version)
    parts = [int(x) for x in digits.group(1).split(".")] if digits else [0]
    return tuple((parts + [0, 0, 0, 0])[:4])


class SandboxManagerAddonKeys(Strict):
    """Where the sandbox manager add-on's `config` JSON takes each value, as dotted paths (nested objects).

    Alibaba publishes no config schema for `ack-sandbox-manager`. The defaults are the upstream chart's keys
    (openkruise/charts@38153b09:versions/kruise-agents-sandbox-manager/0.2.0/values.yaml, kept verbatim in
    tests/data/charts/: `e2b.domain`, `e2b.adminApiKey`, `ingress.className`), which is also what a public stack
    that deployed v0.6.6 sends (MahaoAlex/onyxclaw@68852478:iac/alicloud-acs/main.tf; third-party, docs/facts.md
    §1). Confirm per cluster with `cs.get_kubernetes_addon_metadata(cluster_id, name, version).config_schema`."""

    domain: DottedKeyPath = Field("e2b.domain", description="Dotted path of the E2B domain in the add-on config "
                                  "(upstream chart 0.2.0 values.yaml: e2b.domain).")
    ingress_class: DottedKeyPath = Field("ingress.className", description="Dotted path of the ingress class (alb) in the "
                                         "add-on config (upstream chart 0.2.0 values.yaml: ingress.className).")
    admin_api_key: DottedKeyPath = Field("e2b.adminApiKey", description="Dotted path of the admin API key (secret) in the "
                                         "add-on config (upstream chart 0.2.0 values.yaml: e2b.adminApiKey).")

    @model_validator(mode="after")
    def _disjoint(self) -> SandboxManagerAddonKeys:
        paths = {"domain": self.domain, "ingress_class": self.ingress_class, "admin_api_key": self.admin_api_key}
        for a, pa in paths.items():
            for b, pb in paths.items():
                if a != b and (pa == pb or pb.startswith(pa + ".")):
                    raise ValueError(f"versions.sandbox_manager_config_keys.{b} ({pb}) lies at or under {a} ({pa}): "
                                     "each value needs its own key path in the add-on config")
        return self
