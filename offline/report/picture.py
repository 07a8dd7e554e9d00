"""Pictures of a plan a person would rather look at than a 90-node dependency graph: the critical path to the first
training step as a timeline (Gantt) and the cost as a breakdown.

Both are drawn only from plan.json's `sections.latency` and `sections.cost` (the numbers plan.md prints), as a
mermaid gantt + pie in plan.md and as `plan.svg` beside it (pure Python, no plotting library). Every SVG bar
carries its figure in a `data-*` attribute and its geometry follows from the root's `data-minute-px` and
`data-usd-px`, so a test can hold the picture to the model's numbers.
"""

from __future__ import annotations

import re
from typing import Any, Optional
from xml.sax.saxutils import escape

WIDTH = 960
VALUE_COLUMN = 110  # right of the longest bar: its value label
MAX_LEFT = 420  # the label column grows to its longest label up to this; longer labels are shortened
ROW = 22
# A text's width is not known without a font; 0.6 em per character (7.2 px at font-size 12) is above the average
# advance of sans-serif fonts (Arial/Helvetica ~0.5 em), so text placed by it stays inside the picture.
CHAR_PX = 7.2
COLOURS = {"ack_cluster": "#4e79a7", "gpu_node_pool": "#e15759", "gpu_scale_up": "#e15759", "image_pull": "#f28e2b",
           "prepull": "#f28e2b", "training_phase": "#59a14f", "model_job": "#b07aa1", "dataset_job": "#b07aa1"}
OTHER = "#9c9c9c"


def _label(text: str) -> str:
    """A task or slice name mermaid reads literally: no ':', '#', ';' or quotes (its separators)."""
    return re.sub(r"[:#;\"]", " ", text).strip()


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def text_px(text: str) -> float:
    """Width a line of font-size 12 text takes at most (CHAR_PX per character)."""
    return len(text) * CHAR_PX


def label_column(labels: list[str]) -> float:
    """x where the bars start: past the longest row label and a gap, at most MAX_LEFT."""
    return min(MAX_LEFT, 10 + max((text_px(s) for s in labels), default=0.0) + 14)


def inside(x: float, text: str) -> float:
    """`x` moved left as far as needed for `text` to end inside the picture (a caption beside a late bar)."""
    return max(10.0, min(x, WIDTH - 10 - text_px(text)))


def _clock(minutes: float) -> str:
    seconds = round(minutes * 60)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def cost_items(cost: dict[str, Any]) -> tuple[str, list[tuple[str, str, float]]]:
    """(title, [(key, item, cost)]) of the breakdown: a run's lines (and the GPU time it uses of its platform's
    pool), or a platform's lines per hour while it lives. Lines with no price or no cost are left out."""
    cur = cost["currency"]
    if "hourly_lines" in cost:
        title = f"Platform cost per hour while it lives: {cost['total']['per_hour']:,.2f} {cur}"
        lines = cost["hourly_lines"]
    else:
        title, lines = f"Run cost billed to this stack: {cost['total']:,.2f} {cur}", cost["lines"]
    items = [(k, ln["item"], ln["cost"]) for k, ln in lines.items() if ln["cost"]]
    use = cost.get("platform_gpu_use")
    if use and use["cost"]:
        title += f"; with the GPU time it uses of the platform's pool: {use['run_total_with_gpu']:,.2f} {cur}"
        items.append(("platform_gpu_use", "GPU time used (platform's bill)", use["cost"]))
    return title, sorted(items, key=lambda x: -x[2])


def mermaid_gantt(latency: dict[str, Any], cost: dict[str, Any]) -> Optional[str]:
    """The critical path as a mermaid gantt (clock = time from the start of `pulumi up`; each task `start, end` in
    `dateFormat HH:mm:ss`, the form mermaid's gantt syntax documents); None without a path."""
    path = latency.get("path")
    if not path:
        return None
    lines = ["gantt", "  title Critical path to the first training step (modelled; clock = time since pulumi up)",
             "  dateFormat HH:mm:ss", "  axisFormat %H:%M"]
    for i, st in enumerate(path):
        lines.append(f"  {_label(st['name'])} ({st['minutes']:.1f} min) :s{i}, {_clock(st['start'])}, "
                     f"{_clock(st['start'] + st['minutes'])}")
    ready, idle = latency.get("gpu_pool_ready_minutes"), latency.get("gpu_idle_minutes")
    gi = cost.get("gpu_idle_before_first_step") or {}
    if ready is not None and idle and gi.get("cost") is not None:
        lines.append(f"  GPU idle before the first step ({idle:.1f} min, {gi['cost']:.2f} {cost['currency']}) :crit, "
                     f"idle, {_clock(ready)}, {_clock(ready + idle)}")
    lines.append(f"  first training step ({latency['first_step_minutes']:.1f} min) :milestone, first, "
                 f"{_clock(latency['first_step_minutes'])}, {_clock(latency['first_step_minutes'])}")
    return "\n".join(lines)


