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
from plan import build_plan

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
        return (f"| `{stack}` (platform) | (no job) | {_min(lat['graph_minutes'])} | {_min(lat['serial_minutes'])} | "
                f"| | {_usd(t['per_hour'])} per hour, {_usd(t['per_month'])} per month (GPU pool "
                f"{_usd(gpu['per_month'])} of it) | |")
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
    return (f"| `{stack}` | {_min(lat['first_step_minutes'])} | {_min(lat['graph_minutes'])} | "
            f"{_min(lat['serial_minutes'])} | {idle} | {how} | {billed} | {_usd(cost['idle_per_hour'])} |")


def plans_table(plans: dict[str, dict]) -> str:
    head = ["| stack | first step | `pulumi up` returns | serial sum | GPU idle before step 1 | image pull | "
            "billed to the stack for the run (a platform: while it lives) | left up after the job, per hour |",
            "|---|---|---|---|---|---|---|---|"]
    return "\n".join(head + [stack_row(s, p) for s, p in plans.items()]) + "\n"


def targets_table(plans: dict[str, dict]) -> str:
    split = plans[PAIR[1]]["sections"]["latency"]["split"]
    warm = plans[PAIR[1]]["sections"]["latency"]["path"]
    rows = [f"new platform + experiment: {_min(split['fresh_first_step_minutes'])} vs the chain's "
            f"{_min(split['chain_minutes'])} ({split['fresh_ratio']:.2f}x)",
            f"avoidable GPU idle: {_min(split['gpu_avoidable_idle_minutes'])} (GPU pool ready -> first step "
            f"{_min(split['gpu_idle_minutes'])})",
            f"experiment on a warm platform: {_min(split['warm_first_step_minutes'])}: "
            + " + ".join(f"{st['minutes']:.1f} {st['name']}" for st in warm)]
    lines = [f"| target | {PAIR[0]} + {PAIR[1]} (modelled) | |", "|---|---|---|"]
    for (target, met), row in zip(split["targets"].items(), rows, strict=True):
        lines.append(f"| {target} | {row} | {'met' if met else '**NOT met**'} |")
    lines.append(f"| (platform `pulumi up`, then the experiment's) | {_min(split['sequential_first_step_minutes'])} | |")
    return "\n".join(lines) + "\n"


def figures(plans: dict[str, dict]) -> dict[str, str]:
    split = plans[PAIR[1]]["sections"]["latency"]["split"]
    return {
        "plans": plans_table(plans),
        "targets": targets_table(plans),
        "platform-up": _min(plans[PAIR[0]]["sections"]["latency"]["graph_minutes"]),
        "pair-fresh": _min(split["fresh_first_step_minutes"]),
        "pair-warm": _min(split["warm_first_step_minutes"]),
        "platform-month": _usd(plans[PAIR[0]]["sections"]["cost"]["total"]["per_month"]),
        "dev-resources": str(plans["dev"]["counts"]["resources"]),
        "multinode-pull": _min(plans["multinode"]["sections"]["latency"]["phases"]["image pull"]),
        "multinode-first-step": _min(plans["multinode"]["sections"]["latency"]["first_step_minutes"]),
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
