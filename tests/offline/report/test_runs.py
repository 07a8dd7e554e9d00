"""The plan's runs-and-checkpoints section: what a lost node costs on the run that retries, what an evaluation-only
run is priced as, and where the trained model lands, for every stack the plan renders."""

from __future__ import annotations

import pytest

from components.model import parse_settings
from components.model.layout import resolve_layout
from components.wiring import checkpoint_key_prefix
from components.workloads.training.run_spec import backoff_limit
from offline.report.cost import cost_section, training_steps, validation_passes
from offline.report.latency import own_start_minutes, plan_critical_path
from offline.report.runs import runs_section
from tests.conftest import record, stack_settings


def test_the_multinode_plan_prices_every_retry_at_its_worst_and_says_how_to_turn_it_off():
    s = parse_settings(stack_settings("multinode"))
    rec = record("multinode")
    sec = runs_section(s, rec)
    r = sec.data["retry"]
    assert r["retries"] == backoff_limit(s, resolve_layout(s)) >= 1
    start = own_start_minutes(s, plan_critical_path(rec, s))
    redo = s.training.save_freq * s.cost.seconds_per_step / 60
    assert r["per_retry_minutes"] == round(start + redo, 2)
    assert r["gpu_node_hours"] == round(r["retries"] * (start + redo) / 60 * resolve_layout(s).nodes, 3)
    assert r["worst_case_cost"] is not None and r["worst_case_cost"] > 0
    assert "job.backoff_limit: 0" in sec.markdown and f"{r['worst_case_minutes']:.1f} min" in sec.markdown


def test_each_stacks_plan_says_where_its_checkpoints_and_hugging_face_model_land(stack_name):
    s = parse_settings(stack_settings(stack_name))
    sec = runs_section(s, record(stack_name))
    prefix = checkpoint_key_prefix(s)
    assert f"oss://{s.storage.bucket_name}/{prefix}global_step_N/" in sec.markdown
    if "hf_model" in s.training.save_contents:
        assert sec.data["hf_export"] == f"{prefix}global_step_N/actor/huggingface/"
        assert f"oss://{s.storage.bucket_name}/{prefix}global_step_N/actor/huggingface/" in sec.markdown
    assert ("resume_mode auto" in sec.data["table"]["resume"]) == (s.training.resume_from is None)
    assert sec.data["retry"]["retries"] == backoff_limit(s, resolve_layout(s))


@pytest.mark.parametrize("stack", ["dev", "multinode"])
def test_an_evaluation_only_run_is_priced_as_one_validation_pass_and_no_step(stack):
    over = {"training": {"val_only": True, "total_training_steps": 0}}
    s = parse_settings(stack_settings(stack, over))
    assert training_steps(s) == 0 and validation_passes(s, 0) == 1
    rec = record(stack, over)
    cost = cost_section(s, rec).data
    assert cost["steps"] == 0 and cost["validations"] == 1
    assert cost["training_minutes"] == round(s.cost.seconds_per_validation / 60, 2)
    runs = runs_section(s, rec)
    assert runs.data["retry"]["retries"] == 0 and "evaluation only" in runs.markdown
    assert "trainer.val_only=True" in rec.by_type("kubernetes:ray.io/v1:RayJob")[0].inputs["spec"]["entrypoint"]
