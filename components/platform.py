"""The platform: everything that outlives one training run.

Network, the ACK cluster and its Kubernetes provider, the system pool, the add-ons, the bucket, the RRSA OIDC
provider with the cluster-wide CSI role (and MLflow's), the ALB + TLS, the sandboxes + MCP, MLflow and the image
registry. A `platform` stack builds this and exports `PlatformRefs` (components/wiring.py); with `gpu_pool.owner:
platform` it also keeps the GPU pool and the image pre-pull, so experiments start on joined nodes with the image on
disk. A `single` stack builds it with the GPU pool and all roles included and hands the same objects to
components/experiment.py directly.
Logical names and type tokens are those a single stack always had, so an existing stack's plan does not change.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud

from components.cloud.account_checks import check_account
from components.cloud.addons import Addons, AddonsArgs, SandboxAddons, SandboxAddonsArgs, uses_sandbox_addons
from components.cloud.cluster import Cluster, ClusterArgs, delete_with
from components.cloud.identity import Identity, IdentityArgs
from components.cloud.ingress import Ingress, IngressArgs
from components.cloud.network import Network, NetworkArgs, creates_network, existing_network_refs
from components.cloud.nodepools import NodePools, NodePoolsArgs
from components.cloud.registry import ImageRegistry
from components.cloud.storage import Storage, StorageArgs
from components.config import Settings, addon_installed
from components.config.secrets import Secrets
from components.logs import LogCollection, LogCollectionArgs
from components.queue import Queueing, QueueingArgs, team_limits
from components.wiring import AddonRefs, ClusterRefs, PlatformRefs, mcp_url, tracking_uri
from components.workloads.prepull import ImagePrepull
from components.workloads.sandbox import SandboxArgs, Sandboxes
from components.workloads.tracking import Tracking, TrackingArgs

# RAM roles (components/cloud/identity.py RoleSpec.key) each kind of stack owns: the CSI fuse pods' role is
# cluster-wide and MLflow runs on the platform; the data and training roles belong to one experiment.
PLATFORM_ROLES = ("csi", "mlflow")
EXPERIMENT_ROLES = ("data", "train")


@dataclass
class Platform:
    """What build_platform made: the typed hand-over plus the in-program handles a single stack's experiment
    waits on (an experiment stack has none of these: its platform is already up)."""

    refs: PlatformRefs
    cluster: Cluster
    cluster_refs: ClusterRefs
    pools: NodePools
    identity: Identity
    storage: Storage
    ingress: Ingress | None
    registry: ImageRegistry
    sandboxes: Sandboxes | None
    tracking: Tracking | None
    prepull: ImagePrepull | None = None  # a platform that owns the GPU pool pre-pulls the image onto it
    queueing: Queueing | None = None  # queue.enabled: ack-kube-queue, the quota tree, the priority classes
    logs: LogCollection | None = None  # logs.enabled: logtail-ds and the Ray log collection


def build_platform(settings: Settings, secrets: Secrets, tags: dict[str, str]) -> Platform:
    """The platform's components in dependency order. `settings.kind == "single"` also creates the GPU pool and
    the experiment's roles (in the same `pools` and `identity` components a single stack always had); a platform
    with `gpu_pool.owner: platform` the GPU pool (in `pools`) and the image pre-pull."""
    s = settings
    single = s.kind == "single"
    # One explicit provider per cloud; stacks disable the default providers, so a resource that forgets its
    # provider fails at preview instead of landing in whatever region the environment points at.
    alicloud_provider = alicloud.Provider("alicloud", region=s.region)
    check_account(s, alicloud_provider)  # placeholders and account reads refuse the stack before anything is created

    network = Network("net", NetworkArgs(settings=s, tags=tags, provider=alicloud_provider)) if creates_network(s) else None
    net_refs = network.refs if network else existing_network_refs(s)
    cluster = Cluster("ack", ClusterArgs(settings=s, tags=tags, network=net_refs, provider=alicloud_provider,
                                         egress_ready=network.egress_ready if network else []))
    if not cluster.existing:  # this stack's cluster: its Kubernetes objects go with it (cluster.delete_with)
        pulumi.runtime.register_stack_transformation(delete_with(cluster.cluster))
    pools = NodePools("pools", NodePoolsArgs(settings=s, cluster_id=cluster.cluster_id, network=net_refs, tags=tags,
                                             provider=alicloud_provider,
                                             egress_ready=network.egress_ready if network else [],
                                             gpu=s.owns_gpu_pool()))
    addons = Addons("addons", AddonsArgs(settings=s, cluster_id=cluster.cluster_id, provider=alicloud_provider,
                                         k8s_provider=cluster.k8s_provider,
                                         nodes_ready=pools.system_ready))
    identity = Identity("identity", IdentityArgs(settings=s, bucket_name=s.storage.bucket_name,
                                                 oidc_provider_arn=cluster.oidc.provider_arn,
                                                 oidc_issuer_url=cluster.oidc.issuer_url, tags=tags,
                                                 provider=alicloud_provider, k8s_provider=cluster.k8s_provider,
                                                 roles=None if single else PLATFORM_ROLES))
    storage = Storage("storage", StorageArgs(settings=s, tags=tags, provider=alicloud_provider,
                                             k8s_provider=cluster.k8s_provider, csi_role_name=identity.csi_role_name,
                                             access_key_id=secrets.oss_access_key_id,
                                             access_key_secret=secrets.oss_access_key_secret,
                                             namespace_ready=identity.workload.resources, vpc_id=net_refs.vpc_id))
    ingress = Ingress("ingress", IngressArgs(settings=s, network=net_refs, tags=tags, provider=alicloud_provider,
                                             k8s_provider=cluster.k8s_provider,
                                             tls_certificate=secrets.tls_certificate, tls_private_key=secrets.tls_private_key,
                                             controller_ready=addons.alb_ready)) if s.sandbox.domain else None
    sandbox_addons = SandboxAddons("sandbox-addons", SandboxAddonsArgs(
        settings=s, cluster_id=cluster.cluster_id, provider=alicloud_provider, k8s_provider=cluster.k8s_provider,
        admin_api_key=secrets.sandbox_api_key, nodes_ready=pools.system_ready,
        ingress_ready=ingress.ready if ingress else [])) if uses_sandbox_addons(s) else None
    cluster_refs = ClusterRefs(cluster.cluster_id, cluster.k8s_provider, ready=pools.system_ready, addons=AddonRefs(
        csi=addons.csi_ready, kuberay=addons.kuberay_ready, pod_identity=addons.pod_identity_ready,
        sandbox=sandbox_addons.sandbox_ready if sandbox_addons else []))

    sandboxes = Sandboxes("sandbox", SandboxArgs(settings=s, cluster=cluster_refs, admin_key=secrets.sandbox_api_key,
                                                 sandbox_nodes_ready=pools.sandbox_ready)) \
        if s.sandbox.enabled else None
    tracking = Tracking("tracking", TrackingArgs(settings=s, cluster=cluster_refs, storage=storage.refs, identity=identity.workload,
                                                 backend_disk_id=cluster.tracking_disk.id if cluster.tracking_disk else None)) \
        if s.tracking.enabled else None
    # The training image's ACR repository and the credential helper; experiments pull what `training_image` names.
    registry = ImageRegistry("image", s, cluster_refs, alicloud_provider)
    # A platform-owned GPU pool gets the image as each node joins, in the platform's namespace; a single stack's
    # pre-pull is the experiment half's (components/experiment.py), under the name it always had.
    prepull = ImagePrepull("prepull", s, registry.image, pools.gpu_scheduling, s.job.namespace, cluster_refs,  # type: ignore[arg-type]
                           depends_on=[*identity.workload.resources, *registry.ready]) \
        if s.kind == "platform" and s.owns_gpu_pool() and s.image.prepull else None

    # Shared-platform services (a platform stack only): the job queue and the Ray log collection experiments use.
    queueing = Queueing("queue", QueueingArgs(settings=s, cluster_id=cluster.cluster_id, provider=alicloud_provider,
                                              k8s_provider=cluster.k8s_provider,
                                              nodes_ready=pools.system_ready)) \
        if addon_installed(s, "kube_queue") else None
    logs = LogCollection("logs", LogCollectionArgs(settings=s, cluster_id=cluster.cluster_id, provider=alicloud_provider,
                                                   k8s_provider=cluster.k8s_provider,
                                                   nodes_ready=pools.system_ready)) \
        if addon_installed(s, "logtail") else None

    refs = PlatformRefs(
        region=s.region,
        cluster_id=cluster.cluster_id,
        node_vswitch_ids=dict(net_refs.node_vswitch_ids),
        bucket_name=storage.refs.bucket_name,
        oss_endpoint=storage.refs.endpoint,
        csi_role_name=identity.csi_role_name or "",
        oidc_provider_arn=cluster.oidc.provider_arn,
        oidc_issuer_url=cluster.oidc.issuer_url,
        training_image=registry.image,
        namespace=s.job.namespace,
        mcp_url=mcp_url(s) if sandboxes else "",
        tracking_uri=tracking_uri(s) or "",
        gpu_pool_owner=s.gpu_pool.owner,
        gpu_pool_id=pools.gpu.node_pool_id if pools.gpu else "",
        queue_teams=team_limits(s) if queueing else {},
    )
    return Platform(refs=refs, cluster=cluster, cluster_refs=cluster_refs, pools=pools, identity=identity,
                    storage=storage, ingress=ingress, registry=registry, sandboxes=sandboxes, tracking=tracking,
                    prepull=prepull, queueing=queueing, logs=logs)
