"""The KubeRay RayJob that runs verl (pure manifest builder) and KubeRay's controller rules (pure checks).

Ray cluster shape. One node: the head pod IS the GPU pod and trains (no worker group). Several nodes: a GPU
head plus `nodes - 1` identical GPU workers, not a GPU-less head plus `nodes` workers, because
- verl cannot survive losing any node (no elastic training), so isolating the head on a CPU node buys no
  resilience, while it would need a CPU node big enough for the ~25 GB training image, the driver and verl's
  TaskRunner (which loads the dataset and tokenizer, so it needs the OSS volumes too);
- every GPU pod is then identical and requests one whole node; `gpu_pool.nodes` GPU nodes host exactly
  `trainer.nnodes` Ray nodes, and the layout rules already reserve one CPU per GPU pod for the TaskRunner.
Worker replicas are pinned (replicas == minReplicas == maxReplicas): verl places one STRICT_PACK placement
group per node and never scales.

The controller rules (`check_rayjob`) are KubeRay v1.7.0's `ValidateRayJobSpec`/`ValidateRayClusterSpec`
(../shared/research/verl_kuberay_agents.md §1) plus version gates for the configured `versions.kuberay`, and
one rule of this project: the checkpoint directory must be on the shared read-write volume. Every value rendered
here comes from one `RunSpec` (run_spec.py), computed once per run.
"""

from __future__ import annotations

import copy
import posixpath
import re
import shlex
from typing import Any

import yaml

from components.config import DNS1035, RAYJOB_NAME_MAX, Settings
from components.model.layout import PREFETCH_CPUS, PREFETCH_PROCESS_GIB, Layout
from components.wiring import Scheduling
from components.workloads.network_policies import RAYJOB_LABEL
from components.workloads.training.probes import ray_probes
from components.workloads.training.run_spec import (
    TERMINATION_GRACE_SECONDS,
    PodWiring,
    RayJobError,
    RunSpec,
    pod_wiring,
    run_spec,
    runtime_env,
    runtime_env_yaml,
    shm_gib,
    uses_rdma,
)
from components.workloads.training.verl_config import CONFIG_DIR, ENTRYPOINT_MODULE_FILE, MCP_DIR
from components.workloads.training.volumes import MODEL_COPY_MOUNT, MODEL_COPY_VOLUME

# What the tests and the plan import from here, computed in run_spec.py.
__all__ = ["PodWiring", "RayJobError", "RunSpec", "pod_wiring", "run_spec", "runtime_env", "runtime_env_yaml",
           "shm_gib", "uses_rdma", "ray_pod_security", "pod_groups", "render_rayjob", "rayjob_manifest", "with_platform_values",
           "check_rayjob"]

RAY_API_VERSION = "ray.io/v1"
GPU_RESOURCE = "nvidia.com/gpu"
# Multi-node Lingjun training reaches the other nodes over RDMA: the ack-rdma-device-plugin add-on advertises the
# NICs as `rdma/hca` (shared mode: any number of pods share them through 1000 virtual ids per NIC), and RDMA
# memory registration needs locked memory, hence the two capabilities (docs/facts.md §4;
# https://help.aliyun.com/zh/ack/ack-managed-and-ack-dedicated/user-guide/use-rdma-shared-mode).
RDMA_RESOURCE = "rdma/hca"
RDMA_CAPABILITIES = ("IPC_LOCK", "SYS_RESOURCE")
WORKER_GROUP = "gpu"
MODEL_PREFETCH_CONTAINER = "model-prefetch"
CONFIG_HASH_ANNOTATION = "verl-ack/config-sha256"
TRAINER_LABELS = {"app.kubernetes.io/name": "verl-trainer", "app.kubernetes.io/part-of": "verl-ack"}
# KubeRay release that introduced each submission mode (research notes §1; HTTPMode predates v1.1).
SUBMISSION_MODE_SINCE = {"K8sJobMode": (0, 0, 0), "HTTPMode": (0, 0, 0), "InteractiveMode": (1, 3, 0),
                         "SidecarMode": (1, 5, 0)}
