"""An experiment: one training run on a platform.

The GPU pool (its nodes bill while they exist, so it lives and dies with the run) and the image pre-pull, unless
`gpu_pool.owner: platform` keeps both on the platform (Lingjun bills in a pool or not: the run then starts on joined
nodes with the image on disk); the data and model staging Jobs, the experiment's namespace with its RRSA roles and
service accounts, the verl configs and the RayJob. An `experiment` stack reads every platform value from
`PlatformRefs.from_stack_reference` and talks to the cluster through its own explicit Kubernetes provider, logged in
with a short-lived credential it fetches for the platform's cluster id on every run (the platform exports no
credential: components/cloud/cluster.py kubernetes_provider); nothing it creates is shared, so `pulumi destroy` of the
experiment stack leaves nothing of it billing. A `single` stack passes its in-program `Platform` instead (same
logical names as always).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_alicloud as alicloud

from components.cloud.account_checks import check_account, check_platform_organization
from components.cloud.cluster import kubernetes_provider
from components.cloud.guards import destroying
from components.cloud.identity import Identity, IdentityArgs
from components.cloud.network import NetworkRefs
from components.cloud.nodepools import NodePools, NodePoolsArgs
from components.config import Settings
from components.config.secrets import Secrets
from components.logs import mark_ray_containers
from components.model.layout import Layout
from components.platform import EXPERIMENT_ROLES, Platform
from components.queue import check_gang, check_team, job_request, queued_rayjob
from components.sweep import variants
from components.wiring import (
    ClusterRefs,
    PlatformRefs,
    Scheduling,
    StorageRefs,
    WorkloadIdentity,
    checked_gpu_pool_owner,
    gpu_scheduling,
    ray_namespace,
    stack_reference_name,
)
from components.workloads.cache import cache_entries
from components.workloads.data import DataArgs, DataJobs
from components.workloads.prepull import ImagePrepull
from components.workloads.task_files import TaskFiles, local_task_files
from components.workloads.training.component import TrainingJob, TrainingJobArgs
from components.workloads.training.verl_compose import refuse_uncomposable

PLATFORM_REFERENCE = "platform"  # logical name of the StackReference
K8S_PROVIDER = "platform-k8s"  # the experiment's Kubernetes provider, on the platform's cluster


@dataclass
class Experiment:
    pools: NodePools | None  # None when the platform owns the GPU pool (gpu_pool.owner: platform)
    identity: WorkloadIdentity
    data: DataJobs
    prepull: ImagePrepull | None
    training: TrainingJob  # the run, or a sweep's first variant
    image: pulumi.Input[str]
    # The GPU pool's id: this stack's pool, or the platform's when it owns the pool.
    gpu_pool_id: pulumi.Input[str]
    # An experiment stack's check that it and its platform agree on gpu_pool.owner (an Output that fails the
    # preview when they do not; exported so every `pulumi preview` evaluates it); None in a single stack.
    gpu_pool_owner: pulumi.Output[str] | None = None
    # A sweep's RayJobs by variant key (components/sweep.py); empty for a single run.
    sweep: dict[str, TrainingJob] = field(default_factory=dict)
    # An experiment stack's check that the platform's queue has a team for its RayJob namespace with room for every
    # RayJob (submitter included): an Output that fails the preview otherwise; None when it queues nothing.
    queue_team: pulumi.Output[str] | None = None


class IdentityError(ValueError):
    """An experiment whose objects would be another experiment's; the message names the fields and the fix."""


def check_experiment_identity(s: Settings, stack: str) -> None:
    """An experiment stack's objects are its own: the cloud and cluster-scoped ones are named from `name`, the rest
    live in `job.namespace` (and its Ray namespace), which the experiment creates. Both must end with the stack's
    name, so a stack file copied to a new stack is refused here, before anything is created, instead of failing half
    way on "already exists" (or, adopted, deleting the first experiment's objects on its destroy)."""
    if s.kind != "experiment":
        return
    own = [f for f, v in (("name", s.name), ("job.namespace", s.job.namespace),
                          ("job.ray_namespace", s.job.ray_namespace)) if v is not None]
    bad = [f for f in own if not _ends_with_stack(_value(s, f), stack)]
    if bad:
        fix = ", ".join(f"{f}: {_renamed(_value(s, f), stack)}" for f in bad)
        raise IdentityError(
            f"{', '.join(bad)} ({', '.join(_value(s, f) for f in bad)}) must end with this stack's name {stack!r}: "
            f"every object of an experiment is named from `name` or lives in its namespace, so a stack file copied "
            f"from another experiment would create, change and on destroy delete that experiment's objects. Set "
            f"{fix} in Pulumi.{stack}.yaml, and add the namespace to the platform's queue.teams (docs/stacks.md \"A "
            "second experiment\")")


