"""The plan's "Shared platform" section: the queue, a sweep's variants with their GPU-hours and cost, the logs."""

from __future__ import annotations

from typing import Any

from components.config import Settings
from components.logs import log_location
from components.queue import queue_summary
from components.sweep import variants
from offline.report.cost import training_steps, validation_passes
from offline.report.section import Section, table


def _run_node_hours(s: Settings) -> float:
    """Node-hours one run holds the GPU nodes: its steps, validations and the finished cluster's TTL (a queued run
    starts on joined nodes, so no setup is counted)."""
    c, steps = s.cost, training_steps(s)
    seconds = steps * c.seconds_per_step + validation_passes(s, steps) * c.seconds_per_validation
    return s.gpu_pool.nodes * (seconds + s.job.ttl_seconds_after_finished) / 3600


def _node_price(s: Settings) -> tuple[str, float | None]:
    key = "lingjun_node_hour" if s.gpu_pool.kind == "lingjun" else s.gpu_pool.ecs.instance_types[0]  # type: ignore
    return key, s.cost.prices.get(key)


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
        price_key, price = _node_price(s)
        billed = "the platform (gpu_pool.owner: platform)" if not s.owns_gpu_pool() else "this stack"
        lines = ["| variant | values | RayJob | MLflow run | checkpoints | GPU-hours | cost |", "|---|---|---|---|---|---|---|"]
        out = []
        for v in runs:
            node_h = _run_node_hours(v.settings)
            gpu_h = node_h * s.gpu_pool.gpus_per_node
            cost = None if price is None else node_h * price
            out.append({"key": v.key, "values": v.overrides, "rayjob": v.rayjob_name, "run": v.run_name,
                        "checkpoints": v.checkpoint_prefix, "gpu_hours": round(gpu_h, 2),
                        "cost": None if cost is None else round(cost, 2)})
            values = ", ".join(f"{k}={val:g}" for k, val in v.overrides.items())
            lines.append(f"| {v.key} | {values} | `{v.rayjob_name}` | `{v.run_name}` | `{v.checkpoint_prefix}` | "
                         f"{gpu_h:.2f} | {'n/a' if cost is None else f'{cost:.2f} {s.cost.currency}'} |")
        total_h = sum(r["gpu_hours"] for r in out)
        total = None if price is None else sum(r["cost"] for r in out)
        lines.append(f"| all {len(out)} | | | | | {total_h:.2f} | "
                     f"{'n/a' if total is None else f'{total:.2f} {s.cost.currency}'} |")
        data["sweep"] = {"variants": out, "gpu_hours": round(total_h, 2), "cost": None if total is None else
                         round(total, 2), "price_key": price_key, "billed_to": billed}
        md += ["", f"Sweep: {len(out)} variants, each its own queued RayJob; GPU time billed to {billed} at "
               f"`{price_key}` (ESTIMATE: steps x cost.seconds_per_step + validations + the finished cluster's TTL, "
               "no queue wait).", "", "\n".join(lines)]
    if s.logs.enabled:
        where = log_location(s)
        data["logs"] = where
        md += ["", "Ray logs (driver, workers, vLLM) after the job: Log Service project "
               f"`{where['project']}`, logstore `{where['logstore']}` in {where['region']}, kept "
               f"{where['retention_days']} days, owned by the platform's collection (an experiment's destroy deletes "
               "none)." + (f" One run: `{where['query']}` (docs/review-and-teardown.md)." if "query" in where else "")]
    return Section("sharing", "Shared platform: queue, sweep, logs", "\n".join(md), data)
