"""The job's entrypoint program (agent_tools/verl_ack_entrypoint.py, the ConfigMap's copy) run as a real process
around a stand-in verl that behaves as verl's pieces do (it reads the run id the entrypoint hands every Ray worker,
creates two tool runs nested under it as the agent-loop workers do, and ends the trainer run FINISHED as verl's
`Tracking.finish` does even after an error), against a tracking store that answers as MlflowClient does (mlflow is
not installed here): every run of the job ends FINISHED, FAILED or KILLED as the job did, and no other job's run is
touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from components.workloads.training.verl_config import ENTRYPOINT_MODULE_FILE, STOP_GRACE_SECONDS, TOOL_CONFIG_FILE
from tests.agent_tools.harness import write_config_map
from tests.components.workloads.training.test_rayjob import settings_for

# MlflowClient as the entrypoint uses it, over a JSON file (one process at a time writes it).
FAKE_MLFLOW_TRACKING = r'''
import json, os, types, uuid

def _load():
    with open(os.environ["FAKE_MLFLOW_STATE"]) as f:
        return json.load(f)

def _save(state):
    with open(os.environ["FAKE_MLFLOW_STATE"], "w") as f:
        json.dump(state, f)

def _run(run_id, r):
    return types.SimpleNamespace(info=types.SimpleNamespace(run_id=run_id, experiment_id=r["experiment"],
                                 status=r["status"], run_name=r["name"]), data=types.SimpleNamespace(tags=r["tags"]))

class MlflowClient:
    def __init__(self, uri):
        assert uri == os.environ["MLFLOW_TRACKING_URI"]

    def get_experiment_by_name(self, name):
        exp = _load()["experiments"].get(name)
        return None if exp is None else types.SimpleNamespace(experiment_id=exp)

    def create_experiment(self, name):
        state = _load()
        state["experiments"][name] = str(len(state["experiments"]) + 1)
        _save(state)
        return state["experiments"][name]

    def create_run(self, experiment_id, run_name=None, tags=None):
        state = _load()
        run_id = uuid.uuid4().hex
        state["runs"][run_id] = {"experiment": experiment_id, "name": run_name, "tags": dict(tags or {}),
                                 "status": "RUNNING"}
        _save(state)
        return _run(run_id, state["runs"][run_id])

    def get_run(self, run_id):
        return _run(run_id, _load()["runs"][run_id])

    def search_runs(self, experiment_ids, filter_string="", max_results=1000, order_by=None):
        prefix = "tags.`mlflow.parentRunId` = '"
        assert filter_string.startswith(prefix) and filter_string.endswith("'"), filter_string
        parent = filter_string[len(prefix):-1]
        return [_run(i, r) for i, r in _load()["runs"].items()
                if r["experiment"] in experiment_ids and r["tags"].get("mlflow.parentRunId") == parent]

    def set_terminated(self, run_id, status="FINISHED"):
        state = _load()
        state["runs"][run_id]["status"] = status
        _save(state)
'''

# verl as far as the runs go: the two overrides reach it, its workers nest tool runs, its Tracking ends the run.
FAKE_VERL = r'''
import os, signal, sys, time
sys.path.insert(0, os.environ["FAKE_MLFLOW_PATH"])
from mlflow.tracking import MlflowClient
words = dict(w.split("=", 1) for w in sys.argv[1:] if w.startswith("+ray_kwargs"))
prefix = "+ray_kwargs.ray_init.runtime_env.env_vars."
run_id, job = words[prefix + "MLFLOW_RUN_ID"].strip("'"), words[prefix + "VERL_ACK_JOB_ID"].strip("'")
client = MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
exp = client.get_run(run_id).info.experiment_id
for worker in (1, 2):
    client.create_run(exp, run_name=f"tools-{worker}", tags={"verl_ack.role": "agent-tools", "verl_ack.job": job,
                                                             "mlflow.parentRunId": run_id})
how = os.environ["FAKE_VERL"]
if how in ("exit0", "exit1"):
    client.set_terminated(run_id)  # verl's Tracking.finish: mlflow.end_run(), FINISHED whatever happened
    sys.exit(0 if how == "exit0" else 1)
if how == "os_exit":
    os._exit(3)
if how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
if how == "ignore_term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    def on_term(signum, frame):
        open(os.environ["CHILD_TERMED"], "w").write("yes")
        sys.exit(143)
    signal.signal(signal.SIGTERM, on_term)
open(os.environ["CHILD_READY"], "w").write("yes")
while True:
    time.sleep(0.1)
'''

JOB = "verl-grpo-x7k2p"


@pytest.fixture
def job_env(tmp_path):
    """The ConfigMap's files, the fake tracking store with another job's live runs in it, and the environment Ray's
    job supervisor gives the entrypoint."""
    config = write_config_map(tmp_path, settings_for("dev")).parent
    fake = tmp_path / "fake-mlflow"
    (fake / "mlflow").mkdir(parents=True)
    (fake / "mlflow" / "__init__.py").write_text("")
    (fake / "mlflow" / "tracking.py").write_text(FAKE_MLFLOW_TRACKING)
    (tmp_path / "fake_verl.py").write_text(FAKE_VERL)
    state = tmp_path / "mlflow.json"
    other = {"experiment": "1", "name": "qwen2.5-3b-grpo-tool-agent-n16", "tags": {"verl_ack.job": "another"},
             "status": "RUNNING"}
    other_tools = {"experiment": "1", "name": "t", "status": "RUNNING",
                   "tags": {"verl_ack.role": "agent-tools", "mlflow.parentRunId": "other-trainer"}}
    state.write_text(json.dumps({"experiments": {"gsm8k-tool-agent": "1"},
                                 "runs": {"other-trainer": other, "other-tools": other_tools}}))
    env = {**os.environ, "PYTHONPATH": str(fake), "FAKE_MLFLOW_PATH": str(fake), "FAKE_MLFLOW_STATE": str(state),
           "MLFLOW_TRACKING_URI": "http://mlflow.verl.svc.cluster.local:5000",
           "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"runtime_env": {}, "metadata": {"job_submission_id": JOB}}),
           "CHILD_READY": str(tmp_path / "ready"), "CHILD_TERMED": str(tmp_path / "termed")}
    return types.SimpleNamespace(config=config, state=state, env=env, tmp=tmp_path)


def start(job_env, how: str, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, str(job_env.config / ENTRYPOINT_MODULE_FILE),
           f"--tool-config={job_env.config / TOOL_CONFIG_FILE}", f"--pid-file={job_env.tmp / 'pid'}", *extra, "--",
           sys.executable, str(job_env.tmp / "fake_verl.py"), "-m", "verl.trainer.main_ppo", "trainer.nnodes=1"]
    return subprocess.Popen(cmd, env={**job_env.env, "FAKE_VERL": how}, stderr=subprocess.PIPE, text=True)


def runs(job_env) -> dict:
    return json.loads(job_env.state.read_text())["runs"]


def wait_for(path: Path, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def assert_job_runs(job_env, status: str) -> None:
    mine = {i: r for i, r in runs(job_env).items() if not i.startswith("other")}
    trainer = [r for r in mine.values() if r["tags"].get("verl_ack.role") == "trainer"]
    tools = [r for r in mine.values() if r["tags"].get("verl_ack.role") == "agent-tools"]
    assert len(trainer) == 1 and len(tools) == 2 and len(mine) == 3
    assert trainer[0]["tags"]["verl_ack.job"] == JOB and trainer[0]["name"] == "qwen2.5-3b-grpo-tool-agent-n16"
    assert {r["status"] for r in mine.values()} == {status}
    # Another job with the same experiment and run names keeps its live runs.
    assert runs(job_env)["other-trainer"]["status"] == runs(job_env)["other-tools"]["status"] == "RUNNING"


@pytest.mark.parametrize("how,status,rc", [
    ("exit0", "FINISHED", 0),
    ("exit1", "FAILED", 1),      # verl ended its run FINISHED after the error; the entrypoint corrects it
    ("os_exit", "FAILED", 3),    # a hard crash: nothing of verl's ran
    ("sigkill", "FAILED", 137),  # an OOM kill or `kill -9`
])
def test_every_run_of_the_job_ends_in_the_state_the_job_ended_in(job_env, how, status, rc):
    proc = start(job_env, how)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == rc, err
    assert_job_runs(job_env, status)
    assert f"3 run(s) {status}" in err
    assert not (job_env.tmp / "pid").exists()  # a later preStop hook signals nothing


def test_a_stopped_job_passes_the_stop_to_verl_and_its_runs_end_killed(job_env):
    proc = start(job_env, "sleep")
    wait_for(Path(job_env.env["CHILD_READY"]))
    proc.send_signal(signal.SIGTERM)  # what Ray's supervisor sends on `ray job stop` or the RayJob's deletion
    _, err = proc.communicate(timeout=60)
    assert Path(job_env.env["CHILD_TERMED"]).read_text() == "yes"
    assert proc.returncode == 143
    assert_job_runs(job_env, "KILLED")


def test_the_pre_stop_hook_stops_the_job_and_waits_for_its_close_up(job_env):
    proc = start(job_env, "sleep")
    wait_for(Path(job_env.env["CHILD_READY"]))
    hook = subprocess.run([sys.executable, str(job_env.config / ENTRYPOINT_MODULE_FILE), "--stop",
                           f"--pid-file={job_env.tmp / 'pid'}"], env=job_env.env, timeout=60)
    assert hook.returncode == 0
    assert proc.poll() is not None  # the hook returned after the entrypoint had finished
    assert_job_runs(job_env, "KILLED")
    proc.communicate()


def test_a_child_that_ignores_the_stop_is_killed_after_the_grace(job_env):
    proc = start(job_env, "ignore_term", "--stop-grace-seconds=1")
    wait_for(Path(job_env.env["CHILD_READY"]))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert "did not exit within 1 s of the stop: killing it" in err
    assert proc.returncode == 137
    assert_job_runs(job_env, "KILLED")


def test_without_a_tracking_server_the_entrypoint_only_runs_the_child(job_env):
    env = {k: v for k, v in job_env.env.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.run([sys.executable, str(job_env.config / ENTRYPOINT_MODULE_FILE),
                           f"--tool-config={job_env.config / TOOL_CONFIG_FILE}", "--", sys.executable, "-c",
                           "import sys; print(sys.argv[1:]); sys.exit(5)", "verl.trainer.main_ppo"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 5 and proc.stdout.strip() == "['verl.trainer.main_ppo']"  # nothing appended
    assert set(runs(job_env)) == {"other-trainer", "other-tools"}


def test_an_mlflow_outage_never_changes_the_jobs_exit_code(job_env):
    env = {**job_env.env, "PYTHONPATH": str(job_env.tmp / "nowhere")}  # `import mlflow` fails
    proc = subprocess.run([sys.executable, str(job_env.config / ENTRYPOINT_MODULE_FILE),
                           f"--tool-config={job_env.config / TOOL_CONFIG_FILE}", "--", sys.executable, "-c",
                           "import sys; sys.exit(0)"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "could not create the trainer's MLflow run" in proc.stderr


def test_a_reward_refusal_stops_verl_fails_the_job_and_says_why(job_env):
    """verl's v1 trainer only logs an exception of the reward; the reward writes its reason where the entrypoint
    watches (VERL_ACK_REFUSAL_FILE, on the shared checkpoint volume), and the entrypoint stops the job with it."""
    refusals = job_env.tmp / "checkpoints" / ".verl-ack-refusals"
    proc = start(job_env, "sleep", f"--refusal-dir={refusals}")
    wait_for(Path(job_env.env["CHILD_READY"]))
    refusals.mkdir(parents=True)
    (refusals / f"{JOB}.txt").write_text("a trajectory reached the reward without 'verl_ack_model_text'")
    _, err = proc.communicate(timeout=60)
    assert Path(job_env.env["CHILD_TERMED"]).read_text() == "yes"  # verl got the stop
    assert proc.returncode == 3
    assert "the reward refused a trajectory: a trajectory reached the reward without 'verl_ack_model_text'" in err
    assert_job_runs(job_env, "FAILED")
    assert not (refusals / f"{JOB}.txt").exists()  # its own file: a retry of the job starts without it


def test_every_ray_worker_learns_where_to_write_a_refusal(job_env):
    """The file reaches the reward workers as the run id does: a runtime_env env var override on verl's command."""
    refusals = job_env.tmp / "refusals"
    env = {k: v for k, v in job_env.env.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.run([sys.executable, str(job_env.config / ENTRYPOINT_MODULE_FILE), f"--refusal-dir={refusals}",
                           "--", sys.executable, "-c", "import sys; print(sys.argv[1:])", "verl.trainer.main_ppo"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_ACK_REFUSAL_FILE='{refusals}/{JOB}.txt'" in proc.stdout


def test_the_reward_and_the_entrypoint_name_the_same_refusal_variable():
    from components.workloads.training.verl_config import ENTRYPOINT_SOURCE, REWARD_SOURCE

    def constant(path, name):
        return next(line.split("=", 1)[1].split("#")[0].strip().strip('"') for line in path.read_text().splitlines()
                    if line.startswith(f"{name} ="))

    assert constant(REWARD_SOURCE, "REFUSAL_FILE_ENV") == constant(ENTRYPOINT_SOURCE, "REFUSAL_ENV") \
        == "VERL_ACK_REFUSAL_FILE"


# --------------------------------------------------------------------------------------------- the pieces it relies on
def test_the_run_id_reaches_verls_tracking_and_every_worker_through_verls_own_config(tmp_path):
    """The two words the entrypoint appends compose into verl's config in struct mode (ray_kwargs.ray_init.runtime_env
    is what main_ppo passes to ray.init), and verl's Tracking attaches to MLFLOW_RUN_ID."""
    from tests.components.workloads.training.test_rayjob import SITE
    from tests.components.workloads.training.test_verl_config import compose_job

    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    words = entry.child_command(["python3", "-m", "verl.trainer.main_ppo"], "1234e5678", JOB)[3:]
    assert (SITE / "verl/trainer/main_ppo.py").read_text().count('config.ray_kwargs.get("ray_init", {})') == 1
    with pytest.MonkeyPatch.context() as mp:
        from tests.components.workloads.training.test_verl_config import VERL

        for name, path in (("verl", VERL), ("verl.trainer", VERL / "trainer"),
                           ("verl.trainer.config", VERL / "trainer" / "config")):
            spec = __import__("importlib.util").util.spec_from_file_location(
                name, path / "__init__.py", submodule_search_locations=[str(path)])
            mp.setitem(sys.modules, name, __import__("importlib.util").util.module_from_spec(spec))
        cfg = compose_job(tmp_path, settings_for("dev"), extra=words)
    env_vars = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert dict(env_vars) == {"MLFLOW_RUN_ID": "1234e5678", "VERL_ACK_JOB_ID": JOB}  # strings, not a float
    tracking = (SITE / "verl/utils/tracking.py").read_text()
    assert 'run_id = os.environ.get("MLFLOW_RUN_ID")' in tracking and "mlflow.start_run(run_id=run_id)" in tracking


def test_the_tools_nest_their_run_under_the_jobs_trainer_run_by_id(build_tools, fake_client, monkeypatch):
    from tests.agent_tools.test_verl_ack_tools import FakeMlflow, run_call

    module, tools = build_tools(client=fake_client)
    mlflow = FakeMlflow()
    for name, mod in mlflow.modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.verl.svc.cluster.local:5000")
    monkeypatch.setenv("MLFLOW_RUN_ID", "the-jobs-trainer-run")
    monkeypatch.setenv("VERL_ACK_JOB_ID", JOB)
    run_call(tools["run_code_once"], {"code": "1"})
    module.STATS.flush()
    ((_, tags, _),) = mlflow.runs
    assert tags["mlflow.parentRunId"] == "the-jobs-trainer-run" and tags["verl_ack.job"] == JOB
    assert not hasattr(mlflow, "search")  # no lookup by name


def test_the_stop_budget_fits_inside_what_ray_and_kubernetes_allow():
    from components.workloads.training.run_spec import STOP_WAIT_SECONDS, TERMINATION_GRACE_SECONDS

    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    assert entry.STOP_GRACE_SECONDS == STOP_GRACE_SECONDS
    # child grace + bounded MLflow close-up < Ray's SIGKILL after the stop < the pod's grace (preStop included)
    assert STOP_GRACE_SECONDS < STOP_WAIT_SECONDS < TERMINATION_GRACE_SECONDS
    assert entry.STOP_GRACE_SECONDS + 10 <= TERMINATION_GRACE_SECONDS  # --stop's default wait


def test_run_status_is_killed_for_a_stop_else_the_exit_code_decides():
    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    assert [entry.run_status(rc, False) for rc in (0, 1, 2, -9, 137)] == ["FINISHED"] + ["FAILED"] * 4
    assert {entry.run_status(rc, True) for rc in (0, 1, -15)} == {"KILLED"}
    assert [entry.exit_code(rc) for rc in (0, 2, -9, -15)] == [0, 2, 137, 143]


# --------------------------------------------------------------------------------------------- a stop at any point
CHILD_THAT_RECORDS_TERM = '''
import os, signal, sys, time
def on_term(signum, frame):
    open(os.environ["CHILD_TERMED"], "w").write("yes")
    sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
open(os.environ["CHILD_READY"], "w").write("yes")
while True:
    time.sleep(0.05)
'''


@pytest.mark.parametrize("point", ["before the child starts", "inside Popen, the child not yet known",
                                   "right after Popen returns", "while the child runs"])
def test_a_sigterm_at_any_point_of_the_start_reaches_verl_or_keeps_it_from_starting(tmp_path, monkeypatch, point):
    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    script = tmp_path / "verl.py"
    script.write_text(CHILD_THAT_RECORDS_TERM)
    ready, termed = tmp_path / "ready", tmp_path / "termed"
    env = {**os.environ, "CHILD_READY": str(ready), "CHILD_TERMED": str(termed)}
    sup = entry.Supervisor([sys.executable, str(script)], env, grace=30)
    real_popen = subprocess.Popen

    def popen(*a, **k):
        if point == "before the child starts":
            os.kill(os.getpid(), signal.SIGTERM)  # lands after run()'s stopped check, before the child exists
        child = real_popen(*a, **k)
        wait_for(ready)  # the child has its handler: what verl's SIGTERM handling looks like once it runs
        if point == "inside Popen, the child not yet known":
            os.kill(os.getpid(), signal.SIGTERM)
        return child

    monkeypatch.setattr(entry.subprocess, "Popen", popen)
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        sup.listen()
        if point == "right after Popen returns":
            original = entry.Supervisor._forward
            calls = {"n": 0}

            def forward_then_stop(self):
                calls["n"] += 1
                if calls["n"] == 1 and self.child is not None:
                    os.kill(os.getpid(), signal.SIGTERM)  # the first poll after the child is known
                return original(self)
            monkeypatch.setattr(entry.Supervisor, "_forward", forward_then_stop)
        if point == "while the child runs":
            import threading
            threading.Timer(0.5, lambda: (wait_for(ready), os.kill(os.getpid(), signal.SIGTERM))).start()
        rc = sup.run()
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    assert sup.stopped_by == signal.SIGTERM
    # Passed on as SIGTERM (the child's handler ran and it exited 143), never SIGKILLed after the grace (137).
    assert rc == 143 and termed.read_text() == "yes"


def test_a_stop_before_the_child_would_start_ends_the_job_without_starting_it(tmp_path):
    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    sup = entry.Supervisor([sys.executable, "-c", "raise SystemExit('started')"], dict(os.environ))
    sup.stopped_by = signal.SIGTERM
    assert entry.exit_code(sup.run()) == 143 and sup.child is None


# --------------------------------------------------------------------------------------------- the Ray nodes
def _node(ip: str, gpus: float, alive: bool = True) -> dict:
    return {"Alive": alive, "NodeID": ip, "NodeManagerAddress": ip, "Resources": {"GPU": gpus, "CPU": 8}}


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_a_worker_that_joins_after_the_head_is_waited_for_not_failed():
    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    clock = Clock()
    # The head is up at once; the worker appears after 60 s, first without its GPUs, then with them.
    timeline = [(0, [_node("10.0.0.1", 8)]), (60, [_node("10.0.0.1", 8), _node("10.0.0.2", 0)]),
                (70, [_node("10.0.0.1", 8), _node("10.0.0.2", 8)])]

    def nodes():
        return [n for t, ns in timeline if clock.t >= t for n in [ns]][-1]

    assert entry.wait_for_nodes(nodes, 2, 8, "gpu", 600, sleep=clock.sleep, clock=clock) == []
    assert 70 <= clock.t < 80


def test_a_worker_that_never_joins_fails_the_job_at_the_deadline_naming_its_group():
    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    clock = Clock()
    problems = entry.wait_for_nodes(lambda: [_node("10.0.0.1", 8), _node("10.0.0.9", 8, alive=False)], 2, 8, "gpu",
                                    300, sleep=clock.sleep, clock=clock)
    assert clock.t >= 300
    assert problems == ["1 of 2 Ray node(s) not joined (joined: 10.0.0.1): the worker pod(s) of group gpu "
                        "(`kubectl get pods -l ray.io/group=gpu`)"]
    short = entry.node_problems([_node("10.0.0.1", 8), _node("10.0.0.2", 4)], 2, 8, "gpu")
    assert short == ["node 10.0.0.2 has 4 of 8 GPUs in Ray (its GPU plugin or `num-gpus`)"]


def test_a_stop_during_the_node_wait_ends_it_at_once():
    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    clock = Clock()
    assert entry.wait_for_nodes(lambda: [_node("10.0.0.1", 8)], 2, 8, "gpu", 600, stopped=lambda: True,
                                sleep=clock.sleep, clock=clock)
    assert clock.t == 0


@pytest.mark.parametrize("prefetch", [False, True])
def test_on_a_late_worker_the_entrypoint_starts_the_preflight_only_once_every_node_has_its_gpus(
        tmp_path, monkeypatch, prefetch):
    """The whole entrypoint, with a Ray whose worker joins 3 polls after the head: the child (the prefetch's wait
    or the preflight, then verl) starts only when both nodes are alive with 8 GPUs each."""
    from components.model.layout import resolve_layout
    from components.workloads.training.verl_config import entrypoint_words

    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    s = settings_for("multinode", {"job": {"model_prefetch": prefetch, "model_prefetch_gib": 8 if prefetch else None}})
    words = entrypoint_words(s, resolve_layout(s))
    argv = words[2:words.index("--")]
    assert "--nodes=2" in argv and "--gpus-per-node=8" in argv
    assert ("verl_ack_model_prefetch" in words) == prefetch and "verl_ack_preflight" in " ".join(words)
    polls = {"n": 0}
    seen_at_start: list[int] = []

    def nodes():
        polls["n"] += 1
        return [_node("10.0.0.1", 8)] + ([_node("10.0.0.2", 8)] if polls["n"] > 3 else [])

    ray = types.SimpleNamespace(init=lambda **_: None, shutdown=lambda: None, nodes=nodes)
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(entry, "NODE_POLL_SECONDS", 0.01)

    def run(self):
        seen_at_start.append(polls["n"])
        return 0
    monkeypatch.setattr(entry.Supervisor, "run", run)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    saved = {s_: signal.getsignal(s_) for s_ in (signal.SIGTERM, signal.SIGINT)}
    try:
        rc = entry.main([*[a for a in argv if not a.startswith("--tool-config")], f"--pid-file={tmp_path / 'pid'}",
                         "--", "true"])
    finally:
        for s_, h in saved.items():
            signal.signal(s_, h)
    assert rc == 0 and seen_at_start == [4]


def test_a_branched_run_continues_from_its_own_newest_checkpoint_once_it_has_one(tmp_path):
    entry = __import__("importlib").import_module("agent_tools.verl_ack_entrypoint")
    own = tmp_path / "ckpt" / "p" / "e"
    command = ["python3", "-m", "verl.trainer.main_ppo", "trainer.resume_mode=resume_path",
               "trainer.resume_from_path=/mnt/oss/checkpoints/p/other/global_step_40", f"trainer.default_local_dir={own}"]
    # The first attempt: nothing of its own yet, so it starts from the branch point.
    assert entry.continuing_own_checkpoint(command) == (command, None)
    own.mkdir(parents=True)
    (own / entry.CHECKPOINT_TRACKER).write_text("20")
    # A retry (or rerun) after its own step 20: verl's auto mode reads that tracker.
    continued, where = entry.continuing_own_checkpoint(command)
    assert where == str(own) and "trainer.resume_mode=auto" in continued and entry.RESUME_PATH not in continued
    plain = [w for w in command if "resume" not in w]
    assert entry.continuing_own_checkpoint(plain) == (plain, None)
