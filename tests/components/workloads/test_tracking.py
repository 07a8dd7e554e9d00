"""The MLflow tracking server (components/workloads/tracking.py) and the port-forward commands."""

from __future__ import annotations

import fnmatch
from urllib.parse import urlparse

import pytest

from components.config import SettingsError
from components.wiring import StorageRefs, ray_namespace, tracking_uri
from components.workloads import tracking as tr
from tests.components.workloads.test_sandbox import assert_valid_core, settings
from tests.conftest import STACKS, record
from tests.snapshot import assert_snapshot

RRSA = StorageRefs(bucket_name="verl-ack-dev-data", endpoint="oss-ap-southeast-1-internal.aliyuncs.com", auth="rrsa",
                   csi_role_name="verl-dev-oss-csi")
SA = "verl-mlflow"


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def mlflow_accepts_host(allowed: list[str], host: str) -> bool:
    # mlflow.server.security_utils.is_allowed_host_header: exact match, or fnmatch for patterns with '*'.
    return any(fnmatch.fnmatch(host, a) if "*" in a else host == a for a in allowed)


def test_server_keeps_runs_in_sqlite_on_the_disk_and_serves_artifacts_from_the_oss_volume():
    cmd = tr.server_command(settings())
    assert cmd[:2] == ["mlflow", "server"]
    assert flag(cmd, "--backend-store-uri") == f"sqlite:///{tr.BACKEND_DIR}/mlflow.db"
    assert "--serve-artifacts" in cmd
    assert flag(cmd, "--artifacts-destination") == tr.ARTIFACTS_DIR
    assert (flag(cmd, "--host"), flag(cmd, "--port")) == ("0.0.0.0", "5000")
    dep = tr.deployment_manifest(settings(), SA)
    mounts = {m["name"]: m["mountPath"] for m in dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert (mounts["backend"], mounts["artifacts"]) == (tr.BACKEND_DIR, tr.ARTIFACTS_DIR)


@pytest.mark.parametrize("stack", STACKS)
def test_the_tracking_uri_host_and_port_forward_host_pass_mlflows_host_check(stack):
    s = settings(stack)
    allowed = flag(tr.server_command(s), "--allowed-hosts").split(",")
    assert mlflow_accepts_host(allowed, urlparse(tracking_uri(s)).netloc)
    assert mlflow_accepts_host(allowed, "localhost:5000")
    assert mlflow_accepts_host(allowed, f"mlflow.{s.job.namespace}:5000")
    assert not mlflow_accepts_host(allowed, "evil.example.com")


def test_one_replica_recreated_on_update_on_the_system_pool():
    s = settings()
    dep = tr.deployment_manifest(s, SA)
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"verl-ack/pool": "system"}
    assert pod["serviceAccountName"] == SA
    (c,) = pod["containers"]
    assert c["image"] == s.versions.mlflow_image
    want = {"cpu": s.tracking.cpu, "memory": s.tracking.memory}
    assert c["resources"]["requests"] == c["resources"]["limits"] == want
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}


def test_backend_disk_uses_the_tracking_storage_class():
    s = settings("dev", {"tracking": {"storage_class": "alicloud-disk-essd", "disk_gib": 40}})
    pvc = tr.backend_pvc_manifest(s)
    assert pvc["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "alicloud-disk-essd",
                           "resources": {"requests": {"storage": "40Gi"}}}


def test_artifact_volume_is_the_tracking_prefix_of_the_bucket():
    s = settings()
    pv = tr.persistent_volume(s, tr.artifacts_volume(s), namespace="verl", bucket=RRSA.bucket_name,
                              endpoint=RRSA.endpoint, auth="rrsa", role_name=RRSA.csi_role_name)
    attrs = pv["spec"]["csi"]["volumeAttributes"]
    assert attrs["path"] == "/mlflow"
    assert (attrs["authType"], attrs["roleName"]) == ("rrsa", "verl-dev-oss-csi")
    assert attrs["fuseType"] == "ossfs"
    assert "-o uid=65534" in attrs["otherOpts"] and "-o gid=65534" in attrs["otherOpts"]


def test_service_is_cluster_internal_on_port_5000():
    svc = tr.service_manifest(settings())
    assert svc["metadata"]["name"] == "mlflow"
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "http", "protocol": "TCP", "port": 5000, "targetPort": "http"}]


def test_port_forward_commands_use_the_rayjob_head_service_in_the_ray_namespace_and_the_mlflow_service():
    s = settings("multinode")  # RDMA: the Ray pods (and their head Service) live in verl-ray
    cmds = tr.port_forward_commands(s)
    assert cmds["ray_dashboard_port_forward"] == (
        "kubectl --kubeconfig kubeconfig -n verl-ray port-forward svc/verl-grpo-7b-2x8-head-svc 8265:8265")
    assert cmds["mlflow_port_forward"] == "kubectl --kubeconfig kubeconfig -n verl port-forward svc/mlflow 5000:5000"