def _value(s: Settings, f: str) -> str:
    return {"name": s.name, "job.namespace": s.job.namespace, "job.ray_namespace": s.job.ray_namespace or ""}[f]


def _ends_with_stack(value: str, stack: str) -> bool:
    return value == stack or value.endswith(f"-{stack}")


def _renamed(value: str, stack: str) -> str:
    """The value with this stack's name in place of what follows its first word (verl-dev-grpo -> verl-<stack>)."""
    return f"{value.split('-', 1)[0]}-{stack}"


def rayjob_shape(s: Settings, layout: Layout, requests: dict[str, dict[str, float]] | None = None):
    """What the shared platform adds to each RayJob: the queue's suspend, gang and priority (checked: the job starts
    whole or not at all) and the log collection's marker; None when the stack uses neither. A queued RayJob's
    request (its pods and KubeRay's submitter) goes into `requests`, by RayJob name, for the team check."""
    if not (s.queue.enabled or s.logs.enabled):
        return None

    def shape(manifest: dict) -> dict:
        if s.logs.enabled:
            manifest = mark_ray_containers(manifest)
        if s.queue.enabled:
            manifest = queued_rayjob(manifest, s, layout)
            check_gang(manifest)
            if requests is not None:
                requests[manifest["metadata"]["name"]] = job_request(manifest)
        return manifest
    return shape


def platform_reference(s: Settings) -> PlatformRefs:
    """The platform's outputs, read through one StackReference (settings validation guarantees the name)."""
    assert s.platform_stack is not None
    check_platform_organization(s)  # before the read: on a DIY backend the reference names the stack alone
    return PlatformRefs.from_stack_reference(pulumi.StackReference(
        PLATFORM_REFERENCE, stack_name=stack_reference_name(s.platform_stack)))


