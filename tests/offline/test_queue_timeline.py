"""A sweep's modelled queue (offline/report/queue_timeline.py) in the plan and its picture."""

from __future__ import annotations

import itertools
import re
import types

import pytest

from components.model import parse_settings
from offline.report.queue_timeline import QueueTimelineError, queue_capacity, queue_timeline
from tests.conftest import stack_settings


@pytest.mark.parametrize("capacity", [8, 16, 24])
@pytest.mark.parametrize("sizes", [(8, 8, 8, 8), (8, 16, 8), (16, 8, 8, 16, 8)])
def test_the_queue_never_holds_more_than_its_capacity_and_admits_in_submission_order(capacity, sizes):
    runs = [(f"v{i}", g, 10.0 + 3 * i) for i, g in enumerate(sizes) if g <= capacity]
    out = queue_timeline(runs, capacity, first_start_minutes=5.0)
    assert [r.key for r in out] == [k for k, _, _ in runs]
    assert all(a.start_minutes <= b.start_minutes for a, b in itertools.pairwise(out)), "first come, first admitted"
    for r in out:
        held = sum(o.gpus for o in out if o.start_minutes <= r.start_minutes < o.end_minutes)
        assert held <= capacity
        assert r.end_minutes - r.start_minutes == pytest.approx(dict((k, h) for k, _, h in runs)[r.key])
    assert out[0].start_minutes == 5.0 and out[0].wait_minutes == 0.0


def test_a_variant_larger_than_the_queue_is_named():
    with pytest.raises(QueueTimelineError, match="variant v1 needs 16 GPUs"):
        queue_timeline([("v1", 16, 1.0)], 8, 0.0)


def test_the_capacity_is_the_teams_max_when_smaller_than_the_pool():
    s = parse_settings(stack_settings("dev-sweep"))
    shipped = parse_settings(stack_settings("dev-platform"))
    two_nodes = shipped.model_copy(update={"gpu_pool": shipped.gpu_pool.model_copy(update={"nodes": 2})})
    assert queue_capacity(s, types.SimpleNamespace(settings=two_nodes))[0] == 8, "verl-dev-sweep: gpus 8 of 16"
    teams = {**shipped.queue.teams, "verl-dev-sweep": shipped.queue.teams["verl-dev-sweep"].model_copy(
        update={"gpus": 16})}
    wide = two_nodes.model_copy(update={"queue": shipped.queue.model_copy(update={"teams": teams})})
    assert queue_capacity(s, types.SimpleNamespace(settings=wide))[0] == 16
    assert queue_capacity(s, None)[0] == s.gpu_pool.nodes * s.gpu_pool.gpus_per_node


@pytest.fixture(scope="module")
def sweep_plan(tmp_path_factory):
    from components.config import STACKS_DIR
    from offline.plan import build_plan

    out = tmp_path_factory.mktemp("dev-sweep")
    return build_plan(STACKS_DIR / "Pulumi.dev-sweep.yaml", "dev-sweep", out), out


def test_the_sweeps_plan_shows_each_variant_after_the_last_on_its_one_node_and_when_the_last_is_done(sweep_plan):
    data, out = sweep_plan
    queue = data["sections"]["sharing"]["sweep"]["queue"]
    runs = queue["variants"]
    assert len(runs) == 4 and queue["at_once"] == 1 and queue["capacity_gpus"] == 8
    for a, b in itertools.pairwise(runs):
        assert b["start_minutes"] == pytest.approx(a["end_minutes"], abs=0.01), "one 8-GPU node: one after another"
    assert queue["last_done_minutes"] == pytest.approx(runs[-1]["end_minutes"], abs=0.01)
    md = (out / "plan.md").read_text()
    assert "no queue wait" not in md
    assert f"the last is done {queue['last_done_minutes']:.1f} min after `pulumi up` starts" in md
    assert f"the stack is up {queue['last_done_minutes']:.1f} min, until the last of its queued sweep variants" in md


def test_the_sweeps_picture_draws_every_variant_where_the_queue_puts_it(sweep_plan):
    data, out = sweep_plan
    svg = (out / "plan.svg").read_text()
    runs = {r["key"]: r for r in data["sections"]["sharing"]["sweep"]["queue"]["variants"]}
    group = re.search(r'<g class="sweep-queue" data-queue-minute-px="([0-9.e-]+)"', svg)
    assert group, "the picture draws the sweep's queue"
    px = float(group.group(1))
    left = float(re.search(r'data-left="([0-9.]+)"', svg).group(1))
    bars = re.findall(r'<rect class="queue-run" x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"[^>]*data-key="(\w+)"', svg)
    assert {k for _, _, k in bars} == set(runs)
    for x, width, key in bars:
        r = runs[key]
        assert float(x) == pytest.approx(left + r["start_minutes"] * px, abs=0.01)
        assert float(width) == pytest.approx((r["end_minutes"] - r["start_minutes"]) * px, abs=0.01)


def test_a_stack_without_a_sweep_draws_no_queue(tmp_path):
    from components.config import STACKS_DIR
    from offline.plan import build_plan

    build_plan(STACKS_DIR / "Pulumi.dev-grpo.yaml", "dev-grpo", tmp_path / "g")
    assert "sweep-queue" not in (tmp_path / "g" / "plan.svg").read_text()
