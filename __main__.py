"""verl-ack: VeRL GRPO on Alibaba Cloud ACK. Settings, providers, components, exports; nothing else."""

import pulumi
import pulumi_alicloud as alicloud

from components.cloud.addons import Addons, AddonsArgs, SandboxAddons, SandboxAddonsArgs, uses_sandbox_addons
from components.cloud.cluster import Cluster, ClusterArgs, kubectl_commands
from components.cloud.identity import Identity, IdentityArgs
from components.cloud.ingress import Ingress, IngressArgs, sandbox_api_url
from components.cloud.network import Network, NetworkArgs, creates_network, existing_network_refs
from components.cloud.nodepools import NodePools, NodePoolsArgs
from components.cloud.registry import ImageRegistry
from components.cloud.storage import Storage, StorageArgs
from components.config import PROJECT
from components.config.secrets import read_secrets
from components.model import parse_settings
from components.model.layout import check_layout, resolve_layout
from components.wiring import AddonRefs, ClusterRefs, mcp_url, oss_endpoint
from components.workloads.data import DataArgs, DataJobs
from components.workloads.prepull import ImagePrepull
from components.workloads.sandbox import SandboxArgs, Sandboxes
from components.workloads.tracking import Tracking, TrackingArgs, port_forward_commands
from components.workloads.training.component import TrainingJob, TrainingJobArgs

settings = parse_settings(pulumi.Config(PROJECT).require_object("settings"))
secrets = read_secrets(settings)
layout = resolve_layout(settings)
for finding in check_layout(settings):  # errors already refused the stack in parse_settings
    pulumi.log.warn(f"{finding.field}: {finding.message}")

stack = pulumi.get_stack()
tags = settings.cloud_tags(stack)

# One explicit provider per cloud; stacks disable the default providers, so a resource that forgets its
# provider fails at preview instead of landing in whatever region the environment points at.
alicloud_provider = alicloud.Provider("alicloud", region=settings.region)

# ---- cloud layer: network, cluster (+ the one Kubernetes provider), node pools, add-ons, identity, storage, ingress
network = Network("net", NetworkArgs(settings, tags, alicloud_provider)) if creates_network(settings) else None
net_refs = network.refs if network else existing_network_refs(settings)
cluster = Cluster("ack", ClusterArgs(settings, tags, net_refs, alicloud_provider))
pools = NodePools("pools", NodePoolsArgs(settings, cluster.cluster_id, net_refs, tags, alicloud_provider,
                                         egress_ready=network.egress_ready if network else []))
addons = Addons("addons", AddonsArgs(settings, cluster.cluster_id, alicloud_provider, cluster.k8s_provider,
                                     pools.system_ready))
identity = Identity("identity", IdentityArgs(settings, settings.storage.bucket_name, cluster.oidc.provider_arn,
                                             cluster.oidc.issuer_url, tags, alicloud_provider, cluster.k8s_provider))
storage = Storage("storage", StorageArgs(settings, tags, alicloud_provider, cluster.k8s_provider, identity.csi_role_name,
                                         secrets.oss_access_key_id, secrets.oss_access_key_secret,
                                         identity.workload.resources))
ingress = Ingress("ingress", IngressArgs(settings, net_refs, tags, alicloud_provider, cluster.k8s_provider,
                                         secrets.tls_certificate, secrets.tls_private_key,
                                         addons.alb_ready)) if settings.sandbox.domain else None
sandbox_addons = SandboxAddons("sandbox-addons", SandboxAddonsArgs(
    settings, cluster.cluster_id, alicloud_provider, cluster.k8s_provider, secrets.sandbox_api_key, pools.system_ready,
    ingress.ready if ingress else [])) if uses_sandbox_addons(settings) else None
cluster_refs = ClusterRefs(cluster.cluster_id, cluster.k8s_provider, ready=pools.system_ready, addons=AddonRefs(
    csi=addons.csi_ready, kuberay=addons.kuberay_ready, pod_identity=addons.pod_identity_ready,
    sandbox=sandbox_addons.sandbox_ready if sandbox_addons else []))
workload_identity = identity.workload
storage_refs = storage.refs

# ---- workloads: sandboxes + MCP, dataset and model Jobs, experiment tracking
sandboxes = Sandboxes("sandbox", SandboxArgs(settings, cluster_refs, secrets.sandbox_api_key)) \
    if settings.sandbox.enabled else None
data = DataJobs("data", DataArgs(settings, cluster_refs, storage_refs, workload_identity, secrets.hf_token,
                                 secrets.modelscope_token))
tracking = Tracking("tracking", TrackingArgs(settings, cluster_refs, storage_refs, workload_identity)) \
    if settings.tracking.enabled else None
# ---- the training image: ACR repository + credential helper (built images), pre-pull onto GPU nodes
registry = ImageRegistry("image", settings, cluster_refs, alicloud_provider)
prepull = ImagePrepull("prepull", settings, registry.image, pools.gpu_scheduling, workload_identity.namespace,
                       cluster_refs, depends_on=[*workload_identity.resources, *registry.ready]) \
    if settings.image.prepull else None
# ---- the training job: OSS volumes, verl configs, the KubeRay RayJob (after GPU nodes, data, MLflow and MCP exist)
training = TrainingJob("train", TrainingJobArgs(settings, cluster_refs, pools.gpu_scheduling, storage_refs,
                                                workload_identity, secrets.sandbox_api_key,
                                                wait_for=[*pools.gpu_ready, *registry.ready,
                                                          *[c for c in (data, tracking, sandboxes) if c]]))

pulumi.export("layout", layout.as_dict())
pulumi.export("training_entrypoint", training.entrypoint)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("kubeconfig", cluster.kubeconfig)  # secret
pulumi.export("bucket_name", storage.refs.bucket_name)
pulumi.export("oss_endpoint", storage.refs.endpoint)
pulumi.export("oss_public_endpoint", oss_endpoint(settings.region, internal=False))
pulumi.export("gpu_pool_id", pools.gpu.node_pool_id)
pulumi.export("training_image", registry.image)
if ingress:
    pulumi.export("alb_dns_name", ingress.dns_name)
    pulumi.export("sandbox_api_url", sandbox_api_url(settings))
for key, command in kubectl_commands(settings).items():
    pulumi.export(key, command)
if sandboxes:
    pulumi.export("mcp_url", mcp_url(settings))
if tracking:
    pulumi.export("tracking_uri", tracking.tracking_uri)
for key, command in port_forward_commands(settings).items():
    pulumi.export(key, command)