# Ray token authentication (docs/facts.md, "Ray token authentication"): with `authOptions.mode: token` and no
# `secretName`, KubeRay v1.7.0 creates a Secret named after the RayCluster (`status.rayClusterName` of the RayJob)
# holding a random 32-byte token under `auth_token`, owned by the RayCluster (raycluster_controller.go
# reconcileAuthSecret), and gives the Ray containers, the wait-gcs-ready init container and the submitter (SidecarMode
# and K8sJobMode) RAY_AUTH_MODE=token and RAY_AUTH_TOKEN from that Secret (common/pod.go SetContainerTokenAuthEnvVars;
# rayjob_controller.go configureSubmitterContainer); its own dashboard client reads the same Secret
# (utils/util.go GetRayDashboardClientFunc). The token never passes through Pulumi: not in the state, the plan or
# any manifest. The floors are KubeRay's (api AuthOptions, v1.5.1) and its validation (utils/validation.go: Ray >=
# 2.52.0 for mode token).
AUTH_MODE = "token"
AUTH_SINCE_KUBERAY = (1, 5, 1)
AUTH_SINCE_RAY = (2, 52, 0)
AUTH_TOKEN_KEY = "auth_token"  # utils/constant.go RAY_AUTH_TOKEN_SECRET_KEY
AUTH_TOKEN_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")  # utils/constant.go; the Ray CLI and SDK read these


def _version(v: str) -> tuple[int, int, int]:
    parts = [int(x) for x in v.split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts)))  # type: ignore[return-value]


def _pod_security(rdma: bool, run_as_non_root: bool) -> tuple[dict, dict]:
    pod: dict = {"seccompProfile": {"type": "RuntimeDefault"}}
    container: dict = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if rdma:
        container["capabilities"]["add"] = list(RDMA_CAPABILITIES)
        container["runAsUser"] = 0
    elif run_as_non_root:
        pod["runAsNonRoot"] = True
    return pod, container


def ray_pod_security(s: Settings, rdma: bool) -> tuple[dict, dict]:
    """(pod securityContext, container securityContext) of the Ray pods, which run the job API and GCS of an
    token-authenticated Ray cluster and the model's rollouts: no capability, the runtime's seccomp profile, no privilege
    escalation; the built image (USER 1000) must run as non-root. RDMA is the one exception: memory registration
    needs IPC_LOCK and SYS_RESOURCE, which Kubernetes makes effective only for uid 0 (docs/image.md), so those pods
    run as root with exactly those two."""
    return _pod_security(rdma, s.image.source == "built")


def gpu_pod_template(spec: RunSpec, container: str) -> dict:
    """One Ray pod on one whole GPU node: all its GPUs, the CPUs and memory the layout leaves for Ray (the head's
    less KubeRay's submitter sidecar)."""
    rdma = spec.rdma
    head = container == "ray-head"
    cpus, memory = (spec.head_ray_cpus, spec.head_memory_gib) if head else (spec.ray_cpus, spec.memory_gib)
    resources = {"cpu": str(cpus), "memory": f"{memory}Gi",
                 GPU_RESOURCE: str(spec.gpus_per_node), **({RDMA_RESOURCE: "1"} if rdma else {}),
                 **dict(spec.extra_resources)}
    pod_security, security = _pod_security(rdma, spec.run_as_non_root)
    wiring = spec.wiring
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{spec.shm_gib}Gi"}}]
    for kind, vol in wiring.volumes.items():
        mounts.append({"name": kind, "mountPath": vol.mount_path, "readOnly": vol.read_only})
        volumes.append({"name": kind, "persistentVolumeClaim": {"claimName": vol.name, "readOnly": vol.read_only}})
    mounts.append({"name": "verl-config", "mountPath": CONFIG_DIR, "readOnly": True})
    volumes.append({"name": "verl-config", "configMap": {"name": wiring.config_map}})
    if wiring.mcp_secret:
        mounts.append({"name": "mcp-servers", "mountPath": MCP_DIR, "readOnly": True})
        # 0440 root:root: readable by the official image's root and the built image's uid 1000 (group 0), by no
        # one else.
        volumes.append({"name": "mcp-servers", "secret": {"secretName": wiring.mcp_secret, "defaultMode": 0o440}})
    if spec.model_copy_gib:
        mounts.append({"name": MODEL_COPY_VOLUME, "mountPath": MODEL_COPY_MOUNT, "readOnly": True})
        volumes.append({"name": MODEL_COPY_VOLUME,
                        "emptyDir": {"medium": "Memory", "sizeLimit": f"{spec.model_copy_gib}Gi"}})
    pod = {
        "serviceAccountName": wiring.service_account,
        # Nothing in a Ray pod calls the Kubernetes API (no autoscaler). The RRSA token is not this one: the pod
        # identity webhook mounts its own projected token (rrsa-tokens) whatever this says.
        "automountServiceAccountToken": False,
        "securityContext": pod_security,
        "nodeSelector": dict(spec.scheduling.node_selector),
        "tolerations": [dict(t) for t in spec.scheduling.tolerations],
        "containers": [{
            "name": container,
            "image": spec.image,
            "imagePullPolicy": "IfNotPresent",
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "env": [{"name": k, "value": v} for k, v in spec.env],
            "volumeMounts": mounts,
            # The tutorial's runAsUser: 0 is dropped: the official image runs as root by default and the built
            # image as uid 1000; nothing in the job needs to gain privileges (see ray_pod_security).
            "securityContext": security,
            # Set here, KubeRay keeps them instead of injecting its wget probes (probes.py).
            **(ray_probes(spec.ray_version, head) or {}),
            **({"lifecycle": entrypoint_pre_stop()} if head else {}),
        }],
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "volumes": volumes,
    }
    if spec.model_copy_gib:
        pod["containers"].append(model_prefetch_container(spec, security))
    if rdma:
        # ack-rdma-device-plugin gives RDMA to hostNetwork pods only, unless its non-hostNetwork mode is on, which
        # needs an IPv6 Lingjun cluster (docs/facts.md §4); these clusters are IPv4. One Ray pod per node, so the
        # host's ports are the pod's. NetworkPolicies do not select host-network pods (docs/cloud.md).
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"  # keep resolving cluster Services (MLflow, MCP)
    return {
        "metadata": {
            # ...and its RayJob's, which its NetworkPolicy selects (network_policies.ray_job_pod_labels).
            "labels": {**TRAINER_LABELS, RAYJOB_LABEL: spec.name},
            # A config change changes the spec, so the RayJob is replaced rather than left running old files.
            "annotations": {CONFIG_HASH_ANNOTATION: wiring.config_sha256},
        },
        "spec": pod,
    }


