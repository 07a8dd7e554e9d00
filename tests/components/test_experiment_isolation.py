"""Experiments and sweep variants on one platform never touch each other's objects or reach each other's Ray pods."""

from __future__ import annotations

import json

import pytest

import plan
from components.config import SETTINGS_KEY, STACKS_DIR
from components.experiment import IdentityError, check_experiment_identity
from components.model import parse_settings
from components.workloads.training.rayjob import pod_groups
from tests.conftest import record, stack_settings

RAYJOB = "kubernetes:ray.io/v1:RayJob"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def _matches(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _pod_labels(rayjob) -> list[dict]:
    return [(g["template"].get("metadata") or {}).get("labels") or {} for _, g in pod_groups(rayjob.inputs["spec"])]


def test_each_sweep_variants_ray_policy_selects_and_admits_only_its_own_rayjobs_pods():
    rec = record("dev-sweep")
    jobs = rec.by_type(RAYJOB)
    policies = [p for p in rec.by_type(POLICY) if p.inputs["metadata"]["name"].endswith("-ray-ingress")]
    assert len(jobs) == len(policies) == 4
    for policy in policies:
        owner = policy.inputs["metadata"]["name"].removesuffix("-ray-ingress")
        spec = policy.inputs["spec"]
        # every rule that opens all ports (GCS, raylets, NCCL) or the dashboard/job API (8265)
        peers = [p for rule in spec["ingress"] for p in rule["from"] if "podSelector" in p and "namespaceSelector"
                 not in p]
        for job in jobs:
            mine = job.inputs["metadata"]["name"] == owner
            for labels in _pod_labels(job):
                assert _matches(spec["podSelector"], labels) == mine, (policy.urn, job.urn)
                assert any(_matches(p["podSelector"], labels) for p in peers) == mine, (policy.urn, job.urn)


def _objects(rec) -> set[tuple]:
    """What a stack owns by name: every Kubernetes object (kind, namespace, name) and every named cloud object."""
    out = set()
    for r in rec.resources:
        if not r.custom or r.type.startswith("pulumi:"):
            continue
        meta = r.inputs.get("metadata")
        if isinstance(meta, dict) and meta.get("name"):
            out.add((r.type, meta.get("namespace"), meta["name"]))
        for key in ("roleName", "policyName", "name"):
            if isinstance(r.inputs.get(key), str) and r.type.startswith("alicloud:ram/"):
                out.add((r.type, None, r.inputs[key]))
    return out


def test_a_copied_experiment_stack_file_is_refused_naming_its_namespace_before_anything_is_created(tmp_path, capsys):
    raw = stack_settings("dev-grpo")
    path = tmp_path / "Pulumi.dev-grpo-2.yaml"
    path.write_text(json.dumps({"config": {SETTINGS_KEY: raw}}))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "job.namespace" in err and "verl-dev-grpo" in err and "dev-grpo-2" in err
    assert not (tmp_path / "out").exists()
    # the preview refuses it the same way (components/experiment.py, called with the stack's name)
    with pytest.raises(IdentityError, match="job.namespace: verl-dev-grpo-2"):
        check_experiment_identity(parse_settings(raw), "dev-grpo-2")


def test_a_second_experiment_renamed_as_its_refusal_says_shares_no_object_with_the_first():
    # the fix the refusal names: name and namespace of its own; its namespace added to a team of the platform
    second = {"name": "verl-dev-grpo-2", "job": {"namespace": "verl-dev-grpo-2"}}
    s = parse_settings(stack_settings("dev-grpo", second))
    check_experiment_identity(s, "dev-grpo-2")
    from tests.components.test_sharing import _experiment_on

    teams = dict(record("dev-platform").outputs["queue_teams"])
    teams["verl-dev-grpo-2"] = {**teams["verl-dev-grpo"]}
    first, other = record("dev-grpo"), _experiment_on(teams, second, as_stack="dev-grpo-2")
    a, b = _objects(first), _objects(other)
    assert len(a) > 20 and len(b) == len(a)
    assert not a & b, sorted(a & b)


def test_every_shipped_experiment_stack_is_named_from_its_stack():
    for path in sorted(STACKS_DIR.glob("Pulumi.*.yaml")):
        stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        s = parse_settings(stack_settings(stack))
        check_experiment_identity(s, stack)


def test_the_second_experiment_walkthrough_of_docs_stacks_md_works_as_written(tmp_path, capsys):
    """docs/stacks.md "A second experiment on a shared platform": the copy refused, renamed as the message says,
    refused again until the platform's queue.teams lists it, then queued against that team, sharing nothing."""
    from components.queue import team_limits
    from tests.components.test_sharing import _experiment_on

    doc = (STACKS_DIR.parent / "docs" / "stacks.md").read_text()
    assert "### A second experiment on a shared platform, end to end" in doc
    raw = stack_settings("dev-grpo")
    path = tmp_path / "Pulumi.ben-grpo-2.yaml"
    path.write_text(json.dumps({"config": {SETTINGS_KEY: raw}}))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "a")]) == 2
    assert "name: verl-ben-grpo-2, job.namespace: verl-ben-grpo-2" in capsys.readouterr().err
    ben = {"name": "verl-ben-grpo-2", "job": {"namespace": "verl-ben-grpo-2"},
           "training": {"experiment_name": "ben-grpo-2"}}
    assert all(f"`{k}: {v}`" in doc for k, v in (("name", "verl-ben-grpo-2"), ("job.namespace", "verl-ben-grpo-2")))
    path.write_text(json.dumps({"config": {SETTINGS_KEY: stack_settings("dev-grpo", ben)}}))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "b")]) == 2
    assert "verl-ben-grpo-2 (job.namespace) is in none of the platform's queue.teams" in capsys.readouterr().err
    # the platform with the team the walkthrough adds
    platform = parse_settings(stack_settings("dev-platform", {"queue": {"teams": {
        "ben": {"gpus": 8, "namespaces": ["verl-ben-grpo-2"]}}}}))
    assert "ben: {gpus: 8, namespaces: [verl-ben-grpo-2]}" in doc
    rec = _experiment_on(team_limits(platform), ben, as_stack="ben-grpo-2")
    assert rec.outputs["queue_team"] == "ben"
    assert not _objects(rec) & _objects(record("dev-grpo"))
