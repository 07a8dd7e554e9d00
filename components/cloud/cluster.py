"""The ACK Pro cluster (or an existing one, read by id and never managed) and the ONE Kubernetes provider every
Kubernetes object in the program uses.

A new cluster: Terway networking with pod vSwitches per zone, RRSA on, the public API endpoint when
`cluster.public_api`, no ACK-made NAT gateway (components/cloud/network.py makes one, or the given VPC has egress)
and `delete_options` that delete the ALB, SLB and log resources ACK created for it, so `pulumi destroy` leaves
nothing billing. An existing cluster is read with `ManagedKubernetes.get`: a read registers no managed
resource, so no `pulumi up` or `pulumi destroy` can change or delete it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from components.cloud.addon_config import go_json
from components.cloud.create_only import checked_create_only, guarded_cluster_inputs
from components.cloud.guards import rebuild_guard
from components.cloud.network import NetworkRefs
from components.config import Settings
from components.config.addons import CREATE_TIME_ADDON_ROLES
from components.wiring import POOL_LABEL, ray_namespace

# Resources ACK creates for a cluster and deletes with it only when told (delete_options, SDK
# cs/managed_kubernetes.py): SLB defaults to delete, ALB and the SLS projects default to retain.
DELETE_WITH_CLUSTER = ("ALB", "SLB", "SLS_Data", "SLS_ControlPlane")
# Installed with a new cluster because they can only be chosen at creation (network plugin) or must exist
# before the first node pool (storage): components/config/addons.py marks them `create_time`.
# components/cloud/addons.py manages the CSI pair afterwards.
# Terway enforces NetworkPolicy only when the cluster was created with it on: the terway-eniip add-on config key of
# the SDK's own cluster examples (pulumi_alicloud 4.0.0 cs/managed_kubernetes.py and cs/node_pool.py, which show it
# "false"). Without it every NetworkPolicy of this program (sandbox isolation, the Ray and MLflow ingress rules) is
# accepted by the API server and silently ignored. An existing cluster: kube-system/eni-config must say
# disable_network_policy: "false" (docs/cloud.md).
TERWAY_CONFIG = {"NetworkPolicy": "true"}


# Optional, not Computed, and set by the cluster's Read from what ACK returns, never by this program: `timezone` (set
# whenever the API returns one; in ModifyCluster's update list) and `control_plane_log_components` (what
# CheckControlPlaneLogEnable reports; an update calls UpdateControlPlaneLog). Whatever ACK reports would be a diff
# on every preview after the first, and the update would send the empty value back (offline/readback.py
# "cluster-read"; terraform-provider-alicloud@ace5bcf resource_alicloud_cs_managed_kubernetes.go :201-204, :931-933,
# :422-429, :1386-1420, :1124-1144).
CLUSTER_READ_ONLY = ["timezone", "controlPlaneLogComponents"]


# Kubernetes objects of a cluster this stack owns are `deleted_with` the cluster (Pulumi's deletedWith: the engine skips
# the delete of a resource whose deletedWith resource is deleted in the same run, pulumi/pulumi@1b5949891b
# pkg/resource/deploy/step.go :603-665), so a destroy needs no live cluster for them and none of them can hold the
# cluster's delete up. Except the kinds whose deletion a controller in the cluster turns into a cloud-side cleanup
# that must happen while the cluster still runs (docs/teardown.md "Deleted with the cluster"):
CONTROLLER_CLEANUP_KINDS = {
    "AlbConfig": "the ALB controller removes the listeners and the configuration it put on the ALB",
    "Ingress": "the ALB controller removes the Ingress's forwarding rules from the ALB's listeners",
    "SandboxSet": "the sandbox controller deletes the sandboxes it made and their records in the manager",
    "AliyunLogConfig": "the log controller maps it onto SLS collection configs and logstores",
}
# A Service of type LoadBalancer: the cloud controller manager releases its CLB/NLB. A PersistentVolumeClaim the CSI
# provisioner bound (no spec.volumeName) and a PersistentVolume with persistentVolumeReclaimPolicy Delete: the CSI
# driver deletes the cloud disk behind them (Kubernetes docs, "Persistent Volumes" > Reclaiming).


def _field(obj, camel: str, snake: str):
    """A manifest field of a resource's props (a dict, camelCase as the manifests write it, or python names)."""
    return obj.get(camel, obj.get(snake)) if isinstance(obj, dict) else None


