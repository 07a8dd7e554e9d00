"""Cost ESTIMATE of one training run and of leaving the stack up afterwards.

Prices come from `settings.cost.prices` (built-in rough USD list-price approximations unless the stack
overrides them; never a quote). Durations come from a `Timeline` (offline/report/latency/: the recorded
graph's critical path in the plan, the nominal reference chain in the stack output), the number of steps
(`total_training_steps`, or epochs x rows // train_batch_size as verl's drop_last dataloader counts) times
`cost.seconds_per_step`, validation passes, and the RayJob's TTL. What the stack bills for follows from the
settings: the ACK Pro fee for a new cluster, NAT + EIP for a new VPC, the ALB for a sandbox domain, the node
pools (system, GPU, and the sandboxes' own pool), their disks, the tracking disk and the OSS data. Lingjun nodes
bill while they exist; the ECS GPU pool bills from its nodes' start (the pool's creation, or the autoscaler's
scale-up when `min_nodes` < `nodes`) until the autoscaler removes idle nodes (down to `min_nodes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from components.config import DEFAULT_PRICES_USD, Settings
from components.config.task import train_rows
from components.model import preset_of
from components.model.wait import gpu_pool_autoscales, model_bytes
from components.sweep import variants
from offline.report.cost_view import platform_markdown, run_markdown
from offline.report.latency import CriticalPath, Timeline, own_start_minutes, plan_critical_path
from offline.report.latency.targets import gpu_price  # one price lookup for the plan's targets and its cost
from offline.report.queue_timeline import modelled_queue
from offline.report.section import Section

RUN_ASSUMPTIONS = 5  # estimate_cost's first assumptions: the note, steps, setup, TTL, run length
HOURS_PER_MONTH = 730  # 8760 / 12, the convention of monthly cloud prices
GIB = 2**30
# Checkpoint bytes per parameter by `training.save_contents` (verl utils/checkpoint/fsdp_checkpoint_manager.py):
# `model` and `optimizer` are torch.save'd FSDP shards of the fp32 actor (verl builds the actor in fp32) and
# AdamW's two fp32 moments; `hf_model` is the full state dict as is (fp32 for an fp32 actor); `extra`
# (scheduler, RNG) is negligible. Estimates: check a real checkpoint with `ossutil du`.
CHECKPOINT_BYTES_PER_PARAM = {"model": 4, "optimizer": 8, "hf_model": 4, "extra": 0}
ESTIMATE_NOTE = ("ESTIMATE, not a quote. The built-in prices are rough pay-as-you-go list-price approximations; "
                 "override them with your account's prices in `cost.prices` and set `cost.prices_taken_on`.")


@dataclass(frozen=True)
class Line:
    key: str  # stable id in the stack output and plan.json
    item: str
    quantity: float
    unit: str
    price_key: str
    unit_price: Optional[float]

    @property
    def cost(self) -> Optional[float]:
        return None if self.unit_price is None else self.quantity * self.unit_price

    def as_dict(self) -> dict[str, Any]:
        """What plan.json holds of a line, and all that plan.md prints of it."""
        return {"item": self.item, "quantity": round(self.quantity, 6), "unit": self.unit,
                "price_key": self.price_key, "unit_price": self.unit_price,
                "cost": None if self.cost is None else round(self.cost, 2)}


@dataclass
class CostEstimate:
    currency: str
    prices_source: str
    steps: int
    validations: int
    checkpoints_kept: int
    timeline: Timeline
    training_minutes: float
    ttl_minutes: float
    run_hours: float
    gpu_node_hours: float
    system_node_hours: float
    storage_gib: dict[str, float]
    lines: list[Line]
    idle_lines: list[Line]
    assumptions: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(line.cost or 0.0 for line in self.lines)

    @property
    def idle_per_hour(self) -> float:
        return sum(line.cost or 0.0 for line in self.idle_lines)

    @property
    def missing_prices(self) -> list[str]:
        return sorted({line.price_key for line in self.lines + self.idle_lines if line.unit_price is None})

    @property
    def storage_per_month(self) -> float:
        price = next((line.unit_price for line in self.lines if line.price_key == "oss_gib_month"), None)
        return (price or 0.0) * sum(self.storage_gib.values())

    def as_output(self) -> dict[str, Any]:
        """Plain numbers for the stack output and plan.json."""
        r = lambda x: round(x, 2)
        return {
            "estimate": True,
            "currency": self.currency,
            "total": r(self.total),
            "idle_per_hour": r(self.idle_per_hour),
            "idle_per_day": r(self.idle_per_hour * 24),
            "idle_per_month": r(self.idle_per_hour * HOURS_PER_MONTH),
            "storage_total_gib": r(sum(self.storage_gib.values())),
            "storage_per_month": r(self.storage_per_month),
            "complete": not self.missing_prices,
            "missing_prices": self.missing_prices,
            "steps": self.steps,
            "validations": self.validations,
            "setup_minutes": r(self.timeline.setup_minutes),
            "training_minutes": r(self.training_minutes),
            "ttl_minutes": r(self.ttl_minutes),
            "run_hours": r(self.run_hours),
            "gpu_node_hours": r(self.gpu_node_hours),
            "system_node_hours": r(self.system_node_hours),
            "storage_gib": {k: r(v) for k, v in self.storage_gib.items()},
            "lines": {line.key: line.as_dict() for line in self.lines},
            "idle_lines": {line.key: line.as_dict() for line in self.idle_lines},
            "prices_source": self.prices_source,
            "timeline_source": self.timeline.source,
            "assumptions": self.assumptions,
        }


def training_steps(s: Settings) -> int:
    t = s.training
    if t.val_only:
        return 0  # verl validates once and returns before its first step (trainer/ppo/v1/trainer_base.py fit)
    if t.total_training_steps is not None:
        return t.total_training_steps
    rows = train_rows(s)
    return t.total_epochs * (rows // t.train_batch_size)  # verl's train dataloader drops the last partial batch


def validation_passes(s: Settings, steps: int) -> int:
    """verl validates before training (val_before_train), every test_freq steps and at the last step."""
    t = s.training
    return int(t.val_before_train or t.val_only) + (math.ceil(steps / t.test_freq) if t.test_freq > 0 else 0)


def checkpoints_kept(s: Settings, steps: int) -> int:
    t = s.training
    saves = math.ceil(steps / t.save_freq) if t.save_freq > 0 else 0
    return min(saves, t.max_actor_ckpt_to_keep) if t.max_actor_ckpt_to_keep else saves


def storage_gib(s: Settings, steps: int) -> dict[str, float]:
    params = preset_of(s).arch.params
    per_ckpt = params * sum(CHECKPOINT_BYTES_PER_PARAM[c] for c in s.training.save_contents)
    return {
        "dataset": s.latency.dataset_mib * 2**20 / GIB,
        "model": model_bytes(s) / GIB,
        "checkpoints": checkpoints_kept(s, steps) * per_ckpt / GIB,
    }


def _prices_source(s: Settings) -> str:
    given = {k for k, v in s.cost.prices.items() if DEFAULT_PRICES_USD.get(k) != v}
    if s.cost.prices_taken_on:
        return f"stack prices taken on {s.cost.prices_taken_on} (keys without an override use built-in defaults)"
    if given:
        return f"stack overrides {sorted(given)} (set cost.prices_taken_on) + built-in rough defaults"
    return "built-in rough USD list-price approximations (no date; not a quote)"


def estimate_cost(s: Settings, timeline: Timeline, queue_done_minutes: Optional[float] = None) -> CostEstimate:
    """`queue_done_minutes`: a sweep's, when its last queued variant is done (offline/report/queue_timeline.py); the
    stack is up, and its hourly lines bill, until then rather than for one run."""
    c, prices = s.cost, s.cost.prices
    steps = training_steps(s)
    vals = validation_passes(s, steps)
    training_min = (steps * c.seconds_per_step + vals * c.seconds_per_validation) / 60
    ttl_min = s.job.ttl_seconds_after_finished / 60
    run_min = timeline.setup_minutes + training_min + ttl_min if queue_done_minutes is None else queue_done_minutes
    H = run_min / 60
    g = s.gpu_pool
    lines: list[Line] = []
    idle: list[Line] = []

    def bill(key: str, item: str, unit: str, price_key: str, run_qty: float, idle_qty: Optional[float]) -> None:
        """A line of the run and, unless idle_qty is None, its counterpart per hour left up afterwards."""
        lines.append(Line(key, item, run_qty, unit, price_key, prices.get(price_key)))
        if idle_qty is not None:
            idle.append(Line(key, item, idle_qty, unit, price_key, prices.get(price_key)))

    month = 1 / HOURS_PER_MONTH  # GiB-months per GiB-hour
    assumptions = [  # the first RUN_ASSUMPTIONS describe the run; a platform's running cost drops them
        ESTIMATE_NOTE,
        f"{steps} training step(s) x {c.seconds_per_step:g} s + {vals} validation pass(es) x "
        f"{c.seconds_per_validation:g} s = {training_min:.1f} min",
        f"setup to the first step {timeline.setup_minutes:.1f} min ({timeline.source})",
        f"the finished Ray cluster stays {ttl_min:.1f} min (job.ttl_seconds_after_finished)",
        (f"the stack is up {run_min:.1f} min for the run; every hourly line bills for that time unless noted"
         if queue_done_minutes is None else
         f"the stack is up {run_min:.1f} min, until the last of its queued sweep variants is done (the shared "
         "platform section's queue); every hourly line bills for that time unless noted"),
    ]
    # Each stack of a pair bills what it owns (docs/stacks.md), so a pair's costs add up without counting anything
    # twice: the GPU nodes go to the stack that owns the GPU pool (gpu_pool.owner), the data to the experiment.
    gpu_hours = 0.0
    if s.kind == "platform" and not s.owns_gpu_pool():
        assumptions.append("platform stack: no GPU node (each experiment stack bills its own GPU pool)")
    elif s.kind == "experiment" and not s.owns_gpu_pool():
        assumptions.append("GPU nodes: the platform's pool (gpu_pool.owner: platform), billed in the platform's "
                           "estimate; this run only uses them")
    elif g.kind == "lingjun":
        gpu_hours = g.nodes * H
        bill("gpu_nodes", f"Lingjun GPU nodes ({g.nodes} x {g.gpu_model or 'GPU node'})", "node-hour",
             "lingjun_node_hour", gpu_hours, g.nodes)
        assumptions.append("Lingjun nodes are bought separately and bill while they exist, attached or not")
    else:
        ecs = g.ecs
        assert ecs is not None  # GpuPoolSettings guarantees the ecs section for kind=ecs
        itype = ecs.instance_types[0]
        gpu_min = run_min - timeline.gpu_pool_start_minutes + c.scale_down_minutes
        gpu_hours = g.nodes * gpu_min / 60
        # Left up, the autoscaler keeps min_nodes GPU nodes (0 by default: no GPU bill).
        bill("gpu_nodes", f"ECS GPU nodes ({g.nodes} x {itype}; {ecs.min_nodes} when idle)", "node-hour", itype,
             gpu_hours, ecs.min_nodes)
        bill("gpu_disks", f"ECS GPU system disks ({ecs.system_disk_gib} GiB each)", "GiB-month", "disk_gib_month",
             ecs.system_disk_gib * gpu_hours * month, ecs.min_nodes * ecs.system_disk_gib * month)
        assumptions.append(
            f"ECS GPU nodes bill from their start ({timeline.gpu_pool_start_minutes:.1f} min: pool creation, or the "
            f"autoscaler's scale-up when min_nodes < nodes) until "
            f"{c.scale_down_minutes:g} min after the run (autoscaler scale-down), priced as {itype}")
    sys_hours = s.system_pool.nodes * H if s.kind != "experiment" else 0.0
    if s.kind == "experiment":
        assumptions.append("experiment stack: the cluster, system pool, NAT, ALB and MLflow are the platform's and "
                           "billed there; this estimate counts " + ("the GPU pool and " if s.owns_gpu_pool() else "")
                           + "the experiment's OSS data")
    else:
        _bill_shared_services(s, H, sys_hours, month, bill, assumptions)
    # The experiments' data and checkpoints are theirs: a platform's estimate counts no OSS data of its own.
    store = storage_gib(s, steps) if s.kind != "platform" else {}
    total_gib = sum(store.values())
    bill("oss", f"OSS storage ({total_gib:.1f} GiB)", "GiB-month", "oss_gib_month", total_gib * H * month,
         total_gib * month)
    assumptions.append(
        f"OSS holds the dataset, the bf16 model and {checkpoints_kept(s, steps)} checkpoint(s) of "
        f"{'+'.join(s.training.save_contents)} ({sum(CHECKPOINT_BYTES_PER_PARAM[x] for x in s.training.save_contents)}"
        " bytes/parameter)")
    return CostEstimate(
        currency=c.currency, prices_source=_prices_source(s), steps=steps, validations=vals,
        checkpoints_kept=checkpoints_kept(s, steps), timeline=timeline, training_minutes=training_min,
        ttl_minutes=ttl_min, run_hours=H, gpu_node_hours=gpu_hours, system_node_hours=sys_hours,
        storage_gib=store, lines=lines, idle_lines=idle, assumptions=assumptions)


def _bill_shared_services(s: Settings, H: float, sys_hours: float, month: float, bill, assumptions: list[str]) -> None:
    """The lines of what a single or platform stack owns besides the GPU pool: the system pool, the sandbox pool,
    the cluster's fee, the new VPC's NAT, the sandbox ALB and the MLflow disk."""
    c, sp = s.cost, s.system_pool
    sys_type = sp.instance_types[0]
    bill("system_nodes", f"system pool ({sp.nodes} x {sys_type})", "node-hour", sys_type, sys_hours, sp.nodes)
    bill("system_disks", f"system pool disks ({sp.nodes} x {sp.system_disk_gib} GiB)", "GiB-month", "disk_gib_month",
         sp.system_disk_gib * sys_hours * month, sp.nodes * sp.system_disk_gib * month)
    assumptions.append(f"system pool priced as its first instance type {sys_type}")
    dp = s.sandbox.dedicated_pool if s.sandbox.enabled else None
    if dp is not None:
        # The sandboxes' own tainted pool bills like the system pool: fixed size, pay-as-you-go, while the stack is up.
        sb_type, sb_hours = dp.instance_types[0], dp.nodes * H
        bill("sandbox_nodes", f"sandbox pool ({dp.nodes} x {sb_type})", "node-hour", sb_type, sb_hours, dp.nodes)
        bill("sandbox_disks", f"sandbox pool disks ({dp.nodes} x {dp.system_disk_gib} GiB)", "GiB-month",
             "disk_gib_month", dp.system_disk_gib * sb_hours * month, dp.nodes * dp.system_disk_gib * month)
        assumptions.append(f"sandbox pool (sandbox.dedicated_pool) priced as its first instance type {sb_type}")
    if s.cluster.mode == "new":
        spec = s.cluster.cluster_spec
        bill("ack_fee", f"ACK Pro management fee ({spec})", "hour", spec, H, 1)
        if s.cluster.network.vpc_id is None:
            bill("nat", "NAT gateway", "hour", "nat_gateway_hour", H, 1)
            bill("eip", "NAT EIP holding fee", "hour", "eip_hour", H, 1)
            bill("eip_egress", "NAT EIP outbound traffic", "GiB", "eip_egress_gib", c.egress_gib, None)
            assumptions.append(f"{c.egress_gib:g} GiB outbound internet traffic; downloads are inbound (not billed)")
    else:
        assumptions.append("existing cluster: its management fee, NAT and other nodes are not counted")
    if s.sandbox.enabled and s.sandbox.domain:
        bill("alb", "ALB instance (sandbox domain)", "hour", "alb_hour", H, 1)
        bill("alb_lcu", f"ALB capacity units ({c.alb_lcus:g} LCU)", "LCU-hour", "alb_lcu_hour", c.alb_lcus * H,
             c.alb_lcus)
    if s.tracking.enabled:
        bill("tracking_disk", f"MLflow backend disk ({s.tracking.disk_gib} GiB)", "GiB-month", "disk_gib_month",
             s.tracking.disk_gib * H * month, s.tracking.disk_gib * month)


HOURS_PER_DAY = 24
GPU_LINES = ("gpu_nodes", "gpu_disks")  # the GPU pool's lines; the rest of a platform's are its shared services
BUSY_PERCENT = (0, 25, 50, 100)  # how much of the time experiments keep a platform's GPU pool busy


def _r(x: Optional[float], n: int = 2) -> Optional[float]:
    return None if x is None else round(x, n)


def gpu_idle_cost(s: Settings, cp: CriticalPath) -> Optional[dict[str, Any]]:
    """The GPU nodes' minutes from GPU pool ready to the first step, in money: the largest avoidable cost of a
    run. `avoidable` is the part beyond the job's own start from an in-region image (`own_start_minutes`)."""
    if cp.gpu_idle_minutes is None or not s.owns_gpu_pool():
        return None
    key, price = gpu_price(s)
    own = own_start_minutes(s, cp)
    idle, avoidable = cp.gpu_idle_minutes, max(0.0, cp.gpu_idle_minutes - own)
    node_hours = lambda minutes: s.gpu_pool.nodes * minutes / 60
    return {"minutes": _r(idle), "nodes": s.gpu_pool.nodes, "price_key": key, "unit_price": price,
            "cost": _r(None if price is None else node_hours(idle) * price),
            "own_start_minutes": _r(own), "avoidable_minutes": _r(avoidable),
            "avoidable_cost": _r(None if price is None else node_hours(avoidable) * price)}


