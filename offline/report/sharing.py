"""The plan's "Shared platform" section: the queue, a sweep's variants with their GPU-hours and cost, the logs."""

from __future__ import annotations

from typing import Any

from components.config import Settings
from components.logs import log_location
from components.queue import queue_summary
from components.sweep import variants
from offline.report.cost import estimate_cost, gpu_price, plan_critical_path, run_hold_minutes
from offline.report.queue_timeline import QueuedRun, modelled_queue
from offline.report.section import Section, table


def _run_node_hours(s: Settings, cp) -> float:
    """Node-hours one run holds the GPU nodes, as the cost section counts them (cost.run_hold_minutes): from its
    Ray pods' start (Ray start, submission, verl init) through its steps, validations and the finished cluster's
    TTL. Queue wait is not counted: a suspended RayJob holds no node."""
    return s.gpu_pool.nodes * run_hold_minutes(s, cp, estimate_cost(s, cp.timeline())) / 60


def sweep_queue(s: Settings, recording) -> tuple[list[QueuedRun], int, str]:
    """The sweep's modelled queue, each variant holding the pool as the cost section counts a run."""
    cp = plan_critical_path(recording, s)
    return modelled_queue(s, cp.pods_start_minutes, getattr(recording, "platform", None),
                          lambda vs: run_hold_minutes(vs, cp, estimate_cost(vs, cp.timeline())))


def sharing_section(s: Settings, recording) -> Section:
    data: dict[str, Any] = {"queue": queue_summary(s)}
    rows: list[tuple[str, Any]] = [("queue", "on: RayJobs start suspended, whole (gang), by priority then submission"
                                    if s.queue.enabled else "off")]
    for key, value in data["queue"].items():
        if key != "enabled":
            rows.append((f"queue {key}", value))
    md = [table(rows, ("shared platform", "value"))]
    runs = variants(s)
    if runs:
        price_key, price = gpu_price(s)
        billed = "the platform (gpu_pool.owner: platform)" if not s.owns_gpu_pool() else "this stack"
        lines = ["| variant | values | RayJob | MLflow run | checkpoints | GPU-hours | cost |", "|---|---|---|---|---|---|---|"]
        out, raw_h, raw_cost = [], 0.0, 0.0
        cp = plan_critical_path(recording, s)  # every variant's RayJob has the same path to its first step
        for v in runs:
            node_h = _run_node_hours(v.settings, cp)
            gpu_h = node_h * s.gpu_pool.gpus_per_node
            cost = None if price is None else node_h * price
            raw_h, raw_cost = raw_h + gpu_h, raw_cost + (cost or 0.0)
            out.append({"key": v.key, "values": v.overrides, "rayjob": v.rayjob_name, "run": v.run_name,
                        "checkpoints": v.checkpoint_prefix, "gpu_hours": round(gpu_h, 2),
                        "cost": None if cost is None else round(cost, 2)})
            values = ", ".join(f"{k}={val:g}" for k, val in v.overrides.items())
            lines.append(f"| {v.key} | {values} | `{v.rayjob_name}` | `{v.run_name}` | `{v.checkpoint_prefix}` | "
                         f"{gpu_h:.2f} | {'n/a' if cost is None else f'{cost:.2f} {s.cost.currency}'} |")
        # totals from the unrounded figures, as the cost section's (one rounding, equal numbers in both sections)
        total_h = raw_h
        total = None if price is None else raw_cost
        lines.append(f"| all {len(out)} | | | | | {total_h:.2f} | "
                     f"{'n/a' if total is None else f'{total:.2f} {s.cost.currency}'} |")
        data["sweep"] = {"variants": out, "gpu_hours": round(total_h, 2), "cost": None if total is None else
                         round(total, 2), "price_key": price_key, "billed_to": billed}
        md += ["", f"Sweep: {len(out)} variants, each its own queued RayJob; GPU time billed to {billed} at "
               f"`{price_key}` (ESTIMATE: from the Ray pods' start through steps x cost.seconds_per_step, validations "
               "and the finished cluster's TTL, as the cost section counts a run; queue wait holds no GPU).", "",
               "\n".join(lines)]
        timeline, capacity, why = sweep_queue(s, recording)
        last = max(r.end_minutes for r in timeline)
        at_once = max(sum(1 for o in timeline if o.start_minutes <= r.start_minutes < o.end_minutes) for r in timeline)
        q = ["| variant | GPUs | queued (min) | starts (min) | waits (min) | done (min) |", "|---|---|---|---|---|---|"]
        q += [f"| {r.key} | {r.gpus} | {r.queued_at:.1f} | {r.start_minutes:.1f} | {r.wait_minutes:.1f} | "
              f"{r.end_minutes:.1f} |" for r in timeline]
        data["sweep"]["queue"] = {
            "capacity_gpus": capacity, "capacity_from": why, "at_once": at_once, "last_done_minutes": round(last, 2),
            "variants": [{"key": r.key, "gpus": r.gpus, "start_minutes": round(r.start_minutes, 2),
                          "end_minutes": round(r.end_minutes, 2), "wait_minutes": round(r.wait_minutes, 2)}
                         for r in timeline]}
        md += ["", f"Queue (ESTIMATE, offline/report/queue_timeline.py): {capacity} GPUs at once ({why}), so "
               f"{at_once} variant(s) run at a time, in submission order; the last is done {last:.1f} min after "
               "`pulumi up` starts, and the stack stays up until then. Minutes from the start of `pulumi up`; other "
               "teams' jobs on the pool are not modelled.", "", "\n".join(q)]
    if s.logs.enabled:
        where = log_location(s)
        data["logs"] = where
        md += ["", "Ray logs (driver, workers, vLLM) after the job: Log Service project "
               f"`{where['project']}`, logstore `{where['logstore']}` in {where['region']}, kept "
               f"{where['retention_days']} days, owned by the platform's collection (an experiment's destroy deletes "
               "none)." + (f" One run: `{where['query']}` (docs/review-and-teardown.md)." if "query" in where else "")]
    return Section("sharing", "Shared platform: queue, sweep, logs", "\n".join(md), data)
