"""The open-source sandbox manager (sandbox.manager: open-source): its Deployment, started with the MCP flags of
openkruise/agents PR #165, its ServiceAccount, RBAC, Secrets and namespace, and the controller chart's values.
Split from manifests.py (the pool, the MCP Service and the isolation policy), whose constants it uses."""

from __future__ import annotations

from components.config import Settings
from components.wiring import (
    pod_security_labels,
    restricted_container_security,
    sandbox_namespace_pod_security,
    system_scheduling,
)
from components.workloads.sandbox.manifests import (
    ADMIN_KEY_ENV,
    ADMIN_KEY_ITEM,
    ADMIN_KEY_SECRET,
    KEY_STORE_SECRET,
    MANAGER_CONTAINER,
    MANAGER_HTTP_PORT,
    MANAGER_NAME,
    MANAGER_SYSTEM_PORT,
    MCP_SESSION_SYNC_PORT,
    MEMBERLIST_PORT,
    PART_OF,
    manager_selector,
)


def manager_args(s: Settings) -> list[str]:
    sb = s.sandbox
    sel = manager_selector(s)
    return [
        f"--system-namespace={sb.namespace}",
        "--peer-selector=" + ",".join(f"{k}={v}" for k, v in sorted(sel.items())),
        # Only this stack's SandboxSets: the manager claims from the pool in its own namespace.
        f"--sandbox-namespace={sb.namespace}",
        f"--port={MANAGER_HTTP_PORT}",
        # Kubernetes expands $(VAR) from the container's env, which reads the key from a Secret: the key never
        # appears in the Deployment object.
        f"--e2b-admin-key=$({ADMIN_KEY_ENV})",
        "--e2b-enable-auth=true",
        "--mcp-enabled=true",
        f"--mcp-port={sb.mcp_port}",
        f"--mcp-session-sync-port={MCP_SESSION_SYNC_PORT}",
        # No --e2b-domain: settings refuse sandbox.domain with this manager (nothing here serves the E2B domain).
    ]


def manager_service_account_manifest(s: Settings) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": MANAGER_NAME, "namespace": s.sandbox.namespace, "labels": manager_selector(s)}}


def manager_cluster_role_name(s: Settings) -> str:
    # Cluster-scoped: the namespace in the name keeps two stacks on one cluster apart.
    return f"{MANAGER_NAME}-{s.sandbox.namespace}"


# The Role that lets the manager read Secrets and ConfigMaps, in its own namespace only.
MANAGER_CONFIG_ROLE = f"{MANAGER_NAME}-config"


