"""The RayJob's entrypoint: one program that starts the job, runs verl as a child, and ends the job's MLflow runs in
the state that tells the truth.

    python3 /etc/verl-ack/config/verl_ack_entrypoint.py [--tool-config PATH] -- COMMAND...
    python3 /etc/verl-ack/config/verl_ack_entrypoint.py --stop            # the head container's preStop hook

Why one program. `ray job submit` joins the words it is given with `subprocess.list2cmdline` up to Ray 2.55 and
with `shlex.join` from 2.56 (ray/dashboard/modules/job/cli.py), and the job supervisor runs the string with
`shell=True`. A shell list (`<verl> ; rc=$? ; <close-up> ; exit $rc`) survives only one of the two: `shlex.join`
quotes `;`, and verl receives the close-up as arguments. Plain words (letters, digits, `_./+=-`) come out of both
joins unchanged, so the entrypoint is this program and its plain words, and the sequence lives here.

What it does.
1. With a tool config naming MLflow (`metrics.mlflow_experiment`, `mlflow_parent_run`) and MLFLOW_TRACKING_URI
   set: creates the trainer's MLflow run itself, tagged with the Ray job's submission id, and appends two Hydra
   overrides to verl's command (`+ray_kwargs.ray_init.runtime_env.env_vars.{MLFLOW_RUN_ID,VERL_ACK_JOB_ID}`):
   verl's driver passes them to `ray.init`, Ray merges them into the job's runtime_env (worker.py
   `_merge_runtime_env`), so every Ray worker has them. verl's Tracking attaches to MLFLOW_RUN_ID
   (verl/utils/tracking.py) and the tools nest their runs under it; the job's runs are then known by id.
0. With `--nodes` above 1: waits until every Ray node of the job is alive with its GPUs (`--gpus-per-node`), at
   most `--node-wait-seconds` (the RayJob's pre-running deadline), logging the missing node by its worker group
   every 30 s and failing the job with that message at the end. KubeRay's SidecarMode submitter waits only for the
   head (kuberay v1.7.0 common/job.go `BuildJobSubmitCommand`); a worker that joins later would fail the preflight
   or verl's GPU count.
2. Runs COMMAND (the model prefetch's wait, the fabric preflight, verl: each execs the next) as a child and waits.
3. On SIGTERM or SIGINT (Ray's `ray job stop` and the RayJob's deletion signal every process of the entrypoint;
   the preStop hook signals this one), passes SIGTERM to the child, gives it STOP_GRACE_SECONDS, then kills it.
   The handler is set first; a stop that lands while the child is being started is passed on as soon as the
   child exists, and one before it starts ends the job without starting it.
4. Ends the runs: the trainer's and every tool run nested under it, FINISHED when the child exited 0, FAILED when
   it did not (a Python error, `os._exit`, SIGKILL, an OOM kill: verl's own `Tracking.finish` ends the run FINISHED
   even after an exception), KILLED when the job was stopped. MLflow trouble is logged and never changes the
   exit status.
5. Exits with the child's code (128 + N when signal N ended it).
6. With `--refusal-dir` (on the shared checkpoint volume): gives every Ray worker VERL_ACK_REFUSAL_FILE
   (`<dir>/<job>.txt`, the same Hydra runtime_env route as in 1) and watches it. The job's reward writes its reason
   there when it must refuse a trajectory (verl_ack_reward.refuse: verl's v1 trainer would only log it and drop the
   group); the entrypoint then stops verl as a stop signal would, prints the reason and exits with REFUSED_EXIT.

A run started from another run's checkpoint (`trainer.resume_mode=resume_path`) continues from its own newest
checkpoint once it has one (`continuing_own_checkpoint`): a KubeRay retry after a lost node resumes where it stopped.

Shipped in the job's ConfigMap; stdlib only, plus PyYAML and mlflow where tracking is on (the image's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any, Optional

FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"
# Same names as verl_ack_tools.py (a worker reads them; this file cannot import it: it runs before verl exists).
TRAINER_RUN_ENV = "MLFLOW_RUN_ID"
JOB_ENV = "VERL_ACK_JOB_ID"
JOB_TAG = "verl_ack.job"
ROLE_TAG = "verl_ack.role"
TOOLS_ROLE = "agent-tools"
# Ray's job supervisor hands the driver its job config in this variable (runtime_env and metadata, where
# `job_submission_id` is the id KubeRay submits the job under: status.jobId). ray/_private/runtime_env/constants.py,
# dashboard/modules/job/job_supervisor.py `_get_driver_env_vars`, common.py JOB_ID_METADATA_KEY.
RAY_JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
# How long a stopped child gets to exit before it is killed; the close-up follows. Below the head pod's
# terminationGracePeriodSeconds (30 s) and the job supervisor's stop wait (RAY_JOB_STOP_WAIT_TIME_S, which the Ray
# containers set to STOP_WAIT_SECONDS in components/workloads/training/run_spec.py).
STOP_GRACE_SECONDS = 15
REFUSAL_ENV = "VERL_ACK_REFUSAL_FILE"  # verl_ack_reward.REFUSAL_FILE_ENV (a test compares them)
REFUSED_EXIT = 3
PID_FILE = "/tmp/verl-ack-entrypoint.pid"  # noqa: S108 (inside the head container: the preStop hook reads it)
VERL_MAIN = "verl.trainer.main_ppo"
RUNTIME_ENV_OVERRIDE = "+ray_kwargs.ray_init.runtime_env.env_vars"


def log(message: str) -> None:
    print(f"verl_ack_entrypoint: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------- pure rules
def run_status(returncode: int, stopped: bool) -> str:
    """The final MLflow state of every run of the job: KILLED when the job was stopped, else FINISHED for exit
    code 0 and FAILED for anything else (an exception, `os._exit(n)`, a signal such as SIGKILL)."""
    if stopped:
        return KILLED
    return FINISHED if returncode == 0 else FAILED


def exit_code(returncode: int) -> int:
    """The shell's convention for a child ended by signal N (Popen reports -N): 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def job_id(environ: dict[str, str]) -> str:
    """The Ray job's submission id (KubeRay's status.jobId, unique per RayJob and per retry), or a fresh id when
    the command runs outside a Ray job."""
    try:
        metadata = json.loads(environ.get(RAY_JOB_CONFIG_ENV) or "{}").get("metadata") or {}
    except (json.JSONDecodeError, AttributeError):
        metadata = {}
    return str(metadata.get("job_submission_id") or f"local-{uuid.uuid4().hex[:12]}")


