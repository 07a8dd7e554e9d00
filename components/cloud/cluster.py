"""The ACK Pro cluster (or an existing one, read by id and never managed) and the ONE Kubernetes provider every
Kubernetes object in the program uses.

A new cluster: Terway networking with pod vSwitches per zone, RRSA on, the public API endpoint when
`cluster.public_api`, no ACK-made NAT gateway (components/cloud/network.py makes one, or the given VPC has egress)
and `delete_options` that delete the ALB, SLB and log resources ACK created for it, so `pulumi destroy` leaves
nothing billing. An existing cluster is read with `ManagedKubernetes.get`: a read registers no managed
resource, so no `pulumi up` or `pulumi destroy` can change or delete it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from components.cloud.network import NetworkRefs
from components.config import Settings
from components.wiring import POOL_LABEL

# Resources ACK creates for a cluster and deletes with it only when told (delete_options, SDK
# cs/managed_kubernetes.py): SLB defaults to delete, ALB and the SLS projects default to retain.
DELETE_WITH_CLUSTER = ("ALB", "SLB", "SLS_Data", "SLS_ControlPlane")
# Installed with a new cluster because they can only be chosen at creation (network plugin) or must exist
# before the first node pool (storage). components/cloud/addons.py manages the CSI pair afterwards.
CREATE_TIME_ADDON_ROLES = ("terway_controlplane", "terway", "csi_plugin", "csi_provisioner")


def delete_options() -> list[dict]:
    return [{"resource_type": t, "delete_mode": "delete"} for t in DELETE_WITH_CLUSTER]


def create_time_addons(s: Settings) -> list[dict]:
    """`addons` of a new cluster (create-only in ACK; later changes go through cs.KubernetesAddon)."""
    out = []
    for role in CREATE_TIME_ADDON_ROLES:
        a = s.versions.addons[role]
        out.append({"name": a.name, **({"version": a.version} if a.version else {})})
    # ACK may otherwise add its NGINX ingress controller; the sandbox domain is served by ALB.
    out.append({"name": "nginx-ingress-controller", "disabled": True})
    return out


def oidc_provider_arn(account_id: str, cluster_id: str) -> str:
    """ARN of the RAM OIDC provider ACK creates when RRSA is enabled on a cluster (the same derivation the
    OSS CSI driver uses: alibaba-cloud-csi-driver pkg/mounter/utils/utils.go)."""
    return f"acs:ram::{account_id}:oidc-provider/ack-rrsa-{cluster_id}"


def kubectl_commands(s: Settings) -> dict[str, str]:
    """Stack outputs telling a user how to reach what this stack runs."""
    k = "kubectl --kubeconfig kubeconfig"
    out = {
        "kubectl_get_kubeconfig": "pulumi stack output kubeconfig --show-secrets > kubeconfig && chmod 600 kubeconfig",
        "kubectl_nodes": f"{k} get nodes -L {POOL_LABEL} -L aliyun.accelerator/nvidia_name",
        "kubectl_job": f"{k} -n {s.job.namespace} get rayjob {s.job.name} && {k} -n {s.job.namespace} get pods",
    }
    if s.sandbox.enabled:
        out["kubectl_sandboxes"] = f"{k} -n {s.sandbox.namespace} get sandboxsets,pods"
    if s.sandbox.domain:
        out["kubectl_alb"] = f"{k} get albconfig {s.name} -o jsonpath='{{.status.loadBalancer.dnsname}}'"
    return out


@dataclass
class ClusterArgs:
    settings: Settings
    tags: dict[str, str]
    network: NetworkRefs
    provider: pulumi.ProviderResource  # the explicit alicloud provider


@dataclass
class _Oidc:
    provider_arn: pulumi.Output[str]
    issuer_url: pulumi.Output[str]


class Cluster(pulumi.ComponentResource):
    """ACK Pro cluster (new) or a read of an existing one, its kubeconfig and the Kubernetes provider."""

    cluster_id: pulumi.Input[str]
    kubeconfig: pulumi.Output[str]
    k8s_provider: k8s.Provider
    oidc: _Oidc

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:cluster:Cluster", name, None, opts)
        s = args.settings
        c = s.cluster
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.existing = c.mode == "existing"

        if self.existing:
            assert c.existing_cluster_id is not None  # settings validation
            # A read: Pulumi records the cluster's state but never updates or deletes it.
            self.cluster = alicloud.cs.ManagedKubernetes.get(f"{name}-cluster", id=c.existing_cluster_id, opts=child)
            self.cluster_id = c.existing_cluster_id
            account = alicloud.get_account_output(opts=pulumi.InvokeOutputOptions(parent=self, provider=args.provider))
            arn = account.id.apply(lambda uid: oidc_provider_arn(uid, c.existing_cluster_id))
        else:
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
                new_nat_gateway=False,  # egress comes from components/cloud/network.py or the given VPC
                slb_internet_enabled=c.public_api,
                enable_rrsa=True,  # pods and the OSS CSI driver get RAM roles through OIDC, not AccessKeys
                deletion_protection=c.deletion_protection,
                addons=create_time_addons(s),
                delete_options=delete_options(),
                tags=args.tags,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                    custom_timeouts=pulumi.CustomTimeouts(create=f"{c.create_timeout_minutes}m"),
                    # `addons` is create-only (SDK docs): a later version bump is applied by the
                    # cs.KubernetesAddon of components/cloud/addons.py, and must not show up as a cluster update.
                    ignore_changes=["addons"])),
            )
            self.cluster_id = self.cluster.id
            arn = self.cluster.rrsa_metadata.ram_oidc_provider_arn
        self.oidc = _Oidc(provider_arn=arn, issuer_url=self.cluster.rrsa_metadata.rrsa_oidc_issuer_url)

        # Fetched on every run (the TF implementation asks for the public-endpoint kubeconfig); a short-lived
        # client certificate keeps a leaked state file from granting lasting cluster access.
        credential = alicloud.cs.get_cluster_credential_output(
            cluster_id=self.cluster_id, temporary_duration_minutes=c.kubeconfig_ttl_minutes,
            opts=pulumi.InvokeOutputOptions(parent=self, provider=args.provider))
        self.kubeconfig = pulumi.Output.secret(credential.kube_config)
        self.k8s_provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # The credential changes on every run; keyed on the cluster id, the provider is updated in place
            # instead of replaced (a replacement would replace every Kubernetes object).
            cluster_identifier=self.cluster_id,
            enable_server_side_apply=True,
            # Only an explicit true is passed: an explicit false would override PULUMI_K8S_DELETE_UNREACHABLE,
            # the environment switch for destroying after the cluster is already gone.
            delete_unreachable=True if c.k8s_delete_unreachable else None,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"cluster_id": self.cluster_id, "kubeconfig": self.kubeconfig})


def cloud_section(s: Settings, recording):
    """plan.md/plan.json section of the cloud layer: what is created, read, kept and how pods authenticate."""
    from components.cloud.addons import base_addons, retain_addon, uses_sandbox_addons  # addons imports this module
    from components.cloud.identity import role_specs
    from components.cloud.ingress import certificate_id_suffix, dns_records, sandbox_api_url
    from components.cloud.network import creates_network
    from components.cloud.storage import creates_bucket, lifecycle_rules
    from offline.report import Section  # report imports the builders; import here to avoid a cycle

    c, net, gp, st = s.cluster, s.cluster.network, s.gpu_pool, s.storage
    reads = [{"type": r.type, "name": r.name, "id": r.options.get("id")}
             for r in recording.resources if r.options.get("read")]
    managed = [r for r in recording.resources if r.custom and not r.options.get("read")
               and not r.type.startswith("pulumi:providers:")]
    rows = []
    if c.mode == "new":
        rows.append(("cluster", f"new ACK Pro `{c.cluster_spec}`, Kubernetes {c.kubernetes_version or 'newest'}, "
                                f"Terway, RRSA on, public API {c.public_api}, deletion protection "
                                f"{c.deletion_protection}; destroy deletes {', '.join(DELETE_WITH_CLUSTER)}"))
    else:
        rows.append(("cluster", f"existing `{c.existing_cluster_id}`: read only (never updated or deleted)"))
    if creates_network(s):
        rows.append(("network", f"new VPC {net.vpc_cidr}; node vSwitches {net.node_cidrs[:len(s.zones)]}, pod "
                                f"vSwitches {net.pod_cidrs[:len(s.zones)]} in {s.zones}; Enhanced NAT + "
                                f"{net.nat_bandwidth_mbps} Mbit/s pay-by-traffic EIP"))
    else:
        rows.append(("network", f"existing VPC `{net.vpc_id}`, node vSwitches {net.node_vswitch_ids}"))
    rows.append(("system pool", f"{s.system_pool.nodes} x {s.system_pool.instance_types} (pay-as-you-go)"))
    if gp.kind == "lingjun":
        assert gp.lingjun is not None
        rows.append(("GPU pool", f"Lingjun: {gp.nodes} node(s) of EFLO group `{gp.lingjun.eflo_node_group_id}` in "
                                 f"`{gp.lingjun.eflo_cluster_id}` (bought separately; bills while it exists)"))
    else:
        assert gp.ecs is not None
        rows.append(("GPU pool", f"ECS {gp.ecs.instance_types}, pay-as-you-go, no spot, autoscaled "
                                 f"{gp.ecs.min_nodes}..{gp.nodes} in {gp.zone}"))
    if creates_bucket(s):
        keep = "KEPT on destroy (protect + retain)" if st.keep_on_destroy else "DELETED with its objects on destroy"
        rows.append(("bucket", f"new `{st.bucket_name}`: private, public access blocked, {st.sse_algorithm} "
                               f"encryption, versioning {st.versioning}, {len(lifecycle_rules(s))} lifecycle rules; "
                               f"{keep}"))
    else:
        rows.append(("bucket", f"existing `{st.bucket_name}` (not managed)"))
    rows.append(("OSS auth", st.auth))
    rows.append(("KubeRay", f"{s.versions.kuberay_source} {s.versions.kuberay}"))
    if s.sandbox.domain:
        tls = s.sandbox.tls
        rows.append(("sandbox domain", f"{sandbox_api_url(s)} via an internet ALB; certificate "
                                       f"{'uploaded from secret config' if tls.source == 'upload' else tls.certificate_id}"
                                       f" (AlbConfig id suffix -{certificate_id_suffix(s)}); DNS "
                                       f"{sorted(dns_records(s).values()) or 'not managed (no dns_zone)'}"))
    addon_rows = [(spec.role, s.versions.addons[spec.role].name, s.versions.addons[spec.role].version or "default",
                   "kept" if retain_addon(s, spec.role) else "uninstalled") for spec in base_addons(s)]
    if uses_sandbox_addons(s):
        keep = "kept" if c.mode == "existing" else "uninstalled"
        addon_rows += [(r, s.versions.addons[r].name, s.versions.addons[r].version or "default", keep)
                       for r in ("sandbox_controller", "sandbox_manager")]
    roles = [{"role": r.role_name, "subject": r.subject, "read": list(r.read), "write": list(r.write)}
             for r in role_specs(s)]

    md = ["| cloud layer | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    md += ["", "| add-on role | name | version | on destroy |", "|---|---|---|---|"]
    md += [f"| {a} | `{b}` | {v} | {d} |" for a, b, v, d in addon_rows]
    if roles:
        md += ["", "| RAM role (RRSA) | trusted service account | read | write |", "|---|---|---|---|"]
        md += [f"| {r['role']} | `{r['subject']}` | {', '.join(r['read'])} | {', '.join(r['write'])} |" for r in roles]
    md += ["", f"{len(managed)} managed cloud/Kubernetes resources."]
    if reads:
        md += ["", "Read, not managed (no `pulumi up` or `destroy` changes or deletes them): "
               + ", ".join(f"`{r['type']}` {r['name']} = `{r['id']}`" for r in reads)]
    data = {"rows": dict(rows), "addons": [dict(zip(("role", "name", "version", "on_destroy"), a, strict=True))
                                            for a in addon_rows],
            "rrsa_roles": roles, "reads": reads}
    return Section("cloud", "Cloud layer (Alibaba Cloud)", "\n".join(md), data)