def run_hold_minutes(s: Settings, cp: CriticalPath, est: CostEstimate) -> float:
    """Minutes one run holds the platform's GPU nodes: from its Ray pods' start (an autoscaled ECS pool: the nodes'
    boot) through training and the finished cluster's TTL (and the scale-down of an autoscaled pool)."""
    autoscaled = gpu_pool_autoscales(s)
    held_from = cp.gpu_pool_start_minutes if autoscaled else cp.pods_start_minutes
    minutes = cp.first_step_minutes - held_from + est.training_minutes + est.ttl_minutes
    return minutes + (s.cost.scale_down_minutes if autoscaled else 0.0)


def platform_gpu_use(s: Settings, cp: CriticalPath, est: CostEstimate, platform) -> dict[str, Any]:
    """An experiment on the platform's GPU pool: the GPU time its Ray pods hold and what that costs, billed to the
    platform. A fixed pool (Lingjun, or ECS at min_nodes = nodes) bills the platform anyway: this is the run's
    share of that bill. An autoscaled ECS pool boots nodes for the job: the platform's bill grows by this."""
    ps = platform.settings if platform is not None else s
    key, price = gpu_price(ps)
    autoscaled = gpu_pool_autoscales(s)
    held_from = cp.gpu_pool_start_minutes if autoscaled else cp.pods_start_minutes
    # a sweep queues one RayJob per variant on the same pool: each holds it for its own run (the variant table of
    # the sharing section shows the same per-variant figures)
    held = [run_hold_minutes(v.settings, cp, estimate_cost(v.settings, cp.timeline())) for v in variants(s)] \
        or [run_hold_minutes(s, cp, est)]
    runs, minutes = len(held), sum(held) / len(held)
    node_hours = s.gpu_pool.nodes * sum(held) / 60
    gpus = node_hours * s.gpu_pool.gpus_per_node
    return {"billed_to": s.platform_stack, "platform_stack": platform.stack if platform is not None else None,
            "nodes": s.gpu_pool.nodes, "gpus": s.gpu_pool.nodes * s.gpu_pool.gpus_per_node, "runs": runs,
            "minutes": _r(minutes), "before_first_step_minutes": _r(cp.first_step_minutes - held_from),
            "node_hours": _r(node_hours, 3), "gpu_hours": _r(gpus, 2), "price_key": key, "unit_price": price,
            "cost": _r(None if price is None else node_hours * price), "adds_to_platform_bill": autoscaled,
            "run_total_with_gpu": _r(est.total + (node_hours * price if price is not None else 0.0))}


