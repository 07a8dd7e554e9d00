"""Code sandboxes behind the MCP tool the training job calls (`run_code_once`).

What this creates, in `sandbox.namespace`:
- a SandboxSet (`agents.kruise.io/v1alpha1`) named `sandbox.template_name`: a warm pool of code-interpreter pods.
  The MCP server claims one per `run_code_once` call and deletes it afterwards; the controller refills the pool.
- a ClusterIP Service `sandbox.service_name` in front of the sandbox manager's MCP port, which the RayJob reaches
  at `wiring.mcp_url(settings)`.
- a NetworkPolicy that isolates the sandbox pods: model-written code runs there.
- for `sandbox.manager == "open-source"` (open_source.py) (clusters without the ACK app market): the upstream agent-sandbox
  controller (Helm chart: CRDs, webhooks) and a sandbox manager Deployment started with the MCP flags of
  openkruise/agents PR #165, its ServiceAccount, RBAC and admin-key Secret. With `ack-addon` the cloud layer installs
  ack-agent-sandbox-controller and ack-sandbox-manager instead, and this component only waits for them.

Facts and their sources: ../shared/research/verl_kuberay_agents.md section 2 (openkruise/agents v0.3.0 and PR #165
at 136236a8; config/sandbox-manager/*.yaml), the ACK tutorial's sandbox.yaml; docs/sandbox.md lists what is uncertain.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from typing import Optional

from components.config import Settings
from components.wiring import sandbox_scheduling, task_tools

SANDBOXSET_API_VERSION = "agents.kruise.io/v1alpha1"

# The tutorial's runtime wiring: a native-sidecar init container copies envd into a shared emptyDir and the
# sandbox's postStart hook starts it; the e2b code-interpreter server answers on 49999 (/health, /execute).
ENVD_DIR = "/mnt/envd"
ENVD_VOLUME = "envd-volume"
CODE_INTERPRETER_PORT = 49999
# Old sandbox-manager builds (<= preview-v0.0.3) ran envd init on claim only with this annotation on the
# SandboxSet. Since v0.1.0 (openkruise/agents PR #104) the E2B/MCP claim path always initialises the runtime,
# so the key is a no-op there; it is kept for add-on builds that predate that change. The validating webhook
# rejects `e2b.agents.kruise.io/` keys on spec.template.metadata, so it must never move into the pod template.
SHOULD_INIT_ENVD = "e2b.agents.kruise.io/should-init-envd"
E2B_PREFIX = "e2b.agents.kruise.io/"

# Pod labels of the sandbox manager, per manager kind (see SandboxSettings.manager_selector). The ACK add-on's
# selector is the tutorial's without `app.kubernetes.io/instance: release-name`: that value is what `helm template`
# prints when no release name is given, not the add-on's release name, so it would select nothing.
DEFAULT_MANAGER_SELECTORS: dict[str, dict[str, str]] = {
    "ack-addon": {"app.kubernetes.io/name": "ack-sandbox-manager", "component": "sandbox-manager"},
    "open-source": {"app.kubernetes.io/name": "sandbox-manager", "component": "sandbox-manager"},
}

# Pod labels of the sandbox gateway (the E2B data plane; see SandboxSettings.gateway_selector): upstream's
# `sandbox-gateway.selectorLabels` without the release-named `app.kubernetes.io/instance` (openkruise/charts
# kruise-agents-sandbox-manager 0.6.0 templates/_helpers.tpl; openkruise/agents config/sandbox-gateway). The
# open-source path deploys no gateway, so it admits none.
DEFAULT_GATEWAY_SELECTORS: dict[str, dict[str, str]] = {
    "ack-addon": {"app.kubernetes.io/name": "sandbox-gateway"},
    "open-source": {},
}

# Ranges sandboxes may never reach, even with allow_internet. 100.100.100.200 is the ECS instance metadata service
# (it hands out the node's RAM role credentials); link-local covers other node-local endpoints; the private and
# shared (100.64/10, Alibaba Cloud internal services) ranges cover the VPC, peered networks and cloud-internal
# endpoints for clusters whose real ranges differ from the settings (cluster.mode=existing).
METADATA_CIDR = "100.100.100.200/32"
ALWAYS_BLOCKED = ("169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")

# Open-source sandbox manager (config/sandbox-manager in openkruise/agents; PR #165 for MCP).
MANAGER_NAME = "sandbox-manager"
MANAGER_CONTAINER = "manager"
MANAGER_HTTP_PORT = 8080  # E2B REST API (--port)
MANAGER_SYSTEM_PORT = 7789  # upstream's readiness/startup probe port (pkg/proxy SystemPort)
MCP_SESSION_SYNC_PORT = 7790  # --mcp-session-sync-port default: peers hand MCP sessions to each other
MEMBERLIST_PORT = 7946  # --memberlist-bind-port default: peer discovery gossip
ADMIN_KEY_SECRET = "sandbox-manager-admin-key"
ADMIN_KEY_ITEM = "admin-key"
ADMIN_KEY_ENV = "E2B_ADMIN_KEY"
# The manager stores the API keys it creates in this Secret; its Role may only get/update it, not create it.
KEY_STORE_SECRET = "e2b-key-store"
# PR #165 serves MCP at this fixed path (mcp.DefaultServerConfig; there is no flag).
OPEN_SOURCE_MCP_PATH = "/mcp"

PART_OF = {"app.kubernetes.io/part-of": "verl-ack"}

# What the tutorial's code-interpreter image needs when it runs as root (sandbox.run_as_user empty), read from
# openkruise/agents pkg/agent-runtime/envd-run.sh and e2b-dev/code-interpreter template/ (Dockerfile, start-up.sh):
# envd-run.sh creates the `user` account and chowns its home (CHOWN; /etc/passwd and /home are root's own), envd runs
# and signals processes as that user (SETUID, SETGID, KILL) in a home it does not own (DAC_OVERRIDE, FOWNER). All
# six are in the baseline Pod Security Standard's allowed set; the rest of the default set (NET_RAW, MKNOD,
# SYS_CHROOT, SETPCAP, SETFCAP, AUDIT_WRITE, FSETID, NET_BIND_SERVICE) is dropped.
ROOT_SANDBOX_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID")


# --------------------------------------------------------------------------------------------- pool size
@dataclass(frozen=True)
class PoolSize:
    """Warm pool size and what it costs on the system pool."""

    demand: int  # run_code_once calls that can be in flight at once
    pool_min: int
    pool_cap: int
    replicas: int  # clamp(demand, pool_min, pool_cap)
    cpu_per_sandbox: float
    memory_gib_per_sandbox: float
    system_cpus: int  # vCPUs of the whole pool the sandboxes run on (system pool, or sandbox.dedicated_pool)
    system_memory_gib: int
    host_pool: str = "system pool"  # which pool that is, for messages

    @property
    def capped(self) -> bool:
        return self.demand > self.pool_cap

    @property
    def fit_on_system_pool(self) -> int:
        """Sandboxes the whole system pool could hold if nothing else ran there (an upper bound)."""
        return min(math.floor(self.system_cpus / self.cpu_per_sandbox),
                   math.floor(self.system_memory_gib / self.memory_gib_per_sandbox))


def cpu_cores(quantity: str) -> float:
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def memory_gib(quantity: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)", quantity).groups()  # type: ignore[union-attr]
    return int(number) * {"Ki": 2**-20, "Mi": 2**-10, "Gi": 1, "Ti": 2**10}[unit]


def pool_size(s: Settings) -> PoolSize:
    """Every in-flight `run_code_once` claims one warm sandbox (and the pool refills after), so the pool covers
    one rollout step's worth of concurrent calls: train_batch_size x rollout_n trajectories, each with up to
    max_parallel_calls code-tool calls at once, plus one reward call each when the task's reward runs its tests in
    the sandboxes (task.reward.sandbox). Fewer warm sandboxes make the extra claims create pods on demand (seconds
    each); the cap bounds what the system pool must hold."""
    t, sb = s.training, s.sandbox
    trajectories = t.train_batch_size * t.rollout_n
    demand = trajectories * (t.max_parallel_calls if "code" in task_tools(s) else 0) + \
        (trajectories if s.task.reward_kind == "sandbox" else 0)
    host = sb.dedicated_pool or s.system_pool
    return PoolSize(
        demand=demand,
        pool_min=sb.pool_min,
        pool_cap=sb.pool_cap,
        replicas=min(max(demand, sb.pool_min), sb.pool_cap),
        cpu_per_sandbox=cpu_cores(sb.cpu),
        memory_gib_per_sandbox=memory_gib(sb.memory),
        system_cpus=host.nodes * host.cpus_per_node,
        system_memory_gib=host.nodes * host.memory_gib_per_node,
        host_pool="sandbox pool" if sb.dedicated_pool else "system pool",
    )


# --------------------------------------------------------------------------------------------- labels
def manager_selector(s: Settings) -> dict[str, str]:
    return dict(s.sandbox.manager_selector or DEFAULT_MANAGER_SELECTORS[s.sandbox.manager])


def gateway_selector(s: Settings) -> dict[str, str]:
    """The gateway's pod labels ({} = no gateway peer)."""
    sel = s.sandbox.gateway_selector
    return dict(DEFAULT_GATEWAY_SELECTORS[s.sandbox.manager] if sel is None else sel)