def mermaid_pie(cost: dict[str, Any]) -> Optional[str]:
    title, items = cost_items(cost)
    if not items:
        return None
    return "\n".join([f"pie title {_label(title)}"] + [f'  "{_label(item)}" : {c:.2f}' for _, item, c in items])


def _sweep_queue(queue: dict[str, Any], y: float, left: float, plot: float) -> tuple[list[str], float, float]:
    """A sweep's modelled queue (plan.json sections.sharing.sweep.queue): one bar per variant from its admission to
    its end, a thin bar for its wait before it, on a scale of its own (`data-queue-minute-px` of the group)."""
    runs = queue["variants"]
    end = max([r["end_minutes"] for r in runs] + [1.0])
    px = plot / end
    head = (f"Sweep queue: {len(runs)} variants, {queue['at_once']} at a time on {queue['capacity_gpus']} GPUs; "
            f"the last is done at {queue['last_done_minutes']:.1f} min (modelled)")
    out = [f'<g class="sweep-queue" data-queue-minute-px="{px!r}" data-last-done="{queue["last_done_minutes"]}">',
           f'<text x="10" y="{y + 12:.1f}" font-size="12" font-weight="bold">{escape(head)}</text>']
    y += 22
    for r in runs:
        wait_x, x = left + (r["start_minutes"] - r["wait_minutes"]) * px, left + r["start_minutes"] * px
        name = f"variant {r['key']}"
        out.append(f'<text x="10" y="{y + 15:.1f}" font-size="12">{escape(name)}</text>')
        out.append(f'<rect class="queue-wait" x="{wait_x:.2f}" y="{y + 9}" width="{r["wait_minutes"] * px:.2f}" '
                   f'height="4" fill="#9c9c9c" data-key="{r["key"]}" data-minutes="{r["wait_minutes"]}"/>')
        width = (r["end_minutes"] - r["start_minutes"]) * px
        out.append(f'<rect class="queue-run" x="{x:.2f}" y="{y + 3}" width="{width:.2f}" height="{ROW - 6}" '
                   f'fill="#59a14f" data-key="{r["key"]}" data-start="{r["start_minutes"]}" '
                   f'data-end="{r["end_minutes"]}"/>')
        caption = f'{r["end_minutes"]:.1f} min'
        out.append(f'<text x="{inside(left + r["end_minutes"] * px + 4, caption):.1f}" y="{y + 15:.1f}" '
                   f'font-size="12">{caption}</text>')
        y += ROW
    out.append("</g>")
    return out, y + 10, px