def deleted_with_cluster(type_: str, props: dict) -> bool:
    """Whether a Kubernetes resource (type token, constructor props) may be left to the cluster's deletion. Anything
    this function cannot read is treated as needing its own delete (the safe side)."""
    if not type_.startswith("kubernetes:") or type_.startswith("pulumi:providers:"):
        return False
    kind = props.get("kind") if isinstance(props, dict) else None
    if kind in CONTROLLER_CLEANUP_KINDS:
        return False
    spec = props.get("spec") if isinstance(props, dict) else None
    if kind == "Service":
        return _field(spec, "type", "type") != "LoadBalancer" if spec is not None else True
    if kind == "PersistentVolumeClaim":
        return bool(_field(spec, "volumeName", "volume_name"))
    if kind == "PersistentVolume":
        return _field(spec, "persistentVolumeReclaimPolicy", "persistent_volume_reclaim_policy") == "Retain"
    return True


def delete_with(cluster: pulumi.CustomResource) -> pulumi.ResourceTransformation:
    """A stack transformation that adds `deleted_with=cluster` to every resource `deleted_with_cluster` admits."""
    def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if not deleted_with_cluster(args.type_, args.props) or args.opts.deleted_with is not None:
            return None
        return pulumi.ResourceTransformationResult(
            args.props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(deleted_with=cluster)))
    return transform


def delete_options() -> list[dict]:
    return [{"resource_type": t, "delete_mode": "delete"} for t in DELETE_WITH_CLUSTER]


def create_time_addons(s: Settings) -> list[dict]:
    """`addons` of a new cluster (create-only in ACK; later changes go through cs.KubernetesAddon)."""
    out = []
    for role in CREATE_TIME_ADDON_ROLES:
        a = s.versions.addons[role]
        addon: dict = {"name": a.name, **({"version": a.version} if a.version else {})}
        if role == "terway":
            addon["config"] = go_json(TERWAY_CONFIG)
        out.append(addon)
    # ACK may otherwise add its NGINX ingress controller; the sandbox domain is served by ALB.
    out.append({"name": "nginx-ingress-controller", "disabled": True})
    return out


def audit_log_config(s: Settings) -> dict:
    """`audit_log_config` of a new cluster (SDK ManagedKubernetesAuditLogConfigArgs: enabled, sls_project_name)."""
    c = s.cluster
    out: dict = {"enabled": c.audit_log}
    if c.audit_log and c.audit_log_project:
        out["sls_project_name"] = c.audit_log_project
    return out


def oidc_provider_arn(account_id: str, cluster_id: str) -> str:
    """ARN of the RAM OIDC provider ACK creates when RRSA is enabled on a cluster (the same derivation the
    OSS CSI driver uses: alibaba-cloud-csi-driver pkg/mounter/utils/utils.go)."""
    return f"acs:ram::{account_id}:oidc-provider/ack-rrsa-{cluster_id}"


# ACK's DescribeClusterUserKubeconfig (GET /k8s/{ClusterId}/user_config, `config` in its answer) through the aliyun CLI,
# for the cluster id this stack exports; a one-hour client certificate issued to the caller (docs/facts.md).
KUBECONFIG_COMMAND = ("aliyun cs DescribeClusterUserKubeconfig --ClusterId \"$(pulumi stack output cluster_id)\" "
                      "--TemporaryDurationMinutes 60 | jq -r .config > kubeconfig && chmod 600 kubeconfig")