def child_command(command: list[str], trainer_run: Optional[str], job: str) -> list[str]:
    """COMMAND with the two Hydra overrides that give every Ray worker the trainer run's id and the job's, when
    verl is in it (its words are last, behind the preflight's `--`) and the run exists. Quoted for Hydra's grammar:
    an id of digits and one `e` would otherwise be read as a number."""
    if trainer_run is None or VERL_MAIN not in command:
        return list(command)
    return [*command, f"{RUNTIME_ENV_OVERRIDE}.{TRAINER_RUN_ENV}='{trainer_run}'",
            f"{RUNTIME_ENV_OVERRIDE}.{JOB_ENV}='{job}'"]


# verl's tracker file in trainer.default_local_dir (verl/utils/checkpoint/checkpoint_manager.py
# get_checkpoint_tracker_filename): written after each complete checkpoint; resume_mode auto reads it.
CHECKPOINT_TRACKER = "latest_checkpointed_iteration.txt"
RESUME_PATH = "trainer.resume_mode=resume_path"


def continuing_own_checkpoint(command: list[str], exists: Any = os.path.isfile) -> tuple[list[str], Optional[str]]:
    """A run that branches from another's checkpoint (`trainer.resume_mode=resume_path`) continues from its own
    newest checkpoint once it has one (a KubeRay retry after a lost node, or a rerun): resume_mode becomes `auto`,
    which reads trainer.default_local_dir's tracker file. Returns the command and the directory it continues from
    (None: unchanged)."""
    if RESUME_PATH not in command:
        return list(command), None
    own = [w.split("=", 1)[1] for w in command if w.startswith("trainer.default_local_dir=")]
    if not own or not exists(os.path.join(own[-1], CHECKPOINT_TRACKER)):
        return list(command), None
    return ["trainer.resume_mode=auto" if w == RESUME_PATH else w for w in command], own[-1]


