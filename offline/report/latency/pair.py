"""Platform and experiment stacks (docs/stacks.md): an experiment's platform as plan.py rendered it, and the
`single` settings of the pair as one program, for the figure of a new platform + experiment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from components.config import Settings
from offline.engine import Recording


@dataclass(frozen=True)
class PlatformRun:
    """An experiment's platform as plan.py rendered it: its stack name, settings (validated and raw) and recording,
    and `fresh`: the
    pair as one program (the settings `single_of_pair` gives, and that run's recording)."""

    stack: str
    settings: Settings
    recording: Recording
    raw: dict  # the platform's `verl-ack:settings` as its stack file holds them (single_of_pair merges them)
    fresh: Optional[tuple[Settings, Recording]] = None


# Sections of a pair's stack files that belong to the platform; the rest (GPU pool, data, model, training, job,
# latency, cost) to the experiment.
PLATFORM_SECTIONS = ("name", "region", "zones", "tags", "cluster", "system_pool", "storage", "sandbox", "tracking",
                     "image", "versions")


def single_of_pair(platform_raw: dict, experiment_raw: dict) -> dict:
    """The settings of a `single` stack that builds what a platform stack and one experiment on it build, for the
    "new platform + experiment" figure: platform sections from the platform, the rest from the experiment."""
    out = {k: v for k, v in platform_raw.items() if k in PLATFORM_SECTIONS}
    out.update({k: v for k, v in experiment_raw.items() if k not in PLATFORM_SECTIONS
                and k not in ("kind", "platform_stack", "ttl_hours", "deploy_on_merge", "queue", "logs")})
    if isinstance(out.get("training"), dict):  # the figure is one run's: a sweep's variants queue one after another
        out["training"] = {k: v for k, v in out["training"].items() if k != "sweep"}
    if isinstance(out.get("gpu_pool"), dict):  # a single stack owns its GPU pool whichever half of the pair does
        out["gpu_pool"] = {k: v for k, v in out["gpu_pool"].items() if k != "owner"}
    out["kind"] = "single"
    return out


def with_platform_network(s: Settings, platform: Optional[PlatformRun]) -> Settings:
    """An experiment's hub downloads leave through its platform's NAT: model them with the platform's network."""
    if platform is None:
        return s
    return s.model_copy(update={"cluster": platform.settings.cluster})
