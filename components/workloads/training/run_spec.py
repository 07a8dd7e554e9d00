"""The run's values, computed once: `run_spec(settings, layout, scheduling, wiring)` -> `RunSpec`.

Every value the RayJob renders comes from here (rayjob.py `render_rayjob` reads nothing else): the image, the
Ray cluster's shape and pod resources, the security context inputs, the environment, the runtime_env, the
entrypoint and the lifecycle. A change to how a setting reaches the job touches this one function. A sweep's
variant is a spec of its own settings (components/sweep.py); the queue and log marks reshape the rendered
manifest (components/experiment.py `rayjob_shape`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional

import yaml

from components.cloud.registry import runtime_pip_packages, training_image
from components.config import Settings
from components.model.layout import Layout, check_layout
from components.model.wait import derived_pre_running_deadline_seconds, pre_running_wait
from components.wiring import Scheduling, tracking_uri
from components.workloads.training.prefetch import prefetch_copy_command
from components.workloads.training.verl_config import (
    CONFIG_DIR,
    STOP_GRACE_SECONDS,
    config_files,
    config_sha256,
    entrypoint,
)
from components.workloads.training.volumes import OssVolume, oss_volumes

SHM_MAX_GIB = 64


class RayJobError(ValueError):
    """A RayJob KubeRay (or verl) would reject; the message names the field, the rule and a fix."""


@dataclass(frozen=True)
class PodWiring:
    """Names the pod templates refer to; the component creates the objects behind them."""

    namespace: str
    service_account: str
    config_map: str
    mcp_secret: Optional[str]  # None when sandbox.enabled is false (no MCP tool)
    volumes: dict[str, OssVolume]
    config_sha256: str


def pod_wiring(s: Settings, *, namespace: str, service_account: str) -> PodWiring:
    """The object names of one stack's job (what the component creates under these names)."""
    return PodWiring(
        namespace=namespace,
        service_account=service_account,
        config_map=f"{s.job.name}-config",
        mcp_secret=f"{s.job.name}-mcp" if s.sandbox.enabled else None,
        volumes=oss_volumes(s),
        config_sha256=config_sha256(hashed_config(s)),
    )


@dataclass(frozen=True)
class RunSpec:
    """One run as the RayJob renders it. Plain values only (no Settings): two specs that compare equal render the
    same manifest."""

    name: str  # RayJob name
    namespace: str
    image: str
    ray_version: str
    submission_mode: str
    entrypoint: str
    runtime_env_yaml: str
    ttl_seconds_after_finished: int
    active_deadline_seconds: int
    backoff_limit: int
    pre_running_deadline_seconds: Optional[int]
    nodes: int  # Ray pods, one per GPU node: the head and nodes - 1 workers
    gpus_per_node: int
    ray_cpus: int  # CPU request (and Ray num-cpus) of each worker's Ray container
    memory_gib: int  # memory request and limit of each worker's Ray container
    head_ray_cpus: int  # the head's: less KubeRay's submitter sidecar in SidecarMode (layout.py SUBMITTER_*)
    head_memory_gib: int
    shm_gib: int
    # The model prefetch (job.model_prefetch): the copy's size in GiB (0 = none) and the copier's command.
    model_copy_gib: int
    model_copy_command: tuple[str, ...]
    extra_resources: tuple[tuple[str, str], ...]  # resources each GPU pod requests besides CPU, memory and GPUs
    rdma: bool  # multi-node Lingjun: host network, RDMA NICs, root with IPC_LOCK/SYS_RESOURCE
    run_as_non_root: bool  # the built image (USER 1000)
    env: tuple[tuple[str, str], ...]  # the Ray containers' environment, in order
    scheduling: Scheduling
    wiring: PodWiring

    @property
    def workers(self) -> int:
        return self.nodes - 1


