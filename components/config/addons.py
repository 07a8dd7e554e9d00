"""The ACK add-ons the program installs, declared once: role, default API name, when it is installed, how sure
the name is, what happens to it on destroy.

Everything else derives from `ADDON_ROLES`: the settings' roles and default names (`versions.addons`), which roles
may be turned off, the create-time add-ons of a new cluster, which add-ons ACK manages (never pinned), the install
conditions the components ask (`addon_installed`), the generated schema's defaults and the add-on tables of
docs/cloud.md and docs/architecture.md (`render_addon_table`). A leaf module: it imports nothing of the program, so
conditions are dotted settings paths, evaluated against a `Settings` object by `condition_holds`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# A condition's expected value meaning "set to anything" (a domain, an id).
IS_SET = object()
Condition = tuple[tuple[str, Any], ...]
# Which part of the program installs the role (docs tables name the file).
Installer = Literal["cluster", "addons", "sandbox", "queue", "logs", "registry"]
INSTALLER_FILES: dict[str, str] = {
    "cluster": "components/cloud/cluster.py", "addons": "components/cloud/addons.py",
    "sandbox": "components/cloud/addons.py", "queue": "components/queue.py", "logs": "components/logs.py",
    "registry": "components/cloud/registry.py",
}


@dataclass(frozen=True, kw_only=True)
class AddonRole:
    role: str  # key in settings.versions.addons
    name: str  # default ACK add-on API name
    sure: str  # how sure the name is, and from what
    installer: Installer
    # All must hold (dotted settings path, expected value; IS_SET = any non-empty value). Add-ons are installed by
    # the stack that holds the cluster (single or platform): experiments install none (`addon_installed`).
    when: Condition = ()
    optional: bool = False  # `enabled: false` turns it off even while `when` holds
    create_time: bool = False  # passed to a new cluster at creation (network plugin, storage before any node)
    ack_managed: bool = False  # ACK upgrades it with the cluster: never pinned (components/config/cloud.py)
    # Kept installed when Pulumi deletes its resource: in an existing cluster (it may predate the stack and serve
    # other workloads), or always.
    retain: Literal["existing", "always"] = "existing"
    notes: str = ""
    # ACK's minimum versions for a Lingjun node pool, by add-on name: the default name, or another name a stack may
    # give the role (docs/facts.md §4, the Lingjun node-pool page).
    lingjun_min_versions: tuple[tuple[str, str], ...] = ()
    config_keys: tuple[str, ...] = field(default=())  # the config the program sends, for the docs


ADDON_ROLES: tuple[AddonRole, ...] = (
    AddonRole(role="terway_controlplane", name="terway-controlplane", sure="SDK examples", installer="cluster",
              when=(("cluster.mode", "new"),), create_time=True, ack_managed=True, retain="always",
              notes="at cluster creation only (network plugin)."),
    AddonRole(role="terway", name="terway-eniip", sure="SDK examples", installer="cluster",
              when=(("cluster.mode", "new"),), create_time=True, retain="always",
              lingjun_min_versions=(("terway-eniip", "1.16.8"),),
              notes="at cluster creation only, with NetworkPolicy enforcement on (config `{\"NetworkPolicy\": \"true\"}`)."),
    AddonRole(role="csi_plugin", name="csi-plugin", sure="SDK examples", installer="addons", create_time=True,
              retain="always", lingjun_min_versions=(("csi-plugin", "1.32.2"),),
              notes="at creation (new cluster) and as `cs.KubernetesAddon`; RRSA mounts need CSI >= v1.30.4."),
    AddonRole(role="csi_provisioner", name="managed-csiprovisioner", sure="SDK examples", installer="addons",
              create_time=True, ack_managed=True, retain="always", lingjun_min_versions=(("csi-provisioner", "1.32.2"),),
              notes="at creation (new cluster) and as `cs.KubernetesAddon`; the Lingjun floor is for the self-managed "
              "`csi-provisioner` a stack may name instead."),
    AddonRole(role="pod_identity", name="ack-pod-identity-webhook", sure="ACK docs", installer="addons",
              when=(("storage.auth", "rrsa"),), lingjun_min_versions=(("ack-pod-identity-webhook", "0.2.1"),),
              notes="injects the RRSA OIDC token into pods of annotated service accounts."),
    AddonRole(role="node_problem_detector", name="ack-node-problem-detector", sure="SDK examples", installer="addons",
              optional=True, notes="optional."),
    AddonRole(role="monitoring", name="arms-prometheus", sure="SDK examples", installer="addons", optional=True,
              ack_managed=True, notes="optional; ACK's GPU dashboards come through ARMS Prometheus (**unverified** which "
              "GPU/Ray metrics it scrapes); billed per ARMS pricing."),
    AddonRole(role="alb", name="alb-ingress-controller", sure="SDK + Terraform examples", installer="addons",
              when=(("sandbox.domain", IS_SET),), config_keys=("albIngress.CreateDefaultALBConfig",),
              notes="config `CreateDefaultALBConfig: false` (the program declares its own AlbConfig)."),
    AddonRole(role="kuberay", name="ack-kuberay-operator", sure="**unverified** (console shows \"Kuberay-Operator\")",
              installer="addons", when=(("versions.kuberay_source", "addon"),),
              notes="the default is the upstream Helm chart `kuberay-operator` (`versions.kuberay`) in `kuberay-system` on "
              "the system pool; never both."),
    AddonRole(role="rdma", name="ack-rdma-device-plugin", sure="ACK docs (ack-rdma-device-plugin)", installer="addons",
              when=(("gpu_pool.kind", "lingjun"),),
              notes="advertises the Lingjun RDMA NICs as `rdma/hca` (shared mode, its defaults)."),
    AddonRole(role="sandbox_controller", name="ack-agent-sandbox-controller", sure="ACK docs", installer="sandbox",
              when=(("sandbox.enabled", True), ("sandbox.manager", "ack-addon")),
              notes="its first install needs the RAM role `AliyunCSManagedAgentSandboxRole` authorised once in the console."),
    AddonRole(role="sandbox_manager", name="ack-sandbox-manager",
              sure="**unverified** (install steps use it; the component page is titled ack-agent-sandbox-manager)",
              installer="sandbox", when=(("sandbox.enabled", True), ("sandbox.manager", "ack-addon")),
              notes="config keys **unverified** (`versions.sandbox_manager_config_keys`)."),
    AddonRole(role="kube_queue", name="ack-kube-queue", sure="ACK docs (cloud-native AI suite)", installer="queue",
              when=(("kind", "platform"), ("queue.enabled", True)),
              notes="the job queue of experiments; its RayJob extension is checked by hand (docs/uncertain-facts.md)."),
    AddonRole(role="logtail", name="logtail-ds", sure="SDK examples", installer="logs",
              when=(("kind", "platform"), ("logs.enabled", True)), retain="always",
              lingjun_min_versions=(("logtail-ds", "2.1.6"),),
              notes="Logtail DaemonSet + alibaba-log-controller (AliyunLogConfig CRD); a new cluster with an audit log may "
              "already run it, so it is kept."),
    AddonRole(role="acr_credential_helper", name="managed-aliyun-acr-credential-helper", sure="ACK docs",
              installer="registry", when=(("image.source", "built"), ("image.credential_helper", True)), ack_managed=True,
              notes="nodes pull the private built image without imagePullSecrets (config: `image.credential_helper_config`)."),
)
ADDONS_BY_ROLE: dict[str, AddonRole] = {a.role: a for a in ADDON_ROLES}
DEFAULT_ADDONS: dict[str, str] = {a.role: a.name for a in ADDON_ROLES}
OPTIONAL_ADDONS: tuple[str, ...] = tuple(a.role for a in ADDON_ROLES if a.optional)
CREATE_TIME_ADDON_ROLES: tuple[str, ...] = tuple(a.role for a in ADDON_ROLES if a.create_time)
ACK_MANAGED_ADDONS: tuple[str, ...] = tuple(a.name for a in ADDON_ROLES if a.ack_managed)


def lingjun_min_addon_versions() -> dict[str, str]:
    """Add-on name -> ACK's minimum version for a Lingjun node pool."""
    return {name: floor for a in ADDON_ROLES for name, floor in a.lingjun_min_versions}


