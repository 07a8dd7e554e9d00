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
    read = fresh.model_read
    if read.get("copy_overlapped_minutes") is not None:
        how = (f"model weights copied from the OSS volume `models` (ossfs 2.0, read-only) at {L.oss_read_mbps:g} "
               f"Mbit/s into each Ray pod's memory while Ray starts (job.model_prefetch: "
               f"{read['copy_overlapped_minutes']:.2f} of its {read['oss_read_minutes']:.2f} min overlap Ray's start and "
               f"the submission), then read by verl at {L.local_read_mbps:g} Mbit/s")
    else:
        how = (f"model weights read once from the OSS volume `models` (ossfs 2.0, read-only) at {L.oss_read_mbps:g} "
               "Mbit/s during verl init")
    load = (how + "; staged into OSS by the experiment's model Job, in parallel with the GPU pool join"
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
    return "Platform + experiment (ESTIMATE):\n\n" + table(rows, ("figure", "value"))


def minutes_text(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.1f} min"


TARGET_REPEAT_MINUTES = 9.0  # a repeat experiment on a warm platform (model and dataset in the staging cache)


def gpu_price(s: Settings) -> tuple[str, Optional[float]]:
    """(price key, price per node-hour) of one GPU node of this stack's pool."""
    g = s.gpu_pool
    key = "lingjun_node_hour" if g.kind == "lingjun" or g.ecs is None else g.ecs.instance_types[0]
    return key, s.cost.prices.get(key)


@dataclass(frozen=True)
class Target:
    """One target of a plan (docs/latency.md "Targets"): met, missed, or missed as an exception the stack accepts
    (`latency.accepted_exceptions`), priced."""

    key: str  # the key of latency.accepted_exceptions
    name: str
    value: str
    met: bool
    exception: Optional[str] = None

    @property
    def status(self) -> str:
        if self.met:
            return "met"
        return f"exception (accepted: {self.exception})" if self.exception else "**NOT met**"

    @property
    def holds(self) -> bool:
        """Met, or an accepted exception."""
        return self.met or self.exception is not None

    def as_dict(self) -> dict:
        return {"key": self.key, "target": self.name, "value": self.value, "met": self.met,
                "exception": self.exception, "status": "met" if self.met else "exception" if self.exception
                else "not met"}


def _price_of_idle(s: Settings, minutes: float) -> str:
    key, price = gpu_price(s)
    if price is None:
        return f"{minutes:.1f} min of {s.gpu_pool.nodes} GPU node(s) ({key}: no price)"
    return (f"{minutes:.1f} min of {s.gpu_pool.nodes} GPU node(s) = {s.gpu_pool.nodes * minutes / 60 * price:,.2f} "
            f"{s.cost.currency} a run")


def _target(s: Settings, key: str, name: str, value: str, met: bool, price: str) -> Target:
    reason = s.latency.accepted_exceptions.get(key)  # type: ignore[call-overload]
    return Target(key, name, value, met, None if met or reason is None else f"{reason}; it costs {price}")


def single_targets(s: Settings, cp: CriticalPath, chain: float) -> list[Target]:
    """A single stack: its first step against the unavoidable chain, and the GPU idle beyond the job's own start."""
    over = cp.first_step_minutes - chain
    idle = cp.gpu_idle_minutes
    avoidable = max(0.0, (idle or 0.0) - own_start_minutes(s, cp))
    autoscaled = cp.gpu_pool_ready_minutes is not None and "GPU nodes scale up" in cp.phases
    if autoscaled:
        key, price = gpu_price(s)
        cost = (f"{over:.1f} min more to the first step; the GPU nodes do not idle (they boot for the job); "
                f"keeping them booted (min_nodes = nodes) would bill {s.gpu_pool.nodes} x {key}"
                + (f" = {s.gpu_pool.nodes * price:,.2f} {s.cost.currency} per hour left up" if price is not None else ""))
    else:
        cost = f"{over:.1f} min more to the first step, " + _price_of_idle(s, avoidable) + " of avoidable GPU idle"
    out = [_target(s, "chain_ratio", f"first step <= {TARGET_FRESH_RATIO}x chain",
                   f"{cp.first_step_minutes:.1f} min vs the chain's {chain:.1f} min ({cp.first_step_minutes / chain:.2f}x)",
                   cp.first_step_minutes <= TARGET_FRESH_RATIO * chain, cost)]
    if idle is not None and s.owns_gpu_pool():
        out.append(_target(s, "avoidable_gpu_idle", f"avoidable GPU idle <= {TARGET_AVOIDABLE_IDLE_MINUTES:g} min",
                           f"{avoidable:.1f} min (GPU pool ready -> first step {idle:.1f} min)",
                           avoidable <= TARGET_AVOIDABLE_IDLE_MINUTES, _price_of_idle(s, avoidable)))
    return out


def experiment_targets(s: Settings, warm: CriticalPath, split: Optional[SplitFigures],
                       repeat_minutes: float) -> list[Target]:
    """An experiment: the pair's fresh figures (when its platform was rendered), the warm first use and the repeat."""
    out = []
    if split is not None:
        out.append(_target(s, "chain_ratio", f"fresh <= {TARGET_FRESH_RATIO}x chain",
                           f"new platform + experiment: {split.fresh_first_step_minutes:.1f} min vs the chain's "
                           f"{split.chain_minutes:.1f} min ({split.fresh_ratio:.2f}x)",
                           split.fresh_ratio <= TARGET_FRESH_RATIO,
                           f"{split.fresh_first_step_minutes - split.chain_minutes:.1f} min more to the first step"))
        out.append(_target(s, "avoidable_gpu_idle", f"avoidable GPU idle <= {TARGET_AVOIDABLE_IDLE_MINUTES:g} min",
                           f"{split.gpu_avoidable_idle_minutes:.1f} min (GPU pool ready -> first step "
                           f"{split.gpu_idle_minutes:.1f} min)",
                           split.gpu_avoidable_idle_minutes <= TARGET_AVOIDABLE_IDLE_MINUTES,
                           _price_of_idle(s, split.gpu_avoidable_idle_minutes)))
    out.append(_target(s, "warm_first_step", f"warm experiment <= {TARGET_WARM_MINUTES:g} min",
                       f"first use of the model on the platform: {warm.first_step_minutes:.1f} min",
                       warm.first_step_minutes <= TARGET_WARM_MINUTES,
                       f"{warm.first_step_minutes - TARGET_WARM_MINUTES:.1f} min more"))
    out.append(_target(s, "repeat_first_step", f"repeat experiment <= {TARGET_REPEAT_MINUTES:g} min",
                       f"the same model revision and dataset staged before: {repeat_minutes:.1f} min",
                       repeat_minutes <= TARGET_REPEAT_MINUTES, f"{repeat_minutes - TARGET_REPEAT_MINUTES:.1f} min more"))
    return out


def targets_markdown(targets: list[Target]) -> str:
    rows = [(f"target: {t.name}", f"{t.value}: {t.status}") for t in targets]
    accepted = sum(1 for t in targets if not t.met and t.exception)
    verdict = (("every target holds" + (f" ({accepted} as an accepted exception)" if accepted else ""))
               if all(t.holds for t in targets) else "**a target is NOT met**")
    return f"Targets (docs/latency.md \"Targets\"): {verdict}.\n\n" + table(rows, ("target", "modelled"))
