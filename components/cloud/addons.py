"""ACK add-ons (cs.KubernetesAddon, names and versions from `settings.versions.addons`) and KubeRay.

`Addons` installs what the cluster needs before workloads: the OSS/disk CSI pair, the RRSA pod-identity
webhook, node-problem-detector, ARMS Prometheus (optional), the ALB Ingress controller (when a sandbox domain
is served), the RDMA device plugin (Lingjun GPU pools), and KubeRay (the ACK add-on, whose API name is
unverified, or by default the upstream Helm chart pinned to `versions.kuberay`). `SandboxAddons` installs
ack-agent-sandbox-controller and then the sandbox manager add-on, whose config carries the domain, the ingress
class and the admin API key; it comes after the ALB configuration (components/cloud/ingress.py), so it is its
own component.

Names are checked per region with `cs.get_kubernetes_addons(cluster_id=..., name_regex=...)`; the manager's
config shape with `cs.get_kubernetes_addon_metadata(cluster_id, name, version).config_schema` (docs/cloud.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from components.cloud.addon_config import addon_config
from components.cloud.guards import destroying
from components.config import Settings
from components.config.addons import ADDON_ROLES, ADDONS_BY_ROLE, addon_installed
from components.config.cloud import LINGJUN_MIN_ADDON_VERSIONS, LINGJUN_NODE_POOL_DOC, addon_version_tuple
from components.wiring import (
    ALB_HTTPS_ANNOTATIONS,
    ALB_INGRESS_CLASS,
    KEPT_NAMESPACE_OLD_TYPE,
    kept_namespace,
    pod_security_labels,
    set_dotted,
    system_scheduling,
)

# The controller must not create its own AlbConfig/ALB: components/cloud/ingress.py declares one reusing the ALB
# Pulumi owns (config key from the SDK/Terraform examples of alb-ingress-controller).
ALB_ADDON_CONFIG = {"albIngress": {"CreateDefaultALBConfig": False}}
KUBERAY_NAMESPACE = "kuberay-system"
KUBERAY_CHART = "kuberay-operator"
# The Ingress the sandbox manager add-on creates (tutorial: "creates a route named sandbox-manager in the
# sandbox-system namespace"); the tutorial then adds HTTPS:443 to it by hand, this program patches it.
SANDBOX_MANAGER_INGRESS = "sandbox-manager"


@dataclass(frozen=True)
class AddonSpec:
    role: str  # key in settings.versions.addons
    config: dict | None = None


# The config each add-on of `Addons` is sent (the others take the add-on's defaults).
ADDON_CONFIGS: dict[str, dict] = {"alb": ALB_ADDON_CONFIG}


def base_addons(s: Settings) -> list[AddonSpec]:
    """The add-ons `Addons` installs, in install order (components/config/addons.py declares which and when).
    The RDMA device plugin (Lingjun pools; DaemonSet ack-rdma-dp-ds) advertises the NICs as `rdma/hca`, which
    multi-node training pods request (components/workloads/training/rayjob.py); its config is left at the add-on's
    defaults: shared mode, resource name rdma/hca (docs/facts.md §4)."""
    return [AddonSpec(a.role, ADDON_CONFIGS.get(a.role)) for a in ADDON_ROLES
            if a.installer == "addons" and addon_installed(s, a.role)]


def uses_sandbox_addons(s: Settings) -> bool:
    return all(addon_installed(s, a.role) for a in ADDON_ROLES if a.installer == "sandbox")


def retain_addon(s: Settings, role: str) -> bool:
    """Keep an add-on installed when Pulumi deletes its resource (components/config/addons.py `retain`). In an
    existing cluster every add-on may have been there before this stack and may serve other workloads; in a new
    cluster the create-time add-ons go with the cluster anyway (ACK may refuse to uninstall them), the others
    are uninstalled normally."""
    return s.cluster.mode == "existing" or ADDONS_BY_ROLE[role].retain == "always"


def kuberay_namespace_manifest(s: Settings) -> dict:
    """The operator's namespace, created here (not by Helm) so it carries Pod Security Admission labels: the
    upstream chart's pod meets restricted (values.yaml securityContext at v1.7.0: non-root, no capabilities,
    RuntimeDefault seccomp, read-only root)."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": KUBERAY_NAMESPACE, "labels": pod_security_labels("restricted", s)}}


def kuberay_helm_values(s: Settings) -> dict:
    """Values of the kuberay-operator chart: the operator runs on the system pool, never on the GPUs."""
    return {"nodeSelector": dict(system_scheduling(s).node_selector)}