def plan_svg(stack: str, latency: dict[str, Any], cost: dict[str, Any], queue: Optional[dict[str, Any]] = None) -> str:
    """plan.svg: the critical path as a Gantt chart (GPU idle shaded, first step marked) over the cost breakdown; a
    sweep's queue of variants between them."""
    out: list[str] = []
    y = 30
    path = latency.get("path") or []
    end = max([st["finish"] for st in path] + [latency.get("graph_minutes") or 0.0, 1.0])
    title, items = cost_items(cost)
    variants = [f"variant {r['key']}" for r in (queue or {}).get("variants", [])]
    left = label_column([st["name"] for st in path] + [item for _, item, _ in items] + variants)
    plot = WIDTH - left - VALUE_COLUMN
    fits = int((left - 24) / CHAR_PX)  # characters of a row label that end before the bars
    minute_px = plot / end
    usd_px = plot / max([c for _, _, c in items] + [1e-9])
    text = lambda x, yy, s, extra="": out.append(  # noqa: E731
        f'<text x="{x:.1f}" y="{yy:.1f}" font-size="12"{extra}>{escape(s)}</text>')
    out.append(f'<text x="10" y="18" font-size="15" font-weight="bold">{escape(f"verl-ack plan: stack {stack}")}'
               " (ESTIMATE)</text>")
    if path:
        first = latency["first_step_minutes"]
        text(10, y + 12, f"Critical path to the first training step: {first:.1f} min (modelled)", ' font-weight="bold"')
        y += 22
        top = y
        for st in path:
            x, w = left + st["start"] * minute_px, st["minutes"] * minute_px
            colour = COLOURS.get(st["kind"], OTHER)
            text(10, y + 15, _short(st["name"], fits))
            out.append(f'<rect class="step" x="{x:.2f}" y="{y + 3}" width="{max(w, 0.0):.2f}" height="{ROW - 6}" '
                       f'fill="{colour}" data-name="{escape(st["name"], {chr(34): "&quot;"})}" '
                       f'data-start="{st["start"]}" data-minutes="{st["minutes"]}" data-kind="{st["kind"]}"/>')
            text(x + max(w, 0.0) + 4, y + 15, f"{st['minutes']:.1f} min")
            y += ROW
        ready, idle = latency.get("gpu_pool_ready_minutes"), latency.get("gpu_idle_minutes")
        gi, use = cost.get("gpu_idle_before_first_step"), cost.get("platform_gpu_use")
        if use:  # the platform's nodes idle before this job; it holds them from its pods' start
            idle = use["before_first_step_minutes"]
            ready = first - idle
            out.append(f'<rect class="gpu-held" x="{left + ready * minute_px:.2f}" y="{top}" '
                       f'width="{idle * minute_px:.2f}" height="{y - top}" fill="#e15759" fill-opacity="0.12" '
                       f'data-start="{ready}" data-minutes="{idle}"/>')
            caption = f"GPU held by this job before the first step: {idle:.1f} min"
            text(inside(left + ready * minute_px + 4, caption), y + 14, caption, ' fill="#b0302f"')
        elif gi and ready is not None and idle:
            money = f" = {gi['cost']:,.2f} {cost['currency']}" if gi.get("cost") is not None else ""
            if gi.get("avoidable_cost") is not None:
                money += f" (avoidable: {gi['avoidable_minutes']:.1f} min = {gi['avoidable_cost']:,.2f} {cost['currency']})"
            out.append(f'<rect class="gpu-idle" x="{left + ready * minute_px:.2f}" y="{top}" '
                       f'width="{idle * minute_px:.2f}" height="{y - top}" fill="#e15759" fill-opacity="0.12" '
                       f'data-start="{ready}" data-minutes="{idle}"/>')
            caption = f"GPU idle before the first step: {idle:.1f} min{money}"
            text(inside(left + ready * minute_px + 4, caption), y + 14, caption, ' fill="#b0302f"')
        out.append(f'<line class="first-step" x1="{left + first * minute_px:.2f}" x2="{left + first * minute_px:.2f}" '
                   f'y1="{top - 4}" y2="{y + 4}" stroke="#222" stroke-dasharray="4 3" data-minutes="{first}"/>')
        text(left + first * minute_px - 4, top - 8, f"first step {first:.1f} min", ' text-anchor="end"')
        y += 24
        for tick in range(0, int(end) + 1, 10 if end > 30 else 5):
            text(left + tick * minute_px - 6, y + 6, f"{tick}", ' fill="#555"')
        text(left + plot + 4, y + 6, "min", ' fill="#555"')
        y += 26
    elif latency.get("graph_minutes") is not None:
        text(10, y + 12, f"pulumi up returns after {latency['graph_minutes']:.1f} min (modelled); this stack runs no "
                         "training of its own")
        y += 30
    if queue:
        lines, y, _ = _sweep_queue(queue, y, left, plot)
        out += lines
    if "hourly_lines" in cost:
        t, cur = cost["total"], cost["currency"]
        text(10, y + 12, f"While it lives: {t['per_day']:,.2f} {cur} per day, {t['per_month']:,.2f} {cur} per month; "
                         f"of which the GPU pool {cost['gpu_pool']['per_month']:,.2f} {cur} per month", ' fill="#b0302f"')
        y += 24
    text(10, y + 12, title, ' font-weight="bold"')
    y += 22
    for key, item, c in items:
        text(10, y + 15, _short(item, fits))
        out.append(f'<rect class="cost" x="{left}" y="{y + 3}" width="{c * usd_px:.2f}" height="{ROW - 6}" '
                   f'fill="{"#e15759" if "gpu" in key else "#4e79a7"}" data-key="{key}" data-cost="{c}"/>')
        text(left + c * usd_px + 4, y + 15, f"{c:,.2f} {cost['currency']}")
        y += ROW
    height = y + 16
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
            f'font-family="sans-serif" data-left="{left}" data-minute-px="{minute_px!r}" data-usd-px="{usd_px!r}">')
    return "\n".join([head, f'<rect width="{WIDTH}" height="{height}" fill="white"/>', *out, "</svg>"]) + "\n"
