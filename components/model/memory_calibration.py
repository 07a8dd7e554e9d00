"""The training-phase memory estimate against measured peaks: the calibration table
(`memory_calibration.json`, written by tools/calibrate.sh with tools/measure_memory.py on real GPUs) and the
estimate's error on each of its points. docs/memory.md says how the table was made and how to remake it.

The estimate of what PyTorch's allocator reserves must never be below the measured peak reserved, and at most
UPPER_RATIO above it; the memory outside the allocator (CUDA context, NCCL) the estimate adds on top,
RUNTIME_OVERHEAD_GIB, must cover what each run measured there; a point that ran out of memory must be estimated
above the GPU's memory (the layout check would refuse it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from components.config import FAMILIES, PRESETS, REPO_ROOT, Settings
from components.config.docs import _replace_block
from components.config.loading import raw_settings
from components.model import parse_settings
from components.model.layout import GIB, RUNTIME_OVERHEAD_GIB, AllocatorFit, estimate_memory

TABLE = Path(__file__).with_name("memory_calibration.json")
MEMORY_DOC = REPO_ROOT / "docs" / "memory.md"
UPPER_RATIO = 1.15


@dataclass(frozen=True)
class CalibrationPoint:
    preset: str
    family: str
    world_size: int
    seq_len: int
    micro_batch: int
    log_prob_micro_batch: int
    status: str  # "ok", or "oom" when the measured step ran out of the GPU's memory
    measured_reserved_gib: float
    estimated_gib: float  # the estimate of PyTorch's reserved peak
    estimated_total_gib: float  # plus RUNTIME_OVERHEAD_GIB: what the layout check compares with the GPU
    measured_outside_torch_gib: float
    gpu_gib: float
    gpu_name: str
    measured_allocated_gib: float
    simulated: bool  # rank 0 of world_size on one GPU (measure_memory.py --simulate-world)
    build: str  # "device" (the fp32 model built on the GPU, then sharded) or "meta" (--init meta: FSDP materialises)

    @property
    def ratio(self) -> float:
        return round(self.estimated_gib / self.measured_reserved_gib, 3)

    @property
    def within_bounds(self) -> bool:
        if self.status == "oom":
            return self.estimated_total_gib > self.gpu_gib
        return 1.0 <= self.ratio <= UPPER_RATIO and self.measured_outside_torch_gib <= RUNTIME_OVERHEAD_GIB


def load_table(path: Path = TABLE) -> list[dict]:
    return json.loads(path.read_text())["points"]


def _point_settings(s: Settings, row: dict) -> Settings:
    """The stack's settings with everything the estimate reads pinned to the measured point, so the result
    does not depend on which stack asks."""
    c = row["config"]
    training = s.training.model_copy(update={
        "max_prompt_length": c["prompt_len"], "max_response_length": c["seq_len"] - c["prompt_len"],
        "use_dynamic_bsz": False, "ulysses_sequence_parallel_size": 1, "algorithm": "grpo"})
    model = s.model.model_copy(update={"log_prob_micro_batch_size_per_gpu": c["log_prob_micro_batch"],
                                       "lora_rank": c.get("lora_rank", 0)})
    gpu_pool = s.gpu_pool.model_copy(update={"gpu_memory_gib": row["machine"]["gpu_memory_gib"]})
    return s.model_copy(update={"training": training, "model": model, "gpu_pool": gpu_pool})


def _estimate(s: Settings, row: dict, fit: AllocatorFit | None = None):
    preset, c = PRESETS[row["preset"]], row["config"]
    return estimate_memory(_point_settings(s, row), preset, world=c["world_size"], tp=preset.layout.rollout_tp,
                           param_offload=c["param_offload"], optimizer_offload=c["optimizer_offload"],
                           ref_offload=preset.layout.ref_param_offload, gpu_mem_util=preset.layout.gpu_memory_utilization,
                           micro=c["micro_batch"], uses_ref=True, fit=fit)


def calibration_error(s: Settings, table: list[dict] | None = None) -> list[CalibrationPoint]:
    """The estimate next to the measurement for every preset point of the table (any stack's settings)."""
    out = []
    for row in load_table() if table is None else table:
        if row["preset"] not in PRESETS or row["status"] not in ("ok", "oom"):
            continue
        preset, c = PRESETS[row["preset"]], row["config"]
        est = _estimate(s, row)
        out.append(CalibrationPoint(
            preset=row["preset"], family=preset.arch.family, world_size=c["world_size"], seq_len=c["seq_len"],
            micro_batch=c["micro_batch"],
            log_prob_micro_batch=c["log_prob_micro_batch"], status=row["status"],
            measured_reserved_gib=row["peak_reserved_gib"], estimated_gib=est.train_reserved_gib,
            estimated_total_gib=est.train_gib,
            measured_outside_torch_gib=row["outside_torch_gib"],
            gpu_gib=row["machine"]["gpu_memory_gib"], gpu_name=row["machine"]["gpu_name"],
            measured_allocated_gib=row["peak_allocated_gib"], simulated=c["collectives"].startswith("fake"),
            build=c.get("init", "device")))
    return out


def uncalibrated_families(points: list[CalibrationPoint]) -> list[str]:
    """Families with presets but no measured point: their estimate carries the other families' fit untested."""
    return [f for f in FAMILIES if not any(p.family == f and p.status == "ok" for p in points)]


def calibration_summary(points: list[CalibrationPoint], family: str | None = None) -> str:
    """One line for plan.md's memory section (for the stack's model family when given)."""
    fits = [p.ratio for p in points if p.status == "ok"]
    ooms = [p for p in points if p.status == "oom"]
    gpus = sorted({p.gpu_name for p in points})
    fams = ", ".join(sorted({p.family for p in points if p.status == "ok"}))
    line = (f"training estimate of PyTorch's reserved peak / measured: {min(fits):.2f}-{max(fits):.2f} over "
            f"{len(fits)} points ({fams}) on {', '.join(gpus)} (bound 1.00-{UPPER_RATIO:.2f}); "
            f"{RUNTIME_OVERHEAD_GIB} GiB added for the CUDA context and NCCL")
    if ooms:
        line += f"; {len(ooms)} measured OOM, {sum(p.within_bounds for p in ooms)} of them estimated above the GPU"
    if family in uncalibrated_families(points):
        line += f"; no {family} model measured yet: its estimate is uncalibrated"
    return line


MEMORY_DOC_START = "<!-- calibration-table:start (generated by `python -m components.config`) -->"
MEMORY_DOC_END = "<!-- calibration-table:end -->"


def render_calibration_table(s: Settings) -> str:
    """docs/memory.md's table: every measured point beside the estimate, from the committed table."""
    lines = ["| preset | GPUs | seq | micro (update / log-prob) | allocated GiB | reserved GiB | outside PyTorch GiB "
             "| estimate of reserved GiB | estimate / reserved | estimate with runtime GiB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for p in calibration_error(s):
        sim = " (sim.)" if p.simulated else ""
        build = " (meta build)" if p.build == "meta" else ""
        fit = f"{p.ratio:.2f}" if p.status == "ok" else "**OOM**, estimated above the GPU" if p.within_bounds else "**OOM**"
        lines.append(f"| {p.preset}{build} | {p.world_size}{sim} | {p.seq_len} | {p.micro_batch} / {p.log_prob_micro_batch} "
                     f"| {p.measured_allocated_gib:.1f} | {p.measured_reserved_gib:.1f} | {p.measured_outside_torch_gib:.1f} "
                     f"| {p.estimated_gib:.1f} | {fit} | {p.estimated_total_gib:.1f} |")
    return "\n".join(lines)


def refresh_memory_doc(text: str) -> str:
    """docs/memory.md with the calibration table replaced. The points do not depend on the stack (they pin every
    setting the estimate reads), so the dev stack's settings serve."""
    return _replace_block(text, MEMORY_DOC_START, MEMORY_DOC_END, render_calibration_table(parse_settings(raw_settings("dev"))))


# ------------------------------------------------------------------------------------------- fit, leave-one-out
# The estimate derives every term from the mechanism (what FSDP shards, what the logits and the log-prob phase hold)
# except the caching allocator's slack over its peak, four constants (layout.AllocatorFit) fitted here: the smallest
# worst-case over-estimate over the table's points with every point at least FIT_MARGIN above its measurement and
# every measured OOM estimated above its GPU. The margin is what a point outside the table may fall short of the
# points in it; the leave-one-out test (tests/components/model/test_memory_calibration.py) refits without each
# point in turn and holds the left-out point within 1.00-UPPER_RATIO.
FIT_MARGIN = 0.015
FIT_GRID = {"slack": [i / 100 for i in range(0, 21)], "root_unit_bytes": [i / 2 for i in range(0, 21)],
            "logits_share": [i / 40 for i in range(0, 13)]}


@dataclass(frozen=True)
class PointTerms:
    """One measured point as the fit sees it: the estimate's allocated peak and the terms the slack scales with."""

    name: str
    status: str
    measured_gib: float
    allocated_gib: float
    embed_gib: float  # embedding (and untied LM head) parameters, in 2**30 units
    logits_gib: float  # the largest vocabulary-wide logits block of the step
    gpu_gib: float

    def estimate(self, fit: AllocatorFit) -> float:
        return (self.allocated_gib * (1 + fit.slack) + fit.reserve_gib + fit.root_unit_bytes * self.embed_gib
                + fit.logits_share * self.logits_gib)


def point_terms(s: Settings, table: list[dict] | None = None) -> list[PointTerms]:
    out = []
    zero = AllocatorFit(0.0, 0.0, 0.0, 0.0)
    for row in load_table() if table is None else table:
        if row["preset"] not in PRESETS or row["status"] not in ("ok", "oom"):
            continue
        a, c = PRESETS[row["preset"]].arch, row["config"]
        est = _estimate(s, row, zero)
        logits = max(c["micro_batch"], c["log_prob_micro_batch"]) * c["seq_len"] * a.vocab_size * 2 / GIB
        out.append(PointTerms(
            name=f"{row['preset']} w{c['world_size']} s{c['seq_len']} {c.get('init', 'device')}", status=row["status"],
            measured_gib=row["peak_reserved_gib"], allocated_gib=est.train_reserved_gib,
            embed_gib=a.embedding_params / GIB, logits_gib=logits, gpu_gib=row["machine"]["gpu_memory_gib"]))
    return out


def _grid(points: list[PointTerms], margin: float):
    """Every grid point of the fit: (slack, root, share), then per measured point its estimate without the reserve
    and the reserve it alone needs to stay `margin` above its measurement; the OOM points' estimates less their GPU."""
    ok = [(p.allocated_gib, p.embed_gib, p.logits_gib, p.measured_gib) for p in points if p.status == "ok"]
    oom = [(p.allocated_gib, p.embed_gib, p.logits_gib, p.gpu_gib - RUNTIME_OVERHEAD_GIB) for p in points
           if p.status == "oom"]
    for slack in FIT_GRID["slack"]:
        for root in FIT_GRID["root_unit_bytes"]:
            for share in FIT_GRID["logits_share"]:
                est = [a * (1 + slack) + root * e + share * lg for a, e, lg, _ in ok]
                need = [m * (1 + margin) - v for v, (_, _, _, m) in zip(est, ok, strict=True)]
                oom_short = max((room - (a * (1 + slack) + root * e + share * lg) for a, e, lg, room in oom),
                                default=float("-inf"))
                yield (slack, root, share), est, need, oom_short


def _worst(est: list[float], measured: list[float], reserve: float) -> float:
    return max((v + reserve) / m for v, m in zip(est, measured, strict=True))


def fit_allocator(points: list[PointTerms], margin: float = FIT_MARGIN) -> AllocatorFit:
    """The allocator constants with the smallest worst over-estimate (see FIT_MARGIN): for each grid point the
    reserve is the least that keeps every point `margin` above its measurement and every OOM above its GPU."""
    measured = [p.measured_gib for p in points if p.status == "ok"]
    best: tuple[float, AllocatorFit] | None = None
    for (slack, root, share), est, need, oom_short in _grid(points, margin):
        reserve = max(0.0, max(need), oom_short + 1e-9)
        worst = _worst(est, measured, reserve)
        if best is None or worst < best[0] - 1e-12:
            best = (worst, AllocatorFit(slack, round(reserve, 4), root, share))
    assert best is not None
    return best[1]


def leave_one_out(points: list[PointTerms], margin: float = FIT_MARGIN) -> list[tuple[PointTerms, float]]:
    """Each measured point's ratio (estimate / measured) under the constants fitted without it: the same fit as
    fit_allocator's over the other points, for every point in one pass over the grid."""
    ok = [p for p in points if p.status == "ok"]
    measured = [p.measured_gib for p in ok]
    best: list[tuple[float, float] | None] = [None] * len(ok)  # (worst over the others, the left-out's ratio)
    for _, est, need, oom_short in _grid(points, margin):
        first, second = sorted(range(len(need)), key=need.__getitem__, reverse=True)[:2]
        # The reserve without point i is set by the neediest other point: the neediest of all unless that is i.
        worst_by_reserve = {}
        for top in {need[first], need[second]}:
            reserve = max(0.0, top, oom_short + 1e-9)
            ratios = [(v + reserve) / m for v, m in zip(est, measured, strict=True)]
            r1, r2 = sorted(range(len(ratios)), key=ratios.__getitem__, reverse=True)[:2]
            worst_by_reserve[top] = (reserve, ratios[r1], r1, ratios[r2])
        for i in range(len(ok)):
            reserve, w1, r1, w2 = worst_by_reserve[need[second] if first == i else need[first]]
            worst = w2 if r1 == i else w1
            if best[i] is None or worst < best[i][0] - 1e-12:
                best[i] = (worst, (est[i] + round(reserve, 4)) / measured[i])
    return [(p, round(b[1], 3)) for p, b in zip(ok, best, strict=True) if b is not None]
