"""The staging cache's rule, end to end through the program: an experiment lists the completion markers of its
content-addressed prefixes in its platform's bucket before creating any Job; a complete prefix gets no Job (nothing
of it on the critical path), a missing one exactly one Job that stages it, and the latency model's repeat figure is
what the program then builds."""

from __future__ import annotations

import json

import pytest

from components.config import SETTINGS_KEY, STACKS_DIR
from components.model import parse_settings
from components.wiring import completion_marker, dataset_files, model_cache_key, model_path
from components.workloads.cache import marker_listed
from offline import fakes
from offline.engine import StackOutputs, run_program
from offline.plan import stack_config
from offline.report.latency import PlatformRun, critical_path, kind_of, latency_section
from tests.conftest import PROJECT, REPO, record, stack_settings

EXPERIMENT = "dev-grpo"
LIST_OBJECTS = "alicloud:oss/getBucketObjects:getBucketObjects"
JOB = "kubernetes:batch/v1:Job"


def render(stack: str, bucket_keys: list[str]):
    """The stack's program run with the fake account's bucket holding `bucket_keys` (uncached: the bucket differs)."""
    config, secret_keys, _ = stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    raw = stack_settings(stack)
    s = parse_settings(raw)
    config[SETTINGS_KEY] = json.dumps(raw)
    name = s.platform_stack.rsplit("/", 1)[-1]
    platform = PlatformRun(name, parse_settings(stack_settings(name)), record(name), stack_settings(name))
    saved = dict(fakes.ACCOUNT.bucket_objects)
    fakes.ACCOUNT.bucket_objects[s.storage.bucket_name] = list(bucket_keys)
    try:
        rec = run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack,
                          stack_references={s.platform_stack: StackOutputs.of(platform.recording)})
    finally:
        fakes.ACCOUNT.bucket_objects.clear()
        fakes.ACCOUNT.bucket_objects.update(saved)
    rec.platform = platform
    return s, rec


def staging_jobs(rec) -> dict[str, dict]:
    """Staging Jobs by kind, with their OSS_PREFIX."""
    out = {}
    for r in rec.by_type(JOB):
        k = kind_of(r)
        if k in ("model_job", "dataset_job"):
            env = {e["name"]: e.get("value") for e in r.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
            out[k] = {"urn": r.urn, "prefix": env["OSS_PREFIX"]}
    return out


def markers(s) -> dict[str, str]:
    return {"model": completion_marker(model_path(s)), "dataset": completion_marker(dataset_files(s).prefix)}


def test_a_miss_stages_each_prefix_once_and_the_rayjob_waits_for_it():
    s, rec = render(EXPERIMENT, [])
    jobs = staging_jobs(rec)
    assert {k: j["prefix"] for k, j in jobs.items()} == {"model_job": model_path(s),
                                                        "dataset_job": dataset_files(s).prefix}
    # (The other listings are the run's own checks: its checkpoint folder's tracker; tests/components/workloads/
    # test_model_from_bucket.py.)
    listed = [i["args"]["keyPrefix"] for i in rec.invokes if i["token"] == LIST_OBJECTS
              and i["args"]["keyPrefix"].endswith(".complete")]
    assert sorted(listed) == sorted(markers(s).values()), "each marker is listed once, before any Job"
    rayjob = rec.by_type("kubernetes:ray.io/v1:RayJob")[0]
    waits = set(rayjob.dependencies)
    assert {j["urn"] for j in jobs.values()} <= waits
    path = [st.kind for st in critical_path(rec, s).path]
    assert "model_job" in path, path


def test_a_hit_creates_no_staging_job_and_nothing_of_it_is_on_the_critical_path():
    s = parse_settings(stack_settings(EXPERIMENT))
    _, rec = render(EXPERIMENT, list(markers(s).values()))
    assert staging_jobs(rec) == {}, "a complete prefix gets no Job"
    cp = critical_path(rec, s)
    assert not {"model_job", "dataset_job"} & {st.kind for st in cp.path}
    data = latency_section(s, rec).data
    assert data["staging"]["case"] == "repeat"
    assert [e["job"] for e in data["staging"]["entries"]] == [False, False]
    # The repeat the model predicts from the first-use graph is what the program builds on a hit.
    _, first = render(EXPERIMENT, [])
    assert latency_section(s, first).data["staging"]["repeat_first_step_minutes"] == pytest.approx(
        cp.first_step_minutes, abs=0.01)


def test_only_the_missing_prefix_is_staged():
    s = parse_settings(stack_settings(EXPERIMENT))
    _, rec = render(EXPERIMENT, [markers(s)["model"]])
    assert set(staging_jobs(rec)) == {"dataset_job"}


def test_a_longer_key_that_starts_with_the_marker_is_not_a_hit():
    marker = "models/Qwen2.5-3B-Instruct/33f25c227269.complete"
    assert marker_listed([marker], marker)
    assert not marker_listed([marker + ".tmp", "models/Qwen2.5-3B-Instruct/33f25c227269/config.json"], marker)
    s = parse_settings(stack_settings(EXPERIMENT))
    _, rec = render(EXPERIMENT, [markers(s)["model"] + ".partial"])
    assert "model_job" in staging_jobs(rec)


def test_the_cache_key_is_the_repo_and_revision_so_the_same_revision_shares_one_entry():
    base = parse_settings(stack_settings(EXPERIMENT))
    again = parse_settings(stack_settings("dev"))  # another stack, same preset, hub and (default) revision
    pinned = parse_settings(stack_settings(EXPERIMENT, {"model": {"revision": "a09a354"}}))
    other_hub = parse_settings(stack_settings(EXPERIMENT, {"model": {"source": "modelscope"}}))
    assert model_path(base) == model_path(again)
    assert len({model_path(base), model_path(pinned), model_path(other_hub)}) == 3
    assert model_path(base).endswith(f"/{model_cache_key(base)}/")
    resized = parse_settings(stack_settings(EXPERIMENT, {"dataset": {"train_subset": 40}}))
    assert dataset_files(base).prefix != dataset_files(resized).prefix


def test_a_single_stack_lists_nothing_before_its_bucket_exists_and_always_has_its_jobs():
    rec = record("dev")
    assert not [i for i in rec.invokes if i["token"] == LIST_OBJECTS]
    assert {kind_of(r) for r in rec.by_type(JOB)} >= {"model_job", "dataset_job"}


def test_the_program_and_the_jobs_name_the_same_marker():
    """components/ cannot import pipeline/ (it runs in pods): the two spellings of the marker key must agree."""
    from pipeline.marker import marker_key

    s = parse_settings(stack_settings(EXPERIMENT))
    for prefix in (model_path(s), dataset_files(s).prefix):
        assert completion_marker(prefix) == marker_key(prefix)
