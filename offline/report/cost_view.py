"""plan.md's cost section, rendered only from the plain data that plan.json holds (offline/report/cost.py builds
it), so the two never disagree: every figure printed here is a value of `sections.cost`."""

from __future__ import annotations

from typing import Any, Optional


def _runs(use: dict) -> str:
    """"4 runs x " for a sweep's queued variants; nothing for one run."""
    return f"{use['runs']} runs x " if use.get("runs", 1) > 1 else ""

def money(x: Optional[float], cur: str) -> str:
    return "no price" if x is None else f"{x:,.2f} {cur}"


def price(x: Optional[float], cur: str) -> str:
    return "no price" if x is None else f"{x:g} {cur}"


def _line_rows(lines: dict[str, dict], cur: str, with_price: bool) -> list[str]:
    rows = []
    for ln in lines.values():
        unit_price = f" | {price(ln['unit_price'], cur)} (`{ln['price_key']}`)" if with_price else ""
        rows.append(f"| {ln['item']} | {ln['quantity']:.3f} {ln['unit']}{unit_price} | {money(ln['cost'], cur)} |")
    return rows


def _tail(d: dict[str, Any]) -> list[str]:
    md = ["", "Assumptions:", ""] + [f"- {a}" for a in d["assumptions"]]
    if d["missing_prices"]:
        md += ["", f"- **incomplete**: no price for {d['missing_prices']}; add them to `cost.prices`."]
    return md


def _head(d: dict[str, Any]) -> str:
    return (f"**{d['assumptions'][0]}** Prices: {d['prices_source']}. Computed from the recorded resource graph; the "
            "program exports no estimate of its own, so there is one figure to trust.")


def run_markdown(d: dict[str, Any]) -> str:
    """A single or experiment stack: the run, what it leaves billing, its idle GPU time and (on a platform's GPU
    pool) the GPU time it uses of the platform's bill."""
    cur = d["currency"]
    idle = d["idle_per_hour"]
    md = [_head(d), "",
          f"**Billed to this stack for the run: {money(d['total'], cur)}** over {d['run_hours']:.2f} h "
          f"({d['gpu_node_hours']:.2f} GPU node-hours billed here). **Left up after the job: {money(idle, cur)} per "
          f"hour** ({money(d['idle_per_day'], cur)} per day, {money(d['idle_per_month'], cur)} per month). Data kept "
          f"in OSS: {d['storage_total_gib']:.1f} GiB, {money(d['storage_per_month'], cur)} per month.", ""]
    use = d.get("platform_gpu_use")
    if use:
        grows = ("the platform's autoscaled pool boots these nodes for this job, so its bill grows by this"
                 if use["adds_to_platform_bill"] else
                 "the platform pays its pool whether or not a job runs: this is this run's share of that bill")
        md += [f"**GPU time used on the platform's pool: {use['node_hours']:.3f} node-hours ({use['gpu_hours']:.2f} "
               f"GPU-hours, {_runs(use)}{use['nodes']} node(s) x {use['minutes']:.1f} min, of which "
               f"{use['before_first_step_minutes']:.1f} min before the first step) = {money(use['cost'], cur)} at "
               f"{price(use['unit_price'], cur)} per node-hour (`{use['price_key']}`), billed to the platform stack "
               f"`{use['billed_to']}`** ({grows}). The run{'s' if use.get('runs', 1) > 1 else ''} including it: "
               f"{money(use['run_total_with_gpu'], cur)}.", ""]
    gi = d.get("gpu_idle_before_first_step")
    if gi:
        md += [f"**GPU idle before the first step: {gi['minutes']:.1f} min x {gi['nodes']} node(s) = "
               f"{money(gi['cost'], cur)}**, of which {gi['avoidable_minutes']:.1f} min = "
               f"{money(gi['avoidable_cost'], cur)} is avoidable: the nodes wait beyond the job's own "
               f"{gi['own_start_minutes']:.1f} min start (an in-region image pull, Ray, submission, verl init and the "
               "model read); the time section shows what they wait on.", ""]
    md += ["| run line | quantity | unit price | cost |", "|---|---|---|---|"]
    md += _line_rows(d["lines"], cur, with_price=True)
    md += ["", "| left up after the job (per hour) | quantity | cost per hour |", "|---|---|---|"]
    md += _line_rows(d["idle_lines"], cur, with_price=False)
    return "\n".join(md + _tail(d))


def platform_markdown(d: dict[str, Any]) -> str:
    """A platform stack: its cost per hour, day and month while it lives, split into the shared services and the
    GPU pool experiments use (idle when none runs). A platform runs no training, so it has no run total."""
    cur = d["currency"]

    def row(label: str, g: dict) -> str:
        return (f"| {label} | {money(g['per_hour'], cur)} | {money(g['per_day'], cur)} | "
                f"{money(g['per_month'], cur)} |")

    t, gpu = d["total"], d["gpu_pool"]
    md = [_head(d), "",
          f"**While the platform lives: {money(t['per_hour'], cur)} per hour, {money(t['per_day'], cur)} per day, "
          f"{money(t['per_month'], cur)} per month** ({d['hours_per_month']} h). A platform runs no training of its "
          "own: each experiment's plan shows the GPU time it uses and its cost.", "",
          "| while it lives | per hour | per day | per month |", "|---|---|---|---|",
          row("shared services (cluster, system pool, network, ALB, MLflow): always on, used by every experiment",
              d["services"])]
    if d["owns_gpu_pool"]:
        md.append(row("GPU pool: billed while it exists; experiments use it while they run, it idles otherwise", gpu))
    md.append(row("**total**", t))
    scaled = d["gpu_nodes_while_used"]
    if scaled:
        md += ["", f"The GPU pool scales: {scaled['nodes']} node(s) above `min_nodes` bill only while experiments "
               f"run, {money(scaled['per_hour'], cur)} per hour of use (`{scaled['price_key']}`), on top of the above."]
    elif d["gpu_idle_by_busy_share"]:
        md += ["", "| experiments keep the GPU pool busy | GPU pool idle cost per month |", "|---|---|"]
        md += [f"| {b['busy_percent']}% of the time | {money(b['idle_per_month'], cur)} |"
               for b in d["gpu_idle_by_busy_share"]]
    elif not d["owns_gpu_pool"]:
        md += ["", "No GPU pool: each experiment stack creates and bills its own (`gpu_pool.owner: experiment`)."]
    if d["egress_per_gib"] is not None:
        md += ["", f"Plus outbound internet traffic through the NAT EIP at {price(d['egress_per_gib'], cur)} per GiB."]
    md += ["", "| line (per hour while it lives) | quantity | cost per hour |", "|---|---|---|"]
    md += _line_rows(d["hourly_lines"], cur, with_price=False)
    return "\n".join(md + _tail(d))