def model_prefetch_container(spec: RunSpec, ray_security: dict) -> dict:
    """The `model-prefetch` sidecar of a Ray pod (job.model_prefetch): copies the staged model from the read-only
    models volume into the pod's memory-backed `model-copy` directory while Ray starts, then waits for SIGTERM
    (agent_tools/verl_ack_model_prefetch.py). After the Ray container: KubeRay treats containers[0] as the Ray
    container (utils.RayContainerIndex). The copy's pages count against this container's memory limit (emptyDir
    medium Memory), hence the copy's size plus the copier's process; the same image (on the node already) and user
    as the Ray container, never the RDMA capabilities."""
    models = spec.wiring.volumes["models"]
    resources = {"cpu": str(PREFETCH_CPUS), "memory": f"{spec.model_copy_gib + PREFETCH_PROCESS_GIB}Gi"}
    security = {**copy.deepcopy(ray_security), "capabilities": {"drop": ["ALL"]}}
    return {
        "name": MODEL_PREFETCH_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(spec.model_copy_command),
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": [
            {"name": "models", "mountPath": models.mount_path, "readOnly": True},
            {"name": MODEL_COPY_VOLUME, "mountPath": MODEL_COPY_MOUNT},
            {"name": "verl-config", "mountPath": CONFIG_DIR, "readOnly": True},
        ],
        "securityContext": security,
    }


def entrypoint_pre_stop() -> dict:
    """The head container's preStop hook. KubeRay deletes a suspended or deadline-expired job's RayCluster without
    stopping the Ray job (rayjob_controller.go v1.7.0: "KubeRay doesn't stop the Ray job before suspending"), and a
    deleted pod's entrypoint is then SIGKILLed with the job supervisor. The hook runs first: it signals the
    entrypoint, which stops verl and ends the job's runs KILLED, and waits for it (within
    terminationGracePeriodSeconds)."""
    return {"preStop": {"exec": {"command": ["python3", f"{CONFIG_DIR}/{ENTRYPOINT_MODULE_FILE}", "--stop"]}}}


def _ray_start_params(spec: RunSpec, cpus: int) -> dict[str, str]:
    # Strings (the CRD's map[string]string). num-cpus without `resources`: KubeRay rejects the combination.
    return {"num-cpus": str(cpus), "num-gpus": str(spec.gpus_per_node)}


