"""The plan's pictures (plan.svg, the mermaid gantt and pie in plan.md) draw exactly the model's numbers."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from components.config import STACKS_DIR
from offline import plan as offline_plan

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module", params=["dev", "existing-ecs", "dev-grpo", "dev-platform"])
def rendered(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    offline_plan.build_plan(STACKS_DIR / f"Pulumi.{request.param}.yaml", request.param, out)
    data = json.loads((out / "plan.json").read_text())
    return data, ET.fromstring((out / "plan.svg").read_text()), (out / "plan.md").read_text()


def _rects(root, cls: str) -> list[dict]:
    return [r.attrib for r in root.iter(f"{SVG}rect") if r.get("class") == cls]


def test_each_timeline_bar_is_a_critical_path_step_placed_at_its_modelled_start_and_length(rendered):
    data, root, _ = rendered
    path = data["sections"]["latency"].get("path", [])
    bars = _rects(root, "step")
    assert [(b["data-name"], float(b["data-start"]), float(b["data-minutes"])) for b in bars] == [
        (st["name"], st["start"], st["minutes"]) for st in path]
    left, px = float(root.get("data-left")), float(root.get("data-minute-px"))
    for bar, st in zip(bars, path, strict=True):
        assert float(bar["x"]) == pytest.approx(left + st["start"] * px, abs=0.01)
        assert float(bar["width"]) == pytest.approx(st["minutes"] * px, abs=0.01)
    if path:
        (line,) = [x for x in root.iter(f"{SVG}line") if x.get("class") == "first-step"]
        assert float(line.get("data-minutes")) == data["sections"]["latency"]["first_step_minutes"]


def test_each_cost_bar_is_a_priced_line_of_the_estimate_and_its_length_follows_its_cost(rendered):
    data, root, _ = rendered
    cost = data["sections"]["cost"]
    lines = cost.get("hourly_lines") or cost["lines"]
    expected = {k: ln["cost"] for k, ln in lines.items() if ln["cost"]}
    if cost.get("platform_gpu_use"):
        expected["platform_gpu_use"] = cost["platform_gpu_use"]["cost"]
    bars = _rects(root, "cost")
    assert {b["data-key"]: float(b["data-cost"]) for b in bars} == expected
    px = float(root.get("data-usd-px"))
    for b in bars:
        assert float(b["width"]) == pytest.approx(float(b["data-cost"]) * px, abs=0.01)


def test_the_shaded_gpu_idle_span_is_the_modelled_idle_time_and_its_cost(rendered):
    data, root, _ = rendered
    lat, cost = data["sections"]["latency"], data["sections"]["cost"]
    idle = _rects(root, "gpu-idle")
    held = _rects(root, "gpu-held")
    if cost.get("gpu_idle_before_first_step"):
        (band,) = idle
        assert float(band["data-start"]) == lat["gpu_pool_ready_minutes"]
        assert float(band["data-minutes"]) == lat["gpu_idle_minutes"]
        assert f"{cost['gpu_idle_before_first_step']['cost']:,.2f} USD" in ET.tostring(root, encoding="unicode")
    elif cost.get("platform_gpu_use"):
        (band,) = held
        assert float(band["data-minutes"]) == cost["platform_gpu_use"]["before_first_step_minutes"]
    else:
        assert idle == held == []


def _clock_minutes(clock: str) -> float:
    h, m, s = (int(x) for x in clock.split(":"))
    return h * 60 + m + s / 60


def test_the_mermaid_gantt_and_pie_in_plan_md_hold_the_same_steps_and_costs(rendered):
    data, _, md = rendered
    path = data["sections"]["latency"].get("path", [])
    tasks = re.findall(r"^  (.+) \(([\d.]+) min\) :s\d+, (\d\d:\d\d:\d\d), (\d\d:\d\d:\d\d)$", md, flags=re.M)
    assert len(tasks) == len(path)
    for (name, _, start, end), st in zip(tasks, path, strict=True):
        assert name == re.sub(r"[:#;\"]", " ", st["name"]).strip()
        assert _clock_minutes(start) == pytest.approx(st["start"], abs=1 / 60)
        assert _clock_minutes(end) == pytest.approx(st["start"] + st["minutes"], abs=1 / 60)
    cost = data["sections"]["cost"]
    lines = cost.get("hourly_lines") or cost["lines"]
    slices = {float(v) for v in re.findall(r'^  "[^"]+" : ([\d.]+)$', md, flags=re.M)}
    assert {ln["cost"] for ln in lines.values() if ln["cost"]} <= slices


@pytest.mark.parametrize("stack", sorted(p.name[len("Pulumi."):-len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml")))
def test_every_text_of_the_picture_stays_inside_it_and_row_labels_end_before_the_bars(stack, tmp_path):
    from offline.report.picture import MAX_LEFT, WIDTH, text_px

    offline_plan.build_plan(STACKS_DIR / f"Pulumi.{stack}.yaml", stack, tmp_path)
    root = ET.fromstring((tmp_path / "plan.svg").read_text())
    left = float(root.get("data-left"))
    rows = {float(r.get("y")) + 12 for r in root.iter(f"{SVG}rect") if r.get("class") in ("step", "cost")}
    for t in root.iter(f"{SVG}text"):
        x, s = float(t.get("x")), t.text or ""
        if t.get("text-anchor") == "end":
            assert x - text_px(s) >= 0, s
        else:
            assert x + text_px(s) <= WIDTH, f"{s!r} runs past the right edge"
        if x == 10 and float(t.get("y")) in rows:  # a row's label: it ends before its bar begins
            assert x + text_px(s) < left, s
            if left < MAX_LEFT:
                assert not s.endswith("…"), f"{s!r} is cut though the column could hold it"
