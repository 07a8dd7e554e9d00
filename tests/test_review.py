"""The change report a reviewer reads: settings old -> new, each resource's fields old -> new with a reason, and the
deltas of cost, GPU-hours, time to the first step and memory between the two plans."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import plan
from components.config import SETTINGS_KEY, STACKS_DIR
from offline import plan as offline_plan
from offline import review
from offline.changes import Change
from tests.conftest import REPO, deep_merge, record

SEVEN_B = {"model": {"preset": "qwen2.5-7b-instruct"}}


def _write(path: Path, stack: str, overrides: dict) -> Path:
    doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())
    doc["config"][SETTINGS_KEY] = deep_merge(doc["config"][SETTINGS_KEY], overrides)
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def dev_3b_to_7b(tmp_path_factory):
    """dev as shipped (3B) is the base, the same file with the 7B preset the change; each plan also built alone."""
    tmp = tmp_path_factory.mktemp("review")
    new = _write(tmp / "Pulumi.dev.yaml", "dev", SEVEN_B)
    out = tmp / "out"
    assert plan.main(["--config-file", str(new), "--base-config-file", str(STACKS_DIR / "Pulumi.dev.yaml"),
                      "--out", str(out)]) == 0
    alone_3b = offline_plan.build_plan(STACKS_DIR / "Pulumi.dev.yaml", "dev", tmp / "alone-3b")
    alone_7b = offline_plan.build_plan(new, "dev", tmp / "alone-7b")
    return json.loads((out / "plan.json").read_text()), (out / "plan.md").read_text(), alone_3b, alone_7b


def _section(md: str) -> str:
    start = md.index("## Changes against")
    return md[start:md.find("\n## ", start + 1)]


def test_the_3b_to_7b_report_names_the_setting_and_the_figures_of_both_plans(dev_3b_to_7b):
    data, md, old, new = dev_3b_to_7b
    r = data["review"]
    assert {"setting": "model.preset", "old": "qwen2.5-3b-instruct", "new": "qwen2.5-7b-instruct"} in r["settings"]
    assert len(r["settings"]) == 1
    section = _section(md)
    assert "| `model.preset` | `qwen2.5-3b-instruct` | `qwen2.5-7b-instruct` |" in section
    # settings first, then what they do, then the deltas
    assert section.index("### Settings changed") < section.index("### What they do") < section.index("### What it costs")
    rows = {d["figure"]: d for d in r["deltas"]}
    gpus = old["sections"]["layout"]["layout"]["gpus_per_node"]
    expect = {
        "cost_per_run": (old["sections"]["cost"]["total"], new["sections"]["cost"]["total"]),
        "cost_per_month": (old["sections"]["cost"]["idle_per_month"], new["sections"]["cost"]["idle_per_month"]),
        "gpu_hours_per_run": (round(old["sections"]["cost"]["gpu_node_hours"] * gpus, 2),
                              round(new["sections"]["cost"]["gpu_node_hours"] * gpus, 2)),
        "first_step_minutes": (old["sections"]["latency"]["first_step_minutes"],
                               new["sections"]["latency"]["first_step_minutes"]),
        "memory_peak_gib": (old["sections"]["layout"]["layout"]["memory"]["peak_gib"],
                            new["sections"]["layout"]["layout"]["memory"]["peak_gib"]),
    }
    for key, (a, b) in expect.items():
        assert (rows[key]["old"], rows[key]["new"]) == (a, b), key
        assert a != b, f"{key}: the 7B model should move this figure"
        assert f"| {rows[key]['label']} | {rows[key]['old_text']} | {rows[key]['new_text']} |" in section
    assert f"{old['sections']['cost']['total']:.2f} USD" in section and f"{new['sections']['cost']['total']:.2f} USD" in section
    gpu = new["sections"]["layout"]["layout"]["memory"]["gpu_gib"]
    assert f"of {gpu:g} GiB" in rows["memory_peak_gib"]["new_text"]


def test_a_changed_field_shows_old_and_new_and_a_reason(dev_3b_to_7b):
    data, md, _, _ = dev_3b_to_7b
    res = {c["name"]: c for c in data["review"]["resources"]}
    job = res["train-rayjob"]
    (entry,) = [f for f in job["fields"] if f["field"] == "spec.entrypoint"]
    # a 2 KB command line shows the words that changed, not the whole line
    assert "model.path=/mnt/model-copy/Qwen2.5-3B-Instruct" in entry["old"]
    assert "model.path=/mnt/model-copy/Qwen2.5-7B-Instruct" in entry["new"]
    assert len(entry["new"]) < 600 and "actor_rollout_ref.actor.optim.lr" not in entry["new"]
    assert "replace_on_changes" in job["reason"] and "deleted first" in job["reason"]
    env = {f["readable"]: f for f in res["data-model"]["fields"]}
    model_id = next(f for name, f in env.items() if name.endswith("env[MODEL_ID].value"))
    assert (model_id["old"], model_id["new"]) == ("Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
    # a data Job is replaced as a whole (its spec is immutable), deleted first: fixed name
    assert "Kubernetes does not let" in res["data-model"]["reason"] and "deleted before" in res["data-model"]["reason"]
    assert "| data-model | `" in _section(md)


def test_a_changed_secret_field_never_shows_its_value():
    rec = record("dev")
    secret = next(r for r in rec.resources if r.type == "kubernetes:core/v1:Secret")
    key = next(iter(secret.inputs.get("stringData") or secret.inputs.get("data") or {"x": ""}))
    field = f"stringData.{key}" if "stringData" in secret.inputs else f"data.{key}"
    change = Change(secret.name, secret.type, "update", [field], urn=secret.urn)
    (shown,) = review.field_values(change, rec, rec)
    assert shown["old"] == shown["new"] == "[secret]"
    # a value the engine recorded as a secret stays hidden on any resource, wherever it sits in the value
    assert review._shown(True, {"a": ["x", "[secret]"]}, False) == "[secret]"


def test_long_values_are_shortened_around_the_difference():
    old, new = "a" * 300 + "OLD" + "b" * 300, "a" * 300 + "NEW" + "b" * 300
    o, n = review.shorten(old, new)
    assert "OLD" in o and "NEW" in n and len(o) < 80 and o.startswith("…") and o.endswith("…")
    assert review.shorten("short", "other") == ("short", "other")


def test_a_stack_moved_over_a_target_gets_a_warning():
    base = {"sections": {"layout": {"layout": {"memory": {"peak_gib": 60.0, "gpu_gib": 80}}, "findings": []}},
            "warnings": []}
    over = {"sections": {"layout": {"layout": {"memory": {"peak_gib": 95.0, "gpu_gib": 80}}, "findings": []}},
            "warnings": ["versions.x: new"]}
    warnings = review.target_warnings(base, over)
    assert any("95.0 GiB exceeds the GPU's 80 GiB" in w for w in warnings)
    assert "new warning: versions.x: new" in warnings
    assert review.target_warnings(base, base) == []


def test_the_pr_comment_carries_the_whole_report(dev_3b_to_7b, tmp_path):
    # the change-report job cuts the "Changes against" section out of plan.md into the comment (a fork's PR relays
    # the same file through pr-comment.yml): run its own snippet on a plan.md
    _, md, _, _ = dev_3b_to_7b
    workflow = yaml.safe_load((REPO / ".github/workflows/pr.yml").read_text())
    script = "\n".join(s.get("run", "") for s in workflow["jobs"]["change-report"]["steps"])
    code = re.search(r"python -c '(.*?)' \"out/changes", script, flags=re.S).group(1)
    (tmp_path / "plan.md").write_text(md)
    comment = subprocess.run([sys.executable, "-c", code, str(tmp_path / "plan.md")], capture_output=True, text=True,
                             check=True).stdout
    for part in ("### Settings changed", "`model.preset`", "### What they do", "| data-model | `", "### What it costs"):
        assert part in comment
    assert "## verl command line" not in comment



def test_a_change_that_moves_the_run_over_its_budget_warns(dev_3b_to_7b, tmp_path):
    _, _, old, new = dev_3b_to_7b
    budget = round((old["sections"]["cost"]["total"] + new["sections"]["cost"]["total"]) / 2, 2)
    over = {"cost": {"budget_per_run": budget}}
    base = offline_plan.build_plan(_write(tmp_path / "Pulumi.dev.yaml", "dev", over), "dev", tmp_path / "b")
    seven = offline_plan.build_plan(_write(tmp_path / "Pulumi.dev.yaml", "dev", deep_merge(SEVEN_B, over)), "dev", tmp_path / "n")
    assert base["sections"]["cost"]["budget"]["over"] == []
    (message,) = seven["sections"]["cost"]["budget"]["over"]
    assert f"{new['sections']['cost']['total']:,.2f} USD" in message and f"{budget:,.2f}" in message
    assert f"over budget: {message} (cost section)" in review.target_warnings(base, seven)
    assert "**warning: over budget**" in (tmp_path / "n" / "plan.md").read_text()