def _value(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, Mapping) else getattr(obj, part, None)
    return obj


def condition_holds(s: Any, role: str) -> bool:
    """The role's `when` on settings `s` (a Settings object), ignoring `enabled`."""
    return all((_value(s, path) not in (None, "", [], {})) if want is IS_SET else _value(s, path) == want
               for path, want in ADDONS_BY_ROLE[role].when)


def addon_installed(s: Any, role: str) -> bool:
    """Whether this stack installs the role's add-on: the stack holds the cluster, the role's condition holds, and
    an optional role is not turned off."""
    if getattr(s, "kind", "single") == "experiment":
        return False
    return condition_holds(s, role) and s.versions.addons[role].enabled is not False


def condition_text(role: str) -> str:
    """`when`, as the docs and error messages say it."""
    parts = []
    for path, want in ADDONS_BY_ROLE[role].when:
        parts.append(f"`{path}` set" if want is IS_SET else f"`{path}: {str(want).lower() if isinstance(want, bool) else want}`")
    return " and ".join(parts) or "always"


def on_destroy_text(role: str) -> str:
    a = ADDONS_BY_ROLE[role]
    if a.installer == "cluster":
        return "go with the cluster"
    if a.retain == "always":
        return "kept (`retain_on_delete`); go with a new cluster" if a.create_time else "kept (`retain_on_delete`)"
    return "uninstalled (new cluster) / kept (existing)"


def render_addon_table() -> str:
    """The add-on table of docs/cloud.md and docs/architecture.md (between `<!-- addons -->` markers)."""
    rows = ["| role | default name | how sure | installed when | on destroy | installed by | notes |",
            "|---|---|---|---|---|---|---|"]
    for a in ADDON_ROLES:
        when = condition_text(a.role) + (" (create-time: also passed to a new cluster)" if a.create_time
                                         and a.installer != "cluster" else "")
        if a.optional:
            when += ", unless `enabled: false`"
        rows.append(f"| `{a.role}` | `{a.name}` | {a.sure} | {when} | {on_destroy_text(a.role)} | "
                    f"`{INSTALLER_FILES[a.installer]}` | {a.notes} |")
    return "\n".join(rows) + "\n"