def render_rayjob(spec: RunSpec) -> dict:
    """The complete RayJob of one run (reads nothing but the spec)."""
    head = {
        "rayStartParams": {"dashboard-host": "0.0.0.0", **_ray_start_params(spec, spec.head_ray_cpus)},
        "serviceType": "ClusterIP",
        "template": gpu_pod_template(spec, "ray-head"),
    }
    # Every RayJob authenticates its job API, dashboard and GCS with a token only KubeRay knows (AUTH_MODE).
    cluster: dict = {"rayVersion": spec.ray_version, "authOptions": {"mode": AUTH_MODE}, "headGroupSpec": head}
    if spec.workers:
        cluster["workerGroupSpecs"] = [{
            "groupName": WORKER_GROUP,
            "replicas": spec.workers,
            "minReplicas": spec.workers,
            "maxReplicas": spec.workers,
            "rayStartParams": _ray_start_params(spec, spec.ray_cpus),
            "template": gpu_pod_template(spec, "ray-worker"),
        }]
    body: dict = {
        "entrypoint": spec.entrypoint,
        "submissionMode": spec.submission_mode,
        # The tutorial's `false` left 8 GPUs' worth of Ray cluster running after the job.
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
        "activeDeadlineSeconds": spec.active_deadline_seconds,
        "backoffLimit": spec.backoff_limit,
        "rayClusterSpec": cluster,
    }
    if spec.pre_running_deadline_seconds is not None:
        body["preRunningDeadlineSeconds"] = spec.pre_running_deadline_seconds
    body["runtimeEnvYAML"] = spec.runtime_env_yaml
    return {
        "apiVersion": RAY_API_VERSION,
        "kind": "RayJob",
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": dict(TRAINER_LABELS)},
        "spec": body,
    }


def rayjob_manifest(s: Settings, layout: Layout, scheduling: Scheduling, wiring: PodWiring) -> dict:
    """The complete RayJob of a stack's run. Raises RayJobError for a layout verl would reject."""
    return render_rayjob(run_spec(s, layout, scheduling, wiring))


def with_platform_values(manifest: dict, *, image: Any = None, tracking_uri: Any = None) -> dict:
    """The RayJob of an experiment stack: the image and MLflow address its platform exports (Outputs read through
    the StackReference) in place of the values the settings imply. The manifest is checked before this; only
    these two values change, and only where the settings put them (every Ray container's image and its
    MLFLOW_TRACKING_URI)."""
    out = copy.deepcopy(manifest)
    for _, group in pod_groups(out["spec"]):
        for container in group["template"]["spec"]["containers"]:
            if image is not None:
                container["image"] = image
            for env in container.get("env") or []:
                if env["name"] == "MLFLOW_TRACKING_URI" and tracking_uri is not None:
                    env["value"] = tracking_uri
    return out


# --------------------------------------------------------------------------------------------- controller rules
def pod_groups(spec: dict) -> list[tuple[str, dict]]:
    """(where, group) of the head and every worker group of a RayJob's spec (the queue and the log marker walk the
    same groups)."""
    cluster = spec.get("rayClusterSpec") or {}
    out = [("spec.rayClusterSpec.headGroupSpec", (cluster.get("headGroupSpec") or {}))]
    for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
        out.append((f"spec.rayClusterSpec.workerGroupSpecs[{i}]", group))
    return out


