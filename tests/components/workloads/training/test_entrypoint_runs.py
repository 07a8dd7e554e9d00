"""The RayJob entrypoint run for real through the shells and the `ray job submit` joins it passes, with the job's
own entrypoint program (agent_tools/verl_ack_entrypoint.py, from the generated ConfigMap) and stub commands in place
of verl and the preflight: verl runs as the program's child and the job ends with verl's exit code, whichever way
Ray quotes.

The two shells as KubeRay v1.7.0 and Ray build them: the submitter container runs `/bin/bash -ce -- "<cmd>"` where
<cmd> is `ray job submit ... -- <entrypoint> ;` joined with spaces (rayjob_controller.go
`configureSubmitterContainer`, common/job.go `BuildJobSubmitCommand`); `ray job submit` joins the words it
receives with `subprocess.list2cmdline` up to Ray 2.55 and with `shlex.join` from 2.56 (ray/dashboard/modules/job/
cli.py), and the job supervisor runs that string with `shell=True`. In HTTPMode the operator posts the string
itself, so only Ray's shell reads it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from components.workloads.training.verl_config import CONFIG_DIR, ENTRYPOINT_MODULE_FILE
from tests.agent_tools.harness import write_config_map
from tests.components.workloads.training.test_rayjob import build, settings_for

ENTRY = f"{CONFIG_DIR}/{ENTRYPOINT_MODULE_FILE}"

# Stands in for the image's python3: records each call; runs the job's entrypoint program (the ConfigMap's copy) with
# the real interpreter; verl exits with $VERL_RC; the preflight exits with $PREFLIGHT_RC when that is set, else
# execs the command after its `--` as the real one does; the model prefetch's wait step execs it too (its own runs:
# tests/agent_tools/test_verl_ack_model_prefetch.py).
PYTHON3 = rf"""#!/bin/bash
echo "$*" >> "$CALLS"
if [ "$1" = "{ENTRY}" ]; then shift; exec "{sys.executable}" "$CONFIG_COPY/{ENTRYPOINT_MODULE_FILE}" "$@"; fi
if [ "$1 $2" = "-m verl.trainer.main_ppo" ]; then exit "$VERL_RC"; fi
if [ "$1 $2" = "-m verl_ack_model_prefetch" ]; then
  while [ "$1" != "--" ]; do shift; done; shift; exec "$@"
fi
if [ "$1 $2" = "-m verl_ack_preflight" ]; then
  if [ -n "$PREFLIGHT_RC" ]; then exit "$PREFLIGHT_RC"; fi
  while [ "$1" != "--" ]; do shift; done; shift; exec "$@"
fi
echo "unexpected python3 call: $*" >&2; exit 99
"""

# Stands in for `ray job submit --no-wait ... -- <words>`: what Ray's CLI (either join) and job supervisor do.
RAY = f"""#!{sys.executable}
import os, shlex, subprocess, sys
words = sys.argv[1:]
join = subprocess.list2cmdline if os.environ["RAY_JOIN"] == "list2cmdline" else shlex.join
entrypoint = join(words[words.index("--") + 1:])
rc = subprocess.run(entrypoint, shell=True).returncode
open(os.environ["JOB_RC"], "w").write(str(rc))
"""

JOINS = ["list2cmdline", "shlex.join"]

# The image's Ray as the entrypoint's node wait reads it (multi-node): every node alive with 8 GPUs.
FAKE_RAY = """
def init(**_): pass
def shutdown(): pass
def nodes():
    return [{"Alive": True, "NodeID": str(i), "NodeManagerAddress": f"10.0.0.{i}", "Resources": {"GPU": 8}}
            for i in range(1, 3)]
