"""The queue admission check: a Job created right after a queued RayJob, which passes once the platform's queue has
the job (a QueueUnit names it, or it is resumed) and fails otherwise within `queue.admission_timeout_seconds`,
naming the job; it also repairs the koord-queue/KubeRay start-time race (pipeline/queue_admission.py says how).

Pure manifest builders; the TrainingJob component creates them. Pulumi awaits the Job (Complete) and fails `up` with
the failed pod's termination message, as it does for the node gate (gate.py says why a Job).

- A ServiceAccount per RayJob, in the job namespace beside the pipeline code ConfigMap it mounts.
- A Role in the RayJob's namespace that may get that one RayJob, patch its status, and list QueueUnits: nothing else.
- The `restricted` Pod Security level, the system pool, the dataset Jobs' Python image; nothing is installed.
- Named by a digest of its spec and of the run it checks, so a replaced RayJob gets a new check (Jobs are immutable).
"""

from __future__ import annotations

import json

from components.config import Settings
from components.wiring import ray_namespace
from components.workloads.training.gate import check_job_manifest
from components.workloads.training.run_spec import RunSpec

POLL_SECONDS = 10
LABELS = {"app.kubernetes.io/name": "verl-queue-admission", "app.kubernetes.io/part-of": "verl-ack"}


def admission_needed(s: Settings) -> bool:
    """Experiments on a platform's queue (a single stack runs no queue: components/platform.py)."""
    return s.queue.enabled and s.kind == "experiment"


def account_name(spec: RunSpec) -> str:
    return f"{spec.name[:45]}-admission"


def hints(s: Settings) -> list[str]:
    group = s.queue.queue_unit_api.split("/", 1)[0]
    return [f"the queue runs: `kubectl get pods -A | grep -i queue` on the platform {s.platform_stack}",
            "its RayJob extension is on (docs/uncertain-facts.md: `--enabled-extensions` lists rayjob)",
            f"`kubectl get queueunits.{group} -n {ray_namespace(s)}` lists the job once the queue has it"]


def service_account_manifest(s: Settings, spec: RunSpec) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account_name(spec), "namespace": s.job.namespace, "labels": dict(LABELS)}}


def role_manifest(s: Settings, spec: RunSpec) -> dict:
    group = s.queue.queue_unit_api.split("/", 1)[0]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": account_name(spec), "namespace": ray_namespace(s), "labels": dict(LABELS)},
            "rules": [
                {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "resourceNames": [spec.name], "verbs": ["get"]},
                {"apiGroups": ["ray.io"], "resources": ["rayjobs/status"], "resourceNames": [spec.name],
                 "verbs": ["patch"]},
                {"apiGroups": [group], "resources": ["queueunits"], "verbs": ["list"]}]}


def role_binding_manifest(s: Settings, spec: RunSpec) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": account_name(spec), "namespace": ray_namespace(s), "labels": dict(LABELS)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account_name(spec)},
            "subjects": [{"kind": "ServiceAccount", "name": account_name(spec), "namespace": s.job.namespace}]}


def admission_job_manifest(s: Settings, spec: RunSpec, code_config_map: str) -> dict:
    timeout = s.queue.admission_timeout_seconds
    env = {"ADMIT_NAMESPACE": ray_namespace(s), "ADMIT_RAYJOB": spec.name,
           "ADMIT_QUEUE_UNIT_API": s.queue.queue_unit_api, "ADMIT_TIMEOUT_SECONDS": str(timeout),
           "ADMIT_POLL_SECONDS": str(POLL_SECONDS), "ADMIT_HINTS": json.dumps(hints(s))}
    # It reads one RayJob and the QueueUnits (its Role), nothing else.
    return check_job_manifest(s, spec, code_config_map, container="admission", module="pipeline.queue_admission",
                              suffix="admit", env=env, timeout=timeout, service_account=account_name(spec),
                              labels=LABELS)