def platform_running_cost(s: Settings, est: CostEstimate) -> dict[str, Any]:
    """What a platform costs per hour, day and month while it lives, split into its shared services (always on)
    and its GPU pool (used by experiments while they run, idle otherwise); no training run is assumed."""
    cur = est.currency

    def group(keys) -> dict[str, Any]:
        hour = sum(ln.cost or 0.0 for ln in est.idle_lines if ln.key in keys)
        return {"lines": [ln.key for ln in est.idle_lines if ln.key in keys], "per_hour": _r(hour),
                "per_day": _r(hour * HOURS_PER_DAY), "per_month": _r(hour * HOURS_PER_MONTH)}

    gpu_keys = set(GPU_LINES) if s.owns_gpu_pool() else set()
    services = group({ln.key for ln in est.idle_lines} - gpu_keys)
    gpu = group(gpu_keys)
    total = group({ln.key for ln in est.idle_lines})
    scaled = None
    if s.owns_gpu_pool() and gpu_pool_autoscales(s):
        key, price = gpu_price(s)
        extra = s.gpu_pool.nodes - s.gpu_pool.ecs.min_nodes  # type: ignore[union-attr]  # autoscales: an ECS pool
        scaled = {"nodes": extra, "price_key": key, "unit_price": price,
                  "per_hour": _r(None if price is None else extra * price)}
    busy = [] if not gpu_keys or scaled else [
        {"busy_percent": b, "idle_per_month": _r((100 - b) / 100 * (gpu["per_month"] or 0.0))} for b in BUSY_PERCENT]
    egress = next((ln.unit_price for ln in est.lines if ln.key == "eip_egress"), None)
    return {"estimate": True, "currency": cur, "prices_source": est.prices_source, "complete": not est.missing_prices,
            "missing_prices": est.missing_prices, "hours_per_month": HOURS_PER_MONTH,
            "owns_gpu_pool": s.owns_gpu_pool(), "total": total, "services": services, "gpu_pool": gpu,
            "gpu_nodes_while_used": scaled, "gpu_idle_by_busy_share": busy, "egress_per_gib": egress,
            # The bucket's data is the experiments' (a platform's estimate counts none): no empty OSS line.
            "hourly_lines": {ln.key: ln.as_dict() for ln in est.idle_lines if ln.key != "oss" or ln.quantity},
            "assumptions": [ESTIMATE_NOTE, f"a month is {HOURS_PER_MONTH} h (8760 / 12), a day 24 h",
                            *[a for a in est.assumptions[RUN_ASSUMPTIONS:] if "OSS holds" not in a]]}