def runtime_env(s: Settings) -> dict:
    """Ray runtime_env of the job (RayJob runtimeEnvYAML); it applies to the driver and every Ray worker.

    - `env_vars.PYTHONPATH` puts the ConfigMap mount (the tool module verl_ack_tools.py) in front of the image's
      own PYTHONPATH: verl's tool registry imports tool classes by module name. A pod-level PYTHONPATH would
      replace the image's value (verl's vllm024 image sets one) instead of extending it. `${PYTHONPATH}` is
      expanded by the submitter's shell (KubeRay passes the JSON in double quotes; the submitter runs the head
      image, so it sees the image's value) or else by Ray itself (os.path.expandvars on each worker).
    - `pip` (official image only): the pinned installs. They install WITH their dependencies: Ray's `pip` field
      cannot scope `--no-deps` to one package, and mlflow/fastmcp need dependencies the image lacks. For verl that
      means pip also brings the image up to verl's declared ranges; transformers is pinned beside verl
      (`versions.transformers`) so that step lands on verl's CI release. The built image (`image.source: built`)
      is the reproducible path: verl --no-deps with exact pins, checked at build time.
    """
    env: dict = {"env_vars": {"PYTHONPATH": f"{CONFIG_DIR}:${{PYTHONPATH}}"}}
    packages = runtime_pip_packages(s)
    if packages:
        env["pip"] = packages
    return env


def runtime_env_yaml(s: Settings) -> str:
    return yaml.safe_dump(runtime_env(s), sort_keys=False)