def record_run(record_dir: str, hparams: list[str], volume: Optional[str] = None,
               is_mount: Any = os.path.ismount) -> Optional[str]:
    """The run's create-only hyperparameters beside its checkpoints, one empty file `<name>=<value>` each, written
    only when the folder holds none (the first run under these names; a rerun or retry keeps the first record, which
    the preview compares a rerun's settings with) and only onto the checkpoint volume (`volume` mounted: outside a
    pod nothing is written onto the machine's own disk). Returns what was done, for the log; never raises."""
    try:
        if volume is not None and not is_mount(volume):
            return f"{volume} is not mounted: the run's hyperparameters are not recorded"
        if os.path.isdir(record_dir) and os.listdir(record_dir):
            return None
        os.makedirs(record_dir, exist_ok=True)
        for item in hparams:
            with open(os.path.join(record_dir, item), "w", encoding="utf-8"):
                pass
        return f"recorded {len(hparams)} hyperparameter(s) in {record_dir}"
    except OSError as err:
        return f"could not record the run's hyperparameters in {record_dir} ({err}); a changed rerun is not refused"


@dataclass(frozen=True)
class Tracking:
    uri: str
    experiment: str
    run_name: str


def tracking_from(tool_config_path: Optional[str], environ: dict[str, str]) -> Optional[Tracking]:
    """Where the job's runs live: the tool config's `metrics` (the generator writes the trainer's experiment and
    run name there) and MLFLOW_TRACKING_URI; None when either is missing."""
    uri = environ.get("MLFLOW_TRACKING_URI")
    if not tool_config_path or not uri:
        return None
    import yaml

    with open(tool_config_path, encoding="utf-8") as f:
        tools = (yaml.safe_load(f) or {}).get("tools") or []
    metrics = next((t["config"]["metrics"] for t in tools if (t.get("config") or {}).get("metrics")), {})
    if not metrics.get("mlflow_experiment") or not metrics.get("mlflow_parent_run"):
        return None
    return Tracking(uri, metrics["mlflow_experiment"], metrics["mlflow_parent_run"])


# --------------------------------------------------------------------------------------------- the Ray nodes
NODE_POLL_SECONDS = 2.0
NODE_REPORT_SECONDS = 30.0


def node_problems(nodes: list[dict], want: int, gpus_per_node: int, worker_group: str) -> list[str]:
    """What keeps the job's Ray cluster from being whole (empty when every node is alive with its GPUs), naming
    each node: by its address when it joined short of GPUs, by its worker group and pod label when it has not
    joined (Ray knows nothing of a node before it joins)."""
    alive = [n for n in nodes if n.get("Alive")]
    problems = []
    for n in alive:
        gpus = (n.get("Resources") or {}).get("GPU", 0)
        if gpus < gpus_per_node:
            problems.append(f"node {n.get('NodeManagerAddress', n.get('NodeID', '?'))} has {gpus:g} of "
                            f"{gpus_per_node} GPUs in Ray (its GPU plugin or `num-gpus`)")
    if len(alive) < want:
        joined = ", ".join(sorted(str(n.get("NodeManagerAddress", "?")) for n in alive)) or "none"
        missing = want - len(alive)
        problems.append(f"{missing} of {want} Ray node(s) not joined (joined: {joined}): the worker pod(s) of group "
                        f"{worker_group} (`kubectl get pods -l ray.io/group={worker_group}`)")
    return problems


