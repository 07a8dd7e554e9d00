"""Queued, all-or-nothing experiments on a shared platform: ack-kube-queue, ElasticQuotaTree and ACK gang scheduling.

Without a queue, a second experiment on a platform's GPU pool waits Pending until `preRunningDeadlineSeconds` fails
it, and two multi-node RayJobs can each hold part of the pool and wait for the rest forever. With `queue.enabled`:

- the platform installs ack-kube-queue (cs.KubernetesAddon `versions.addons.kube_queue`) and renders one
  ElasticQuotaTree (kube-system/elasticquotatree): the GPU pool is the root (min == max), each team's namespace a
  leaf with its `gpus` (max) and `min_gpus` (min), plus one PriorityClass per queue priority;
- an experiment's RayJob is created with `spec.suspend: true`. kube-queue makes one QueueUnit of the whole job (head
  plus every worker replica, summed) and resumes it only when that total fits the namespace's quota; order is
  priority, then first submission (kube-queue priority plugin). KubeRay creates nothing for a suspended RayJob;
- every Ray pod carries ACK's gang labels (pod-group name = the RayJob, min-available = all its pods), so the
  scheduler binds all of them or none: a job resumed by the queue can never hold part of the pool.

Waiting in the queue does not count against the job's deadlines: KubeRay v1.7.0 keeps a suspended RayJob in
`Suspended` without checking them, and on resume goes back to `New`, whose initialisation sets `status.startTime`
anew, the clock of both `activeDeadlineSeconds` and `preRunningDeadlineSeconds` (docs/facts.md "Shared platform").
Sources for every name here: docs/facts.md "Shared platform"; uncertain ones in docs/uncertain-facts.md.
"""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from components.cloud.addons import AddonsArgs, retain_addon
from components.config import Settings
from components.model.layout import Layout
from components.wiring import ray_namespace
from components.workloads.training.rayjob import pod_groups

EQT_API_VERSION = "scheduling.sigs.k8s.io/v1beta1"
EQT_NAME = "elasticquotatree"  # one tree per cluster, in kube-system (ACK capacity scheduling)
EQT_NAMESPACE = "kube-system"
# ACK kube-scheduler gang labels: it creates the PodGroup named by the first, and binds the group's pods only when
# min-available of them can run.
POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
MIN_AVAILABLE_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"
GPU = "nvidia.com/gpu"
# The queue reads a RayJob's priority from the head pod's priorityClassName; all pods of a gang share it.
PRIORITY_CLASS_PREFIX = "verl-ack-"
# Oldest ack-kube-queue that queues RayJobs (ACK "Automate RayJobs" prerequisites: Kube Queue v1.21.4 or later).
KUBE_QUEUE_RAYJOB_MIN = "1.21.4"


class QueueError(ValueError):
    """A queued RayJob that could start partially or out of the queue; the message names the field and the fix."""


def priority_class_name(priority: str) -> str:
    return f"{PRIORITY_CLASS_PREFIX}{priority}"


def priority_class_manifests(s: Settings) -> list[dict]:
    """One PriorityClass per queue priority. preemptionPolicy Never: a high-priority job waits for the GPUs instead
    of evicting a running one (verl cannot lose a node mid-run)."""
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": priority_class_name(p), "labels": {"app.kubernetes.io/part-of": "verl-ack"}},
             "value": value, "preemptionPolicy": "Never", "globalDefault": False,
             "description": f"verl-ack queue priority {p} (components/queue.py)"}
            for p, value in s.queue.priority_values.items()]


def _quota(gpus: int, cpu: int, memory_gib: int) -> dict[str, Any]:
    return {"cpu": cpu, "memory": f"{memory_gib}Gi", GPU: gpus}


def elastic_quota_tree_manifest(s: Settings) -> dict:
    """The platform's quota tree: the GPU pool as the root (ACK requires root min == max, at most the cluster), one
    leaf per team namespace. CPU and memory are the GPU pool's, in every node, so only GPUs ever bind (the data Jobs
    in a team's namespace fit beside any RayJob); a team's GPU max is its `gpus`, its guarantee `min_gpus`."""
    g = s.gpu_pool
    gpus, cpu, mem = g.nodes * g.gpus_per_node, g.nodes * g.cpus_per_node, g.nodes * g.memory_gib_per_node
    children = [{"name": f"root.{ns}", "namespaces": team.all_namespaces(ns),
                 "max": _quota(team.gpus, cpu, mem), "min": _quota(team.min_gpus, 0, 0)}
                for ns, team in sorted(s.queue.teams.items())]
    root = {"name": "root", "max": _quota(gpus, cpu, mem), "min": _quota(gpus, cpu, mem)}
    if children:
        root["children"] = children
    return {"apiVersion": EQT_API_VERSION, "kind": "ElasticQuotaTree",
            "metadata": {"name": EQT_NAME, "namespace": EQT_NAMESPACE,
                         "labels": {"app.kubernetes.io/part-of": "verl-ack"}},
            "spec": {"root": root}}


