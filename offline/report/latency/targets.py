"""The targets a plan is held to (docs/latency.md) and the two figures of a platform + experiment pair."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from components.config import Settings
from offline.report.latency.pair import PlatformRun
from offline.report.latency.path import CriticalPath, critical_path, own_start_minutes, unavoidable_chain_minutes
from offline.report.section import table

TARGET_FRESH_RATIO = 1.1  # fresh platform + experiment: at most 1.1x the unavoidable chain
TARGET_AVOIDABLE_IDLE_MINUTES = 5.0
TARGET_WARM_MINUTES = 15.0


@dataclass(frozen=True)
class SplitFigures:
    """The two figures of a platform + experiment pair, with the targets they are held to (docs/latency.md)."""

    fresh_first_step_minutes: float  # new platform + experiment, one `pulumi up` of both (kind: single)
    chain_minutes: float  # cluster -> GPU pool join -> in-region image on node -> Ray start -> verl init
    fresh_ratio: float
    gpu_idle_minutes: float  # fresh: GPU pool ready -> first step
    gpu_avoidable_idle_minutes: float  # of which not the job's own start (image, Ray, submission, verl init)
    platform_up_minutes: float  # the platform stack's `pulumi up`
    warm_first_step_minutes: float  # experiment on a platform that is up
    sequential_first_step_minutes: float  # platform `up` returns, then the experiment's `up`
    model_load: str
    targets: dict[str, bool]


def split_figures(s: Settings, warm: CriticalPath, platform: PlatformRun) -> SplitFigures:
    assert platform.fresh is not None
    fs, frec = platform.fresh
    fresh = critical_path(frec, fs)
    start = own_start_minutes(fs, fresh)
    chain = unavoidable_chain_minutes(fs, fresh)
    L = fs.latency
    idle = fresh.gpu_idle_minutes or 0.0
    avoidable = max(0.0, idle - start)
    up = critical_path(platform.recording, platform.settings).graph_minutes
    targets = {
        f"fresh <= {TARGET_FRESH_RATIO}x chain": fresh.first_step_minutes <= TARGET_FRESH_RATIO * chain,
        f"avoidable GPU idle <= {TARGET_AVOIDABLE_IDLE_MINUTES:g} min": avoidable <= TARGET_AVOIDABLE_IDLE_MINUTES,
        f"warm experiment <= {TARGET_WARM_MINUTES:g} min": warm.first_step_minutes <= TARGET_WARM_MINUTES,
    }
    load = (f"model weights read once from the OSS volume `models` (ossfs 2.0, read-only) at {L.oss_read_mbps:g} "
            "Mbit/s during verl init; staged into OSS by the experiment's model Job, in parallel with the GPU pool join"
            + (" (on a warm platform the pool is joined already: the Job is on the warm path)"
               if not s.owns_gpu_pool() else ""))
    return SplitFigures(fresh.first_step_minutes, chain, fresh.first_step_minutes / chain, idle, avoidable, up,
                        warm.first_step_minutes, up + warm.first_step_minutes, load, targets)


def split_markdown(f: SplitFigures) -> str:
    rows = [
        ("new platform + experiment (both in one `pulumi up`, as a single stack of these settings builds them)",
         minutes_text(f.fresh_first_step_minutes)),
        ("unavoidable chain: cluster -> GPU pool join -> in-region image on node -> Ray start -> verl init",
         minutes_text(f.chain_minutes)),
        ("ratio to the chain", f"{f.fresh_ratio:.2f}x"),
        ("GPU idle before the first step (new platform + experiment)", minutes_text(f.gpu_idle_minutes)),
        ("of which avoidable (waiting on anything but image, Ray, submission and verl init)",
         minutes_text(f.gpu_avoidable_idle_minutes)),
        ("experiment on a warm platform (this stack's `pulumi up`)", minutes_text(f.warm_first_step_minutes)),
        ("platform `pulumi up`, then this experiment's `pulumi up`", minutes_text(f.sequential_first_step_minutes)),
        ("model load assumed", f.model_load),
    ]
    rows += [(f"target: {k}", "met" if v else "**NOT met**") for k, v in f.targets.items()]
    return "Platform + experiment (ESTIMATE):\n\n" + table(rows, ("figure", "value"))


def minutes_text(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.1f} min"
