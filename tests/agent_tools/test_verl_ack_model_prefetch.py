"""The model prefetch program (agent_tools/verl_ack_model_prefetch.py) run for real on directories standing in for the
OSS models volume and the pod's memory-backed copy: the copy follows the staging Job's marker, refuses what it cannot
hold, survives its own restart, and the wait step execs verl reading the copy, or the OSS volume when any copy is not
there, never failing the job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest

from agent_tools import verl_ack_model_prefetch as mp

PROGRAM = Path(mp.__file__)
FILES = {"config.json": b"{}", "model-00001-of-00002.safetensors": os.urandom(3000),
         "model-00002-of-00002.safetensors": os.urandom(1000), "tokenizer/tokenizer.json": b"{\"v\": 1}"}


def staged(tmp_path: Path, files: dict[str, bytes] = FILES, sizes: dict[str, int] | None = None) -> Path:
    """A staged prefix as the model Job leaves it: the files, then `<prefix>.complete` listing each key and size."""
    prefix = tmp_path / "oss" / "models" / "M" / "key0"
    for key, data in files.items():
        (prefix / key).parent.mkdir(parents=True, exist_ok=True)
        (prefix / key).write_bytes(data)
    listed = [{"key": k, "size": (sizes or {}).get(k, len(v)), "crc64": "0"} for k, v in sorted(files.items())]
    (prefix.parent / "key0.complete").write_text(json.dumps({"format": 1, "files": listed}))
    return prefix


def test_the_copy_holds_every_staged_file_and_writes_its_marker_last(tmp_path):
    source, dest = staged(tmp_path), tmp_path / "copy" / "M" / "key0"
    marker = mp.copy_model(str(source), str(dest), log=lambda _: None)
    for key, data in FILES.items():
        assert (dest / key).read_bytes() == data
    assert marker["total_bytes"] == sum(len(v) for v in FILES.values())
    assert mp.local_state(str(dest))[0] == "complete"
    assert not (tmp_path / "copy" / "M" / "key0.partial").exists()


def test_a_restarted_copier_finds_its_copy_and_reads_nothing_again(tmp_path, monkeypatch):
    source, dest = staged(tmp_path), tmp_path / "copy" / "key0"
    mp.copy_model(str(source), str(dest), log=lambda _: None)
    monkeypatch.setattr(mp.shutil, "copyfileobj", lambda *a, **k: pytest.fail("copied again"))
    assert mp.copy_model(str(source), str(dest), log=lambda _: None)["files"]


def test_a_model_larger_than_the_copys_directory_is_not_copied_and_says_which_setting(tmp_path, monkeypatch):
    source, dest = staged(tmp_path), tmp_path / "copy" / "key0"
    # Over its budget (the container's memory), whatever the directory shows free...
    with pytest.raises(RuntimeError, match="job.model_prefetch_gib"):
        mp.copy_model(str(source), str(dest), max_bytes=100, log=lambda _: None)
    # ...or over what the directory holds.
    monkeypatch.setattr(mp.shutil, "disk_usage", lambda _: types.SimpleNamespace(free=100))
    with pytest.raises(RuntimeError, match="job.model_prefetch_gib"):
        mp.copy_model(str(source), str(dest), log=lambda _: None)
    assert not dest.exists()


@pytest.mark.parametrize("case,needle", [
    ("no marker", "the model staging Job has not completed"),
    ("short file", "the staging marker says"),
    ("unsafe key", "unsafe key"),
])
def test_a_copy_that_cannot_be_trusted_is_reported_failed_with_its_reason(tmp_path, case, needle):
    if case == "no marker":
        source = tmp_path / "oss" / "models" / "M" / "key0"
        source.mkdir(parents=True)
    elif case == "short file":
        source = staged(tmp_path, sizes={"config.json": 99})
    else:
        source = staged(tmp_path, files={"../escape": b"x"})
    dest = tmp_path / "copy" / "key0"
    run = subprocess.run([sys.executable, str(PROGRAM), "copy", f"--source={source}", f"--dest={dest}", "--exit"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "FAILED" in run.stderr  # the copier never fails the pod
    state, detail = mp.local_state(str(dest))
    assert state == "failed" and needle in detail


def test_the_copier_ends_on_sigterm_during_or_after_the_copy_as_pid_1_of_its_container_must(tmp_path):
    source, dest = staged(tmp_path), tmp_path / "copy" / "key0"
    proc = subprocess.Popen([sys.executable, str(PROGRAM), "copy", f"--source={source}", f"--dest={dest}"],
                            stdout=subprocess.PIPE, text=True)
    assert "copied 4 files" in proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def _verl_words(tmp_path: Path, copy: Path) -> list[str]:
    """A stand-in for verl that prints the model path it was given."""
    script = "import sys; print([w for w in sys.argv if w.startswith('actor_rollout_ref.model.path=')][0])"
    return [sys.executable, "-c", script, "trainer.nnodes=1", f"actor_rollout_ref.model.path={copy}"]


def _wait(source: Path, dest: Path, tmp_path: Path, timeout: float = 30) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(PROGRAM.parent)}
    return subprocess.run([sys.executable, "-m", "verl_ack_model_prefetch", "wait", f"--source={source}",
                           f"--dest={dest}", "--nodes=1", f"--timeout-seconds={timeout}", "--",
                           *_verl_words(tmp_path, dest)], capture_output=True, text=True, env=env, timeout=120)


def test_with_the_copy_complete_verl_reads_the_copy(tmp_path):
    source, dest = staged(tmp_path), tmp_path / "copy" / "key0"
    mp.copy_model(str(source), str(dest), log=lambda _: None)
    run = _wait(source, dest, tmp_path)
    assert run.returncode == 0
    assert run.stdout.splitlines()[-1] == f"actor_rollout_ref.model.path={dest}"


def test_a_failed_or_unfinished_copy_sends_verl_to_the_oss_volume_with_a_warning_never_a_failure(tmp_path):
    source = staged(tmp_path)
    failed = tmp_path / "copy" / "failed"
    failed.parent.mkdir(parents=True)
    Path(f"{failed}.failed").write_text("RuntimeError: no room\n")
    run = _wait(source, failed, tmp_path)
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == f"actor_rollout_ref.model.path={source}"
    assert "no room" in run.stdout and "reads the weights from" in run.stdout
    unfinished = _wait(source, tmp_path / "copy" / "never", tmp_path, timeout=0.1)
    assert unfinished.stdout.splitlines()[-1] == f"actor_rollout_ref.model.path={source}"
    assert "did not finish within 0.1 s" in unfinished.stdout


def test_a_copy_changed_after_its_marker_is_not_trusted(tmp_path):
    source, dest = staged(tmp_path), tmp_path / "copy" / "key0"
    mp.copy_model(str(source), str(dest), log=lambda _: None)
    (dest / "config.json").write_bytes(b"{}{}")
    assert mp.local_state(str(dest))[0] == "failed"


def test_the_copier_finds_the_marker_where_the_staging_job_writes_it():
    # The program runs alone from the ConfigMap (standard library only), so it keeps its own copy of the rule.
    from pipeline.marker import marker_key

    for prefix in ("models/M/key0/", "/mnt/oss/models/M/key0", "a/b//"):
        assert mp.marker_of(prefix) == marker_key(prefix)


def test_the_fallback_rewrites_exactly_the_one_model_path_override():
    words = ["python3", "-m", "verl.trainer.main_ppo", "actor_rollout_ref.model.path=/c/k",
             "data.train_files=/c/k/x"]
    assert mp.with_source(words, "/c/k", "/oss/k") == [*words[:3], "actor_rollout_ref.model.path=/oss/k", words[4]]
    with pytest.raises(SystemExit, match="in 0"):
        mp.with_source(words[:3], "/c/k", "/oss/k")


def test_on_several_nodes_one_zero_cpu_task_pinned_to_each_node_reads_that_nodes_copy(monkeypatch, tmp_path):
    calls: list[dict] = []

    class Task:
        def __init__(self, fn):
            self.fn = fn

        def options(self, scheduling_strategy):
            calls.append({"node": scheduling_strategy.node_id, "soft": scheduling_strategy.soft})
            return self

        def remote(self, *a):
            return self.fn(*a)

    def remote(**kw):
        assert kw == {"num_cpus": 0}
        return Task

    dest = tmp_path / "copy" / "key0"
    Path(f"{dest}.failed").parent.mkdir(parents=True)
    Path(f"{dest}.failed").write_text("no room")
    nodes = [{"Alive": True, "NodeID": "n1", "NodeManagerAddress": "10.0.0.1"},
             {"Alive": True, "NodeID": "n2", "NodeManagerAddress": "10.0.0.2"},
             {"Alive": False, "NodeID": "n0", "NodeManagerAddress": "10.0.0.9"}]
    ray = types.SimpleNamespace(init=lambda **_: None, shutdown=lambda: None, nodes=lambda: nodes, remote=remote,
                                get=lambda r: r)
    strategies = types.SimpleNamespace(NodeAffinitySchedulingStrategy=lambda node_id, soft: types.SimpleNamespace(
        node_id=node_id, soft=soft))
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray.util", types.SimpleNamespace(scheduling_strategies=strategies))
    monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)
    states = mp.wait_ray(str(dest), 2, 5)
    assert calls == [{"node": "n1", "soft": False}, {"node": "n2", "soft": False}]
    assert states == {"10.0.0.1": ("failed", "no room"), "10.0.0.2": ("failed", "no room")}
    assert mp.wait_ray(str(dest), 3, 0.01) == {"ray": ("failed", "2 of 3 Ray nodes joined within 0.01 s")}


# --------------------------------------------------------------------------------------------- a copier killed
def _half_state(source: Path, dest: Path, step: str) -> None:
    """What a copier killed at `step` leaves behind in the pod's directory."""
    partial = Path(f"{dest}.partial")
    keys = sorted(FILES)
    if step == "copying":  # the first file half-written
        (partial / keys[0]).parent.mkdir(parents=True, exist_ok=True)
        (partial / keys[0]).write_bytes(FILES[keys[0]][:1])
        return
    target = dest if step in ("renamed", "writing its marker") else partial
    for key in keys:
        (target / key).parent.mkdir(parents=True, exist_ok=True)
        (target / key).write_bytes((source / key).read_bytes())
    if step == "writing its marker":
        Path(f"{dest}.complete.tmp4242").write_text('{"files": [')


