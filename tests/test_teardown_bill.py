"""The bill that outlives a teardown: every plan says what is destroyed, what is kept and why, and what still bills."""

from __future__ import annotations

import json

import pytest
import yaml

from components.config import STACKS_DIR
from keeper.destroy import GUARDED_TYPES
from offline import plan as offline_plan
from offline.report.cost import HOURS_PER_MONTH
from tests.conftest import STACKS


def _plan(stack: str, tmp_path) -> tuple[dict, str]:
    out = tmp_path / stack
    offline_plan.build_plan(STACKS_DIR / f"Pulumi.{stack}.yaml", stack, out)
    return json.loads((out / "plan.json").read_text()), (out / "plan.md").read_text()


def _gpu_line(cost: dict) -> dict | None:
    lines = cost.get("idle_lines") or cost.get("hourly_lines") or {}
    return lines.get("gpu_nodes")


@pytest.mark.parametrize("stack", STACKS)
def test_every_plan_has_the_teardown_bill_and_its_figures_are_plan_jsons(stack, tmp_path):
    data, md = _plan(stack, tmp_path)
    bill = data["sections"]["teardown"]
    assert "## After a teardown: what still bills" in md
    # destroyed: every managed resource but those `destroy --exclude-protected` keeps (protected and not lifted by
    # teardown.py) or retain_on_delete leaves in the cloud
    managed = [r for r in data["resources"] if r["custom"] and not r["options"].get("read")
               and r["type"] != "pulumi:pulumi:StackReference" and not r["type"].startswith("pulumi:providers:")]
    kept = [r for r in managed if r["options"].get("protect") and r["type"] not in GUARDED_TYPES
            or r["options"].get("retain_on_delete")]
    assert bill["destroyed"]["resources"] == len(managed) - len(kept)
    assert f"**Destroyed**: {bill['destroyed']['resources']} resources" in md
    cost = data["sections"]["cost"]
    settings = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]["verl-ack:settings"]
    gpu = settings["gpu_pool"]
    lingjun = [k for k in bill["kept"] if "Lingjun" in k["what"]]
    if gpu.get("kind") == "lingjun":
        (row,) = lingjun  # the machines bill after any teardown: bought outside Pulumi
        line = _gpu_line(cost)
        if line is not None:  # the stack prices its pool: the bill is that price around the clock
            assert row["per_month"] == round(line["unit_price"] * gpu["nodes"] * HOURS_PER_MONTH, 2)
        assert "Lingjun console" in row["release"]
    else:
        assert lingjun == []
    storage = next((k for k in bill["kept"] if "bucket" in k["what"]), None)
    assert storage is not None, "the data outlives the stack in every layout"
    if "storage_per_month" in cost:
        assert storage["per_month"] == cost["storage_per_month"]
    known = [k["per_month"] for k in bill["kept"] if k["per_month"] is not None]
    assert bill["still_billing_per_month"] == round(sum(known), 2)
    assert f"Still billing after the teardown: {bill['still_billing_per_month']:,.2f}" in md
    for k in bill["kept"]:
        assert k["why"] and k["release"]
        shown = f"{k['per_month']:,.2f} {bill['currency']}" if k["per_month"] is not None else "not estimated"
        assert f"| {k['what']} | {k['why']} | {shown} | {k['release']} |" in md


def test_a_platforms_bill_names_the_experiment_stacks_that_depend_on_it(tmp_path):
    data, md = _plan("dev-platform", tmp_path)
    on_it = []
    for path in sorted(STACKS_DIR.glob("Pulumi.*.yaml")):
        s = yaml.safe_load(path.read_text())["config"]["verl-ack:settings"]
        if s.get("kind") == "experiment" and s["platform_stack"].endswith("/dev-platform"):
            on_it.append(path.name[len("Pulumi."):-len(".yaml")])
    assert on_it and data["sections"]["teardown"]["dependent_experiments"] == on_it
    assert all(f"`{n}`" in md.split("## After a teardown")[1] for n in on_it)


def _teardown(stack: str, env: dict) -> tuple[int, list[str]]:
    import teardown

    lines: list[str] = []
    code = teardown.main(["--stack", stack, "--dry-run"], env=env, log=lines.append, err=lines.append)
    return code, lines


def test_teardown_prints_the_plans_bill_even_without_oss_credentials_and_says_what_it_could_not_check(tmp_path):
    import teardown
    from offline.report.teardown_bill import summary_lines

    data, _ = _plan("dev", tmp_path)
    code, lines = _teardown("dev", env={})
    assert code == 2  # no credentials: nothing is read, copied or destroyed
    for line in summary_lines(data["sections"]["teardown"]):
        assert line in lines
    assert any(line.startswith("kept: 1 Lingjun machine(s)") for line in lines)  # the bill that outlives it
    assert teardown.NOT_CHECKED in lines
    assert lines.index(summary_lines(data["sections"]["teardown"])[0]) < lines.index(teardown.NOT_CHECKED)


def test_a_platforms_teardown_names_the_experiments_on_it(tmp_path):
    data, _ = _plan("dev-platform", tmp_path)
    _, lines = _teardown("dev-platform", env={})
    named = [line for line in lines if line.startswith("experiment stacks on this platform")]
    assert named and all(f"`{n}`" in named[0] for n in data["sections"]["teardown"]["dependent_experiments"])