def wait_for_nodes(nodes_of: Any, want: int, gpus_per_node: int, worker_group: str, timeout: float,
                   stopped: Any = lambda: False, sleep: Any = time.sleep, clock: Any = time.monotonic) -> list[str]:
    """Poll the Ray cluster (`nodes_of()`: `ray.nodes()`) until `want` nodes are alive with `gpus_per_node` GPUs
    each, the job is stopped, or `timeout` seconds pass; the problems left (empty: whole). KubeRay's SidecarMode
    submitter waits only for the head's dashboard (kuberay v1.7.0 common/job.go BuildJobSubmitCommand), so without
    this a worker that joins late fails the preflight or verl's own GPU count."""
    deadline, reported = clock() + timeout, clock()
    while True:
        problems = node_problems(nodes_of(), want, gpus_per_node, worker_group)
        if not problems or stopped() or clock() >= deadline:
            return problems
        if clock() - reported >= NODE_REPORT_SECONDS:
            reported = clock()
            log("waiting for the Ray cluster: " + "; ".join(problems))
        sleep(NODE_POLL_SECONDS)


def wait_for_ray_nodes(want: int, gpus_per_node: int, worker_group: str, timeout: float, stopped: Any) -> list[str]:
    import ray

    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", log_to_driver=False)
    try:
        return wait_for_nodes(ray.nodes, want, gpus_per_node, worker_group, timeout, stopped)
    finally:
        ray.shutdown()


# --------------------------------------------------------------------------------------------- the job's runs
def open_trainer_run(client: Any, tracking: Tracking, job: str) -> str:
    """The trainer's run, created before verl (which attaches to it through MLFLOW_RUN_ID): named as verl names it
    (trainer.experiment_name), in its experiment (trainer.project_name), tagged with the job."""
    exp = client.get_experiment_by_name(tracking.experiment)
    if exp is not None:
        exp_id = exp.experiment_id
    else:
        try:
            exp_id = client.create_experiment(tracking.experiment)
        except Exception:  # noqa: BLE001 (another job created it first)
            exp_id = client.get_experiment_by_name(tracking.experiment).experiment_id
    run = client.create_run(exp_id, run_name=tracking.run_name, tags={JOB_TAG: job, ROLE_TAG: "trainer"})
    return run.info.run_id


def job_runs(client: Any, trainer_run: str) -> list[str]:
    """The job's runs by id: the trainer's and the tool runs nested under it (each worker tags its run with the
    trainer run's id, which only this job's workers have)."""
    exp_id = client.get_run(trainer_run).info.experiment_id
    nested = client.search_runs([exp_id], filter_string=f"tags.`mlflow.parentRunId` = '{trainer_run}'",
                                max_results=5000)
    return [trainer_run] + [r.info.run_id for r in nested if r.data.tags.get(ROLE_TAG) == TOOLS_ROLE]


def close_job_runs(client: Any, trainer_run: str, status: str) -> list[str]:
    """Every run of the job ends in `status`, whatever state it was left in (verl ends its run FINISHED even when
    training raised; a killed worker leaves its run RUNNING; a worker that exited normally ended its own FINISHED).
    Returns the run ids."""
    runs = job_runs(client, trainer_run)
    for run_id in runs:
        client.set_terminated(run_id, status=status)
    return runs


def _client(uri: str) -> Any:
    # Bounded: the close-up must end inside the stop grace; mlflow's defaults retry for minutes.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


