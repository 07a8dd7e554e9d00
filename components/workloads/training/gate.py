"""The GPU node gate: a Job the RayJob waits for, which passes once the GPU pool's nodes are Ready with the
allocatable the job requests (`nvidia.com/gpu`, and `rdma/hca` where RDMA is used) and fails otherwise, within
`job.node_gate_timeout_seconds`, naming the pool, how many nodes joined and what to check (pipeline/node_gate.py).

Pure manifest builders; the TrainingJob component creates them. Why a Job: pulumi-kubernetes awaits a Job until it
is Complete and fails the resource at once when it is Failed, reporting the failed pod's container termination
message (pulumi/pulumi-kubernetes@94977969 provider/pkg/await/job.go, jobInitAwaiter with its PodAggregator;
provider/pkg/await/checker/pod/check.go containerTerminatedError), so the message is in `pulumi up`'s output and
the RayJob, which depends on the Job, is never created on an empty pool.

- Its own ServiceAccount (named, like its ClusterRole, after the environment: one per sweep variant), bound to a
  ClusterRole that may only `get` and `list` nodes (nodes are cluster-scoped).
- The `restricted` Pod Security level: non-root, no capability, RuntimeDefault seccomp, read-only root.
- The pipeline code ConfigMap (data.py) and the dataset Jobs' Python image; nothing is installed.
- Named by a digest of its spec and of the whole RayJob it guards, so a new RayJob gets a new gate (Jobs are immutable);
  a gate that failed is run again by the next `up` (its `pulumi.com/replaceUnready` annotation; wiring.py).

An autoscaled ECS pool (min_nodes < nodes) boots its nodes only once the Ray pods are pending, so no gate: there
is nothing to wait for before the RayJob exists.
"""

from __future__ import annotations

import hashlib
import json

from components.config import Settings
from components.model.wait import gpu_pool_autoscales
from components.wiring import (
    REPLACE_UNREADY,
    Scheduling,
    non_root_pod_security,
    restricted_container_security,
    system_scheduling,
)
from components.workloads.data import CODE_ROOT, NOBODY  # the pipeline ConfigMap mounted as the data Jobs mount it
from components.workloads.training.rayjob import GPU_RESOURCE, RDMA_RESOURCE, render_rayjob
from components.workloads.training.run_spec import RunSpec

POLL_SECONDS = 15
LABELS = {"app.kubernetes.io/name": "verl-node-gate", "app.kubernetes.io/part-of": "verl-ack"}


def gate_needed(s: Settings) -> bool:
    return s.job.node_gate and not gpu_pool_autoscales(s)


def pool_name(s: Settings) -> str:
    """How the messages name the pool (components/cloud/nodepools.py names this stack's `<name>-gpu`)."""
    if s.owns_gpu_pool():
        return f"{s.name}-gpu"
    return f"of platform stack {s.platform_stack} (gpu_pool.owner: platform)"


def needed_resources(spec: RunSpec) -> dict[str, str]:
    out = {GPU_RESOURCE: str(spec.gpus_per_node)}
    if spec.rdma:
        out[RDMA_RESOURCE] = "1"
    out.update(dict(spec.extra_resources))
    return out


def selector_text(scheduling: Scheduling) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(scheduling.node_selector.items()))


def hints(s: Settings, spec: RunSpec) -> list[str]:
    out = ["`kubectl get nodes -l " + selector_text(spec.scheduling) + " -o wide` and the node pool's scaling "
           "activity in the ACK console"]
    if s.gpu_pool.kind == "lingjun":
        out.append("that the Lingjun node group's machines were added to the pool (ACK console > Node pools > "
                   "the pool > Nodes) and are Running in the Lingjun console")
    out.append(f"`kubectl describe node <node>`: {GPU_RESOURCE} comes from the GPU device plugin"
               + (f", {RDMA_RESOURCE} from ack-rdma-device-plugin" if spec.rdma else ""))
    # What the user does next; it works because the failed gate is replaced, not re-awaited (component.py).
    out.append("once fixed, run `pulumi up` again: it deletes this failed gate and checks the nodes once more")
    return out


def gate_object_name(s: Settings) -> str:
    """The name of the gate's ServiceAccount, ClusterRole and ClusterRoleBinding: the environment's. A sweep's
    variants each have their own gate in the one namespace (components/sweep.py gives each variant its own
    settings.name), and pulumi-kubernetes fails the create of an object that already exists, so a constant name
    would leave every variant's gate but the first uncreated."""
    return f"{s.name}-node-gate"