def run_and_month(data: dict[str, Any]) -> tuple[Optional[float], Optional[float]]:
    """(cost of one run, cost per month left up) of a cost section's data: a run includes the GPU time it uses of
    its platform's pool; a platform has no run, its month is while it lives."""
    if isinstance(data.get("total"), dict):
        return None, data["total"].get("per_month")
    use = data.get("platform_gpu_use") or {}
    return use.get("run_total_with_gpu", data.get("total")), data.get("idle_per_month")


def budget_status(s: Settings, data: dict[str, Any]) -> dict[str, Any]:
    """The stack's budgets (cost.budget_per_run / budget_per_month) and each one the estimate goes over."""
    run, month = run_and_month(data)
    cur, c = data["currency"], s.cost
    over = []
    if c.budget_per_run is not None and run is not None and run > c.budget_per_run:
        over.append(f"a run costs {run:,.2f} {cur}, over cost.budget_per_run {c.budget_per_run:,.2f} {cur}")
    if c.budget_per_month is not None and month is not None and month > c.budget_per_month:
        over.append(f"left up it costs {month:,.2f} {cur} per month, over cost.budget_per_month "
                    f"{c.budget_per_month:,.2f} {cur}")
    return {"per_run": c.budget_per_run, "per_month": c.budget_per_month, "over": over}