def shm_gib(s: Settings, layout: Layout) -> int:
    return s.job.shm_gib if s.job.shm_gib is not None else max(1, min(SHM_MAX_GIB, layout.memory_gib_per_gpu_pod // 4))


def uses_rdma(s: Settings, layout: Layout) -> bool:
    """Only Lingjun nodes have RDMA NICs, and only a job spanning nodes talks across them."""
    return s.gpu_pool.kind == "lingjun" and layout.nodes > 1


# Seconds Ray's job supervisor waits between the stop signal (SIGTERM to every process of the entrypoint: `ray job
# stop`, and KubeRay's StopJob when a running RayJob is deleted) and SIGKILL (RAY_JOB_STOP_WAIT_TIME_S, default 3:
# ray/dashboard/modules/job/job_supervisor.py). The entrypoint needs its stop grace plus the MLflow close-up; both
# stay under the pods' terminationGracePeriodSeconds, which bounds the preStop hook (rayjob.py).
STOP_WAIT_SECONDS = STOP_GRACE_SECONDS + 10
TERMINATION_GRACE_SECONDS = STOP_WAIT_SECONDS + 5


def container_env(s: Settings) -> tuple[tuple[str, str], ...]:
    env = {
        # Warnings only; NCCL_DEBUG=INFO is the first thing to set (job.env) when a multi-node run hangs.
        "NCCL_DEBUG": "WARN",
        # Read by the job supervisor actor, which inherits the head container's environment.
        "RAY_JOB_STOP_WAIT_TIME_S": str(STOP_WAIT_SECONDS),
    }
    uri = tracking_uri(s)
    if uri:
        env["MLFLOW_TRACKING_URI"] = uri
    env.update(s.job.env)
    return tuple(env.items())


def _check_startable(s: Settings, layout: Layout, image: str, shm: int) -> None:
    errors = [f for f in check_layout(s) if f.severity == "error"]
    if errors:
        raise RayJobError("the GPU layout would be rejected by verl/vLLM at start:\n" +
                          "\n".join(f"  - {f.field}: {f.message}" for f in errors))
    engine = s.training.rollout_engine
    # verl's images carry one rollout engine each: verlai/verl:vllmNNN.* has vLLM, verlai/verl:sglNNN.* SGLang.
    shipped = re.match(r"verlai/verl:(vllm|sgl)\d", image)
    if shipped and {"vllm": "vllm", "sgl": "sglang"}[shipped.group(1)] != engine:
        raise RayJobError(f"training.rollout_engine {engine} does not run on {image}, which ships "
                          f"{'vLLM' if shipped.group(1) == 'vllm' else 'SGLang'}; pick the matching verlai/verl image "
                          "in versions.verl_image or change the engine")
    pod_gib = min(layout.memory_gib_per_gpu_pod, layout.head_memory_gib)
    if shm >= pod_gib:
        raise RayJobError(f"job.shm_gib: /dev/shm of {shm} GiB is memory-backed and counts against the pod's "
                          f"{pod_gib} GiB; use at most {pod_gib // 2}")


def pre_running_deadline(s: Settings, image: str) -> Optional[int]:
    """preRunningDeadlineSeconds: the stack's value, else derived from the modelled wait (components/model/wait.py);
    none before KubeRay 1.6.0, which lacks the field. A stack value below the modelled wait would fail every run
    before its pods could start, so it is refused."""
    given = s.job.pre_running_deadline_seconds
    phases = pre_running_wait(s, image)
    wait = sum(phases.values())
    if given is None:
        return derived_pre_running_deadline_seconds(s, image) if s.versions.kuberay_tuple() >= (1, 6, 0) else None
    if given < wait * 60:
        detail = ", ".join(f"{k} {v:.1f}" for k, v in phases.items())
        raise RayJobError(f"job.pre_running_deadline_seconds {given} is below the modelled wait of {wait * 60:.0f} s "
                          f"({detail} min) between the RayJob's creation and its Ray cluster being Ready: KubeRay would "
                          f"fail every run before it starts; remove it (derived: "
                          f"{derived_pre_running_deadline_seconds(s, image)} s) or raise it")
    return given


def backoff_limit(s: Settings, layout: Layout) -> int:
    """RayJob backoffLimit: job.backoff_limit, else 1 for a multi-node training run that writes a checkpoint before
    its last step (verl fails the whole run when one node is lost, "relying on checkpoints to resume", verl issue
    #1314; KubeRay retries on a new Ray cluster, rayjob_controller.go v1.7.0, and verl's resume_mode auto continues
    from the newest checkpoint), else 0: a single node has no other node to lose, an evaluation or a run without
    an intermediate checkpoint would only start over, and InteractiveMode refuses retries."""
    given = s.job.backoff_limit
    if given is not None:
        return given
    t = s.training
    checkpoints_midway = t.save_freq > 0 and (t.total_training_steps is None or t.total_training_steps > t.save_freq)
    retried = layout.nodes > 1 and not t.val_only and checkpoints_midway
    return 1 if retried and s.job.submission_mode != "InteractiveMode" else 0


def run_spec(s: Settings, layout: Layout, scheduling: Scheduling, wiring: PodWiring) -> RunSpec:
    """The run's values from the settings and the resolved layout. Raises RayJobError for a run verl, vLLM or the
    pod spec would reject."""
    image = training_image(s)
    shm = shm_gib(s, layout)
    _check_startable(s, layout, image, shm)
    j = s.job
    return RunSpec(
        name=j.name,
        namespace=wiring.namespace,
        image=image,
        ray_version=s.versions.ray,
        submission_mode=j.submission_mode,
        entrypoint=entrypoint(s, layout),
        runtime_env_yaml=runtime_env_yaml(s),
        ttl_seconds_after_finished=j.ttl_seconds_after_finished,
        active_deadline_seconds=j.active_deadline_seconds,
        backoff_limit=backoff_limit(s, layout),
        pre_running_deadline_seconds=pre_running_deadline(s, image),
        nodes=layout.nodes,
        gpus_per_node=layout.gpus_per_node,
        ray_cpus=layout.ray_cpus_per_gpu_pod,
        memory_gib=layout.memory_gib_per_gpu_pod,
        head_ray_cpus=layout.head_ray_cpus,
        head_memory_gib=layout.head_memory_gib,
        shm_gib=shm,
        model_copy_gib=layout.model_copy_gib,
        model_copy_command=tuple(prefetch_copy_command(s, CONFIG_DIR)) if layout.model_copy_gib else (),
        extra_resources=tuple(j.gpu_pod_resources.items()),
        rdma=uses_rdma(s, layout),
        run_as_non_root=s.image.source == "built",
        env=container_env(s),
        scheduling=scheduling,
        wiring=wiring,
    )


def hashed_config(s: Settings) -> dict[str, str]:
    """What the job's config hash covers: the ConfigMap's files and, when the stack has any, training.verl_overrides
    (the scalar ones travel on the command line, so a changed override replaces the job like a changed file)."""
    files = config_files(s)
    if s.training.verl_overrides:
        files = {**files, "training.verl_overrides": json.dumps(s.training.verl_overrides, sort_keys=True)}
    return files
