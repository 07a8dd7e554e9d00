"""`model.source: oss`: a run starts from a model already in the bucket (an SFT checkpoint, a previous run's Hugging
Face export). Through the whole program: no Job downloads it from a hub, verl loads it from its prefix (through the
prefetch's copy, which lists the directory), and the preview refuses a prefix that holds no loadable model, naming
model.path."""

from __future__ import annotations

import json
import shlex

import pytest

from components.cloud.account_checks import model_prefix_problems
from components.config import SETTINGS_KEY, STACKS_DIR, SettingsError
from components.model import parse_settings
from components.model.layout import resolve_layout
from components.workloads.training.prefetch import prefetch_copy_command
from components.workloads.training.verl_config import CONFIG_DIR
from components.workloads.training.volumes import model_copy_dir, model_dir, oss_volumes
from offline import fakes
from offline.engine import StackOutputs, run_program
from offline.plan import stack_config
from offline.report.latency import PlatformRun
from tests.components.workloads.test_staging_cache import JOB, LIST_OBJECTS, staging_jobs
from tests.conftest import PROJECT, REPO, record, stack_settings

EXPERIMENT = "dev-grpo"
SFT = "models/my-sft/qwen-3b-step900/"
EXPORT = "checkpoints/gsm8k-tool-agent/base-run/global_step_40/actor/huggingface/"
LOADABLE = ["config.json", "generation_config.json", "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors", "tokenizer.json", "tokenizer_config.json"]


def settings_with(path: str, stack: str = EXPERIMENT) -> dict:
    raw = stack_settings(stack)
    raw = json.loads(json.dumps(raw))
    raw.setdefault("model", {}).update({"source": "oss", "path": path})
    return raw


def render(raw: dict, bucket_keys: list[str], stack: str = EXPERIMENT):
    config, secret_keys, _ = stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    s = parse_settings(raw)
    config[SETTINGS_KEY] = json.dumps(raw)
    name = s.platform_stack.rsplit("/", 1)[-1]
    platform = PlatformRun(name, parse_settings(stack_settings(name)), record(name), stack_settings(name))
    saved = dict(fakes.ACCOUNT.bucket_objects)
    fakes.ACCOUNT.bucket_objects[s.storage.bucket_name] = list(bucket_keys)
    try:
        return s, run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack,
                              stack_references={s.platform_stack: StackOutputs.of(platform.recording)})
    finally:
        fakes.ACCOUNT.bucket_objects.clear()
        fakes.ACCOUNT.bucket_objects.update(saved)


@pytest.mark.parametrize("path", [SFT, EXPORT])
def test_a_model_from_the_bucket_plans_with_verl_loading_it_from_there_and_no_hub_download(path):
    s, rec = render(settings_with(path), [path + k for k in LOADABLE])
    scripts = json.dumps([r.inputs["spec"]["template"]["spec"] for r in rec.by_type(JOB)])
    assert "stage_model" not in scripts and "model_job" not in staging_jobs(rec), "no Job downloads the model"
    assert "dataset_job" in staging_jobs(rec)  # the dataset is still staged
    rayjob = rec.by_type("kubernetes:ray.io/v1:RayJob")[0]
    words = shlex.split(rayjob.inputs["spec"]["entrypoint"])
    vol = oss_volumes(s)["models" if path.startswith("models/") else "checkpoints"]
    source = f"{vol.mount_path}/{path[len(vol.prefix):].rstrip('/')}"
    assert model_dir(s) == source
    layout = resolve_layout(s)
    if layout.model_copy_gib:  # verl reads the pod's copy of it, or the prefix itself when the copy fails
        assert f"actor_rollout_ref.model.path={model_copy_dir(s)}" in words and f"--source={source}" in words
        assert prefetch_copy_command(s, CONFIG_DIR)[-1] == "--list-source"  # no staging marker to read
    else:
        assert f"actor_rollout_ref.model.path={source}" in words
    # The preview listed the prefix before anything was created.
    assert path in [i["args"]["keyPrefix"] for i in rec.invokes if i["token"] == LIST_OBJECTS]


@pytest.mark.parametrize("keys,missing", [
    ([], "config.json and no weights"),
    (["config.json", "tokenizer.json"], "weights (*.safetensors or *.bin)"),
    (["model.safetensors"], "config.json"),
])
def test_a_prefix_without_a_loadable_model_is_refused_at_preview_naming_model_path(keys, missing):
    with pytest.raises(SettingsError) as err:
        render(settings_with(SFT), [SFT + k for k in keys])
    assert "model.path" in str(err.value) and missing in str(err.value)


def test_what_a_loadable_model_directory_needs():
    assert model_prefix_problems([SFT + k for k in LOADABLE], SFT) == []
    assert model_prefix_problems([SFT + "sub/model.safetensors", SFT + "config.json"], SFT) == [
        "weights (*.safetensors or *.bin)"]


@pytest.mark.parametrize("model,match", [
    ({"source": "oss"}, "model.path"),
    ({"source": "oss", "path": "kept/x/"}, "model.path"),
    ({"path": SFT}, "model.source"),
])
def test_a_model_from_the_bucket_needs_its_path_in_a_mounted_prefix(model, match):
    raw = json.loads(json.dumps(stack_settings(EXPERIMENT)))
    raw.setdefault("model", {}).update(model)
    with pytest.raises((SettingsError, ValueError), match=match):
        parse_settings(raw)