def cost_section(s: Settings, recording) -> Section:
    cp = plan_critical_path(recording, s)
    est = estimate_cost(s, cp.timeline())
    if s.kind != "platform" and s.training.sweep is not None:  # up until the queue's last variant is done
        runs, _, _ = modelled_queue(s, cp.pods_start_minutes, getattr(recording, "platform", None),
                                    lambda vs: run_hold_minutes(vs, cp, estimate_cost(vs, cp.timeline())))
        est = estimate_cost(s, cp.timeline(), max(r.end_minutes for r in runs))
    if s.kind == "platform":
        data = platform_running_cost(s, est)
        data["budget"] = budget_status(s, data)
        return Section("cost", "Cost (ESTIMATE)", _over_budget(data) + platform_markdown(data), data)
    data = est.as_output()
    data["gpu_idle_before_first_step"] = gpu_idle_cost(s, cp)
    if s.kind == "experiment" and not s.owns_gpu_pool():
        data["platform_gpu_use"] = platform_gpu_use(s, cp, est, getattr(recording, "platform", None))
    data["budget"] = budget_status(s, data)
    return Section("cost", "Cost (ESTIMATE)", _over_budget(data) + run_markdown(data), data)


def _over_budget(data: dict[str, Any]) -> str:
    return "".join(f"- **warning: over budget**: {o}\n" for o in data["budget"]["over"]) + (
        "\n" if data["budget"]["over"] else "")
