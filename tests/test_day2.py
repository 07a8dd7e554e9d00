"""Day 2: every stack's second preview is empty, and the change-impact report says what an edit would do."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

import plan
from components.config import PROJECT, SETTINGS_KEY, STACKS_DIR, read_stack_config
from components.model import parse_settings
from offline import day2
from offline import plan as offline_plan
from offline.changes import changes
from offline.engine import StackOutputs, run_program
from offline.readback import readback
from tests.conftest import REPO, STACKS, deep_merge, record

# Every defect the day-2 review named (spaced add-on JSON, stripped controller tags, the bucket's inline policy and logging,
# TTL-deleted Jobs) is fixed: the second preview of every stack is empty. A stack listed here would say what is not.
KNOWN_DEFECTS: dict[str, dict[str, tuple]] = {}


def _runner(stack: str, overrides: dict | None = None) -> day2.Runner:
    """The program of a stack (with settings overrides) as a second run: own outputs and prior state given."""
    config, secret_keys, _ = offline_plan.stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    raw = deep_merge(read_stack_config(stack)[SETTINGS_KEY], overrides or {})
    config[SETTINGS_KEY] = json.dumps(raw)
    settings = parse_settings(raw)
    refs = {}
    if settings.kind == "experiment":
        refs = {settings.platform_stack: StackOutputs.of(record(settings.platform_stack.rsplit("/", 1)[-1]))}
    return lambda own, prior: run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack,
                                          stack_references=refs, own_outputs=own, prior=prior)


def _summary(changes) -> dict[str, tuple]:
    return {c.name: (c.action, tuple(c.fields)) for c in changes}


@pytest.mark.parametrize("stack", STACKS)
def test_the_second_preview_of_every_stack_is_empty(stack):
    assert _summary(day2.second_preview(record(stack), _runner(stack))) == KNOWN_DEFECTS.get(stack, {})


def test_the_second_preview_is_empty_with_every_add_on_config_the_settings_can_give():
    # add-on configs the shipped stacks leave empty (a named Log Service project for logtail-ds) are in the provider's
    # stored form too: a spaced json.dumps there once diffed on every preview
    over = {"logs": {"project": "team-ray-logs"}}
    assert _summary(day2.second_preview(record("dev-platform", over), _runner("dev-platform", over))) == {}


def _report(stack: str, overrides: dict) -> dict[str, tuple]:
    changes = day2.change_report(record(stack), _runner(stack, overrides))
    return {n: v for n, v in _summary(changes).items() if KNOWN_DEFECTS.get(stack, {}).get(n) != v}


def test_nothing_changed_reports_no_change():
    assert _report("dev", {}) == {}


def test_a_new_service_cidr_replaces_the_cluster_and_with_it_every_pool_add_on_and_kubernetes_object():
    report = _report("dev", {"cluster": {"network": {"service_cidr": "172.21.0.0/20"}}})
    first = record("dev")
    assert report["ack-cluster"] == ("replace", ("serviceCidr",))
    assert report["ack-k8s"][0] == "replace"  # its clusterIdentifier is the cluster id
    for r in first.resources:
        # every Kubernetes object (its provider is keyed on the cluster) and every alicloud resource of the cluster
        # (pools, add-ons: clusterId is ForceNew); the in-region registry's namespace and repository are not
        under_cluster = r.type.startswith("kubernetes:") or "clusterId" in r.inputs
        if r.custom and under_cluster and r.type.startswith(("kubernetes:", "alicloud:cs/")) and not r.options.get("read"):
            assert report.get(r.name, ("no change",))[0] == "replace", r.name
    assert report.get("image-namespace") is None  # the ACR instance is not under the cluster
    assert report.get("net-vpc") is None and report.get("storage-bucket") is None  # not under the cluster


def test_turning_the_public_api_off_is_refused_or_reported_as_ignored_never_as_an_update():
    try:
        report = _report("dev-platform", {"cluster": {"public_api": False}})
    except day2.ChangeRefused as err:
        assert "cluster.public_api" in str(err)
        return
    assert report == {"ack-cluster": ("ignored", ("slbInternetEnabled",))}


def test_a_training_setting_changes_only_the_training_job():
    report = _report("dev", {"training": {"total_training_steps": 2}})
    # the new RayJob, and the node gate that guards it (its name carries the run: the nodes are checked again
    # before the new run starts); nothing of the platform
    assert report == {"train-rayjob": ("replace", ("spec.entrypoint",)), "train-gate": ("replace", ("metadata.name",))}


def _write(path: Path, stack: str, overrides: dict) -> Path:
    doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())
    doc["config"][SETTINGS_KEY] = deep_merge(doc["config"][SETTINGS_KEY], overrides)
    path.write_text(yaml.safe_dump(doc))
    return path


def test_plan_with_a_base_file_writes_the_changes_into_plan_json_and_first_into_plan_md(tmp_path, capsys):
    new = _write(tmp_path / "Pulumi.dev.yaml", "dev", {"training": {"total_training_steps": 2}})
    out = tmp_path / "out"
    assert plan.main(["--config-file", str(new), "--base-config-file", str(STACKS_DIR / "Pulumi.dev.yaml"),
                      "--out", str(out)]) == 0
    changes = json.loads((out / "plan.json").read_text())["changes"]
    assert {"name": "train-rayjob", "type": "kubernetes:ray.io/v1:RayJob", "action": "replace",
            "fields": ["spec.entrypoint"]}.items() <= next(c for c in changes if c["name"] == "train-rayjob").items()
    md = (out / "plan.md").read_text()
    assert md.index("## Changes against") < md.index("## verl command line")
    assert "| **replace** | train-rayjob |" in md


def test_a_change_the_program_refuses_exits_2_naming_the_setting(tmp_path, capsys, monkeypatch):
    def refuse(base, path, stack):
        raise day2.ChangeRefused("refused change: cluster.public_api is create-only; see docs/review-and-teardown.md")

    monkeypatch.setattr(plan, "change_review", refuse)
    out = tmp_path / "out"
    assert plan.main(["--stack", "dev", "--base-config-file", str(STACKS_DIR / "Pulumi.dev.yaml"),
                      "--out", str(out)]) == 2
    assert "refused change: cluster.public_api" in capsys.readouterr().err
    assert not out.exists()


def test_the_program_raising_a_refusal_is_a_change_refused_with_its_message():
    def program(own, prior):
        raise RuntimeError("Program failed: refused change: cluster.network.service_cidr would rebuild the cluster")

    with pytest.raises(day2.ChangeRefused, match=r"^refused change: cluster\.network\.service_cidr"):
        day2.change_report(record("dev"), program)


def _after_a_failed_first_up(stack: str, overrides: dict) -> dict:
    """The report of an edit made after a first `up` that created the resources and then failed: the state holds
    them, but no outputs were recorded (the Python SDK registers them when the program finishes)."""
    first = record(stack)
    state = readback(first)
    return {c.name: c for c in changes(first, state, _runner(stack, overrides)(None, state))}


def test_after_a_failed_first_up_a_public_api_change_is_stopped_by_the_engine_from_the_state():
    # the create-only check reads the previous outputs, which a failed up never wrote: the change once passed as
    # "ignored" (an update that does nothing); replace_on_changes on the protected cluster makes Pulumi refuse it
    c = _after_a_failed_first_up("dev-platform", {"cluster": {"public_api": False}})["ack-cluster"]
    assert (c.action, c.fields) == ("replace", ["slbInternetEnabled"])
    assert "protect" in c.notes  # `pulumi up` fails: "unable to replace resource ... marked for protection"


def test_after_a_failed_first_up_an_allowed_public_api_change_is_the_update_that_does_nothing():
    c = _after_a_failed_first_up("dev-platform", {"cluster": {"public_api": False,
                                                              "allow_create_only_changes": ["cluster.public_api"]}})
    assert (c["ack-cluster"].action, c["ack-cluster"].fields) == ("ignored", ["slbInternetEnabled"])


def test_a_node_gate_that_failed_is_run_again_by_the_next_up_not_re_awaited():
    # pulumi-kubernetes records a Job whose await failed as created with initialisation errors; the next `up` gives
    # an unchanged resource with such errors an empty update, which awaits the same Failed Job and fails in seconds,
    # even after the pool was fixed. Its pulumi.com/replaceUnready annotation (pulumi-kubernetes' documented switch,
    # not the engine's "#initerror" key): the gate is deleted and run again.
    first = record("dev")
    state = readback(first)
    gate_job = first.get("kubernetes:batch/v1:Job", "train-gate")
    state[gate_job.urn] = dataclasses.replace(state[gate_job.urn], init_errors=("Job failed: 0 of 1 GPU nodes",))
    del state[first.get("kubernetes:ray.io/v1:RayJob", "train-rayjob").urn]  # never created: it waits for the gate
    report = {c.name: c for c in changes(first, state, _runner("dev")(StackOutputs.of(first), state))}
    assert {n: c.action for n, c in report.items()} == {"train-gate": "replace", "train-rayjob": "create"}
    assert "delete_before_replace" in report["train-gate"].notes  # its name is fixed: the failed Job goes first


@pytest.mark.parametrize("stack", STACKS)
def test_every_job_pulumi_awaits_runs_again_after_a_failed_up_in_every_stack(stack):
    # a data Job that failed (a download cut off) is run again as the gate is: each Job carries the annotation
    # pulumi.com/replaceUnready, and it is deleted first (its name is fixed)
    first = record(stack)
    state = readback(first)
    jobs = first.by_type("kubernetes:batch/v1:Job")
    for job in jobs:
        failed = {**state, job.urn: dataclasses.replace(state[job.urn], init_errors=("Job has reached the specified "
                                                                                     "backoff limit",))}
        report = {c.name: c.action for c in changes(first, failed, first)}
        assert report == {job.name: "replace"}, job.name
        assert job.options["delete_before_replace"], job.name
        assert job.inputs["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true", job.name
        assert "#initerror" not in repr(job.options.get("replace_on_changes")), "no engine-internal key"