def kubectl_commands(s: Settings) -> dict[str, str]:
    """Stack outputs telling a user how to reach what this stack runs."""
    k = "kubectl --kubeconfig kubeconfig"
    out = {
        # A credential of the user's own, for as long as they need it: no stack exports one (docs/stacks.md).
        "kubectl_get_kubeconfig": KUBECONFIG_COMMAND,
        "kubectl_nodes": f"{k} get nodes -L {POOL_LABEL} -L aliyun.accelerator/nvidia_name",
        "kubectl_job": f"{k} -n {ray_namespace(s)} get rayjob {s.job.name} && {k} -n {ray_namespace(s)} get pods",
    }
    if s.sandbox.enabled:
        out["kubectl_sandboxes"] = f"{k} -n {s.sandbox.namespace} get sandboxsets,pods"
    if s.sandbox.domain:
        out["kubectl_alb"] = f"{k} get albconfig {s.name} -o jsonpath='{{.status.loadBalancer.dnsname}}'"
    return out


def kubernetes_provider(name: str, cluster_id: pulumi.Input[str], s: Settings, provider: pulumi.ProviderResource,
                        parent: pulumi.Resource | None = None) -> k8s.Provider:
    """A Kubernetes provider on `cluster_id`, logged in with a credential this run fetches for itself.

    `cs.get_cluster_credential` is an invoke: every `pulumi preview`, `up` and `destroy --run-program` asks ACK
    (DescribeClusterUserKubeconfig) again, so the credential is always fresh, issued to whoever runs the program,
    and valid `cluster.kubeconfig_ttl_minutes` (docs/facts.md "Cluster credential"). It is a secret, goes into
    the provider's inputs only and never into a stack output: a platform exports its cluster id and each experiment
    builds its own provider with this function (components/experiment.py), as pulumi-eks never puts an expiring
    credential in state or outputs."""
    c = s.cluster
    credential = alicloud.cs.get_cluster_credential_output(
        cluster_id=cluster_id, temporary_duration_minutes=c.kubeconfig_ttl_minutes,
        opts=pulumi.InvokeOutputOptions(parent=parent, provider=provider))
    return k8s.Provider(
        name,
        kubeconfig=pulumi.Output.secret(credential.kube_config),
        # The credential changes on every run; keyed on the cluster id, the provider is updated in place
        # instead of replaced (a replacement would replace every Kubernetes object).
        cluster_identifier=cluster_id,
        enable_server_side_apply=True,
        # Only an explicit true is passed: an explicit false would override PULUMI_K8S_DELETE_UNREACHABLE,
        # the environment switch for destroying after the cluster is already gone.
        delete_unreachable=True if c.k8s_delete_unreachable else None,
        opts=pulumi.ResourceOptions(parent=parent),
    )


@dataclass(kw_only=True)
class ClusterArgs:
    settings: Settings
    tags: dict[str, str]
    network: NetworkRefs
    provider: pulumi.ProviderResource  # the explicit alicloud provider
    # The SNAT entries of a network this stack creates: the cluster waits for them, so whatever ACK does with its
    # own snat_entry default (contested between SDK versions, docs/facts-provider.md) it meets finished entries
    # instead of racing their creation.
    egress_ready: list[pulumi.Resource] = field(default_factory=list)


def owns_tracking_disk(s: Settings) -> bool:
    """The MLflow backend disk is Pulumi's own (tracking.backend_disk) only with a new cluster of this stack."""
    return s.tracking.enabled and s.tracking.backend_disk == "owned" and s.cluster.mode == "new" \
        and s.kind != "experiment"


@dataclass
class _Oidc:
    provider_arn: pulumi.Output[str]
    issuer_url: pulumi.Output[str]