def _templates(manifest: dict) -> list[tuple[str, dict, int]]:
    """(where, group, pod count) of every Ray pod group of a RayJob manifest: the head is one pod."""
    groups = pod_groups(manifest["spec"])
    return [(where, group, 1 if i == 0 else group.get("replicas", 0)) for i, (where, group) in enumerate(groups)]


def queued_rayjob(manifest: dict, s: Settings, layout: Layout) -> dict:
    """The RayJob as the queue needs it: suspended, every pod in one gang of all its pods, the queue priority."""
    out = copy.deepcopy(manifest)
    pods = sum(n for _, _, n in _templates(out))
    if pods != layout.nodes:
        raise QueueError(f"the RayJob has {pods} pods but the layout {layout.nodes} nodes: the gang must be all of "
                         "them")
    out["spec"]["suspend"] = True  # kube-queue resumes it; KubeRay creates no pod while it is suspended
    name = out["metadata"]["name"]
    for _, group, _ in _templates(out):
        meta = group["template"].setdefault("metadata", {})
        meta.setdefault("labels", {}).update({POD_GROUP_LABEL: name, MIN_AVAILABLE_LABEL: str(pods)})
        group["template"]["spec"]["priorityClassName"] = priority_class_name(s.queue.priority)
    return out


# KubeRay v1.7.0 common/job.go GetDefaultSubmitterContainer: the submitter's requests. K8sJobMode runs it as a pod
# of its own in the RayJob's namespace, SidecarMode appends it to the head pod; neither is in the RayJob's template,
# which is all the queue sums (koord-queue rayjob.go `Resources`), yet the namespace's quota counts the pod.
SUBMITTER_REQUEST = {"cpu": 0.5, "memory": 200 * 2**20}
SUBMITTER_MODES = ("K8sJobMode", "SidecarMode")  # HTTPMode and InteractiveMode start no submitter


def quantity(text: Any) -> float:
    """A Kubernetes quantity as a number (cores for CPU, bytes for memory)."""
    text = str(text).strip()
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    decimal = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    for suffix, factor in binary.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    if text and text[-1] in decimal:
        return float(text[:-1]) * decimal[text[-1]]
    return float(text)


def job_request(manifest: dict) -> dict[str, float]:
    """What one RayJob takes from its namespace's quota while it runs: the requests of the head plus every worker
    replica (what the queue admits as one unit), and KubeRay's submitter (K8sJobMode, SidecarMode). CPU in cores,
    memory in bytes, GPUs as a count."""
    total: dict[str, float] = {GPU: 0.0, "cpu": 0.0, "memory": 0.0}
    for _, group, n in _templates(manifest):
        for c in group["template"]["spec"]["containers"]:
            for key, value in (c.get("resources") or {}).get("requests", {}).items():
                if key in total:
                    total[key] += n * quantity(value)
    if manifest["spec"].get("submissionMode", "K8sJobMode") in SUBMITTER_MODES:
        for key, value in SUBMITTER_REQUEST.items():
            total[key] += value
    return total


def team_limits(s: Settings) -> dict[str, dict[str, float]]:
    """The platform's quota leaves as an experiment checks them: namespace -> the most each of its jobs may take
    (the leaf's max: `gpus`, and the GPU pool's CPU and memory). Exported by the platform (`queue_teams`)."""
    tree = elastic_quota_tree_manifest(s)
    out: dict[str, dict[str, float]] = {}
    for leaf in tree["spec"]["root"].get("children", []):
        limit = {k: quantity(v) for k, v in leaf["max"].items()}
        for ns in leaf["namespaces"]:
            out[ns] = {"team": leaf["name"].removeprefix("root."), **limit}
    return out


def check_team(s: Settings, teams: dict[str, dict[str, Any]], requests: dict[str, dict[str, float]],
               platform: str) -> None:
    """Refuse, before anything is created, a queued RayJob no queue would ever dequeue: its namespace in no quota
    leaf of the platform (koord-queue: a job in no ElasticQuota leaf belongs to no queue), or a request (submitter
    included) above its team's max. `requests`: RayJob name -> job_request."""
    ns = ray_namespace(s)
    field = "job.namespace" if ns == s.job.namespace else "job.ray_namespace"
    if ns not in teams:
        listed = ", ".join(sorted(teams)) or "none"
        raise QueueError(
            f"{field}: the RayJob namespace {ns} is in none of the platform {platform}'s queue.teams (listed: "
            f"{listed}), so the queue would never dequeue it: add `{ns}: {{gpus: N}}` under queue.teams (or to a "
            f"team's namespaces) in the platform's stack file and `pulumi up` it first")
    limit = teams[ns]
    for name, request in sorted(requests.items()):
        for key, need in request.items():
            have = float(limit.get(key, 0))
            if need > have:
                unit = {"memory": lambda v: f"{v / 2**30:.2f}Gi", "cpu": lambda v: f"{v:g} CPU"}.get(
                    key, lambda v: f"{v:g}")
                raise QueueError(
                    f"queue.teams: RayJob {name} needs {unit(need)} of {key} (its Ray pods plus KubeRay's submitter) "
                    f"but team {limit.get('team', ns)} of {platform} may use at most {unit(have)}, so the queue would "
                    f"never admit it: raise the team's gpus on the platform, or shrink the job")