# --------------------------------------------------------------------------------------------- the process
class Supervisor:
    """Runs the child, turns a stop signal into SIGTERM for it, and remembers that the job was stopped."""

    def __init__(self, command: list[str], env: dict[str, str], grace: float = STOP_GRACE_SECONDS,
                 refusal_file: Optional[str] = None):
        self.command, self.env, self.grace = command, env, grace
        self.child: Optional[subprocess.Popen] = None
        self.stopped_by: Optional[int] = None
        self._stopped_at = 0.0
        self._forwarded = False
        self.refusal_file = refusal_file
        self.refused: Optional[str] = None

    def _check_refusal(self) -> None:
        """The reward's refusal (its reason in `refusal_file`) stops verl as a stop signal does."""
        if self.refusal_file is None or self.refused is not None or not os.path.exists(self.refusal_file):
            return
        try:
            with open(self.refusal_file, encoding="utf-8") as f:
                self.refused = f.read().strip() or "(no reason given)"
        except OSError as err:
            self.refused = f"(the reason could not be read: {err})"
        log(f"the job's reward refused a trajectory, stopping the job: {self.refused}")
        self._on_signal(signal.SIGTERM, None)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.stopped_by is None:
            self.stopped_by, self._stopped_at = signum, time.monotonic()
            log(f"received {signal.Signals(signum).name}: stopping the job")
        self._forward()

    def _forward(self) -> None:
        """SIGTERM to the child once it exists and runs. Called from the handler and again right after the child
        starts and on every poll: a stop that lands while `Popen` runs (the child exists, `self.child` is not set
        yet) is passed on as soon as it is, never left to the grace's SIGKILL."""
        if self.stopped_by is None or self._forwarded:
            return
        child = self.child
        if child is not None and child.poll() is None:
            self._forwarded = True
            child.send_signal(signal.SIGTERM)

    def listen(self) -> None:
        """From the program's start: a stop while the trainer run is being created must not kill it unhandled."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def run(self) -> int:
        if self.stopped_by is not None:
            return -self.stopped_by  # stopped before verl started: nothing to run
        try:
            self.child = subprocess.Popen(self.command, env=self.env)
        except OSError as err:
            log(f"could not start {self.command[0]}: {err}")
            return 127
        while True:
            self._forward()
            try:
                return self.child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self._check_refusal()
                if self.stopped_by is not None and time.monotonic() - self._stopped_at > self.grace:
                    log(f"the child did not exit within {self.grace:g} s of the stop: killing it")
                    self.child.kill()


def _running(pid: int) -> bool:
    """The process exists and has not exited: a zombie (exited, its parent has not reaped it yet) has finished."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def stop(pid_file: str, wait: float) -> int:
    """`--stop` (the head container's preStop hook: a suspended, deadline-expired or deleted job's pods go away
    without a signal to this program): SIGTERM to the running entrypoint, then wait for it to finish its close-up."""
    try:
        with open(pid_file, encoding="utf-8") as f:
            pid = int(f.read().strip())
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return 0  # no entrypoint running in this container (a worker pod, or the job is over)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.2)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="verl_ack_entrypoint", description=__doc__.split("\n\n")[0])
    p.add_argument("--tool-config", default=None, help="the job's tool config (names the MLflow experiment and run)")
    p.add_argument("--pid-file", default=PID_FILE)
    p.add_argument("--stop", action="store_true", help="stop the running entrypoint and wait for its close-up")
    p.add_argument("--stop-grace-seconds", type=float, default=STOP_GRACE_SECONDS,
                   help="how long a stopped child may take to exit before it is killed")
    p.add_argument("--refusal-dir", default=None,
                   help="a folder every Ray pod shares: the reward writes why it refused a trajectory there")
    p.add_argument("--stop-wait-seconds", type=float, default=STOP_GRACE_SECONDS + 10,
                   help="--stop: how long to wait for the entrypoint's close-up")
    p.add_argument("--record-dir", default=None, help="where the run records its create-only hyperparameters")
    p.add_argument("--hparam", action="append", default=[], help="NAME=VALUE, one per create-only hyperparameter")
    p.add_argument("--record-volume", default=None, help="the checkpoint volume's mount: record only onto it")
    p.add_argument("--nodes", type=int, default=1, help="Ray nodes of the job: more than 1 waits for all of "
                   "them, alive with their GPUs, before COMMAND starts")
    p.add_argument("--gpus-per-node", type=int, default=0, help="GPUs each Ray node must have")
    p.add_argument("--worker-group", default="workers", help="the RayCluster's worker group (named in the message)")
    p.add_argument("--node-wait-seconds", type=float, default=1800, help="how long to wait for the nodes (the "
                   "RayJob's pre-running deadline)")
    args = p.parse_args(argv)
    if args.stop:
        return stop(args.pid_file, args.stop_wait_seconds)
    if not command:
        p.error("give the command to run after --")

    child_env = dict(os.environ)
    job = job_id(child_env)
    refusal_file = os.path.join(args.refusal_dir, f"{job}.txt") if args.refusal_dir else None
    supervisor = Supervisor(command, child_env, grace=args.stop_grace_seconds, refusal_file=refusal_file)
    supervisor.listen()
    if args.nodes > 1:
        try:
            problems = wait_for_ray_nodes(args.nodes, args.gpus_per_node, args.worker_group,
                                          args.node_wait_seconds, lambda: supervisor.stopped_by is not None)
        except Exception as err:  # noqa: BLE001 (Ray itself unreachable: the job cannot run)
            problems = [f"could not read the Ray cluster's nodes ({type(err).__name__}: {err})"]
        if supervisor.stopped_by is not None:
            log("stopped while waiting for the Ray nodes: nothing started")
            return exit_code(-supervisor.stopped_by)
        if problems:
            log(f"the Ray cluster is not whole after {args.node_wait_seconds:g} s: " + "; ".join(problems))
            return 1
        log(f"all {args.nodes} Ray nodes are alive with {args.gpus_per_node} GPU(s) each")
    tracking = tracking_from(args.tool_config, child_env)
    client, trainer_run = None, None
    if tracking is not None:
        try:
            client = _client(tracking.uri)
            trainer_run = open_trainer_run(client, tracking, job)
            log(f"job {job}: trainer run {trainer_run} ({tracking.experiment}/{tracking.run_name})")
        except Exception as err:  # noqa: BLE001 (training goes on; verl creates its own run)
            log(f"could not create the trainer's MLflow run ({type(err).__name__}: {err}); verl creates its own and "
                "the job's runs are left as they end")
    try:
        with open(args.pid_file, "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
    except OSError as err:
        log(f"could not write {args.pid_file} ({err}); the preStop hook cannot stop this job gracefully")

    if args.record_dir:
        done = record_run(args.record_dir, args.hparam, args.record_volume)
        if done:
            log(done)
    command, own = continuing_own_checkpoint(command)
    if own is not None:
        log(f"{own} holds this run's own checkpoint: continuing from its newest step (resume_mode auto), not from "
            "training.resume_from")
    supervisor.command = child_command(command, trainer_run, job)
    if refusal_file is not None and VERL_MAIN in command:
        supervisor.command.append(f"{RUNTIME_ENV_OVERRIDE}.{REFUSAL_ENV}='{refusal_file}'")
    try:
        returncode = supervisor.run()
    finally:
        # A later preStop hook must not signal whatever process reuses this pid.
        with contextlib.suppress(OSError):
            os.remove(args.pid_file)
    if supervisor.refused is not None:
        log(f"job {job} failed: the reward refused a trajectory: {supervisor.refused}")
        with contextlib.suppress(OSError):
            os.remove(refusal_file)  # this run's own file: a retry starts without it
        returncode = REFUSED_EXIT
    status = run_status(returncode, supervisor.stopped_by is not None and supervisor.refused is None)
    if client is not None and trainer_run is not None:
        try:
            runs = close_job_runs(client, trainer_run, status)
            log(f"job {job}: {len(runs)} run(s) {status}: {', '.join(runs)}")
        except Exception as err:  # noqa: BLE001 (the job's own result decides the exit status)
            log(f"could not set the job's runs to {status} ({type(err).__name__}: {err})")
    return exit_code(returncode)


if __name__ == "__main__":
    sys.exit(main())
