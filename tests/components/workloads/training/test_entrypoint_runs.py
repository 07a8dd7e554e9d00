"""The RayJob entrypoint run for real through the shells it passes, with stub commands in place of verl, the
preflight and the tools script: verl runs, then the tool runs' close-up, and the job ends with verl's exit code.

The two shells as KubeRay v1.7.0 and Ray build them: the submitter container runs `/bin/bash -ce -- "<cmd>"` where
<cmd> is `ray job submit ... -- <entrypoint> ;` joined with spaces (rayjob_controller.go
`configureSubmitterContainer`, common/job.go `BuildJobSubmitCommand`); `ray job submit` joins the words it
receives with `subprocess.list2cmdline` and the job supervisor runs that string with `shell=True`. In HTTPMode the
operator posts the string itself, so only Ray's shell reads it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from components.workloads.training.verl_config import CONFIG_DIR, TOOL_CONFIG_FILE, TOOLS_MODULE_FILE
from tests.components.workloads.training.test_rayjob import build

CLOSE_RUNS = f"{CONFIG_DIR}/{TOOLS_MODULE_FILE} --close-runs {CONFIG_DIR}/{TOOL_CONFIG_FILE}"

# Stands in for the image's python3: records each call; verl exits with $VERL_RC; the preflight exits with
# $PREFLIGHT_RC when that is set, else execs the command after its `--` as the real one does; the tools script's
# close-up exits 7, which must not become the job's code.
PYTHON3 = r"""#!/bin/bash
echo "$*" >> "$CALLS"
if [ "$1 $2" = "-m verl.trainer.main_ppo" ]; then exit "$VERL_RC"; fi
if [ "$1 $2" = "-m verl_ack_preflight" ]; then
  if [ -n "$PREFLIGHT_RC" ]; then exit "$PREFLIGHT_RC"; fi
  while [ "$1" != "--" ]; do shift; done; shift; exec "$@"
fi
case "$1 $2" in *verl_ack_tools.py\ --close-runs) exit 7;; esac
echo "unexpected python3 call: $*" >&2; exit 99
"""

# Stands in for `ray job submit --no-wait ... -- <words>`: what Ray's CLI and job supervisor do with the words.
RAY = f"""#!{sys.executable}
import os, subprocess, sys
words = sys.argv[1:]
entrypoint = subprocess.list2cmdline(words[words.index("--") + 1:])
rc = subprocess.run(entrypoint, shell=True).returncode
open(os.environ["JOB_RC"], "w").write(str(rc))
"""


def _shims(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("python3", PYTHON3), ("ray", RAY)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls"),
            "JOB_RC": str(tmp_path / "job_rc")}


def _run(tmp_path: Path, manifest: dict, verl_rc: int, preflight_rc: str = "") -> tuple[int, list[str]]:
    """The job's exit code as Ray records it, and the python3 calls in order."""
    env = {**_shims(tmp_path), "VERL_RC": str(verl_rc), "PREFLIGHT_RC": preflight_rc}
    entry = manifest["spec"]["entrypoint"]
    if manifest["spec"]["submissionMode"] == "HTTPMode":
        rc = subprocess.run(entry, shell=True, env=env).returncode
    else:
        submitter = " ".join(["ray", "job", "submit", "--address", "http://127.0.0.1:8265", "--no-wait", "--",
                              entry, ";"])
        subprocess.run(["/bin/bash", "-ce", "--", submitter], env=env, check=True)
        rc = int((tmp_path / "job_rc").read_text())
    return rc, (tmp_path / "calls").read_text().splitlines()


@pytest.mark.parametrize("verl_rc", [0, 1, 134])
@pytest.mark.parametrize("mode", ["SidecarMode", "K8sJobMode", "HTTPMode"])
def test_the_entrypoint_runs_verl_then_closes_the_tool_runs_and_ends_with_verls_code(tmp_path, mode, verl_rc):
    _, manifest = build("dev", {"job": {"submission_mode": mode}})
    rc, calls = _run(tmp_path, manifest, verl_rc)
    assert rc == verl_rc
    assert [c.split(" ")[:2] for c in calls] == [["-m", "verl.trainer.main_ppo"], CLOSE_RUNS.split(" ")[:2]]
    assert calls[1] == CLOSE_RUNS
    # verl got exactly its own words: nothing of the close-up leaked into its command line.
    assert calls[0].endswith("trainer.default_local_dir=/mnt/oss/checkpoints/gsm8k-tool-agent/"
                             "qwen2.5-3b-grpo-tool-agent-n16")


@pytest.mark.parametrize("verl_rc", [0, 1])
def test_behind_the_preflight_verl_still_runs_by_exec_and_the_close_up_follows(tmp_path, verl_rc):
    _, manifest = build("multinode")
    rc, calls = _run(tmp_path, manifest, verl_rc)
    assert rc == verl_rc
    assert [c.split(" ")[:2] for c in calls] == [["-m", "verl_ack_preflight"], ["-m", "verl.trainer.main_ppo"],
                                                CLOSE_RUNS.split(" ")[:2]]


def test_a_failed_preflight_never_starts_verl_and_the_job_ends_with_the_preflights_code(tmp_path):
    _, manifest = build("multinode")
    rc, calls = _run(tmp_path, manifest, 0, preflight_rc="1")
    assert rc == 1
    assert [c.split(" ")[:2] for c in calls] == [["-m", "verl_ack_preflight"], CLOSE_RUNS.split(" ")[:2]]


def test_without_mlflow_there_are_no_tool_runs_and_the_entrypoint_is_verl_alone(tmp_path):
    _, manifest = build("dev", {"tracking": {"enabled": False}, "training": {"logger": ["console"]}})
    assert "--close-runs" not in manifest["spec"]["entrypoint"]
    rc, calls = _run(tmp_path, manifest, 3)
    assert rc == 3 and len(calls) == 1