def check_gang(manifest: dict) -> None:
    """A queued RayJob can start only whole: suspended at creation, every pod in one PodGroup whose min-available is
    all of them, one priority for the gang (ACK: all pods of a PodGroup share one priority)."""
    spec = manifest.get("spec") or {}
    if spec.get("suspend") is not True:
        raise QueueError("spec.suspend must be true: the queue resumes the RayJob; created running, it would take GPUs "
                         "outside the quota")
    groups = _templates(manifest)
    pods = sum(n for _, _, n in groups)
    name = manifest["metadata"]["name"]
    classes = set()
    for where, group, _ in groups:
        labels = (group["template"].get("metadata") or {}).get("labels") or {}
        if labels.get(POD_GROUP_LABEL) != name or labels.get(MIN_AVAILABLE_LABEL) != str(pods):
            raise QueueError(f"{where}.template.metadata.labels: every Ray pod needs {POD_GROUP_LABEL}={name} and "
                             f"{MIN_AVAILABLE_LABEL}={pods} (all pods of the job), or part of it could start")
        classes.add(group["template"]["spec"].get("priorityClassName"))
    if len(classes) != 1 or None in classes:
        raise QueueError("every Ray pod template needs the same priorityClassName: a gang shares one priority")


def queue_summary(s: Settings) -> dict[str, Any]:
    """What the plan says about the queue of this stack."""
    out: dict[str, Any] = {"enabled": s.queue.enabled}
    if s.queue.enabled and s.kind == "platform":
        out["quota_tree"] = f"{EQT_NAMESPACE}/{EQT_NAME}"
        out["teams"] = {ns: {"gpus": t.gpus, "min_gpus": t.min_gpus, "namespaces": t.all_namespaces(ns)}
                        for ns, t in sorted(s.queue.teams.items())}
        out["min_gpus"] = ("ordering, not a guarantee: nothing is preempted (preemptionPolicy Never), so GPUs another "
                           "team borrowed return only when its running job ends")
        out["pool_gpus"] = s.gpu_pool.nodes * s.gpu_pool.gpus_per_node
    if s.queue.enabled and s.kind == "experiment":
        out["priority_class"] = priority_class_name(s.queue.priority)
        out["namespace"] = ray_namespace(s)  # the RayJob's: its quota leaf
        out["admission_check"] = (f"`up` fails, naming the RayJob, when no queue has taken it within "
                                  f"{s.queue.admission_timeout_seconds} s (queue.admission_timeout_seconds)")
    return out


# The same inputs as the cluster's other add-ons (settings, cluster id, both providers, the nodes they need).
QueueingArgs = AddonsArgs


class Queueing(pulumi.ComponentResource):
    """The platform's queue: the ack-kube-queue add-on, the ElasticQuotaTree and the PriorityClasses."""

    def __init__(self, name: str, args: QueueingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:queue:Queueing", name, None, opts)
        s = args.settings
        addon = s.versions.addons["kube_queue"]
        self.addon = alicloud.cs.KubernetesAddon(
            f"{name}-kube-queue", cluster_id=args.cluster_id, name=addon.name, version=addon.version,
            # RayJob queueing is a job-extensions switch (--enabled-extensions ... rayjob); the add-on's config key
            # for it is not published, so the plan says to check it (docs/uncertain-facts.md).
            # The queue's controller pods need the system pool's nodes, or the install reports failed.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.nodes_ready,
                                        retain_on_delete=True if retain_addon(s, "kube_queue") else None))
        tree = elastic_quota_tree_manifest(s)
        self.quota_tree = k8s.apiextensions.CustomResource(
            f"{name}-quota-tree", api_version=tree["apiVersion"], kind=tree["kind"], metadata=tree["metadata"],
            spec=tree["spec"],
            # The ElasticQuotaTree is read by the queue, which is installed first (the tree's CRD is ACK Pro's).
            opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[self.addon]))
        self.priority_classes = [
            k8s.scheduling.v1.PriorityClass(
                f"{name}-{m['metadata']['name']}", metadata=m["metadata"], value=m["value"],
                preemption_policy=m["preemptionPolicy"], global_default=m["globalDefault"],
                description=m["description"], opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider))
            for m in priority_class_manifests(s)]
        self.ready: list[pulumi.Resource] = [self.addon, self.quota_tree, *self.priority_classes]
        self.register_outputs({"quota_tree": f"{EQT_NAMESPACE}/{EQT_NAME}"})