def cluster_role_manifest(s: Settings) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            # Cluster-scoped: the environment name keeps two stacks on one cluster apart.
            "metadata": {"name": gate_object_name(s), "labels": dict(LABELS)},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                      # logs.enabled: the log collector's DaemonSet, whose tolerations it checks (that one name only)
                      *([{"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"],
                          "resourceNames": [s.logs.collector_daemonset.split("/", 1)[1]]}] if s.logs.enabled else [])]}


def cluster_role_binding_manifest(s: Settings, namespace: str) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": gate_object_name(s), "labels": dict(LABELS)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": gate_object_name(s)},
            "subjects": [{"kind": "ServiceAccount", "name": gate_object_name(s), "namespace": namespace}]}


def service_account_manifest(s: Settings, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": gate_object_name(s), "namespace": namespace, "labels": dict(LABELS)}}


def check_job_manifest(s: Settings, spec: RunSpec, code_config_map: str, *, container: str, module: str,
                       suffix: str, env: dict[str, str], timeout: int, service_account: str,
                       labels: dict[str, str]) -> dict:
    """A small check Job of one run (`spec`), as the gate and the queue admission check are: `python -m <module>`
    from the pipeline code ConfigMap, on the system pool, non-root, one pod that polls until its own timeout. Its
    name carries a digest of what it checks, so a changed run gets a new check."""
    sched = system_scheduling(s)
    tiny = {"cpu": "100m", "memory": "128Mi"}
    job_spec = {
        "backoffLimit": 0,  # the check waits itself; a second pod would only wait again
        "activeDeadlineSeconds": timeout + 300,  # pulling the small image and starting count too
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "restartPolicy": "Never",
                "serviceAccountName": service_account,
                "automountServiceAccountToken": True,  # it reads what its Role allows, nothing else
                "enableServiceLinks": False,
                "nodeSelector": dict(sched.node_selector),
                "tolerations": [dict(t) for t in sched.tolerations],
                "securityContext": non_root_pod_security(NOBODY),
                "containers": [{
                    "name": container,
                    "image": s.versions.dataset_image,
                    "command": ["python", "-m", module],
                    "env": [{"name": k, "value": v} for k, v in
                            {**env, "PYTHONPATH": CODE_ROOT, "PYTHONDONTWRITEBYTECODE": "1",
                             "PYTHONUNBUFFERED": "1"}.items()],
                    "resources": {"requests": dict(tiny), "limits": dict(tiny)},
                    # The message pulumi-kubernetes shows; the log tail when the script could not write it.
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "securityContext": restricted_container_security(),
                    "volumeMounts": [{"name": "code", "mountPath": f"{CODE_ROOT}/pipeline", "readOnly": True}],
                }],
                "volumes": [{"name": "code", "configMap": {"name": code_config_map, "defaultMode": 0o444}}],
            },
        },
    }
    # The run is the whole RayJob it renders (pod resources included): any change that replaces the RayJob gets a
    # new check, never the old completed one.
    checked = json.dumps({"job": job_spec, "run": render_rayjob(spec)}, sort_keys=True)
    digest = hashlib.sha256(checked.encode()).hexdigest()[:10]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"{spec.name[:40]}-{suffix}-{digest}", "namespace": s.job.namespace,
                         "labels": dict(labels), "annotations": dict(REPLACE_UNREADY)},  # failed: rerun next `up`
            "spec": job_spec}


def gate_job_manifest(s: Settings, spec: RunSpec, code_config_map: str) -> dict:
    """The gate Job guarding one run (`spec`), in the job namespace beside the pipeline code ConfigMap it mounts
    (not the Ray pods' privileged one, wiring.ray_namespace: the gate needs no privilege)."""
    timeout = s.job.node_gate_timeout_seconds
    env = {"GATE_POOL": pool_name(s), "GATE_SELECTOR": selector_text(spec.scheduling), "GATE_NODES": str(spec.nodes),
           "GATE_RESOURCES": json.dumps(needed_resources(spec), sort_keys=True),
           "GATE_TIMEOUT_SECONDS": str(timeout), "GATE_POLL_SECONDS": str(POLL_SECONDS),
           "GATE_HINTS": json.dumps(hints(s, spec)),
           **({"GATE_COLLECTOR": s.logs.collector_daemonset} if s.logs.enabled else {})}
    return check_job_manifest(s, spec, code_config_map, container="gate", module="pipeline.node_gate", suffix="gate",
                              env=env, timeout=timeout, service_account=gate_object_name(s), labels=LABELS)
