"""The figures the docs quote from the offline plans, generated from the plans themselves, never typed.

    python -m offline.report.docs_figures          # rewrite the generated parts of the pages below
    python -m offline.report.docs_figures --check  # exit 1 if a page differs from what the plans say now

A page marks a generated table with `<!-- generated:NAME -->` ... `<!-- /generated -->` and an inline figure with
`<!-- fig:NAME -->...<!-- /fig -->`; tests/test_docs.py fails when a committed page differs from the generated
one, so a change to the program that moves a figure also moves the docs. Plan and benchmark times are not figures
of this kind: they depend on the machine, `make bench` prints them, and no doc or test states them.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from components.config import STACKS_DIR
from offline.plan import build_plan

REPO = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/estimates.md", "docs/latency.md", "docs/stacks.md"]
FIG = re.compile(r"<!-- fig:(?P<name>[\w.-]+) -->(?P<body>.*?)<!-- /fig -->", re.S)
BLOCK = re.compile(r"<!-- generated:(?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- /generated -->", re.S)
PAIR = ("dev-platform", "dev-grpo")


def render_plans() -> dict[str, dict]:
    """plan.json of every stack file in stacks/, rendered as `plan.py` renders it."""
    plans = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(STACKS_DIR.glob("Pulumi.*.yaml")):
            stack = path.name[len("Pulumi."):-len(".yaml")]
            plans[stack] = build_plan(path, stack, Path(tmp) / stack)
    return plans


def _min(x: float | None) -> str:
    return "" if x is None else f"{x:.1f} min"


def _usd(x: float | None, cur: str = "USD") -> str:
    return "no price" if x is None else f"{x:,.2f} {cur}"


def stack_row(stack: str, plan: dict[str, Any]) -> str:
    lat, cost = plan["sections"]["latency"], plan["sections"]["cost"]
    if "hourly_lines" in cost:  # a platform: no run, its cost while it lives
        t, gpu = cost["total"], cost["gpu_pool"]
        return (f"| `{stack}` (platform) | (no job) | | {_min(lat['graph_minutes'])} | {_min(lat['serial_minutes'])} | "
                f"| | {_usd(t['per_hour'])} per hour, {_usd(t['per_month'])} per month (GPU pool "
                f"{_usd(gpu['per_month'])} of it) | | (the experiments') |")
    pull = lat["image_pull"]
    how = ("already on the nodes (pre-pulled)" if pull["prepulled"] and pull["minutes"] == 0 else
           f"{pull['minutes']:.1f} min" + (" through the NAT" if pull["via_nat"] else " in-region")
           + ("" if pull["on_critical_path"] else ", off the critical path"))
    gi, use = cost.get("gpu_idle_before_first_step"), cost.get("platform_gpu_use")
    idle = (f"{_min(gi['minutes'])} = {_usd(gi['cost'])} ({_min(gi['avoidable_minutes'])} avoidable)" if gi else
            f"{_min(use['before_first_step_minutes'])} held before step 1 (of the platform's pool)" if use else "")
    billed = _usd(cost["total"])
    if use:
        billed += (f"; GPU time on the platform's pool {use['node_hours']:.3f} node-hours = {_usd(use['cost'])}, "
                   "billed to the platform")
    return (f"| `{stack}` | {_min(lat['first_step_minutes'])} | {repeat_cell(lat)} | {_min(lat['graph_minutes'])} | "
            f"{_min(lat['serial_minutes'])} | {idle} | {how} | {billed} | {_usd(cost['idle_per_hour'])} | "
            f"{verdict(lat)} |")


def repeat_cell(lat: dict[str, Any]) -> str:
    staging = lat.get("staging")
    return _min(staging["repeat_first_step_minutes"]) if staging else ""


def verdict(lat: dict[str, Any]) -> str:
    """The plan's own verdict on its targets: met, met with accepted exceptions, or not met."""
    targets = lat.get("targets") or []
    if not targets:
        return "(no job)"
    if not lat["meets_targets"]:
        return "**NOT met**"
    accepted = [t["key"] for t in targets if t["status"] == "exception"]
    return "met" + (f" ({len(accepted)} accepted exception{'s' if len(accepted) > 1 else ''})" if accepted else "")


