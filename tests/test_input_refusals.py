"""Inputs that would open the cluster, lose a user's files, or plan a job that never starts are refused at
preview, naming the setting: `plan.py --out` writes only into its own folders, admit CIDRs stay inside the VPC,
system namespaces stay the system's, an experiment matches its platform's queue and logs and fits its team's
quota, credential-shaped tag values never reach the plan, and `teardown.py --destroy` without a pulumi CLI says
what is missing."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

import plan
import teardown
from components.config import SETTINGS_KEY, STACKS_DIR, Settings, SettingsError
from components.config.exposure import ADDON_NAMESPACES, outside_private_ranges
from components.config.sharing import experiment_on_platform_problems
from components.model import parse_settings
from components.wiring import ray_namespace
from offline import plan as offline_plan
from tests.conftest import stack_settings

PLATFORM, EXPERIMENT = "dev-platform", "dev-grpo"


def refusal(raw: dict) -> str:
    with pytest.raises(SettingsError) as err:
        parse_settings(raw)
    return str(err.value)


# ============================================================================================== plan.py --out
def _git_repo(path):
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "notes.txt").write_text("mine")
    return path


def _folder(path, files: dict[str, str]):
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


@pytest.mark.parametrize("make", [
    lambda tmp: _git_repo(tmp / "repo"),
    lambda tmp: _folder(tmp / "stacks", {"Pulumi.dev.yaml": "x", "stack.schema.json": "{}"}),
    lambda tmp: _folder(tmp / "home", {"plan.json": "{}", "thesis.tex": "x"}),  # a plan's file name among others
], ids=["git-repository", "stacks-folder", "folder-with-a-plan-json-and-more"])
def test_plan_out_refuses_a_folder_it_did_not_write_and_deletes_nothing(tmp_path, capsys, make):
    out = make(tmp_path)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    assert plan.main(["--stack", "dev", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out} is not empty and holds no previous plan" in err and "Traceback" not in err
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_plan_out_refuses_a_file(tmp_path, capsys):
    target = tmp_path / "plan.txt"
    target.write_text("mine")
    assert plan.main(["--stack", "dev", "--out", str(target)]) == 2
    assert "is not a folder" in capsys.readouterr().err and target.read_text() == "mine"


def test_plan_out_replaces_its_own_previous_plan_and_an_empty_folder(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    assert plan.main(["--stack", "dev", "--out", str(out)]) == 0
    assert (out / offline_plan.PLAN_MARKER).is_file()
    (out / "manifests" / "stale.yaml").write_text("old")  # a previous plan's leftovers go with it
    assert plan.main(["--stack", "dev", "--out", str(out)]) == 0
    assert not (out / "manifests" / "stale.yaml").exists() and (out / "plan.json").is_file()


def test_a_plan_folder_written_before_the_marker_is_still_replaced(tmp_path):
    out = tmp_path / "o"
    (out / "manifests").mkdir(parents=True)
    (out / "plan.json").write_text("{}")
    (out / "plan.md").write_text("# old")
    offline_plan.check_out_folder(out)  # no refusal


# ============================================================================================== admit CIDRs
@pytest.mark.parametrize("cidr, open_", [("0.0.0.0/0", True), ("8.8.8.0/24", True), ("0.0.0.0/1", True),
                                         ("10.0.0.0/8", False), ("10.4.0.0/16", False), ("172.16.0.0/12", False),
                                         ("192.168.1.0/24", False), ("100.64.0.0/10", False), ("172.0.0.0/8", True)])
def test_a_cidr_is_vpc_internal_only_inside_the_private_ranges(cidr, open_):
    assert outside_private_ranges(cidr) is open_


def test_ray_admit_cidrs_open_to_the_world_are_refused_naming_the_setting():
    raw = stack_settings("multinode", {"gpu_pool": {"lingjun": {"ray_admit_cidrs": ["10.4.0.0/16", "0.0.0.0/0"]}}})
    message = refusal(raw)
    assert "gpu_pool.lingjun.ray_admit_cidrs lists 0.0.0.0/0" in message and "8265" in message
    assert "10.4.0.0/16" not in message.split("lists", 1)[1].split(",")[0]


def test_host_network_cidrs_open_to_the_world_are_refused_naming_the_setting():
    message = refusal(stack_settings("multinode", {"job": {"host_network_cidrs": ["0.0.0.0/0"]}}))
    assert "job.host_network_cidrs lists 0.0.0.0/0" in message and "MLflow" in message


def test_the_shipped_admit_lists_are_vpc_internal():
    Settings.model_validate(stack_settings("multinode"))


# ============================================================================================== namespaces
@pytest.mark.parametrize("namespace", ["kube-system", "default", "kube-public", "kube-anything", "kuberay-system"])
def test_a_system_namespace_for_the_privileged_ray_pods_is_refused(namespace):
    message = refusal(stack_settings("multinode", {"job": {"ray_namespace": namespace}}))
    assert f"job.ray_namespace {namespace!r}" in message


@pytest.mark.parametrize("field", ["job", "sandbox"])
def test_a_system_namespace_for_the_job_or_the_sandboxes_is_refused(field):
    message = refusal(stack_settings("dev", {field: {"namespace": "kube-system"}}))
    assert f"{field}.namespace 'kube-system'" in message


def test_the_addon_namespaces_are_the_ones_the_program_installs_into():
    from components.cloud.addons import KUBERAY_NAMESPACE
    from components.cloud.identity import CSI_FUSE_NAMESPACE

    assert ADDON_NAMESPACES == {KUBERAY_NAMESPACE, CSI_FUSE_NAMESPACE}


# ============================================================================================== experiment vs platform
def _pair(platform_over: dict | None = None, experiment_over: dict | None = None):
    return (Settings.model_validate(stack_settings(PLATFORM, platform_over)),
            Settings.model_validate(stack_settings(EXPERIMENT, experiment_over)))


def problems(platform, experiment):
    return experiment_on_platform_problems(platform, experiment, ray_namespace(experiment))


def test_the_shipped_pairs_match_their_platform():
    assert problems(*_pair()) == []
    sweep = Settings.model_validate(stack_settings("dev-sweep"))
    assert problems(_pair()[0], sweep) == []


def test_a_team_quota_smaller_than_the_experiments_job_is_refused():
    platform, experiment = _pair({"queue": {"teams": {"verl-dev-grpo": {"gpus": 4, "min_gpus": 4}}}})
    [(field, message)] = problems(platform, experiment)
    assert field == "job.namespace"
    assert "queue.teams.verl-dev-grpo.gpus) is 4 GPUs but this experiment's RayJob needs 8" in message


@pytest.mark.parametrize("over, field", [
    ({"queue": {"enabled": False}}, "queue.enabled"),
    ({"logs": {"enabled": False}}, "logs.enabled"),
    ({"logs": {"retention_days": 7}}, "logs.retention_days"),
    ({"logs": {"logstore": "elsewhere"}}, "logs.logstore"),
])
def test_an_experiment_whose_queue_or_logs_differ_from_its_platform_is_refused(over, field):
    platform, experiment = _pair(experiment_over=over)
    assert [f for f, _ in problems(platform, experiment)] == [field]


def test_plan_refuses_the_pair_naming_the_field(tmp_path, capsys, monkeypatch):
    raw = stack_settings(PLATFORM, {"queue": {"teams": {"verl-dev-grpo": {"gpus": 4, "min_gpus": 4}}}})
    platform_file = tmp_path / f"Pulumi.{PLATFORM}.yaml"
    doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{PLATFORM}.yaml").read_text())
    doc["config"][SETTINGS_KEY] = raw
    platform_file.write_text(yaml.safe_dump(doc))
    files = lambda name: platform_file if name == PLATFORM else STACKS_DIR / name  # noqa: E731
    monkeypatch.setattr(plan, "stack_file", files)  # the command's own lookup
    monkeypatch.setattr(offline_plan, "stack_file", files)  # the platform's, when the experiment renders it
    assert plan.main(["--stack", str(STACKS_DIR / f"Pulumi.{EXPERIMENT}.yaml"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "job.namespace: the platform's quota for team 'verl-dev-grpo'" in err and not (tmp_path / "o").exists()


def test_an_experiment_that_sets_the_platforms_queue_teams_is_refused():
    message = refusal(stack_settings(EXPERIMENT, {"queue": {"teams": {"verl-dev-grpo": {"gpus": 8}}}}))
    assert "queue.teams is the platform's quota tree" in message


# ============================================================================================== secrets in tags
ACCESS_KEY_ID = "LTAI" + "5tAbCdEfGhIjKlMnOpQrSt"


@pytest.mark.parametrize("tags", [{"owner": ACCESS_KEY_ID}, {"note": "key " + ACCESS_KEY_ID},
                                  {"ci": "ghp_" + "a" * 36}, {ACCESS_KEY_ID: "x"}])
def test_a_credential_shaped_tag_is_refused_before_it_reaches_every_resource(tags):
    assert "holds a value shaped like a credential" in refusal(stack_settings("dev", {"tags": tags}))


def test_ordinary_tags_pass():
    Settings.model_validate(stack_settings("dev", {"tags": {"owner": "team-llm", "cost-center": "task-1234567890123"}}))


def test_plan_writes_no_credential_shaped_tag(tmp_path, capsys):
    path = tmp_path / "Pulumi.t.yaml"
    path.write_text(json.dumps({"config": {SETTINGS_KEY: stack_settings("dev", {"tags": {"owner": ACCESS_KEY_ID}})}}))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "tags.owner holds a value shaped like a credential" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ============================================================================================== teardown without pulumi
def test_teardown_destroy_without_the_pulumi_cli_says_what_to_install_and_touches_nothing():
    lines: list[str] = []

    def load_stack(name):
        raise AssertionError("nothing is read before the CLI check")

    rc = teardown.main(["--stack", "dev", "--destroy"], load_stack=load_stack, which=lambda name: None,
                       log=lines.append, err=lines.append)
    assert rc == 2
    [line] = lines
    assert "no `pulumi` CLI is on PATH" in line and f"--version {teardown.PULUMI_VERSION}" in line
    assert "nothing copied or destroyed" in line


def test_the_quota_checked_is_the_one_of_the_namespace_the_rayjob_queues_in():
    platform, experiment = _pair({"queue": {"teams": {"verl-dev-grpo-ray": {"gpus": 4}}}})
    [(field, message)] = experiment_on_platform_problems(platform, experiment, "verl-dev-grpo-ray")
    assert field == "job.ray_namespace" and "queue.teams.verl-dev-grpo-ray.gpus) is 4 GPUs" in message