@pytest.mark.parametrize("stack", STACKS)
def test_every_tracking_object_validates_strictly(stack):
    s = settings(stack)
    vol = tr.artifacts_volume(s)
    for obj in (tr.backend_pvc_manifest(s), tr.deployment_manifest(s, SA), tr.service_manifest(s),
                tr.persistent_volume(s, vol, namespace="verl", bucket="b", endpoint="e", auth="rrsa", role_name="r"),
                tr.persistent_volume_claim(s, vol, namespace="verl")):
        assert_valid_core(obj, s.cluster.schema_version)


def test_dev_tracking_manifests_match_their_snapshot():
    s = settings()
    assert_snapshot("dev.tracking.yaml", [tr.deployment_manifest(s, SA), tr.service_manifest(s),
                                          tr.backend_pvc_manifest(s)])


# --------------------------------------------------------------------------------------------- component
def test_recorded_server_waits_for_both_claims_and_the_claim_for_its_volume():
    rec = record("dev")
    dep = rec.get("kubernetes:apps/v1:Deployment", "tracking-server")
    backend = rec.get("kubernetes:core/v1:PersistentVolumeClaim", "tracking-backend-pvc")
    artifacts = rec.get("kubernetes:core/v1:PersistentVolumeClaim", "tracking-artifacts-pvc")
    pv = rec.get("kubernetes:core/v1:PersistentVolume", "tracking-artifacts-pv")
    assert {backend.urn, artifacts.urn} <= set(dep.dependencies)
    assert pv.urn in artifacts.dependencies
    (comp,) = rec.by_type("verl-ack:tracking:Tracking")
    assert all(r.parent == comp.urn for r in (dep, backend, artifacts, pv))


def test_mlflow_is_not_exposed_through_any_ingress():
    rec = record("dev")
    for ing in rec.by_type("kubernetes:networking.k8s.io/v1:Ingress"):
        assert "mlflow" not in repr(ing.inputs), ing.urn
    assert rec.get("kubernetes:core/v1:Service", "tracking-service").inputs["spec"]["type"] == "ClusterIP"


def test_tracking_outputs_are_exported():
    out = record("dev").outputs
    assert out["tracking_uri"] == "http://mlflow.verl.svc.cluster.local:5000"
    assert out["mlflow_port_forward"] == "kubectl --kubeconfig kubeconfig -n verl port-forward svc/mlflow 5000:5000"
    assert out["ray_dashboard_port_forward"] == (
        "kubectl --kubeconfig kubeconfig -n verl port-forward svc/verl-grpo-head-svc 8265:8265")


@pytest.mark.parametrize("stack", STACKS)
def test_the_token_command_reads_kuberays_secret_of_the_jobs_ray_cluster_and_never_holds_a_token(stack):
    s = settings(stack)
    cmd = tr.port_forward_commands(s)["ray_auth_env"]
    ns = ray_namespace(s)
    assert cmd.startswith("export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=")
    # the RayCluster KubeRay made for this RayJob, and the Secret it labelled with that cluster's name
    assert f"-n {ns} get rayjob {s.job.name} -o jsonpath='{{.status.rayClusterName}}'" in cmd
    assert f"-n {ns} get secret -l ray.io/cluster=$(" in cmd
    assert "{.items[0].data.auth_token}' | base64 -d" in cmd
    assert "RAY_AUTH_TOKEN=\"$(" in cmd, "the token is read at run time, not written into the output"


def test_an_experiment_exports_the_token_command_with_its_port_forward():
    out = record("dev-grpo").outputs
    assert out["ray_auth_env"] == tr.port_forward_commands(settings("dev-grpo"))["ray_auth_env"]
    assert "ray_auth_env" not in record("dev-platform").outputs


def test_disabled_tracking_creates_no_server_and_exports_no_uri():
    rec = record("dev", {"tracking": {"enabled": False},
                         "training": {"logger": ["console"]}})
    assert rec.by_type("verl-ack:tracking:Tracking") == []
    assert "tracking_uri" not in rec.outputs and "mlflow_port_forward" not in rec.outputs
    assert "ray_dashboard_port_forward" in rec.outputs


# --------------------------------------------------------------------------------------------- bad input
BAD = [
    ({"tracking": {"storage_class": None}}, "tracking", "needs storage_class"),
    ({"tracking": {"storage_class": ""}}, "tracking", "needs storage_class"),
    ({"tracking": {"storage_class": "Not_A_Class"}}, "tracking.storage_class", "StorageClass name"),
    ({"tracking": {"enabled": False}}, "training.logger", "pod-local sqlite"),
    ({"tracking": {"cpu": "0"}}, "tracking.cpu", "not zero"),
]


@pytest.mark.parametrize("overrides,field,text", BAD, ids=[str(b[0]) for b in BAD])
def test_bad_tracking_settings_are_refused_naming_the_field(overrides, field, text):
    with pytest.raises(SettingsError) as info:
        settings("dev", overrides)
    found = [str(p) for p in info.value.problems]
    assert any(p.startswith(field) and text in p for p in found), found
