"""The Sandboxes component: wires the manifests of manifests.py into the cluster (see manifests.py's docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.config import Settings
from components.wiring import KEPT_NAMESPACE_OLD_TYPE, ClusterRefs, kept_namespace, resource_kwargs
from components.workloads.sandbox.image_pull import sandbox_image_pull_daemonset
from components.workloads.sandbox.manifests import (
    ADMIN_KEY_ITEM,
    mcp_service_manifest,
    network_policy_manifest,
    pool_size,
    sandboxset_manifest,
)
from components.workloads.sandbox.open_source import (
    MANAGER_CONFIG_ROLE,
    admin_key_secret_manifest,
    controller_chart_values,
    key_store_secret_manifest,
    manager_deployment_manifest,
    manager_rbac_manifests,
    manager_service_account_manifest,
    sandbox_namespace_manifest,
)


@dataclass(kw_only=True)
class SandboxArgs:
    settings: Settings
    cluster: ClusterRefs
    # secrets.sandbox_api_key: the open-source manager's admin key (the ACK add-on gets it from the cloud layer).
    admin_key: Optional[pulumi.Input[str]] = None
    # The dedicated sandbox node pool (sandbox.dedicated_pool), which the sandbox pods need to run on.
    sandbox_nodes_ready: list[pulumi.Resource] = field(default_factory=list)


class Sandboxes(pulumi.ComponentResource):
    """The warm sandbox pool, the in-cluster MCP Service and their isolation (plus the open-source manager)."""

    def __init__(self, name: str, args: SandboxArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("verl-ack:sandbox:Sandboxes", name, None, opts)
        s = args.settings
        provider = args.cluster.k8s_provider

        def child(depends_on: list[pulumi.Resource], **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on, **extra)

        if s.sandbox.manager == "open-source":
            if args.admin_key is None:
                raise ValueError("sandbox.manager=open-source needs the sandboxApiKey secret as its admin key")
            # The namespace carries the Pod Security Admission labels, so this program creates it (the chart
            # creates none).
            # Kept on destroy, as Helm's create_namespace always left it; a patch, not a retained Namespace, so the
            # next `up` on the same cluster adopts it instead of failing on "already exists" (wiring.kept_namespace).
            self.namespace = k8s.core.v1.NamespacePatch(
                f"{name}-namespace", **resource_kwargs(kept_namespace(sandbox_namespace_manifest(s))),
                opts=child([], aliases=[pulumi.Alias(type_=KEPT_NAMESPACE_OLD_TYPE)]))
            # The chart brings the CRDs, the controller and its webhooks; it waits for the controller to be
            # ready (Helm --wait), so the SandboxSet below is admitted by a running webhook. It needs the
            # node pools (cluster.ready) to schedule onto.
            self.controller = k8s.helm.v3.Release(
                f"{name}-controller",
                name="sandbox-controller",
                chart=s.versions.sandbox_controller_chart,
                version=s.versions.sandbox_controller_chart_version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=s.versions.sandbox_chart_repo),
                namespace=s.sandbox.namespace,
                create_namespace=False,
                values=controller_chart_values(s),
                opts=child([self.namespace, *args.cluster.ready]),
            )
            # Everything namespaced below lives in the namespace the release creates.
            platform: list[pulumi.Resource] = [self.controller]
            sa = k8s.core.v1.ServiceAccount(
                f"{name}-manager-sa", **resource_kwargs(manager_service_account_manifest(s)), opts=child(platform))
            rbac = []
            for m in manager_rbac_manifests(s):
                cls = {"ClusterRole": k8s.rbac.v1.ClusterRole, "ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding,
                       "Role": k8s.rbac.v1.Role, "RoleBinding": k8s.rbac.v1.RoleBinding}[m["kind"]]
                # Logical names are API: the key-store pair keeps the names it had before the config Role existed.
                prefix = "config" if m["metadata"]["name"] == MANAGER_CONFIG_ROLE else "key-store"
                suffix = {"ClusterRole": "cluster-role", "ClusterRoleBinding": "cluster-role-binding",
                          "Role": f"{prefix}-role", "RoleBinding": f"{prefix}-role-binding"}[m["kind"]]
                rbac.append(cls(f"{name}-manager-{suffix}", **resource_kwargs(m), opts=child(platform)))
            # The manager writes the keys it issues into this Secret; Pulumi owns only its existence.
            key_store = k8s.core.v1.Secret(
                f"{name}-key-store", **resource_kwargs(key_store_secret_manifest(s)),
                opts=child(platform, ignore_changes=["data"]))
            admin = k8s.core.v1.Secret(
                f"{name}-admin-key", **resource_kwargs(admin_key_secret_manifest(s)),
                string_data={ADMIN_KEY_ITEM: args.admin_key}, opts=child(platform))
            # The pod reads the admin key, the key store and its RBAC at start; without them it crash-loops.
            self.manager = k8s.apps.v1.Deployment(
                f"{name}-manager", **resource_kwargs(manager_deployment_manifest(s)),
                opts=child([sa, key_store, admin, *rbac]))
        else:
            # ack-agent-sandbox-controller and ack-sandbox-manager (cluster.addons.sandbox) create the namespace,
            # the CRD, its webhooks and the manager.
            platform = list(args.cluster.addons.sandbox) + list(args.cluster.ready)

        # The SandboxSet needs its CRD and admission webhook (platform). On destroy the same dependency deletes
        # the SandboxSet (and so its sandboxes) before the controller that removes their finalizers goes away.
        # The image pull starts on the sandbox nodes before the warm pool is created (image_pull.py); it needs only
        # the namespace (platform) and the nodes.
        pulled: list[pulumi.Resource] = []
        if s.sandbox.pull_ahead:
            self.image_pull = k8s.apps.v1.DaemonSet(
                f"{name}-image-pull", **resource_kwargs(sandbox_image_pull_daemonset(s)),
                opts=child([*platform, *args.sandbox_nodes_ready]))
            pulled.append(self.image_pull)
        set_manifest = sandboxset_manifest(s)
        self.sandbox_set = k8s.apiextensions.CustomResource(
            f"{name}-pool",
            api_version=set_manifest["apiVersion"], kind=set_manifest["kind"],
            metadata=set_manifest["metadata"], spec=set_manifest["spec"],
            opts=child([*platform, *args.sandbox_nodes_ready, *pulled]))
        # Both live in the sandbox namespace the platform creates.
        self.mcp_service = k8s.core.v1.Service(
            f"{name}-mcp", **resource_kwargs(mcp_service_manifest(s)), opts=child(platform))
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-isolation", **resource_kwargs(network_policy_manifest(s)), opts=child(platform))

        pool = pool_size(s)
        if pool.replicas > pool.fit_on_system_pool:
            # Not an error: an oversized pool still works (the extra sandboxes stay Pending), but it wastes the
            # point of a warm pool, so say it where `pulumi preview` shows it.
            pulumi.log.warn(f"sandbox.pool_cap: {pool.replicas} warm sandboxes need more than the {pool.host_pool}'s "
                            f"{pool.system_cpus} vCPU / {pool.system_memory_gib} GiB (at most "
                            f"{pool.fit_on_system_pool} fit); lower sandbox.pool_cap or sandbox.cpu/memory, or add "
                            f"{pool.host_pool} nodes", self)
        self.pool_replicas = pool.replicas
        self.register_outputs({"pool_replicas": self.pool_replicas, "mcp_service": self.mcp_service.metadata["name"]})


# --------------------------------------------------------------------------------------------- plan
