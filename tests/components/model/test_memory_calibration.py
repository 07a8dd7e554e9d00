"""The training-phase memory estimate against real GPU measurements (components/model/memory_calibration.json,
made with tools/calibrate.sh; CI has no GPU, so the table is the measurement)."""

from __future__ import annotations

import pytest

from components.config import FAMILIES, PRESETS
from components.model import load_stack
from components.model.layout import RUNTIME_OVERHEAD_GIB
from components.model.memory_calibration import (
    UPPER_RATIO,
    calibration_error,
    calibration_summary,
    load_table,
    uncalibrated_families,
)

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
def test_the_estimate_is_never_below_the_measured_reserved_peak_and_at_most_15_percent_above(p):
    assert UPPER_RATIO == 1.15
    assert p.measured_reserved_gib <= p.estimated_gib <= UPPER_RATIO * p.measured_reserved_gib, (
        f"estimate {p.estimated_gib} GiB vs measured {p.measured_reserved_gib} GiB reserved (ratio {p.ratio})")


@pytest.mark.parametrize("p", POINTS, ids=_id)
def test_the_memory_added_outside_pytorch_covers_what_every_run_measured_there(p):
    assert p.measured_outside_torch_gib <= RUNTIME_OVERHEAD_GIB
    assert p.estimated_total_gib == pytest.approx(p.estimated_gib + RUNTIME_OVERHEAD_GIB, abs=0.02)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_with_presets_has_measured_points_in_the_table(family):
    assert any(PRESETS[r["preset"]].arch.family == family for r in ROWS if r["preset"] in PRESETS and
               r["status"] == "ok"), f"no measured {family} point"


def test_every_preset_sized_by_the_table_is_measured_within_its_bound_for_each_family():
    # The bound holds per family, not only over the pooled points: a family whose points all sit at one end
    # would be hidden by another's.
    for family in FAMILIES:
        ratios = [p.ratio for p in POINTS if p.family == family and p.status == "ok"]
        assert ratios and 1.0 <= min(ratios) <= max(ratios) <= UPPER_RATIO, (family, ratios)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_family_without_measured_points_is_named_uncalibrated_in_the_plan_line(family):
    assert "uncalibrated" not in calibration_summary(POINTS, family)
    # the table as it would be without that family's points (as Qwen3's was before a GPU measured it)
    without = [p for p in POINTS if p.family != family]
    assert uncalibrated_families(without) == [family]
    assert f"no {family} model measured yet: its estimate is uncalibrated" in calibration_summary(without, family)
    assert "uncalibrated" not in calibration_summary(without, next(f for f in FAMILIES if f != family))


def test_a_model_built_on_the_meta_device_measures_as_the_same_model_built_on_the_gpu():
    # `--init meta` (how the 32B points are measured: its fp32 copy does not fit one GPU beside FSDP's) against
    # the default build at the same point: the steps measured are the same, only the build differs.
    pairs = {}
    for p in POINTS:
        pairs.setdefault((p.preset, p.world_size, p.seq_len, p.micro_batch), {})[p.build] = p
    both = [b for b in pairs.values() if {"device", "meta"} <= set(b)]
    assert both, "no point measured with both builds"
    for b in both:
        assert b["meta"].measured_allocated_gib == pytest.approx(b["device"].measured_allocated_gib, rel=0.01)
        assert b["meta"].measured_reserved_gib == pytest.approx(b["device"].measured_reserved_gib, rel=0.03)


@pytest.mark.parametrize("p", [p for p in POINTS if p.status == "oom"], ids=_id)
def test_a_step_that_ran_out_of_memory_is_estimated_above_the_gpu_so_the_layout_check_refuses_it(p):
    assert p.estimated_gib > p.gpu_gib


def test_the_calibration_line_for_the_plan_gives_the_ratio_range_and_the_gpu():
    line = calibration_summary(POINTS)
    lo, hi = min(p.ratio for p in POINTS if p.status == "ok"), max(p.ratio for p in POINTS if p.status == "ok")
    assert f"{lo:.2f}-{hi:.2f}" in line and "NVIDIA H200" in line and "bound 1.00-1.15" in line


def test_the_calibration_does_not_depend_on_which_stack_asks():
    other = calibration_error(load_stack("multinode"))
    assert [p.estimated_gib for p in other] == [p.estimated_gib for p in POINTS]


def test_docs_memory_md_shows_the_current_table_and_its_range():
    from components.model.memory_calibration import MEMORY_DOC, refresh_memory_doc

    text = MEMORY_DOC.read_text()
    assert refresh_memory_doc(text) == text, "stale docs/memory.md calibration table: run `python -m components.config`"
    fits = [p.ratio for p in POINTS if p.status == "ok"]
    assert f"{min(fits):.2f}–{max(fits):.2f} × the measured peak reserved on all {len(fits)} points" in text
    assert f"bound 1.00–{UPPER_RATIO:.2f}" in text
    ooms = [p for p in POINTS if p.status == "oom"]
    assert f"every point that ran out of memory ({len(ooms)})" in " ".join(text.split())
    per_family = []
    for family in sorted(FAMILIES):
        r = [p.ratio for p in POINTS if p.family == family and p.status == "ok"]
        per_family.append(f"{family} {min(r):.2f}–{max(r):.2f} over {len(r)} points")
    assert ", ".join(per_family) in " ".join(text.split()), per_family


# --------------------------------------------------------------------------------------------- fit, leave-one-out
def test_the_allocator_constants_are_the_fit_over_the_table_not_typed_by_hand():
    from components.model.layout import AllocatorFit
    from components.model.memory_calibration import fit_allocator, point_terms

    assert fit_allocator(point_terms(load_stack("dev"))) == AllocatorFit()


def test_every_point_left_out_of_the_fit_is_estimated_within_1_00_to_1_15_of_its_measurement():
    from components.model.memory_calibration import leave_one_out, point_terms

    held = leave_one_out(point_terms(load_stack("dev")))
    assert len(held) == sum(p.status == "ok" for p in POINTS)
    outside = [(p.name, ratio) for p, ratio in held if not 1.0 <= ratio <= UPPER_RATIO]
    assert not outside, f"refitted without them, these points leave 1.00-{UPPER_RATIO}: {outside}"


def test_docs_memory_md_states_the_leave_one_out_range():
    from components.model.memory_calibration import MEMORY_DOC, leave_one_out, point_terms

    ratios = [r for _, r in leave_one_out(point_terms(load_stack("dev")))]
    assert f"{min(ratios):.2f}–{max(ratios):.2f} × its measurement" in " ".join(MEMORY_DOC.read_text().split())