def manager_rbac_manifests(s: Settings) -> list[dict]:
    """The RBAC of config/sandbox-manager/rbac.yaml at PR #165's head (136236a8), the build the MCP image comes
    from, with one change: upstream's ClusterRole reads every Secret and ConfigMap of the cluster, but the manager's
    cache watches them only in --system-namespace (pkg/cache/cache.go BuildCacheConfig at 136236a8: Secret and
    ConfigMap informers are restricted to opts.SystemNamespace), so here a Role grants them in that namespace alone.
    What stays cluster-scoped is upstream's: pods, events, the agents.kruise.io resources and persistentvolumes."""
    ns, labels, role = s.sandbox.namespace, manager_selector(s), manager_cluster_role_name(s)
    subject = [{"kind": "ServiceAccount", "name": MANAGER_NAME, "namespace": ns}]
    rw = ["get", "list", "watch", "update", "patch", "delete", "create"]
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": role, "labels": labels},
         "rules": [
             {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
             {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get", "update", "patch"]},
             {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
             {"apiGroups": ["agents.kruise.io"],
              "resources": ["sandboxes", "sandboxsets", "checkpoints", "sandboxtemplates"], "verbs": rw},
             {"apiGroups": ["agents.kruise.io"], "resources": ["sandboxes/status", "sandboxsets/status"],
              "verbs": ["get", "update", "patch"]},
             {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch"]},
         ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": role, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": f"{MANAGER_NAME}-key-store", "namespace": ns, "labels": labels},
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [KEY_STORE_SECRET],
                    "verbs": ["get", "list", "watch", "update", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{MANAGER_NAME}-key-store", "namespace": ns, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{MANAGER_NAME}-key-store"},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": MANAGER_CONFIG_ROLE, "namespace": ns, "labels": labels},
         "rules": [{"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": MANAGER_CONFIG_ROLE, "namespace": ns, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": MANAGER_CONFIG_ROLE},
         "subjects": subject},
    ]


def sandbox_namespace_manifest(s: Settings) -> dict:
    """The sandbox namespace of the open-source manager (the chart does not create one; with ack-addon the add-on
    owns it). Pod Security Admission enforces the level the sandbox pods meet (wiring.sandbox_namespace_pod_security);
    the controller chart's and the manager's pods meet restricted."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": s.sandbox.namespace,
                         "labels": {**pod_security_labels(sandbox_namespace_pod_security(s), s), **PART_OF}}}


def key_store_secret_manifest(s: Settings) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": KEY_STORE_SECRET, "namespace": s.sandbox.namespace, "labels": manager_selector(s)}}


def admin_key_secret_manifest(s: Settings) -> dict:
    """The admin key Secret without its value (the component adds it as a secret Output)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": ADMIN_KEY_SECRET, "namespace": s.sandbox.namespace, "labels": manager_selector(s)}}


MANAGER_TMP_SIZE = "1Gi"


def manager_deployment_manifest(s: Settings) -> dict:
    sb = s.sandbox
    sel = manager_selector(s)
    sched = system_scheduling(s)
    resources = {"cpu": sb.manager_cpu, "memory": sb.manager_memory}
    pod_spec: dict = {
        "serviceAccountName": MANAGER_NAME,
        "enableServiceLinks": False,
        "nodeSelector": dict(sched.node_selector),
        # The image runs as 65532 (dockerfiles/sandbox-manager.Dockerfile).
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": MANAGER_CONTAINER,
            "image": s.versions.sandbox_manager_image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["/sandbox-manager"],
            "args": manager_args(s),
            "env": [
                # The manager manages sandboxes as custom resources (upstream deployment.yaml).
                {"name": "INFRA", "value": "sandbox-cr"},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": ADMIN_KEY_ENV,
                 "valueFrom": {"secretKeyRef": {"name": ADMIN_KEY_SECRET, "key": ADMIN_KEY_ITEM}}},
            ],
            "ports": [
                {"name": "http-manager", "containerPort": MANAGER_HTTP_PORT, "protocol": "TCP"},
                {"name": "http-mcp", "containerPort": sb.mcp_port, "protocol": "TCP"},
                {"name": "mcp-sync", "containerPort": MCP_SESSION_SYNC_PORT, "protocol": "TCP"},
                {"name": "memberlist", "containerPort": MEMBERLIST_PORT, "protocol": "TCP"},
            ],
            # Upstream's probes (config/sandbox-manager/deployment.yaml).
            "startupProbe": {"tcpSocket": {"port": MANAGER_SYSTEM_PORT}, "initialDelaySeconds": 10,
                             "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 30},
            "readinessProbe": {"tcpSocket": {"port": MANAGER_SYSTEM_PORT}, "initialDelaySeconds": 10,
                               "periodSeconds": 5, "timeoutSeconds": 3, "failureThreshold": 3},
            "livenessProbe": {"tcpSocket": {"port": MANAGER_HTTP_PORT}, "initialDelaySeconds": 60,
                              "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3},
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "securityContext": restricted_container_security(),
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        }],
        # The manager keeps nothing on disk but scratch files; bounded so it cannot fill the system node.
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": MANAGER_TMP_SIZE}}],
    }
    if sched.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in sched.tolerations]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": MANAGER_NAME, "namespace": sb.namespace, "labels": {**sel, **PART_OF}},
        "spec": {
            "replicas": sb.manager_replicas,
            "selector": {"matchLabels": sel},
            "template": {
                "metadata": {"labels": {**sel, **PART_OF},
                             "annotations": {"kubectl.kubernetes.io/default-container": MANAGER_CONTAINER}},
                "spec": pod_spec,
            },
        },
    }


def controller_chart_values(s: Settings) -> dict:
    """Values for the agents-sandbox-controller chart (keys from its values.yaml at 0.2.0)."""
    sched = system_scheduling(s)
    return {
        "namespace": {"name": s.sandbox.namespace},
        "nodeSelector": dict(sched.node_selector),
        "tolerations": [dict(t) for t in sched.tolerations],
    }