def test_a_stack_that_creates_its_bucket_cannot_start_from_a_model_in_it():
    with pytest.raises(SettingsError, match="storage.mode: new"):
        parse_settings(settings_with(SFT, "dev"))


def test_the_copier_lists_a_model_directory_no_staging_job_marked(tmp_path):
    from agent_tools import verl_ack_model_prefetch as mp

    source = tmp_path / "oss" / "checkpoints" / "p" / "e" / "global_step_4" / "actor" / "huggingface"
    for key in ("config.json", "model.safetensors", "tokenizer/tokenizer.json"):
        (source / key).parent.mkdir(parents=True, exist_ok=True)
        (source / key).write_bytes(key.encode() * 10)
    dest = tmp_path / "copy" / "checkpoints" / "x"
    marker = mp.copy_model(str(source), str(dest), log=lambda _: None, list_source=True)
    assert [f["key"] for f in marker["files"]] == ["config.json", "model.safetensors", "tokenizer/tokenizer.json"]
    assert mp.local_state(str(dest))[0] == "complete"
    (source / "config.json").unlink()
    with pytest.raises(RuntimeError, match="no config.json"):
        mp.copy_model(str(source), str(tmp_path / "copy2"), log=lambda _: None, list_source=True)


# --------------------------------------------------------------------------------------------- rerun of the same names
def _record(s) -> list[str]:
    from components.cloud.account_checks import CHECKPOINT_TRACKER
    from components.wiring import checkpoint_key_prefix
    from components.workloads.training.runs import RUN_RECORD_DIR, create_only_hyperparameters

    prefix = checkpoint_key_prefix(s)
    return [prefix + CHECKPOINT_TRACKER, prefix + "global_step_20/actor/model_world_size_8_rank_0.pt",
            *(f"{prefix}{RUN_RECORD_DIR}/{k}={v}" for k, v in create_only_hyperparameters(s).items())]


def test_a_rerun_of_the_same_names_continues_when_nothing_create_only_changed():
    raw = json.loads(json.dumps(stack_settings(EXPERIMENT)))
    s = parse_settings(raw)
    _, rec = render(raw, _record(s))
    assert "trainer.resume_mode=resume_path" not in rec.by_type("kubernetes:ray.io/v1:RayJob")[0].inputs["spec"][
        "entrypoint"]  # the trainer file's auto: the newest step under the names


@pytest.mark.parametrize("change,field", [
    ({"training": {"lr": 3e-6}}, "training.lr"),
    ({"training": {"rollout_n": 4}}, "training.rollout_n"),
    ({"model": {"source": "oss", "path": SFT}}, "model"),
])
def test_a_rerun_that_changed_a_create_only_hyperparameter_is_refused_naming_it(change, field):
    raw = json.loads(json.dumps(stack_settings(EXPERIMENT)))
    first = parse_settings(raw)
    for section, values in change.items():
        raw.setdefault(section, {}).update(values)
    keys = _record(first) + [SFT + k for k in LOADABLE]
    with pytest.raises(SettingsError) as err:
        render(raw, keys)
    assert f"{field}: {field} is" in str(err.value) and "training.experiment_name" in str(err.value)
    # A new experiment name is a new folder: no refusal.
    raw.setdefault("training", {})["experiment_name"] = "branch-2"
    render(raw, keys)


def test_the_entrypoint_records_the_first_runs_hyperparameters_once(tmp_path):
    from agent_tools import verl_ack_entrypoint as entry

    record = tmp_path / "ckpt" / "verl-ack-run"
    mounted = {"is_mount": lambda _: True}  # the pod's checkpoint volume
    vol = str(tmp_path / "ckpt")
    assert "recorded 2" in entry.record_run(str(record), ["training.lr=1e-06", "model=sha256-abc"], vol, **mounted)
    assert entry.record_run(str(record), ["training.lr=3e-06"], vol, **mounted) is None  # a rerun keeps the first
    assert sorted(p.name for p in record.iterdir()) == ["model=sha256-abc", "training.lr=1e-06"]
    # Outside a pod (the volume not mounted) nothing is written onto the machine's own disk.
    elsewhere = tmp_path / "host" / "verl-ack-run"
    assert "is not mounted" in entry.record_run(str(elsewhere), ["training.lr=1e-06"], str(tmp_path / "host"),
                                                is_mount=lambda _: False)
    assert not elsewhere.exists()


def test_a_staged_model_folder_and_a_capitalised_experiment_are_valid_places_to_start_from():
    raw = json.loads(json.dumps(stack_settings(EXPERIMENT)))
    raw.setdefault("model", {}).update({"source": "oss", "path": "models/Qwen2.5-3B-Instruct/33f25c227269/"})
    raw.setdefault("training", {}).update({"resume_from": "checkpoints/GSM8K/Run-A/global_step_40/"})
    s = parse_settings(raw)
    assert s.model.path == "models/Qwen2.5-3B-Instruct/33f25c227269/"
    with pytest.raises((SettingsError, ValueError), match="a bucket key prefix"):
        parse_settings({**raw, "training": {**raw["training"], "resume_from": "/checkpoints/x/global_step_1/"}})
