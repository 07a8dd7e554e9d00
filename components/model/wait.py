"""The pure pieces of the time model that the program itself needs: image pull, model size, and the wait from
the RayJob's creation until KubeRay calls it Running, from which `preRunningDeadlineSeconds` is derived.

offline/report/latency/ (the plan's time-to-first-step model) uses these same functions, so the deadline and the
plan's figures cannot drift apart. Every input is a `latency` setting: a modelled ESTIMATE (docs/latency.md).

What the deadline covers (ray-project/kuberay v1.7.0 ray-operator/controllers/ray/rayjob_controller.go): KubeRay
sets `status.startTime` when it first reconciles the RayJob and, while the job is `Initializing`, fails it once
`now > startTime + preRunningDeadlineSeconds` (`checkPreRunningDeadlineAndUpdateStatusIfNeeded`). It leaves
Initializing for Running as soon as the RayCluster is Ready (and, in K8sJobMode, the submitter Job is created):
the GPU nodes' boot when the pool autoscales, the image pull and the Ray start count; the job's runtime_env pip
install and verl's start come after and do not.
"""

from __future__ import annotations

import math

from components.config import Settings
from components.model.presets import preset_of


def mbit_minutes(nbytes: float, mbps: float) -> float:
    """Minutes to move `nbytes` at `mbps` megabits per second."""
    return nbytes * 8 / (mbps * 1e6) / 60


def model_bytes(s: Settings) -> float:
    """bf16 weights as published on the hub: 2 bytes per parameter."""
    return preset_of(s).arch.params * 2


def nat_cap_mbps(s: Settings) -> float | None:
    """Internet bandwidth of a new cluster's NAT: the EIP this stack creates, or in a given VPC (a Lingjun stack is
    built in its nodes' VPC) that VPC's own NAT, assumed to be `nat_bandwidth_mbps` too. None for an existing
    cluster, whose egress the settings do not describe."""
    return float(s.cluster.network.nat_bandwidth_mbps) if s.cluster.mode == "new" else None


def pull_minutes(s: Settings, image: str) -> tuple[float, float, bool]:
    """(minutes, effective Mbit/s per node, via NAT). Every GPU node pulls the image at once; a registry
    outside Alibaba Cloud is reached through the NAT, whose EIP bandwidth the nodes share."""
    host = image.split("/", 1)[0] if "/" in image and "." in image.split("/", 1)[0] else "docker.io"
    nodes = s.gpu_pool.nodes
    rate = s.latency.node_pull_mbps
    cap = nat_cap_mbps(s)
    via_nat = not host.endswith(".aliyuncs.com")
    if via_nat and cap is not None:
        rate = min(rate, cap / nodes)
    minutes = mbit_minutes(s.latency.training_image_gib * 2**30, rate)
    if s.image.lazy_loading:
        minutes *= s.latency.lazy_pull_fraction  # on-demand loading: the rest is read as the containers touch it
    return minutes, rate, via_nat and cap is not None


def gpu_pool_autoscales(s: Settings) -> bool:
    """An ECS pool below its node count boots its GPU nodes only once the Ray pods are pending."""
    ecs = s.gpu_pool.ecs
    return ecs is not None and ecs.min_nodes < s.gpu_pool.nodes


def pre_running_wait(s: Settings, image: str) -> dict[str, float]:
    """The modelled minutes from the RayJob's creation to Running, by phase. The whole pull counts, as the
    pre-pull may not have finished (or may not exist) when the RayJob is created."""
    phases = {}
    if gpu_pool_autoscales(s):
        phases["GPU nodes scale up"] = s.latency.create_minutes["gpu_node_pool"]
    phases["image pull"] = pull_minutes(s, image)[0]
    phases["Ray cluster start"] = s.latency.ray_start_minutes
    return phases


def derived_pre_running_deadline_seconds(s: Settings, image: str) -> int:
    """The modelled wait x job.pre_running_margin_factor + job.pre_running_margin_minutes, in whole seconds."""
    wait = sum(pre_running_wait(s, image).values())
    return math.ceil((wait * s.job.pre_running_margin_factor + s.job.pre_running_margin_minutes) * 60)
