"""Inputs of the offline estimates: the time-to-first-step model and the cost estimate."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from components.config.types import IsoDate, Strict, mapping

# --------------------------------------------------------------------------------------------- latency
# Typical creation minutes per kind of resource; offline/report/latency/ maps type tokens to these kinds.
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
        400, gt=0, le=1e6, description="Model/dataset download rate from the hub, Mbit/s (estimate). Capped by "
        "cluster.network.nat_bandwidth_mbps for a new cluster (its NAT, or the given VPC's own).")
    oss_upload_mbps: float = Field(
        800, gt=0, le=1e6, description="Upload rate from a pod to OSS (intranet endpoint), Mbit/s (estimate).")
    oss_read_mbps: float = Field(
        800, gt=0, le=1e6, description="Rate a GPU node reads the model from the OSS volume at verl start, Mbit/s (estimate).")
    local_read_mbps: float = Field(
        8000, gt=0, le=1e6, description="Rate verl reads the model from the pod's memory-backed copy when "
        "job.model_prefetch runs, Mbit/s (estimate: a sixth of the single-threaded tmpfs read of a 3B bf16 checkpoint "
        "measured on an H200 machine, components/model/model_read_measured.json). The copy itself reads OSS at "
        "oss_read_mbps while Ray starts.")
    node_pull_mbps: float = Field(
        1000, gt=0, le=1e6, description="Image pull rate of one node including layer extraction, Mbit/s (estimate). Pulls "
        "from registries outside *.aliyuncs.com go through the NAT and share its bandwidth.")
    training_image_gib: float = Field(
        25, gt=0, le=1024, description="Size of the training image to pull, GiB (estimate: verl's vLLM images are 20+ GB; "
        "check with `docker manifest inspect` or the registry's UI).")
    sandbox_image_gib: float = Field(
        2, gt=0, le=1024, description="Size of the code-interpreter sandbox image to pull, GiB (estimate: no public "
        "source states it; check with `docker manifest inspect` or the registry's UI).")
    sandbox_start_minutes: float = Field(
        0.5, ge=0, le=10080, description="A warm sandbox's start once its image is on the node: envd init and the "
        "startup probe (estimate; the tutorial's probe allows up to ~40 s).")
    dataset_mib: float = Field(
        10, gt=0, le=1e8, description="Size of the raw dataset the dataset Job downloads, MiB (GSM8K is a few MB).")
    job_start_minutes: float = Field(
        2, ge=0, le=10080, description="Start of a data Job's pod: scheduling, small image pull, pip install (estimate).")
    accepted_exceptions: dict[Literal["chain_ratio", "avoidable_gpu_idle", "warm_first_step", "repeat_first_step"],
                              str] = Field(
        default_factory=dict, description="Targets of the time to the first step (docs/latency.md \"Targets\") this "
        "stack accepts missing, each with the reason in the stack's own words (target -> reason). The plan then says "
        "`exception` with the reason and what missing it costs, instead of NOT met. Empty = every target holds.")
    gate_job_minutes: float = Field(
        0.25, ge=0, le=10080, description="The node gate Job (pipeline/node_gate.py) once the GPU nodes are Ready: its "
        "pod on a system node with the small image cached, standard library only (nothing installed), and one node "
        "listing (estimate).")
    ray_start_minutes: float = Field(
        2, ge=0, le=10080, description="Ray head and workers up once the image is on the nodes (estimate).")
    job_submit_minutes: float = Field(
        3, ge=0, le=10080, description="RayJob submission: submitter start and the job's runtime_env (pip) setup (estimate).")
    job_submit_no_pip_minutes: float = Field(
        0.5, ge=0, le=10080, description="RayJob submission when the runtime_env installs nothing (image.source: built): "
        "the submitter's `ray job submit` only (estimate).")
    lazy_pull_fraction: float = Field(
        0.11, gt=0, le=1, description="Share of the image pull left before the containers start when image.lazy_loading "
        "is on (ACK's on-demand loading example: a 1.34 GB image's pull phase 36 s -> 4 s; estimate for a 25 GiB image).")
    verl_init_minutes: float = Field(
        5, ge=0, le=10080, description="verl start excluding the model read: workers, FSDP wrap, vLLM engine and CUDA graphs "
        "(estimate). The model read is added on top: params x 2 bytes at oss_read_mbps from the OSS volume, or with "
        "job.model_prefetch at local_read_mbps from the pod's copy, after whatever part of the copy outlasted Ray's "
        "start and the submission.")

    @field_validator("create_minutes", mode="before")
    @classmethod
    def _merge_minutes(cls, v):
        given = mapping(v, "latency.create_minutes")
        unknown = sorted(set(given) - set(DEFAULT_CREATE_MINUTES), key=repr)
        if unknown:
            raise ValueError(f"unknown kind(s) {unknown} in latency.create_minutes; use {sorted(DEFAULT_CREATE_MINUTES)}")
        return {**DEFAULT_CREATE_MINUTES, **given}

    @field_validator("create_minutes")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: m for k, m in v.items() if not 0 <= m <= 10080}
        if bad:
            raise ValueError(f"latency.create_minutes must be 0-10080 minutes (a week); fix {bad}")
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
    prices_taken_on: IsoDate | None = Field(
        None, description="Date (YYYY-MM-DD) you read the prices in `prices` from your account's price list.")
    seconds_per_step: float = Field(600, gt=0, le=604800, description="Wall time of one training step you expect, seconds.")
    seconds_per_validation: float = Field(300, ge=0, le=604800, description="Wall time of one validation pass, seconds.")
    alb_lcus: float = Field(1.0, ge=0, le=1e4, description="Average ALB capacity units in use (sandbox traffic is light).")
    egress_gib: float = Field(1.0, ge=0, le=1e8, description="Outbound internet traffic of one run through the NAT EIP, GiB.")
    scale_down_minutes: float = Field(
        10, ge=0, le=10080, description="Minutes an idle autoscaled ECS node lives before scale-down (cluster-autoscaler "
        "--scale-down-unneeded-time default 10m).")
    budget_per_run: float | None = Field(
        None, ge=0, le=1e9, description="Most one run may cost, in `currency` (the estimate's run total, with the GPU "
        "time it uses of a platform's pool); above it the plan's cost section and the change report warn. Empty = "
        "no budget.")
    budget_per_month: float | None = Field(
        None, ge=0, le=1e9, description="Most the stack may cost per month left up (a platform: while it lives), in "
        "`currency`; above it the plan's cost section and the change report warn. Empty = no budget.")

    @field_validator("prices", mode="before")
    @classmethod
    def _merge_prices(cls, v, info):
        v = mapping(v, "cost.prices")
        bad = sorted((k for k in v if not isinstance(k, str) or k not in PRICE_KEYS and not ITEM_PRICE_KEY.fullmatch(k)),
                     key=repr)
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
        bad = {k: p for k, p in v.items() if not 0 <= p <= 1e6}
        if bad:
            raise ValueError(f"prices must be 0-1000000 per unit; fix {bad}")
        return v