def build_experiment(settings: Settings, layout: Layout, secrets: Secrets, tags: dict[str, str], refs: PlatformRefs,
                     local: Platform | None = None) -> Experiment:
    """The experiment's components. `local` is the platform built in the same program (a single stack): its
    pools, identity, add-ons and services are used directly and waited for; without it (an experiment stack)
    everything platform-side comes from `refs` and is already up."""
    s = settings
    # verl composes the job's config (training.verl_overrides included) before anything of the experiment exists.
    refuse_uncomposable(s, layout, [(v.settings, v.layout) for v in variants(s)])
    if local is not None:
        pools: NodePools | None = local.pools  # a single stack's `pools` holds the GPU pool too
        identity = local.identity.workload
        cluster_refs = local.cluster_refs
        storage_refs = local.storage.refs
        image: pulumi.Input[str] = local.registry.image
        platform_ready: list[pulumi.Resource] = [
            *local.registry.ready, *[c for c in (local.tracking, local.sandboxes) if c]]
        overrides: dict = {}
        owner_check = None
        cache_provider: alicloud.Provider | None = None  # a single stack's bucket is created in this `up`
        files_provider: pulumi.ProviderResource = local.storage.provider
    else:
        check_experiment_identity(s, pulumi.get_stack())
        # Region, cluster and vSwitches are the platform's: this stack never restates them.
        provider = cache_provider = files_provider = alicloud.Provider("alicloud", region=refs.region)
        check_account(s, provider)  # placeholders and account reads refuse the stack before anything is created
        # Its own credential, fetched by this run with this stack's alicloud provider: it never depends on when
        # the platform last ran, and no reader of the platform's outputs gets a login.
        k8s_provider = kubernetes_provider(K8S_PROVIDER, refs.cluster_id, s, provider)
        vswitches = pulumi.Output.from_input(refs.node_vswitch_ids)
        zone = s.gpu_pool.zone
        net = NetworkRefs(vpc_id="", node_vswitch_ids={zone: vswitches.apply(lambda ids: ids[zone])})
        # The platform keeps the pool (gpu_pool.owner: platform): schedule on its labels and taints, create none.
        pools = NodePools("pools", NodePoolsArgs(settings=s, cluster_id=refs.cluster_id, network=net, tags=tags,
                                                 provider=provider, egress_ready=[],
                                                 system=False)) if s.owns_gpu_pool() else None
        # Not under a destroy (guards.destroying): what the platform says now must not stop this stack's deletes.
        owner_check = None if destroying() else \
            pulumi.Output.from_input(refs.gpu_pool_owner).apply(lambda o: checked_gpu_pool_owner(s, o))
        roles = Identity("identity", IdentityArgs(settings=s, bucket_name=refs.bucket_name,
                                                  oidc_provider_arn=refs.oidc_provider_arn, oidc_issuer_url=refs.oidc_issuer_url,
                                                  tags=tags, provider=provider, k8s_provider=k8s_provider, roles=EXPERIMENT_ROLES))
        identity = roles.workload
        cluster_refs = ClusterRefs(refs.cluster_id, k8s_provider)
        storage_refs = StorageRefs(bucket_name=refs.bucket_name, endpoint=refs.oss_endpoint,  # type: ignore[arg-type]
                                   auth="rrsa", csi_role_name=refs.csi_role_name)
        image = refs.training_image
        platform_ready = []
        overrides = {"image": refs.training_image, "tracking_uri": refs.tracking_uri, "mcp_url": refs.mcp_url}

    scheduling: Scheduling = pools.gpu_scheduling if pools else gpu_scheduling(s)
    gpu_ready: list[pulumi.Resource] = pools.gpu_ready if pools else []  # a platform's pool is already up
    gpu_pool_id = pools.gpu.node_pool_id if pools and pools.gpu else refs.gpu_pool_id
    # An experiment lists its platform's bucket for the staging cache's markers before creating any Job.
    cache = cache_entries(s, cache_provider)
    task_files = TaskFiles("task-files", s, refs.bucket_name, files_provider) if local_task_files(s) else None
    data = DataJobs("data", DataArgs(settings=s, cluster=cluster_refs, storage=storage_refs, identity=identity,
                                     hf_token=secrets.hf_token,
                                     modelscope_token=secrets.modelscope_token, cache=cache))
    # The image onto each GPU node as it joins: only the namespace (and a single stack's registry) first. A
    # platform-owned pool has the platform's pre-pull of the same image (components/platform.py).
    prepull = ImagePrepull("prepull", s, image, scheduling, identity.namespace, cluster_refs,  # type: ignore[arg-type]
                           depends_on=[*identity.resources, *(local.registry.ready if local else [])]) \
        if s.image.prepull and s.owns_gpu_pool() else None
    # The RayJob after GPU nodes, data, MLflow and MCP exist; a sweep's variants each as their own (train-<key>).
    runs = [(f"train-{v.key}", v.settings, v.layout) for v in variants(s)] or [("train", s, layout)]
    requests: dict[str, dict[str, float]] = {}
    jobs = {name: TrainingJob(name, TrainingJobArgs(settings=rs, layout=rl, cluster=cluster_refs, gpu=scheduling,
                                                    storage=storage_refs, identity=identity,
                                                    sandbox_api_key=secrets.sandbox_api_key,
                                                    wait_for=[*gpu_ready, *platform_ready, data,
                                                              *([task_files] if task_files else [])],
                                                    gate_code=data.code_config_map, gate_after=gpu_ready,
                                                    shape=rayjob_shape(rs, rl, requests), **overrides))
            for name, rs, rl in runs}
    # The platform's queue must have a team for the RayJobs' namespace with room for each (read from its outputs).
    team_check = pulumi.Output.from_input(refs.queue_teams).apply(
        lambda teams: _checked_team(s, teams, requests)) if local is None and s.queue.enabled and not destroying() \
        else None
    training = next(iter(jobs.values()))
    sweep = {name.removeprefix("train-"): job for name, job in jobs.items()} if s.training.sweep else {}
    return Experiment(pools=pools, identity=identity, data=data, prepull=prepull, training=training, image=image,
                      gpu_pool_id=gpu_pool_id, gpu_pool_owner=owner_check, sweep=sweep, queue_team=team_check)


def _checked_team(s: Settings, teams: dict, requests: dict[str, dict[str, float]]) -> str:
    check_team(s, teams, requests, s.platform_stack or "")
    return teams[ray_namespace(s)]["team"]
