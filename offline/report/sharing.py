"""The plan's "Shared platform" section: the queue, a sweep's variants with their GPU-hours and cost, the logs."""

from __future__ import annotations

from typing import Any

from components.config import Settings
from components.logs import log_location
from components.queue import queue_summary
from components.sweep import variants
from offline.report.cost import estimate_cost, gpu_price, plan_critical_path, run_hold_minutes
from offline.report.section import Section, table


def _run_node_hours(s: Settings, cp) -> float:
    """Node-hours one run holds the GPU nodes, as the cost section counts them (cost.run_hold_minutes): from its
    Ray pods' start (Ray start, submission, verl init) through its steps, validations and the finished cluster's
    TTL. Queue wait is not counted: a suspended RayJob holds no node."""
    return s.gpu_pool.nodes * run_hold_minutes(s, cp, estimate_cost(s, cp.timeline())) / 60


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
               "and the finished cluster's TTL, as the cost section counts a run; no queue wait).", "", "\n".join(lines)]
    if s.logs.enabled:
        where = log_location(s)
        data["logs"] = where
        md += ["", "Ray logs (driver, workers, vLLM) after the job: Log Service project "
               f"`{where['project']}`, logstore `{where['logstore']}` in {where['region']}, kept "
               f"{where['retention_days']} days, owned by the platform's collection (an experiment's destroy deletes "
               "none)." + (f" One run: `{where['query']}` (docs/review-and-teardown.md)." if "query" in where else "")]
    return Section("sharing", "Shared platform: queue, sweep, logs", "\n".join(md), data)