def sandbox_manager_ingress_patch(s: Settings) -> dict:
    """Server-side-apply patch of the manager's Ingress: listen on 80 and 443 and redirect HTTP to HTTPS.
    `pulumi.com/patchForce` lets these annotations win over the add-on's own values for the same keys."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": SANDBOX_MANAGER_INGRESS, "namespace": s.sandbox.namespace,
                     "annotations": {**ALB_HTTPS_ANNOTATIONS, "pulumi.com/patchForce": "true"}},
    }


def sandbox_manager_config(s: Settings, admin_api_key) -> dict:
    """Config of the sandbox manager add-on: E2B domain, ingress class and admin API key, nested at the dotted
    key paths `versions.sandbox_manager_config_keys` names (default: the upstream chart's e2b.domain,
    e2b.adminApiKey, ingress.className; docs/facts.md §1). `admin_api_key` is the secret Output."""
    keys = s.versions.sandbox_manager_config_keys
    out: dict = {}
    set_dotted(out, keys.domain, s.sandbox.domain)
    set_dotted(out, keys.ingress_class, ALB_INGRESS_CLASS)
    set_dotted(out, keys.admin_api_key, admin_api_key)
    return out


def sandbox_manager_config_json(s: Settings, admin_api_key: pulumi.Input[str]) -> pulumi.Output[str]:
    """The add-on's `config` string as the provider's Read stores it (addon_config.py); it stays a secret because
    the key is one."""
    return addon_config(sandbox_manager_config(s, admin_api_key))  # type: ignore[return-value]


def lingjun_floor_problems(s: Settings, live: list[dict]) -> list[str]:
    """Add-ons below the versions ACK requires for a Lingjun node pool, from `cs.get_kubernetes_addons` rows
    ({name, current_version}). Pinned add-ons are checked by the settings already; an empty current_version is
    an add-on not installed (yet)."""
    if s.gpu_pool.kind != "lingjun":
        return []
    wanted = {a.name: role for role, a in s.versions.addons.items() if not a.version}
    out = []
    for row in live:
        name, current = row.get("name", ""), row.get("current_version") or ""
        floor = LINGJUN_MIN_ADDON_VERSIONS.get(name)
        if floor and current and name in wanted and addon_version_tuple(current) < addon_version_tuple(floor):
            out.append(f"versions.addons.{wanted[name]}: the cluster runs {name} {current}, below v{floor}, the oldest "
                       f"ACK supports with Lingjun node pools ({LINGJUN_NODE_POOL_DOC}); upgrade it in the ACK console "
                       "(Add-ons) before the Lingjun pool is created")
    return out


def check_lingjun_floors(s: Settings, cluster_id: pulumi.Input[str], provider: pulumi.ProviderResource,
                         parent: pulumi.Resource) -> pulumi.Output[list[str]] | None:
    """At preview, the live add-on versions of the cluster against the Lingjun floors, so no add-on needs a pin
    (a pin fights ACK's upgrades). Skipped while the cluster id is unknown (a fresh stack's first preview: ACK then
    installs its current versions); a problem fails the program (an exception in an outstanding Output). Not read
    under a destroy (guards.destroying): the pool is about to go, whatever the add-ons run."""
    if s.gpu_pool.kind != "lingjun" or destroying():
        return None
    live = alicloud.cs.get_kubernetes_addons_output(
        cluster_id=cluster_id, opts=pulumi.InvokeOutputOptions(parent=parent, provider=provider))

    def check(addons) -> list[str]:
        rows = [{"name": a.name, "current_version": a.current_version} for a in addons or []]
        if problems := lingjun_floor_problems(s, rows):
            raise pulumi.RunError("\n".join(problems))
        return []

    return live.addons.apply(check)


@dataclass(kw_only=True)
class AddonsArgs:
    settings: Settings
    cluster_id: pulumi.Input[str]
    provider: pulumi.ProviderResource  # the explicit alicloud provider
    k8s_provider: pulumi.ProviderResource
    # Add-on pods need nodes; an add-on install only completes once they run (the node pools).
    nodes_ready: list[pulumi.Resource] = field(default_factory=list)


class Addons(pulumi.ComponentResource):
    """Cluster add-ons and KubeRay. Exposes what other components wait for: csi_ready, pod_identity_ready,
    alb_ready, kuberay_ready."""

    def __init__(self, name: str, args: AddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:addons:Addons", name, None, opts)
        s = args.settings
        self.addons: dict[str, alicloud.cs.KubernetesAddon] = {}
        for spec in base_addons(s):
            a = s.versions.addons[spec.role]
            self.addons[spec.role] = alicloud.cs.KubernetesAddon(
                f"{name}-{spec.role.replace('_', '-')}",
                cluster_id=args.cluster_id,
                name=a.name,
                version=a.version,
                config=addon_config(spec.config) if spec.config else None,
                opts=pulumi.ResourceOptions(
                    # Add-on pods need nodes to run on (the system pool); ACK reports an install failed when
                    # they stay Pending. Destroy then removes the add-ons before the nodes.
                    parent=self, provider=args.provider, depends_on=args.nodes_ready,
                    retain_on_delete=True if retain_addon(s, spec.role) else None),
            )

        self.floors_checked = check_lingjun_floors(s, args.cluster_id, args.provider, self)

        self.kuberay_release: k8s.helm.v3.Release | None = None
        self.kuberay_namespace: k8s.core.v1.NamespacePatch | None = None
        if s.versions.kuberay_source == "helm":
            ns = kept_namespace(kuberay_namespace_manifest(s))
            # Kept on destroy, as Helm's create_namespace always left it: in an existing cluster it may hold more
            # than this release. A patch, not a retained Namespace, so the next `up` adopts it (wiring.kept_namespace).
            self.kuberay_namespace = k8s.core.v1.NamespacePatch(
                f"{name}-kuberay-namespace", metadata=ns["metadata"],
                opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider,
                                            aliases=[pulumi.Alias(type_=KEPT_NAMESPACE_OLD_TYPE)]))
            # Upstream chart (the ACK add-on's API name is unverified); never install both.
            self.kuberay_release = k8s.helm.v3.Release(
                f"{name}-kuberay",
                name=KUBERAY_CHART,
                chart=KUBERAY_CHART,
                version=s.versions.kuberay,
                repository_opts={"repo": s.versions.kuberay_chart_repo},
                namespace=KUBERAY_NAMESPACE,
                create_namespace=False,
                values=kuberay_helm_values(s),
                # The operator Deployment needs a node (the system pool) or the release times out.
                opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider,
                                            depends_on=[self.kuberay_namespace, *args.nodes_ready]),
            )

        def ready(*roles: str) -> list[pulumi.Resource]:
            return [self.addons[r] for r in roles if r in self.addons]

        self.csi_ready = ready("csi_plugin", "csi_provisioner")
        self.pod_identity_ready = ready("pod_identity")
        self.alb_ready = ready("alb")
        self.kuberay_ready: list[pulumi.Resource] = (
            [self.kuberay_release] if self.kuberay_release is not None else ready("kuberay"))
        self.register_outputs({"addons": {r: a.name for r, a in self.addons.items()}})


@dataclass(kw_only=True)
class SandboxAddonsArgs:
    settings: Settings
    cluster_id: pulumi.Input[str]
    provider: pulumi.ProviderResource  # the explicit alicloud provider
    k8s_provider: pulumi.ProviderResource
    admin_api_key: pulumi.Output[str]  # secret
    nodes_ready: list[pulumi.Resource] = field(default_factory=list)
    # The manager creates an Ingress of class `alb` on the sandbox domain: AlbConfig + IngressClass first.
    ingress_ready: list[pulumi.Resource] = field(default_factory=list)


class SandboxAddons(pulumi.ComponentResource):
    """ack-agent-sandbox-controller, then the sandbox manager add-on (E2B API on the sandbox domain)."""

    def __init__(self, name: str, args: SandboxAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:addons:SandboxAddons", name, None, opts)
        s = args.settings
        ctrl = s.versions.addons["sandbox_controller"]
        mgr = s.versions.addons["sandbox_manager"]
        retain = s.cluster.mode == "existing"
        self.controller = alicloud.cs.KubernetesAddon(
            f"{name}-controller", cluster_id=args.cluster_id, name=ctrl.name, version=ctrl.version,
            # Its controller and webhook pods need the system pool's nodes.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.nodes_ready,
                                        retain_on_delete=True if retain else None))
        self.manager = alicloud.cs.KubernetesAddon(
            f"{name}-manager", cluster_id=args.cluster_id, name=mgr.name, version=mgr.version,
            config=sandbox_manager_config_json(s, args.admin_api_key),
            # The manager runs on the controller's CRDs and publishes its Ingress through the ALB configuration.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[self.controller, *args.ingress_ready],
                                        retain_on_delete=True if retain else None))
        patch = sandbox_manager_ingress_patch(s)
        self.https_patch = k8s.networking.v1.IngressPatch(
            f"{name}-https", metadata=patch["metadata"],
            # The Ingress exists only once the manager add-on is installed.
            opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[self.manager]))
        self.sandbox_ready: list[pulumi.Resource] = [self.controller, self.manager, self.https_patch]
        self.register_outputs({"controller": ctrl.name, "manager": mgr.name})
