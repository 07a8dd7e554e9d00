"""MLflow tracking server that outlives the training job.

verl's MLflow logger defaults to `sqlite:////tmp/mlruns.db` inside the Ray driver pod, which
is deleted with the Ray cluster. This component runs one MLflow server in `job.namespace` on the system pool:

- backend store: sqlite on a cloud-disk PVC (`tracking.storage_class`). A disk is ReadWriteOnce, so one replica
  and `strategy: Recreate` (a rolling update would start the new pod while the old one holds the disk);
- artifacts: served by the server itself (`--serve-artifacts`, clients upload through it) into an OSS CSI volume on
  the bucket's `storage.tracking_prefix`. MLflow has no built-in OSS artifact store (3.18 registers s3, gs,
  wasbs, hdfs, ...); `s3://` against OSS's S3-compatible endpoint would need an AccessKey (boto3 cannot assume a
  RAM role through ACK's RRSA OIDC tokens), and the `aliyunstoreplugin` package is unmaintained since 2020 and
  also key-based. The CSI volume reuses the cluster's RRSA setup and keeps the server free of cloud credentials;
- a ClusterIP Service `mlflow:5000`, never exposed on the ALB (`kubectl port-forward`, exported as a command).

MLflow >= 3.5 rejects requests whose Host header is not localhost or a private IP (DNS-rebinding protection), so
the Service's DNS names are passed in `--allowed-hosts`; /health stays exempt, which the probes use.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.config import Settings
from components.wiring import (
    MLFLOW_PORT,
    MLFLOW_SERVICE,
    ClusterRefs,
    StorageRefs,
    WorkloadIdentity,
    ray_namespace,
    resource_kwargs,
    restricted_container_security,
    system_scheduling,
    tracking_uri,
)
from components.workloads.network_policies import RAY_DASHBOARD_PORT, mlflow_network_policy_manifest
from components.workloads.training.volumes import OSSFS_READ_WRITE_OPTS, OssVolume, persistent_volume, persistent_volume_claim

BACKEND_DIR = "/mlflow/backend"
ARTIFACTS_DIR = "/mnt/artifacts"
BACKEND_PVC = "mlflow-backend"
NOBODY = 65534
LABELS = {"app.kubernetes.io/name": MLFLOW_SERVICE, "app.kubernetes.io/component": "tracking",
          "app.kubernetes.io/part-of": "verl-ack"}
# KubeRay's token Secret: named after the RayCluster, token under `auth_token`; the Ray CLI and SDK read the mode and
# the token from RAY_AUTH_MODE and RAY_AUTH_TOKEN (components/workloads/training/rayjob.py, AUTH_*).
RAY_AUTH_TOKEN_KEY = "auth_token"
RAY_CLUSTER_LABEL = "ray.io/cluster"  # utils/constant.go RayClusterLabelKey, on the Secret KubeRay creates


def artifacts_volume(s: Settings) -> OssVolume:
    """The OSS volume of the artifact store: ossfs 1.0 (general read-write), files owned by the server's uid."""
    return OssVolume(
        kind="tracking",  # type: ignore[arg-type]  # a fourth kind next to the training volumes
        # PVs are cluster-scoped: the environment name keeps two stacks on one cluster apart.
        name=f"{s.name}-mlflow-artifacts",
        prefix=s.storage.tracking_prefix,
        fuse_type="ossfs",
        access_mode="ReadWriteMany",
        # The server runs as an unprivileged uid; ossfs presents the files as that uid's so it may write them.
        other_opts=f"{OSSFS_READ_WRITE_OPTS} -o uid={NOBODY} -o gid={NOBODY}",
        mount_path=ARTIFACTS_DIR,
    )


def allowed_hosts(s: Settings) -> list[str]:
    """Host headers the server accepts: every in-cluster name of the Service, and localhost for port-forward."""
    ns = s.job.namespace
    names = [MLFLOW_SERVICE, f"{MLFLOW_SERVICE}.{ns}", f"{MLFLOW_SERVICE}.{ns}.svc",
             f"{MLFLOW_SERVICE}.{ns}.svc.cluster.local"]
    return [h for n in names for h in (n, f"{n}:{MLFLOW_PORT}")] + ["localhost:*", "127.0.0.1:*"]


def server_command(s: Settings) -> list[str]:
    return [
        "mlflow", "server",
        "--host", "0.0.0.0",
        "--port", str(MLFLOW_PORT),
        "--backend-store-uri", f"sqlite:///{BACKEND_DIR}/mlflow.db",
        "--serve-artifacts",
        "--artifacts-destination", ARTIFACTS_DIR,
        "--allowed-hosts", ",".join(allowed_hosts(s)),
    ]


DISK_CSI_DRIVER = "diskplugin.csi.alibabacloud.com"
DISK_ZONE_KEY = "topology.diskplugin.csi.alibabacloud.com/zone"


def backend_pv_name(s: Settings) -> str:
    return f"{s.job.namespace}-{BACKEND_PVC}"


