"""The training-phase memory estimate against real GPU measurements (components/model/memory_calibration.json,
made with tools/calibrate.sh; CI has no GPU, so the table is the measurement)."""

from __future__ import annotations

import pytest

from components.model import load_stack
from components.model.memory_calibration import UPPER_RATIO, calibration_error, calibration_summary, load_table

ROWS = load_table()
POINTS = calibration_error(load_stack("dev"))


def _id(p) -> str:
    return f"{p.preset.removeprefix('qwen2.5-').removesuffix('-instruct')}-w{p.world_size}-s{p.seq_len}-mb{p.micro_batch}"


def test_the_table_covers_0_5b_to_7b_at_two_sequence_lengths_on_one_and_two_gpus():
    for size in ("0.5b", "1.5b", "3b", "7b"):
        rows = [r for r in ROWS if r["preset"] == f"qwen2.5-{size}-instruct"]
        for world in (1, 2):
            assert len({r["seq_len"] for r in rows if r["world_size"] == world}) >= 2, (size, world)


def test_every_record_names_its_machine_versions_and_exact_configuration():
    for r in ROWS:
        assert r["machine"]["gpu_name"] and r["machine"]["gpu_memory_gib"] > 0
        assert r["versions"]["torch"] and r["versions"]["transformers"] and r["versions"]["cuda"]
        assert r["config"]["fsdp"]["sharding"] == "FULL_SHARD" and r["config"]["gradient_checkpointing"]
        assert r["status"] in ("ok", "oom"), f"{r['preset']} w{r['world_size']} s{r['seq_len']}: {r['error']}"


def test_every_table_point_is_checked():
    assert len(POINTS) == len(ROWS)


@pytest.mark.parametrize("p", [p for p in POINTS if p.status == "ok"], ids=_id)
def test_the_estimate_is_never_below_the_measured_reserved_peak_and_at_most_a_quarter_above(p):
    assert p.measured_reserved_gib <= p.estimated_gib <= UPPER_RATIO * p.measured_reserved_gib, (
        f"estimate {p.estimated_gib} GiB vs measured {p.measured_reserved_gib} GiB reserved (ratio {p.ratio})")


@pytest.mark.parametrize("p", [p for p in POINTS if p.status == "oom"], ids=_id)
def test_a_step_that_ran_out_of_memory_is_estimated_above_the_gpu_so_the_layout_check_refuses_it(p):
    assert p.estimated_gib > p.gpu_gib


def test_the_calibration_line_for_the_plan_gives_the_ratio_range_and_the_gpu():
    line = calibration_summary(POINTS)
    lo, hi = min(p.ratio for p in POINTS if p.status == "ok"), max(p.ratio for p in POINTS if p.status == "ok")
    assert f"{lo:.2f}-{hi:.2f}" in line and "NVIDIA H200" in line and "bound 1.00-1.25" in line


def test_the_calibration_does_not_depend_on_which_stack_asks():
    other = calibration_error(load_stack("multinode"))
    assert [p.estimated_gib for p in other] == [p.estimated_gib for p in POINTS]