def sandbox_peers(s: Settings) -> list[dict]:
    """The pods that must reach the sandboxes, as NetworkPolicy peers of the sandbox namespace: the manager
    (envd init on claim, MCP run_code_once's /execute on 49999) and, where one runs, the gateway, whose envoy
    routes E2B SDK traffic (`<port>-<id>.<domain>`) to the sandbox pod's IP (`original_dst_cluster`, chart
    0.6.0 templates/_gateway-helpers.tpl), on any port the SDK names, so no port is restricted."""
    peers = [{"podSelector": {"matchLabels": manager_selector(s)}}]
    gateway = gateway_selector(s)
    if gateway and gateway != manager_selector(s):
        peers.append({"podSelector": {"matchLabels": gateway}})
    return peers


def sandbox_labels(s: Settings) -> dict[str, str]:
    """Labels on every sandbox pod (the controller copies the template's labels onto the pods); the
    NetworkPolicy selects them."""
    return {"app.kubernetes.io/name": s.sandbox.template_name, "app.kubernetes.io/component": "sandbox", **PART_OF}


# --------------------------------------------------------------------------------------------- manifests
def sandbox_security(s: Settings) -> tuple[dict, dict, dict]:
    """(pod securityContext, sandbox container securityContext, envd init container securityContext).

    With `sandbox.run_as_user` the pod meets the restricted Pod Security Standard. Without it the image runs as
    root (see ROOT_SANDBOX_CAPABILITIES): every restricted control except runAsNonRoot, and only the capabilities
    envd needs. Never privileged, never a privilege escalation (no setuid binary such as sudo gains anything)."""
    uid = s.sandbox.run_as_user
    pod: dict = {"seccompProfile": {"type": "RuntimeDefault"}}
    drop_all = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if uid is not None:
        pod.update({"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "fsGroup": uid})
        return pod, dict(drop_all), dict(drop_all)
    sandbox = {"allowPrivilegeEscalation": False,
               "capabilities": {"drop": ["ALL"], "add": list(ROOT_SANDBOX_CAPABILITIES)}}
    # The envd init sidecar only copies two files into the shared emptyDir and sleeps.
    return pod, sandbox, dict(drop_all)


def sandbox_pod_template(s: Settings) -> dict:
    """The SandboxSet's pod template (a core PodTemplateSpec: the webhook validates it as one)."""
    sb, v = s.sandbox, s.versions
    sched = sandbox_scheduling(s)
    pod_security, sandbox_security_context, init_security_context = sandbox_security(s)

    def envd_env() -> list[dict]:
        return [{"name": "ENVD_DIR", "value": ENVD_DIR}]

    def envd_mount() -> list[dict]:
        return [{"name": ENVD_VOLUME, "mountPath": ENVD_DIR}]

    resources = {"cpu": sb.cpu, "memory": sb.memory, "ephemeral-storage": sb.ephemeral_storage}
    # The envd sidecar writes nothing but what it copies into the emptyDir (which counts against the pod, bounded by
    # the volume's sizeLimit); its own layer and logs get the same bound.
    init_storage = {"ephemeral-storage": sb.envd_volume_size}
    spec: dict = {
        # Model-written code runs here: no API credentials, no Service environment variables to discover.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": dict(sched.node_selector),
        "securityContext": pod_security,
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        # Claimed sandboxes are deleted right after one call; a long grace period only delays the refill.
        "terminationGracePeriodSeconds": 1,
        "initContainers": [{
            "name": "init",
            "image": v.sandbox_runtime_image,
            "imagePullPolicy": "IfNotPresent",
            # A native sidecar (restartPolicy Always on an init container, Kubernetes >= 1.29): it provides envd
            # under ENVD_DIR for the sandbox's postStart hook. It runs no user code, so it gets no CPU or memory
            # limits of its own, as in the tutorial; its disk is bounded like every sandbox container's.
            "restartPolicy": "Always",
            "env": envd_env(),
            "volumeMounts": envd_mount(),
            "resources": {"requests": dict(init_storage), "limits": dict(init_storage)},
            "securityContext": init_security_context,
        }],
        "containers": [{
            "name": "sandbox",
            "image": s.sandbox_image(),
            "imagePullPolicy": "IfNotPresent",
            "env": envd_env(),
            "volumeMounts": envd_mount(),
            "lifecycle": {"postStart": {"exec": {"command": ["bash", f"{ENVD_DIR}/envd-run.sh"]}}},
            # Ready only once the code interpreter answers; the tutorial's timings (up to ~40 s).
            "startupProbe": {
                "httpGet": {"path": "/health", "port": CODE_INTERPRETER_PORT, "scheme": "HTTP"},
                "initialDelaySeconds": 1, "periodSeconds": 2, "timeoutSeconds": 1,
                "failureThreshold": 20, "successThreshold": 1,
            },
            # requests = limits: a sandbox cannot take more CPU, memory or local disk than it reserved, whatever the
            # code does; past its ephemeral-storage limit the kubelet evicts this pod alone.
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "securityContext": sandbox_security_context,
        }],
        # Bounded: a pod whose emptyDir grows past sizeLimit is evicted, not its neighbours (the node's disk).
        "volumes": [{"name": ENVD_VOLUME, "emptyDir": {"sizeLimit": sb.envd_volume_size}}],
    }
    if sb.runtime_class:
        # e.g. `runv`: ACK Sandboxed-Container gives each sandbox its own kernel in a lightweight VM.
        spec["runtimeClassName"] = sb.runtime_class
    if sched.tolerations:
        spec["tolerations"] = [dict(t) for t in sched.tolerations]
    return {"metadata": {"labels": sandbox_labels(s)}, "spec": spec}


def sandboxset_manifest(s: Settings, replicas: Optional[int] = None) -> dict:
    sb = s.sandbox
    return {
        "apiVersion": SANDBOXSET_API_VERSION,
        "kind": "SandboxSet",
        "metadata": {
            "name": sb.template_name,
            "namespace": sb.namespace,
            "labels": dict(PART_OF),
            "annotations": {SHOULD_INIT_ENVD: "true"},
        },
        "spec": {
            "replicas": pool_size(s).replicas if replicas is None else replicas,
            "template": sandbox_pod_template(s),
        },
    }


def mcp_service_manifest(s: Settings) -> dict:
    sb = s.sandbox
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": sb.service_name, "namespace": sb.namespace,
                     "labels": {"app.kubernetes.io/name": sb.service_name, **PART_OF}},
        "spec": {
            # In-cluster only: the training pods call it; nothing outside the cluster needs MCP.
            "type": "ClusterIP",
            "selector": manager_selector(s),
            "ports": [{"name": "http-mcp", "protocol": "TCP", "port": sb.mcp_port, "targetPort": sb.mcp_port}],
            # MCP Streamable-HTTP sessions live in the manager replica that opened them; PR #165 syncs them
            # between peers, but keeping a client on one replica does not rely on that.
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
        },
    }