STEPS = ["copying", "copied, not renamed", "renamed", "writing its marker"]


@pytest.mark.parametrize("step", STEPS)
def test_a_copier_restarted_after_a_kill_at_any_step_ends_in_a_usable_copy(tmp_path, step):
    source, dest = staged(tmp_path), tmp_path / "copy" / "M" / "key0"
    _half_state(source, dest, step)
    run = subprocess.run([sys.executable, str(PROGRAM), "copy", f"--source={source}", f"--dest={dest}", "--exit"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "FAILED" not in run.stderr, run.stderr
    assert mp.local_state(str(dest))[0] == "complete"
    for key, data in FILES.items():
        assert (dest / key).read_bytes() == data
    assert sorted(p.name for p in dest.parent.iterdir()) == ["key0", "key0.complete"]  # no half state left
    assert _wait(source, dest, tmp_path).stdout.splitlines()[-1] == f"actor_rollout_ref.model.path={dest}"


def test_a_copy_renamed_but_damaged_before_its_marker_is_copied_again_not_trusted(tmp_path):
    source, dest = staged(tmp_path), tmp_path / "copy" / "key0"
    _half_state(source, dest, "renamed")
    (dest / "config.json").write_bytes(b"")
    mp.copy_model(str(source), str(dest), log=lambda _: None)
    assert (dest / "config.json").read_bytes() == FILES["config.json"]
    assert mp.local_state(str(dest))[0] == "complete"


@pytest.mark.parametrize("step", STEPS)
def test_a_copier_killed_at_any_step_and_never_restarted_sends_verl_to_the_oss_volume(tmp_path, step):
    """The SidecarMode head never restarts a container: the copier's PID 1 outlives the killed copy (an OOM kill
    is SIGKILL) and reports it, so the wait step falls back at once instead of the job failing."""
    source, dest = staged(tmp_path), tmp_path / "copy" / "key0"
    args = mp.parse(["copy", f"--source={source}", f"--dest={dest}", "--exit"])[0]
    killed = [sys.executable, "-c", "import os, signal, sys\n"
              "os.kill(os.getpid(), signal.SIGKILL)"]
    _half_state(source, dest, step)
    saved = signal.getsignal(signal.SIGTERM)
    try:
        mp.supervise_copy(args, killed)
    finally:
        signal.signal(signal.SIGTERM, saved)
    state, detail = mp.local_state(str(dest))
    assert state == "failed" and "SIGKILL" in detail
    run = _wait(source, dest, tmp_path)
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == f"actor_rollout_ref.model.path={source}"


def test_a_failure_marker_that_cannot_be_written_still_leaves_the_copier_up(tmp_path, monkeypatch):
    def refuse(*_a, **_k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(mp, "_write_atomic", refuse)
    mp.report_failed(str(tmp_path / "copy" / "key0"), "/src", "boom")  # never raises
    args = mp.parse(["copy", f"--source={tmp_path / 'none'}", f"--dest={tmp_path / 'copy' / 'key0'}", "--exit"])[0]
    args.child = True
    assert mp.run_copy(args) == 1  # the child reports and ends; its parent stays up (above)


def test_the_copy_runs_as_the_oom_killers_first_choice_under_a_parent_that_stays(tmp_path):
    source, dest = staged(tmp_path), tmp_path / "copy" / "key0"
    args = mp.parse(["copy", f"--source={source}", f"--dest={dest}", "--max-gib=1"])[0]
    words = mp.child_words(args)
    assert words[2:] == ["copy", f"--source={source}", f"--dest={dest}", "--child", "--max-gib=1.0"]
    probe = [sys.executable, "-c", "import os; print(open('/proc/self/oom_score_adj').read().strip())"]
    out = subprocess.run([sys.executable, "-c", (
        "import sys, subprocess, time; sys.path.insert(0, sys.argv[1]); import verl_ack_model_prefetch as m\n"
        "a = m.parse(['copy', '--source=/x', '--dest=' + sys.argv[2], '--exit'])[0]\n"
        "m.supervise_copy(a, sys.argv[3:])"), str(PROGRAM.parent), str(dest), *probe],
        capture_output=True, text=True, timeout=60)
    if sys.platform.startswith("linux"):
        # Written right after the child starts; the probe may read before the write lands, so either is the child.
        assert out.stdout.strip() in {"1000", "0"}, out.stderr


def test_a_wait_step_that_cannot_check_the_copies_sends_verl_to_the_oss_volume(monkeypatch, tmp_path):
    source, dest = staged(tmp_path), tmp_path / "copy" / "key0"
    args = mp.parse(["wait", f"--source={source}", f"--dest={dest}", "--nodes=2", "--", "verl",
                     f"actor_rollout_ref.model.path={dest}"])
    execs: list[list[str]] = []

    def broken(*_a):
        raise ConnectionError("the Ray GCS is not reachable")
    monkeypatch.setattr(mp, "wait_ray", broken)
    monkeypatch.setattr(mp.os, "execvp", lambda _f, words: execs.append(words))
    mp.run_wait(*args)
    assert execs == [["verl", f"actor_rollout_ref.model.path={source}"]]


def test_on_several_nodes_a_worker_that_joins_after_the_head_is_waited_for(monkeypatch, tmp_path):
    dest = tmp_path / "copy" / "key0"
    mp.copy_model(str(staged(tmp_path)), str(dest), log=lambda _: None)
    polls = {"n": 0}

    def nodes():
        polls["n"] += 1
        head = {"Alive": True, "NodeID": "n1", "NodeManagerAddress": "10.0.0.1"}
        return [head] + ([{"Alive": True, "NodeID": "n2", "NodeManagerAddress": "10.0.0.2"}] if polls["n"] > 2 else [])

    class Task:
        def options(self, scheduling_strategy):
            return self

        def remote(self, *a):
            return mp.wait_local(*a)

    ray = types.SimpleNamespace(init=lambda **_: None, shutdown=lambda: None, nodes=nodes,
                                remote=lambda **_: (lambda fn: Task()), get=lambda r: r)
    strategies = types.SimpleNamespace(NodeAffinitySchedulingStrategy=lambda node_id, soft: None)
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray.util", types.SimpleNamespace(scheduling_strategies=strategies))
    monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)
    monkeypatch.setattr(mp, "POLL_SECONDS", 0.01)
    states = mp.wait_ray(str(dest), 2, 30)
    assert polls["n"] == 3 and {ip: s for ip, (s, _) in states.items()} == {"10.0.0.1": "complete",
                                                                           "10.0.0.2": "complete"}