def backend_pv_manifest(s: Settings, disk_id: pulumi.Input[str]) -> dict:
    """A static PV of the Pulumi-owned backend disk (tracking.backend_disk: owned), in the disk's zone (ACK
    "Use statically provisioned disks to persist data": driver, volumeHandle = disk id, zone nodeAffinity). Retain:
    Pulumi deletes the disk itself, after the cluster."""
    t = s.tracking
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": backend_pv_name(s), "labels": dict(LABELS)},
        "spec": {"capacity": {"storage": f"{t.disk_gib}Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                 "claimRef": {"namespace": s.job.namespace, "name": BACKEND_PVC},
                 "csi": {"driver": DISK_CSI_DRIVER, "volumeHandle": disk_id, "fsType": "ext4"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": DISK_ZONE_KEY, "operator": "In", "values": [s.zones[0]]}]}]}}},
    }


def backend_pvc_manifest(s: Settings, static: bool = False) -> dict:
    t = s.tracking
    spec: dict = {"accessModes": ["ReadWriteOnce"], "storageClassName": "" if static else t.storage_class,
                  "resources": {"requests": {"storage": f"{t.disk_gib}Gi"}}}
    if static:
        spec["volumeName"] = backend_pv_name(s)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": BACKEND_PVC, "namespace": s.job.namespace, "labels": dict(LABELS)},
        "spec": spec,
    }


def deployment_manifest(s: Settings, service_account: str) -> dict:
    t = s.tracking
    sched = system_scheduling(s)
    resources = {"cpu": t.cpu, "memory": t.memory}

    def health(**timing) -> dict:
        return {"httpGet": {"path": "/health", "port": "http"}, **timing}

    pod_spec: dict = {
        "serviceAccountName": service_account,
        # The server calls neither the Kubernetes API nor OSS (artifacts go through the CSI volume).
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": dict(sched.node_selector),
        # OnRootMismatch: chown the disk once, never walk the (large) artifact tree on restart.
        "securityContext": {"runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY, "fsGroup": NOBODY,
                            "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "mlflow",
            "image": s.versions.mlflow_image,
            "command": server_command(s),
            "env": [{"name": "HOME", "value": "/tmp"}],  # the root filesystem is read-only
            "ports": [{"name": "http", "containerPort": MLFLOW_PORT, "protocol": "TCP"}],
            # First start creates the sqlite schema (migrations): give it up to ~3 minutes.
            "startupProbe": health(periodSeconds=5, failureThreshold=36),
            "readinessProbe": health(periodSeconds=10, timeoutSeconds=5, failureThreshold=3),
            "livenessProbe": health(periodSeconds=20, timeoutSeconds=5, failureThreshold=6),
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "securityContext": restricted_container_security(),
            "volumeMounts": [
                {"name": "backend", "mountPath": BACKEND_DIR},
                {"name": "artifacts", "mountPath": ARTIFACTS_DIR},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
        }],
        "volumes": [
            {"name": "backend", "persistentVolumeClaim": {"claimName": BACKEND_PVC}},
            {"name": "artifacts", "persistentVolumeClaim": {"claimName": artifacts_volume(s).name}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
        ],
    }
    if sched.tolerations:
        pod_spec["tolerations"] = [dict(x) for x in sched.tolerations]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": MLFLOW_SERVICE, "namespace": s.job.namespace, "labels": dict(LABELS)},
        "spec": {
            # sqlite on a ReadWriteOnce disk: exactly one writer, and the old pod must release the disk first.
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(LABELS)},
            "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod_spec},
        },
    }


def service_manifest(s: Settings) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": MLFLOW_SERVICE, "namespace": s.job.namespace, "labels": dict(LABELS)},
        # ClusterIP only: MLflow has no authentication here; reach it with kubectl port-forward.
        "spec": {"type": "ClusterIP", "selector": dict(LABELS),
                 "ports": [{"name": "http", "protocol": "TCP", "port": MLFLOW_PORT, "targetPort": "http"}]},
    }


def ray_token_command(s: Settings) -> str:
    """The shell line that puts the Ray job's token into the environment the Ray CLI and SDK read (RAY_AUTH_MODE,
    RAY_AUTH_TOKEN). KubeRay keeps the token in a Secret labelled `ray.io/cluster: <RayCluster>` (its name is the
    RayCluster's, shortened past 50 characters: utils.CheckName), and the RayCluster's name has a random suffix: it is
    the RayJob's `status.rayClusterName`. The token stays in the Secret, the cluster and this shell."""
    k = f"kubectl --kubeconfig kubeconfig -n {shlex.quote(ray_namespace(s))}"
    cluster = f"$({k} get rayjob {shlex.quote(s.job.name)} -o jsonpath='{{.status.rayClusterName}}')"
    return (f"export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=\"$({k} get secret -l {RAY_CLUSTER_LABEL}={cluster} "
            f"-o jsonpath='{{.items[0].data.{RAY_AUTH_TOKEN_KEY}}}' | base64 -d)\"")