def blocked_cidrs(s: Settings) -> list[str]:
    """Destinations sandboxes may not reach when allow_internet opens 0.0.0.0/0: the metadata service, the
    cluster's own ranges from the settings, and the private/shared/link-local ranges."""
    net = s.cluster.network
    ranges = [METADATA_CIDR, net.vpc_cidr, *net.node_cidrs, *net.pod_cidrs, net.service_cidr, *ALWAYS_BLOCKED]
    out: list[str] = []
    for r in ranges:
        c = str(ipaddress.ip_network(r, strict=True))
        if c not in out:
            out.append(c)
    return out


def network_policy_manifest(s: Settings) -> dict:
    sb = s.sandbox
    egress: list[dict] = [{
        # Name resolution only, and only through the cluster DNS in kube-system.
        "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    }]
    if sb.allow_internet:
        egress.append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": blocked_cidrs(s)}}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{sb.template_name}-isolation", "namespace": sb.namespace, "labels": dict(PART_OF)},
        "spec": {
            "podSelector": {"matchLabels": sandbox_labels(s)},
            "policyTypes": ["Ingress", "Egress"],
            # Only the sandbox manager and the gateway talk to sandboxes (sandbox_peers).
            "ingress": [{"from": sandbox_peers(s)}],
            "egress": egress,
        },
    }
