"""The root `Settings` model: every section, and the rules that span sections."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from components.config.cloud import ClusterSettings, GpuPoolSettings, StorageSettings, SystemPoolSettings
from components.config.estimates import CostSettings, LatencySettings
from components.config.image import ImageSettings, VersionSettings
from components.config.project import PROJECT
from components.config.sandbox import SandboxSettings
from components.config.training import DatasetSettings, JobSettings, ModelSettings, TrackingSettings, TrainingSettings
from components.config.types import REGION, Strict


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
        default_factory=LatencySettings, description="Durations of the time-to-first-step model (offline/report/latency.py).")
    cost: CostSettings = Field(
        default_factory=CostSettings, description="Prices and run assumptions of the cost ESTIMATE (offline/report/cost.py).")

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
        """Rules of the cloud layer (components/cloud/network.py ... ingress.py) that span sections."""
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

    def cloud_tags(self, stack: str) -> dict[str, str]:
        """Cost tags every taggable cloud resource carries."""
        return {"project": PROJECT, "stack": stack, "environment": self.name, **self.tags}