def port_forward_commands(s: Settings) -> dict[str, str]:
    """kubectl commands for the two UIs that are deliberately not exposed, and the Ray job's token they need. KubeRay
    gives a RayJob's head a stable Service `<rayjob name>-head-svc` (utils.GenerateHeadServiceName for RayJobCRD) in
    the Ray pods' namespace, which follows the job across retries, unlike the generated RayCluster name. The Ray
    dashboard and job API ask for the token (RayJob authOptions.mode token): `ray_auth_env` exports it, then
    `ray job list --address http://localhost:8265` (or the dashboard's token prompt) works through the forward."""
    head_svc = shlex.quote(f"svc/{s.job.name}-head-svc")
    out = {"ray_dashboard_port_forward":
           f"kubectl --kubeconfig kubeconfig -n {shlex.quote(ray_namespace(s))} port-forward {head_svc} "
           f"{RAY_DASHBOARD_PORT}:{RAY_DASHBOARD_PORT}",
           "ray_auth_env": ray_token_command(s)}
    if s.tracking.enabled:
        ns = shlex.quote(s.job.namespace)
        out["mlflow_port_forward"] = (f"kubectl --kubeconfig kubeconfig -n {ns} port-forward svc/{MLFLOW_SERVICE} "
                                      f"{MLFLOW_PORT}:{MLFLOW_PORT}")
    return out


# --------------------------------------------------------------------------------------------- component
@dataclass(kw_only=True)
class TrackingArgs:
    settings: Settings
    cluster: ClusterRefs
    storage: StorageRefs
    identity: WorkloadIdentity
    # The Pulumi-owned backend disk (components/cloud/cluster.py, tracking.backend_disk: owned); None = dynamic PVC.
    backend_disk_id: Optional[pulumi.Input[str]] = None


class Tracking(pulumi.ComponentResource):
    """The MLflow server, its backend disk, its artifact volume and its Service."""

    def __init__(self, name: str, args: TrackingArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("verl-ack:tracking:Tracking", name, None, opts)
        s = args.settings
        if not s.tracking.enabled:
            raise ValueError("Tracking is created only when tracking.enabled is true")
        provider = args.cluster.k8s_provider
        ns = args.identity.namespace
        st = args.storage

        def child(depends_on: list[pulumi.Resource], **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on, **extra)

        # Namespaced objects wait for the workload namespace; volumes also for the CSI drivers that serve them.
        in_namespace = list(args.identity.resources)
        csi = list(args.cluster.addons.csi)
        vol = artifacts_volume(s)
        self.artifacts_pv = k8s.core.v1.PersistentVolume(
            f"{name}-artifacts-pv",
            **resource_kwargs(persistent_volume(
                s, vol, namespace=ns, bucket=st.bucket_name, endpoint=st.endpoint, auth=st.auth,
                role_name=st.csi_role_name, access_key_secret=st.access_key_secret_name)),
            # OSS capacity is nominal; changing it must not replace a bound volume (see training.py).
            opts=child(csi, ignore_changes=["spec.capacity"]))
        # The claim names the PV by a plain string: the edge makes Pulumi create the PV first.
        self.artifacts_pvc = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-artifacts-pvc", **resource_kwargs(persistent_volume_claim(s, vol, namespace=ns)),
            opts=child([*in_namespace, self.artifacts_pv], ignore_changes=["spec.resources"]))
        self.backend_pv: k8s.core.v1.PersistentVolume | None = None
        if args.backend_disk_id is not None:
            self.backend_pv = k8s.core.v1.PersistentVolume(
                f"{name}-backend-pv", **resource_kwargs(backend_pv_manifest(s, args.backend_disk_id)),
                # A bigger tracking.disk_gib grows the ECS disk in place; the bound volume and claim are not replaced.
                opts=child(csi, ignore_changes=["spec.capacity"]))
        static = {"ignore_changes": ["spec.resources"]} if self.backend_pv is not None else {}
        self.backend_pvc = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-backend-pvc", **resource_kwargs(backend_pvc_manifest(s, static=self.backend_pv is not None)),
            opts=child([*in_namespace, *csi, *([self.backend_pv] if self.backend_pv else [])], **static))
        # The pod mounts both claims by name and runs on the system pool (cluster.ready).
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-server", **resource_kwargs(deployment_manifest(s, args.identity.tracking_service_account)),
            opts=child([*in_namespace, self.backend_pvc, self.artifacts_pvc, *args.cluster.ready]))
        self.service = k8s.core.v1.Service(
            f"{name}-service", **resource_kwargs(service_manifest(s)), opts=child(in_namespace))
        # MLflow accepts any write without authentication: only the Ray pods may reach it.
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-ingress", **resource_kwargs(mlflow_network_policy_manifest(s, LABELS)), opts=child(in_namespace))
        self.tracking_uri = tracking_uri(s)
        self.register_outputs({"tracking_uri": self.tracking_uri})