def model_prefetch_of(spec: dict) -> dict | None:
    """The head pod's `model-prefetch` container in a RayJob's spec (as rendered or recorded), if it has one."""
    head = ((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}
    return next((c for c in (head.get("spec") or {}).get("containers") or []
                 if isinstance(c, dict) and c.get("name") == MODEL_PREFETCH_CONTAINER), None)


def override_values(entrypoint: str, key: str) -> list[str]:
    """Every value the entrypoint gives the Hydra override `key`, in order (the last one wins in verl)."""
    return [w.split("=", 1)[1] for w in shlex.split(entrypoint or "") if w.startswith(f"{key}=")]


def _checkpoint_rule(spec: dict, checkpoint_claim: str) -> None:
    values = override_values(spec.get("entrypoint") or "", "trainer.default_local_dir")
    field = "spec.entrypoint: trainer.default_local_dir"
    if not values:
        raise RayJobError(f"{field} is missing: verl would write checkpoints to a relative directory inside the "
                          "head pod, which is lost with the Ray cluster; set it to the checkpoint volume")
    path = values[-1]
    if not path.startswith("/") or posixpath.normpath(path) != path:
        raise RayJobError(f"{field}={path} must be an absolute, normalised path on the checkpoint volume")
    for where, group in pod_groups(spec):
        pod = (group.get("template") or {}).get("spec") or {}
        claims = {v["name"]: v["persistentVolumeClaim"] for v in pod.get("volumes") or []
                  if "persistentVolumeClaim" in v}
        ok = False
        for c in pod.get("containers") or []:
            for m in c.get("volumeMounts") or []:
                claim = claims.get(m.get("name"))
                mount = m.get("mountPath", "").rstrip("/")
                if (claim and claim.get("claimName") == checkpoint_claim and not m.get("readOnly")
                        and not claim.get("readOnly") and (path == mount or path.startswith(mount + "/"))):
                    ok = True
        if not ok:
            raise RayJobError(
                f"{field}={path} is not on the shared checkpoint volume (claim {checkpoint_claim}, read-write) in "
                f"{where}: every actor rank writes its shard there, and a path elsewhere is lost with the pod")


def _auth_rule(spec: dict, kv: tuple[int, int, int], kuberay_version: str, ray_version: str) -> None:
    """Token authentication is this project's rule (the job API runs any command on the GPU nodes); its floors are
    KubeRay's (AUTH_SINCE_KUBERAY, AUTH_SINCE_RAY)."""
    auth = (spec.get("rayClusterSpec") or {}).get("authOptions") or {}
    if auth.get("mode") != AUTH_MODE:
        raise RayJobError("spec.rayClusterSpec.authOptions.mode must be token: without it Ray's job API (8265) runs "
                          "any command it is sent on the GPU nodes for anyone who reaches the port")
    if kv < AUTH_SINCE_KUBERAY:
        raise RayJobError(f"spec.rayClusterSpec.authOptions needs KubeRay >= {'.'.join(map(str, AUTH_SINCE_KUBERAY))} "
                          f"but versions.kuberay is {kuberay_version}; upgrade KubeRay")
    if _version(ray_version) < AUTH_SINCE_RAY:
        raise RayJobError(f"spec.rayClusterSpec.authOptions.mode token needs Ray >= {'.'.join(map(str, AUTH_SINCE_RAY))} "
                          f"(KubeRay refuses it below), but versions.ray is {ray_version}; use an image with a newer Ray "
                          "and set versions.ray to it")


def check_rayjob(manifest: dict, kuberay_version: str, *, checkpoint_claim: str) -> None:
    """KubeRay's admission rules for the configured operator version; raise RayJobError on the first violation."""
    kv = _version(kuberay_version)
    meta = manifest.get("metadata") or {}
    name = meta.get("name") or ""
    if len(name) > RAYJOB_NAME_MAX or not DNS1035.fullmatch(name):
        raise RayJobError(f"metadata.name {name!r}: KubeRay needs a DNS-1035 label of at most {RAYJOB_NAME_MAX} "
                          "characters (it appends a suffix for the RayCluster); set job.name accordingly")
    spec = manifest.get("spec") or {}
    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    ttl = spec.get("ttlSecondsAfterFinished", 0)
    if ttl < 0:
        raise RayJobError(f"spec.ttlSecondsAfterFinished {ttl} must be >= 0")
    if ttl > 0 and not shutdown:
        raise RayJobError("spec.ttlSecondsAfterFinished > 0 needs spec.shutdownAfterJobFinishes: true")
    if spec.get("suspend") and not shutdown:
        raise RayJobError("spec.suspend needs spec.shutdownAfterJobFinishes: true")
    selector = spec.get("clusterSelector")
    if not spec.get("rayClusterSpec") and not (selector or {}).get("ray.io/cluster"):
        raise RayJobError("spec.rayClusterSpec is required (or clusterSelector with ray.io/cluster)")
    mode = spec.get("submissionMode", "K8sJobMode")
    if mode not in SUBMISSION_MODE_SINCE:
        raise RayJobError(f"spec.submissionMode {mode!r} is not a KubeRay mode ({', '.join(SUBMISSION_MODE_SINCE)})")
    since = SUBMISSION_MODE_SINCE[mode]
    if kv < since:
        raise RayJobError(f"spec.submissionMode {mode} needs KubeRay >= {'.'.join(map(str, since))} but "
                          f"versions.kuberay is {kuberay_version}; use K8sJobMode or upgrade KubeRay")
    backoff = spec.get("backoffLimit", 0)
    if backoff < 0:
        raise RayJobError(f"spec.backoffLimit {backoff} must be >= 0")
    if mode == "SidecarMode":
        for key in ("clusterSelector", "submitterPodTemplate", "submitterConfig"):
            if spec.get(key):
                raise RayJobError(f"spec.{key} cannot be combined with submissionMode SidecarMode")
        head_policy = (((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}).get(
            "spec", {}).get("restartPolicy")
        if head_policy not in (None, "Never"):
            raise RayJobError(f"headGroupSpec.template.spec.restartPolicy {head_policy!r}: SidecarMode needs Never or "
                              "unset (the submitter runs inside the head pod)")
    if mode == "InteractiveMode" and backoff > 0:
        raise RayJobError("spec.backoffLimit > 0 is not allowed with InteractiveMode")
    if selector and backoff > 0:
        raise RayJobError("spec.backoffLimit > 0 is not allowed with clusterSelector")
    if "runtimeEnvYAML" in spec:
        try:
            parsed = yaml.safe_load(spec["runtimeEnvYAML"])
        except yaml.YAMLError as err:
            raise RayJobError(f"spec.runtimeEnvYAML is not valid YAML: {err}") from None
        if not isinstance(parsed, dict):
            raise RayJobError("spec.runtimeEnvYAML must be a YAML mapping (a Ray runtime_env)")
    for key in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
        if key in spec and not spec[key] > 0:
            raise RayJobError(f"spec.{key} {spec[key]} must be > 0")
    if "preRunningDeadlineSeconds" in spec and kv < (1, 6, 0):
        raise RayJobError(f"spec.preRunningDeadlineSeconds needs KubeRay >= 1.6.0 (versions.kuberay is "
                          f"{kuberay_version}); remove job.pre_running_deadline_seconds or upgrade KubeRay")
    if (spec.get("deletionStrategy") or {}).get("deletionRules"):
        if kv < (1, 5, 0):
            raise RayJobError("spec.deletionStrategy.deletionRules needs KubeRay >= 1.5.0")
        if shutdown:
            raise RayJobError("spec.deletionStrategy.deletionRules cannot be combined with shutdownAfterJobFinishes")
    for where, group in pod_groups(spec):
        containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            raise RayJobError(f"{where}.template needs at least one container")
        params = group.get("rayStartParams") or {}
        if any(not isinstance(v, str) for v in params.values()):
            raise RayJobError(f"{where}.rayStartParams values must be strings (e.g. num-gpus: \"8\")")
        if "labels" in params:
            raise RayJobError(f"{where}.rayStartParams.labels is rejected; use {where}.labels")
        if group.get("resources") and ({"num-cpus", "num-gpus", "memory", "resources"} & set(params)):
            raise RayJobError(f"{where}: rayStartParams num-cpus/num-gpus/memory/resources cannot be combined with "
                              "the group's `resources`")
        if where.startswith("spec.rayClusterSpec.workerGroupSpecs"):
            if not group.get("groupName"):
                raise RayJobError(f"{where}.groupName is required")
            autoscaling = (spec.get("rayClusterSpec") or {}).get("enableInTreeAutoscaling")
            if not autoscaling and ("minReplicas" not in group or "maxReplicas" not in group):
                raise RayJobError(f"{where}: minReplicas and maxReplicas must both be set when autoscaling is off")
            lo, hi = group.get("minReplicas", 0), group.get("maxReplicas", 2147483647)
            n = group.get("replicas", 0)
            if lo < 0 or hi < 0 or not lo <= hi:
                raise RayJobError(f"{where}: minReplicas {lo} must be <= maxReplicas {hi}, both >= 0")
            if not lo <= n <= hi:
                raise RayJobError(f"{where}: replicas {n} must lie between minReplicas {lo} and maxReplicas {hi}")
    ray_version = str((spec.get("rayClusterSpec") or {}).get("rayVersion", "0.0.0"))
    if not re.fullmatch(r"\d+\.\d+\.\d+", ray_version):
        raise RayJobError("spec.rayClusterSpec.rayVersion must be an exact Ray version like 2.52.1")
    _auth_rule(spec, kv, kuberay_version, ray_version)
    _checkpoint_rule(spec, checkpoint_claim)