def plans_table(plans: dict[str, dict]) -> str:
    head = ["| stack | first step | repeat (model and dataset staged before) | `pulumi up` returns | serial sum | "
            "GPU idle before step 1 | image pull | billed to the stack for the run (a platform: while it lives) | "
            "left up after the job, per hour | targets |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    return "\n".join(head + [stack_row(s, p) for s, p in plans.items()]) + "\n"


def targets_table(plans: dict[str, dict]) -> str:
    """Every plan's targets as the plan states them (offline/report/latency/targets.py), one row per target."""
    lines = ["| stack | target | modelled | |", "|---|---|---|---|"]
    for stack, plan in plans.items():
        for tg in plan["sections"]["latency"].get("targets") or []:
            status = {"met": "met", "not met": "**NOT met**"}.get(tg["status"], f"exception: {tg['exception']}")
            lines.append(f"| `{stack}` | {tg['target']} | {tg['value']} | {status} |")
    split = plans[PAIR[1]]["sections"]["latency"]["split"]
    lines.append(f"| `{PAIR[0]}` then `{PAIR[1]}` | (platform `pulumi up`, then the experiment's) | "
                 f"{_min(split['sequential_first_step_minutes'])} | |")
    return "\n".join(lines) + "\n"


def warm_table(plans: dict[str, dict]) -> str:
    """The two warm cases of the pair's experiment, step by step (first use of the model vs a repeat)."""
    lat = plans[PAIR[1]]["sections"]["latency"]
    staging = lat["staging"]
    rows = [("first use (this `up` stages the model and dataset)", lat["first_step_minutes"], lat["path"]),
            ("repeat (the same model revision and dataset staged before: no staging Job)",
             staging["repeat_first_step_minutes"], staging["repeat_path"])]
    lines = [f"| `{PAIR[1]}` on a warm `{PAIR[0]}` | first step | critical path (minutes) |", "|---|---|---|"]
    for name, minutes, path in rows:
        steps = " + ".join(f"{st['minutes']:.2f} {st['name']}" for st in path)
        lines.append(f"| {name} | {_min(minutes)} | {steps} |")
    for cut in staging["further_cuts"]:
        lines.append(f"| repeat with {cut['cut']} (modelled, not done: {cut['cost']}) | "
                     f"{_min(cut['first_step_minutes'])} | {cut['saves_minutes']:.2f} min less |")
    return "\n".join(lines) + "\n"


def figures(plans: dict[str, dict]) -> dict[str, str]:
    split = plans[PAIR[1]]["sections"]["latency"]["split"]
    return {
        "plans": plans_table(plans),
        "targets": targets_table(plans),
        "platform-up": _min(plans[PAIR[0]]["sections"]["latency"]["graph_minutes"]),
        "pair-fresh": _min(split["fresh_first_step_minutes"]),
        "pair-warm": _min(split["warm_first_step_minutes"]),
        "pair-repeat": _min(plans[PAIR[1]]["sections"]["latency"]["staging"]["repeat_first_step_minutes"]),
        "warm-cases": warm_table(plans),
        "platform-month": _usd(plans[PAIR[0]]["sections"]["cost"]["total"]["per_month"]),
        "dev-resources": str(plans["dev"]["counts"]["resources"]),
        "multinode-pull": _min(plans["multinode"]["sections"]["latency"]["phases"]["image pull"]),
        "multinode-first-step": _min(plans["multinode"]["sections"]["latency"]["first_step_minutes"]),
        "multinode-repeat": _min(plans["multinode"]["sections"]["latency"]["staging"]["repeat_first_step_minutes"]),
        **prefetch_figures(plans[PAIR[1]]),
    }


def prefetch_figures(plan: dict[str, Any]) -> dict[str, str]:
    """What the model prefetch moves on the experiment's repeat: its OSS read, the phases it overlaps, the repeat
    without it (the same path with verl reading OSS) and the copy's size in each Ray pod."""
    lat = plan["sections"]["latency"]
    read, phases = lat["model_read"], lat["phases"]
    without = lat["staging"]["repeat_first_step_minutes"] + read["oss_read_minutes"] - read["minutes"]
    return {
        "pair-model-oss-read": f"{read['oss_read_minutes']:.2f} min",
        "pair-prefetch-window": _min(phases["Ray cluster start"] + phases["RayJob submission"]),
        "pair-repeat-no-prefetch": _min(without),
        "pair-copy-gib": f"{plan['sections']['layout']['layout']['model_copy_gib']} GiB",
    }


def regenerate(text: str, figs: dict[str, str]) -> str:
    def fill(m: re.Match, block: bool) -> str:
        name = m.group("name")
        if name not in figs:
            raise KeyError(f"no generated figure {name!r}; known: {sorted(figs)}")
        return (f"<!-- generated:{name} -->\n{figs[name]}<!-- /generated -->" if block
                else f"<!-- fig:{name} -->{figs[name]}<!-- /fig -->")

    text = BLOCK.sub(lambda m: fill(m, True), text)
    return FIG.sub(lambda m: fill(m, False), text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only report pages that differ")
    args = ap.parse_args(argv)
    figs = figures(render_plans())
    stale = []
    for page in PAGES:
        path = REPO / page
        text = path.read_text()
        new = regenerate(text, figs)
        if new != text:
            stale.append(page)
            if not args.check:
                path.write_text(new)
    verb = "differ from the plans" if args.check else "rewritten"
    print(f"{len(stale)} page(s) {verb}: {', '.join(stale) or 'none'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