"""


def _shims(tmp_path: Path, stack: str, join: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("python3", PYTHON3), ("ray", RAY)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    config = write_config_map(tmp_path, settings_for(stack)).parent
    (tmp_path / "site" / "ray").mkdir(parents=True)
    (tmp_path / "site" / "ray" / "__init__.py").write_text(FAKE_RAY)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return {**env, "PYTHONPATH": str(tmp_path / "site"), "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "CALLS": str(tmp_path / "calls"),
            "JOB_RC": str(tmp_path / "job_rc"), "CONFIG_COPY": str(config), "RAY_JOIN": join}


def _run(tmp_path: Path, stack: str, manifest: dict, verl_rc: int, join: str, preflight_rc: str = ""):
    """The job's exit code as Ray records it, and the python3 calls in order."""
    env = {**_shims(tmp_path, stack, join), "VERL_RC": str(verl_rc), "PREFLIGHT_RC": preflight_rc}
    entry = manifest["spec"]["entrypoint"]
    if manifest["spec"]["submissionMode"] == "HTTPMode":
        rc = subprocess.run(entry, shell=True, env=env).returncode
    else:
        submitter = " ".join(["ray", "job", "submit", "--address", "http://127.0.0.1:8265", "--no-wait", "--",
                              entry, ";"])
        subprocess.run(["/bin/bash", "-ce", "--", submitter], env=env, check=True)
        rc = int((tmp_path / "job_rc").read_text())
    return rc, (tmp_path / "calls").read_text().splitlines()


def test_both_joins_of_ray_job_submit_give_the_program_the_same_words():
    _, manifest = build("multinode")
    words = manifest["spec"]["entrypoint"].split(" ")
    assert subprocess.list2cmdline(words) == __import__("shlex").join(words) == manifest["spec"]["entrypoint"]


@pytest.mark.parametrize("join", JOINS)
@pytest.mark.parametrize("verl_rc", [0, 1, 134])
@pytest.mark.parametrize("mode", ["SidecarMode", "K8sJobMode", "HTTPMode"])
def test_the_entrypoint_runs_verl_as_its_child_and_ends_with_verls_code(tmp_path, mode, verl_rc, join):
    _, manifest = build("dev", {"job": {"submission_mode": mode}})
    rc, calls = _run(tmp_path, "dev", manifest, verl_rc, join)
    assert rc == verl_rc
    assert calls[0].split(" ")[0] == ENTRY and "--tool-config=/etc/verl-ack/config/tool_config.yaml" in calls[0]
    assert [c.split(" ")[:2] for c in calls[1:]] == [["-m", "verl_ack_model_prefetch"], ["-m", "verl.trainer.main_ppo"]]
    # The wait step and verl got exactly their own words; with no tracking server here, the only word appended is where
    # a reward worker writes a refusal (verl_ack_entrypoint.py `--refusal-dir`).
    refusal = "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_ACK_REFUSAL_FILE='/mnt/oss/checkpoints/"
    for call, own in ((calls[1], manifest["spec"]["entrypoint"].split(" -- python3 ", 1)[1]),
                      (calls[2], manifest["spec"]["entrypoint"].rsplit(" -- python3 ", 1)[1])):
        words, last = call.rsplit(" ", 1)
        assert words == own and last.startswith(refusal) and "/.verl-ack-refusals/" in last


@pytest.mark.parametrize("join", JOINS)
@pytest.mark.parametrize("verl_rc", [0, 1])
def test_behind_the_preflight_verl_still_runs_by_exec(tmp_path, verl_rc, join):
    _, manifest = build("multinode")
    rc, calls = _run(tmp_path, "multinode", manifest, verl_rc, join)
    assert rc == verl_rc
    assert [c.split(" ")[:2] for c in calls][1:] == [["-m", "verl_ack_model_prefetch"], ["-m", "verl_ack_preflight"],
                                                    ["-m", "verl.trainer.main_ppo"]]


@pytest.mark.parametrize("join", JOINS)
def test_a_failed_preflight_never_starts_verl_and_the_job_ends_with_the_preflights_code(tmp_path, join):
    _, manifest = build("multinode")
    rc, calls = _run(tmp_path, "multinode", manifest, 0, join, preflight_rc="1")
    assert rc == 1
    assert [c.split(" ")[:2] for c in calls][1:] == [["-m", "verl_ack_model_prefetch"], ["-m", "verl_ack_preflight"]]


def test_without_mlflow_the_program_gets_no_tool_config(tmp_path):
    s = {"tracking": {"enabled": False}, "training": {"logger": ["console"]}}
    _, manifest = build("dev", s)
    assert "--tool-config" not in manifest["spec"]["entrypoint"]
    rc, calls = _run(tmp_path, "dev", manifest, 3, "shlex.join")
    assert rc == 3 and len(calls) == 3