class Cluster(pulumi.ComponentResource):
    """ACK Pro cluster (new) or a read of an existing one and the Kubernetes provider on it."""

    cluster_id: pulumi.Input[str]
    k8s_provider: k8s.Provider
    oidc: _Oidc

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:cluster:Cluster", name, None, opts)
        s = args.settings
        c = s.cluster
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.existing = c.mode == "existing"
        self.tracking_disk: alicloud.ecs.EcsDisk | None = None

        if self.existing:
            assert c.existing_cluster_id is not None  # settings validation
            # A read: Pulumi records the cluster's state but never updates or deletes it.
            self.cluster = alicloud.cs.ManagedKubernetes.get(f"{name}-cluster", id=c.existing_cluster_id, opts=child)
            self.cluster_id = c.existing_cluster_id
            account = alicloud.get_account_output(opts=pulumi.InvokeOutputOptions(parent=self, provider=args.provider))
            arn = account.id.apply(lambda uid: oidc_provider_arn(uid, c.existing_cluster_id))
        else:
            # The MLflow backend disk (components/workloads/tracking.py binds it through a static PV). The cluster
            # depends on it, so destroy deletes it after the cluster, when no node holds it attached any more: a
            # dynamically provisioned disk is deleted by the CSI provisioner at its own pace and can outlive the
            # cluster, billing (delete_options covers no disks: resource_alicloud_cs_managed_kubernetes.go :528-536).
            self.tracking_disk = alicloud.ecs.EcsDisk(
                f"{name}-mlflow-disk", zone_id=s.zones[0], size=s.tracking.disk_gib, category=s.tracking.disk_category,
                disk_name=f"{s.name}-mlflow", payment_type="PayAsYouGo", tags=args.tags,
                opts=child) if owns_tracking_disk(s) else None
            self.cluster = alicloud.cs.ManagedKubernetes(
                f"{name}-cluster",
                name=s.name,
                cluster_spec=c.cluster_spec,
                version=c.kubernetes_version,
                vswitch_ids=[args.network.node_vswitch_ids[z] for z in s.zones],
                pod_vswitch_ids=[args.network.pod_vswitch_ids[z] for z in s.zones],
                service_cidr=c.network.service_cidr,
                proxy_mode="ipvs",
                ip_stack="ipv4",  # Lingjun node pools support IPv4 single stack only
                # Egress comes from components/cloud/network.py or the given VPC. NOTE: the provider never sends a
                # false here (GetOk), so ACK's default snat_entry=true applies; see docs/facts-provider.md.
                new_nat_gateway=False,
                # The API server's public endpoint (an EIP on its CLB): off unless cluster.public_api. Its 6443
                # listener's ACL is not an argument of this resource (docs/cloud.md).
                slb_internet_enabled=c.public_api,
                audit_log_config=audit_log_config(s),
                # Secrets envelope-encrypted in etcd with this KMS key (ACK Pro only).
                encryption_provider_key=c.secrets_kms_key_id,
                enable_rrsa=True,  # pods and the OSS CSI driver get RAM roles through OIDC, not AccessKeys
                deletion_protection=c.deletion_protection,
                addons=create_time_addons(s),
                delete_options=delete_options(),
                tags=args.tags,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                    custom_timeouts=pulumi.CustomTimeouts(create=f"{c.create_timeout_minutes}m"),
                    depends_on=[*args.egress_ready, *([self.tracking_disk] if self.tracking_disk else [])],
                    # A ForceNew input (service_cidr, proxy_mode, ip_stack, ...) would rebuild the whole platform:
                    # protected (components/cloud/guards.py); teardown.py lifts it for an intended destroy.
                    protect=rebuild_guard(),
                    # `addons` is create-only (SDK docs): a later version bump is applied by the
                    # cs.KubernetesAddon of components/cloud/addons.py, and must not show up as a cluster update.
                    # The rest are what ACK decides and the Read stores (CLUSTER_READ_ONLY).
                    ignore_changes=["addons", *CLUSTER_READ_ONLY],
                    # Create-only inputs: a change would be an update that does nothing. As replacements of this
                    # protected resource the engine refuses them from the state, even when a failed first `up` left
                    # no outputs for the create-only check (components/cloud/create_only.py).
                    replace_on_changes=guarded_cluster_inputs(s))),
            )
            self.cluster_id = self.cluster.id
            arn = self.cluster.rrsa_metadata.ram_oidc_provider_arn
        # The create-only settings as last deployed, checked against this run's (components/cloud/create_only.py).
        self.create_only = checked_create_only(s, pulumi.ResourceOptions(parent=self))
        self.oidc = _Oidc(provider_arn=arn, issuer_url=self.cluster.rrsa_metadata.rrsa_oidc_issuer_url)

        self.k8s_provider = kubernetes_provider(f"{name}-k8s", self.cluster_id, s, args.provider, parent=self)
        # No credential among the outputs: the provider's own (secret) input is the only place it is kept.
        self.register_outputs({"cluster_id": self.cluster_id})
