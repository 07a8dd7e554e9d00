"""Settings of experiments that share a platform: the job queue with per-team quotas, sweeps, and run logs.

- `queue` (ack-kube-queue + ElasticQuotaTree + ACK gang scheduling): a platform installs the queue and renders the
  quota tree and priority classes; an experiment's RayJobs are created suspended and start only when the queue
  admits them, all of their pods at once (components/queue.py, docs/stacks.md "Queued experiments").
- `training.sweep`: a small grid over verl settings, one queued RayJob per variant (components/sweep.py).
- `logs`: driver, worker and vLLM logs of every Ray pod collected into a Log Service logstore that the platform's
  collection owns and an experiment's destroy never touches (components/logs.py).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from components.config.types import Dns1123Label, Strict

# The grid is a product: three axes of three values already make 27 RayJobs. The cap keeps a sweep "small" (each
# variant is a full GPU job); a larger study wants a scheduler of its own.
SWEEP_MAX_VARIANTS = 16
# The bounds of the training fields a sweep varies (components/config/training.py declares those fields with these
# types); the per-variant validation applies the full rules of each field.
Rate = Annotated[float, Field(gt=0, lt=1)]
Coefficient = Annotated[float, Field(ge=0, le=1000)]
SampleCount = Annotated[int, Field(ge=1, le=4096)]
PRIORITIES = ("low", "normal", "high")


class TeamQuota(Strict):
    gpus: int = Field(ge=0, le=1 << 20, description="Most GPUs the team's namespace may use at once (the quota's max); "
                      "a RayJob needing more than this never leaves the queue.")
    min_gpus: int = Field(0, ge=0, le=1 << 20, description="The team's share of the pool in the quota tree (the "
                          "quota's min). Ordering, not a guarantee: nothing is ever preempted (the PriorityClasses are "
                          "preemptionPolicy Never, and verl cannot lose a node mid-run), so GPUs another team borrowed "
                          "come back only when its running job ends; a job of this team waits in the queue until "
                          "then.")
    namespaces: list[Dns1123Label] = Field(
        default_factory=list, max_length=64, description="Further experiment namespaces that share this team's quota "
        "(the quota leaf lists the key and these). Each experiment has a namespace of its own (docs/stacks.md \"A "
        "second experiment\"); a team with several experiments lists them here.")

    @model_validator(mode="after")
    def _min_max(self) -> TeamQuota:
        if self.min_gpus > self.gpus:
            raise ValueError(f"min_gpus {self.min_gpus} exceeds gpus {self.gpus}: ElasticQuotaTree needs min <= max "
                             "on every node; lower min_gpus or raise gpus")
        return self

    def all_namespaces(self, key: str) -> list[str]:
        return [key, *(n for n in self.namespaces if n != key)]


class QueueSettings(Strict):
    enabled: bool = Field(
        False, description="Queue experiments on the platform's GPU pool (ack-kube-queue, ElasticQuotaTree, ACK gang "
        "scheduling). A platform installs the queue and renders the quotas; an experiment's RayJobs are created "
        "suspended and start, all pods or none, when their namespace's quota has room, by priority then submission "
        "order. Both stacks of a pair say the same.")
    teams: dict[Dns1123Label, TeamQuota] = Field(
        default_factory=dict, description="Platform: the quota per team, keyed by the namespace its experiments use "
        "(job.namespace; the RayJob's `<job.namespace>-ray` with RDMA), plus its `namespaces`. Each becomes a leaf of "
        "the ElasticQuotaTree. An experiment whose RayJob namespace is in no team is refused at preview: no queue "
        "would ever dequeue it.")
    admission_timeout_seconds: int = Field(
        600, ge=60, le=86400, description="Experiment: how long `pulumi up` waits for the queue to take each RayJob "
        "(a QueueUnit for it, or the job resumed) before it fails naming the job. The queue's controller takes a "
        "created job within seconds when it runs; the bound covers a queue restarting. Waiting for quota is not "
        "counted: a job the queue holds passes at once.")
    queue_unit_api: str = Field(
        "scheduling.x-k8s.io/v1alpha1", pattern=r"^[a-z0-9.-]+/v[0-9a-z]+$", description="Experiment: the apiVersion "
        "of the queue's QueueUnit (koord-queue and kube-queue: scheduling.x-k8s.io/v1alpha1), which the admission "
        "check lists (docs/uncertain-facts.md).")
    priority: Literal["low", "normal", "high"] = Field(
        "normal", description="Experiment: the queue priority of its RayJobs (a PriorityClass the platform creates). "
        "Higher goes first; equal priorities go in submission order.")
    priority_values: dict[Literal["low", "normal", "high"], int] = Field(
        default_factory=lambda: {"low": 1000, "normal": 2000, "high": 3000},
        description="Platform: the value of each PriorityClass (verl-ack-<priority>). They never preempt a running "
        "job (preemptionPolicy: Never): verl cannot survive losing a node.")

    @model_validator(mode="after")
    def _values(self) -> QueueSettings:
        if set(self.priority_values) != set(PRIORITIES):
            raise ValueError(f"queue.priority_values needs a value for each of {list(PRIORITIES)}")
        values = [self.priority_values[p] for p in PRIORITIES]
        if values != sorted(set(values)) or not all(0 <= v <= 1_000_000_000 for v in values):
            raise ValueError("queue.priority_values must rise strictly from low to high, each 0..1000000000 (the "
                             "range Kubernetes allows user PriorityClasses)")
        owner: dict[str, str] = {}
        for key, team in self.teams.items():
            for ns in team.all_namespaces(key):
                if ns in owner:
                    raise ValueError(f"queue.teams: namespace {ns} is in teams {owner[ns]} and {key}; a namespace "
                                     "belongs to one quota leaf (ElasticQuotaTree): list it under one team")
                owner[ns] = key
        return self

    def team_of(self, namespace: str) -> str | None:
        """The team (its key) whose quota leaf holds `namespace`, or None."""
        return next((k for k, t in self.teams.items() if namespace in t.all_namespaces(k)), None)


class LogSettings(Strict):
    enabled: bool = Field(
        False, description="Keep every Ray pod's log files (driver, workers, vLLM: /tmp/ray/session_*/logs) in a Log "
        "Service logstore after the Ray cluster is deleted. The platform installs the logtail-ds add-on and owns the "
        "collection; experiments only mark their Ray containers. Both stacks of a pair say the same.")
    retention_days: int = Field(
        30, ge=1, le=3650, description="Days the logstore keeps log entries (AliyunLogConfig lifeCycle).")
    logstore: Dns1123Label = Field("verl-ray", description="Logstore the Ray logs go to (created by the log "
                                   "controller when missing).")
    collector_daemonset: str = Field(
        "kube-system/logtail-ds", pattern=r"^[a-z0-9-]+/[a-z0-9-]+$", description="Experiment: the `<namespace>/<name>` "
        "of the logtail-ds add-on's DaemonSet. The node gate reads its tolerations and fails `up` unless it tolerates "
        "every taint of the GPU nodes (the program's verl-ack/gpu, Lingjun's), since a collector that does not run "
        "beside the Ray pods collects nothing (docs/uncertain-facts.md).")
    project: Dns1123Label | None = Field(
        None, description="Log Service project of the logstore. Empty = the project the logtail-ds add-on uses, "
        "k8s-log-<cluster id>. Project names are unique across Alibaba Cloud.")


class SweepSettings(Strict):
    """A grid over verl settings; every combination is one variant, i.e. one queued RayJob with its own run."""

    lr: list[Rate] = Field(default_factory=list, max_length=SWEEP_MAX_VARIANTS,
                            description="Actor learning rates to try (training.lr).")
    kl_loss_coef: list[Coefficient] = Field(default_factory=list, max_length=SWEEP_MAX_VARIANTS,
                                      description="KL loss coefficients to try (training.kl_loss_coef).")
    rollout_n: list[SampleCount] = Field(default_factory=list, max_length=SWEEP_MAX_VARIANTS,
                                 description="Responses per prompt to try (training.rollout_n).")
    entropy_coeff: list[Coefficient] = Field(default_factory=list, max_length=SWEEP_MAX_VARIANTS,
                                       description="Entropy bonus coefficients to try (training.entropy_coeff).")

    def axes(self) -> dict[str, list]:
        """The non-empty axes, in a fixed order (the variants' order and names depend on nothing else)."""
        return {k: list(getattr(self, k)) for k in ("lr", "kl_loss_coef", "rollout_n", "entropy_coeff")
                if getattr(self, k)}

    def size(self) -> int:
        return math.prod(len(v) for v in self.axes().values())

    @model_validator(mode="after")
    def _small(self) -> SweepSettings:
        axes = self.axes()
        if not axes:
            raise ValueError("training.sweep lists no values: give at least one of lr, kl_loss_coef, rollout_n, "
                             "entropy_coeff, or remove training.sweep")
        for key, values in axes.items():
            if len(set(values)) != len(values):
                raise ValueError(f"training.sweep.{key} lists a value twice: every variant must differ")
        if self.size() > SWEEP_MAX_VARIANTS:
            raise ValueError(f"training.sweep has {self.size()} variants (the product of its lists), more than "
                             f"{SWEEP_MAX_VARIANTS}: each variant is a full GPU job; shorten the lists or split the "
                             "sweep into several stacks")
        return self


def experiment_on_platform_problems(platform: Any, experiment: Any, queue_namespace: str) -> list[tuple[str, str]]:
    """(field, message) for an experiment whose queue or log settings its platform does not match, or whose job
    its team's quota can never admit. Both are validated Settings (root.py); `queue_namespace` is the namespace
    of the experiment's RayJob, the quota leaf it queues in (components/wiring.py ray_namespace: job.namespace, or
    the privileged Ray namespace of a multi-node Lingjun job). plan.py calls this when it renders an experiment's
    platform, the one place both files are read."""
    problems: list[tuple[str, str]] = []
    pq, eq = platform.queue, experiment.queue
    if pq.enabled != eq.enabled:
        problems.append(("queue.enabled", (
            f"is {eq.enabled} but the platform's is {pq.enabled}: " + (
                "a queued RayJob is created suspended and nothing on the platform ever admits it" if eq.enabled else
                "an unqueued RayJob starts at once, bypassing the team quotas, and can hold part of the pool while "
                "a queued job holds the rest") + f"; set queue.enabled: {pq.enabled} here (both stacks say the same)")))
    gpus = experiment.gpu_pool.nodes * experiment.gpu_pool.gpus_per_node
    team = pq.teams.get(queue_namespace) if pq.enabled and eq.enabled else None
    if team is not None and team.gpus < gpus:
        field = "job.namespace" if queue_namespace == experiment.job.namespace else "job.ray_namespace"
        problems.append((field, (
            f"the platform's quota for team {queue_namespace!r} (queue.teams.{queue_namespace}.gpus) "
            f"is {team.gpus} GPUs but this experiment's RayJob needs {gpus} (gpu_pool.nodes x gpus_per_node), all at "
            "once: the queue would never admit it; raise the team's gpus in the platform's stack file or shrink the "
            "job")))
    pl, el = platform.logs, experiment.logs
    if pl.enabled != el.enabled:
        problems.append(("logs.enabled", (
            f"is {el.enabled} but the platform's is {pl.enabled}: the platform owns the log collection, so "
            + ("the Ray logs this experiment marks are collected by nothing" if el.enabled else
               "this experiment's Ray logs would be lost with its Ray cluster")
            + f"; set logs.enabled: {pl.enabled} here (both stacks say the same)")))
    elif el.enabled:
        for key in ("logstore", "project", "retention_days"):
            if getattr(pl, key) != getattr(el, key):
                problems.append((f"logs.{key}", (
                    f"is {getattr(el, key)!r} but the platform's is {getattr(pl, key)!r}: the platform's collection "
                    f"decides where the logs go and how long they stay; copy the platform's logs.{key}")))
    return problems
