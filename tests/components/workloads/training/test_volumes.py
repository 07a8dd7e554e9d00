"""OSS volumes: static PVs and claims through the OSS CSI driver, valid core objects, the right FUSE client and
access mode per volume, RRSA (or the AccessKey fallback), no debug mount options."""

from __future__ import annotations

import kubernetes_validate
import pytest

from components.config import Settings
from components.wiring import dataset_files, model_path, oss_endpoint
from components.workloads.training.volumes import (
    CSI_DRIVER,
    checkpoint_dir,
    checkpoint_key_prefix,
    dataset_paths,
    model_dir,
    oss_volumes,
    persistent_volume,
    persistent_volume_claim,
)
from tests.components.workloads.training.test_rayjob import settings_for


def k8s_validate(obj: dict, s: Settings) -> None:
    """kubernetes-validate in strict mode (unknown fields are errors) for the stack's Kubernetes minor."""
    kubernetes_validate.validate(obj, s.cluster.schema_version, strict=True)


def rendered(s: Settings, auth: str = "rrsa") -> list[tuple[dict, dict]]:
    out = []
    for vol in oss_volumes(s).values():
        pv = persistent_volume(s, vol, namespace=s.job.namespace, bucket=s.storage.bucket_name,
                               endpoint=oss_endpoint(s.region), auth=auth, role_name="verl-oss-csi",
                               access_key_secret="oss-ak")
        out.append((pv, persistent_volume_claim(s, vol, namespace=s.job.namespace)))
    return out


def test_kubernetes_validate_ships_schemas_for_every_stacks_version(stack_name):
    s = settings_for(stack_name)
    versions = {v.rsplit(".", 1)[0] for v in kubernetes_validate.utils.all_versions()}
    assert s.cluster.schema_version in versions


def test_every_pv_and_claim_is_a_valid_core_object(stack_name):
    s = settings_for(stack_name)
    for auth in ("rrsa", "access_key"):
        for pv, pvc in rendered(s, auth):
            k8s_validate(pv, s)
            k8s_validate(pvc, s)


def test_the_strict_core_schema_check_can_fail():
    s = settings_for("dev")
    pv, _ = rendered(s)[0]
    pv["spec"]["reclaimPolicy"] = "Retain"  # a misspelt field
    with pytest.raises(kubernetes_validate.ValidationError):
        k8s_validate(pv, s)


def test_data_and_models_are_read_only_ossfs2_and_checkpoints_are_shared_read_write_ossfs():
    s = settings_for("dev")
    want = {"datasets": ("ossfs2", "ReadOnlyMany", "/datasets"), "models": ("ossfs2", "ReadOnlyMany", "/models"),
            "checkpoints": ("ossfs", "ReadWriteMany", "/checkpoints")}
    for (pv, pvc), (kind, (fuse, mode, path)) in zip(rendered(s), want.items(), strict=True):
        attrs = pv["spec"]["csi"]["volumeAttributes"]
        assert (attrs["fuseType"], pv["spec"]["accessModes"], pvc["spec"]["accessModes"], attrs["path"]) == \
            (fuse, [mode], [mode], path), kind


def test_static_volumes_are_retained_prebound_and_named_by_their_handle(stack_name):
    s = settings_for(stack_name)
    for pv, pvc in rendered(s):
        name = pv["metadata"]["name"]
        assert name.startswith(f"{s.name}-")
        spec = pv["spec"]
        assert spec["csi"]["driver"] == CSI_DRIVER == "ossplugin.csi.alibabacloud.com"
        assert spec["csi"]["volumeHandle"] == name  # the OSS driver requires volumeHandle == PV name
        assert spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["storageClassName"] == "" == pvc["spec"]["storageClassName"]
        assert spec["claimRef"] == {"namespace": s.job.namespace, "name": pvc["metadata"]["name"]}
        assert pvc["spec"]["volumeName"] == name and pvc["metadata"]["namespace"] == s.job.namespace
        attrs = spec["csi"]["volumeAttributes"]
        assert attrs["bucket"] == s.storage.bucket_name
        # https:// explicitly: the bucket refuses plain HTTP (storage.require_https) and the driver would pick it
        assert attrs["url"] == f"https://oss-{s.region}-internal.aliyuncs.com"


def test_rrsa_mounts_assume_the_csi_role_and_carry_no_secret_reference():
    for pv, _ in rendered(settings_for("dev"), "rrsa"):
        csi = pv["spec"]["csi"]
        assert csi["volumeAttributes"]["authType"] == "rrsa"
        assert csi["volumeAttributes"]["roleName"] == "verl-oss-csi"
        assert "nodePublishSecretRef" not in csi


def test_the_access_key_fallback_uses_a_node_publish_secret():
    s = settings_for("dev")
    for pv, _ in rendered(s, "access_key"):
        csi = pv["spec"]["csi"]
        assert csi["nodePublishSecretRef"] == {"name": "oss-ak", "namespace": s.job.namespace}
        assert "authType" not in csi["volumeAttributes"] and "roleName" not in csi["volumeAttributes"]


def test_missing_credentials_for_the_chosen_auth_are_refused():
    s = settings_for("dev")
    vol = oss_volumes(s)["models"]
    with pytest.raises(ValueError, match="csi_role_name"):
        persistent_volume(s, vol, namespace="verl", bucket="b", endpoint="e", auth="rrsa")
    with pytest.raises(ValueError, match="access_key_secret_name"):
        persistent_volume(s, vol, namespace="verl", bucket="b", endpoint="e", auth="access_key")


def test_no_debug_mount_options(stack_name):
    for pv, _ in rendered(settings_for(stack_name)):
        opts = pv["spec"]["csi"]["volumeAttributes"].get("otherOpts", "")
        assert "dbglevel" not in opts and "curldbg" not in opts
        assert "mountOptions" not in pv["spec"]  # ossfs 2.0 ignores them; options go in otherOpts


def test_paths_inside_the_mounts_are_the_bucket_keys_the_jobs_use(stack_name):
    s = settings_for(stack_name)
    vols = oss_volumes(s)
    files = dataset_files(s)
    train, val = dataset_paths(s)
    assert train == vols["datasets"].mount_path + "/" + files.train[len(s.storage.datasets_prefix):]
    assert val == vols["datasets"].mount_path + "/" + files.test[len(s.storage.datasets_prefix):]
    assert model_dir(s) == vols["models"].mount_path + "/" + model_path(s)[len(s.storage.models_prefix):].rstrip("/")
    assert checkpoint_key_prefix(s) == f"{s.storage.checkpoints_prefix}{s.training.project_name}/" \
                                       f"{s.training.experiment_name}/"
    t = s.training
    assert checkpoint_dir(s) == f"{vols['checkpoints'].mount_path}/{t.project_name}/{t.experiment_name}"


def test_a_key_outside_a_volumes_prefix_is_refused():
    vol = oss_volumes(settings_for("dev"))["models"]
    with pytest.raises(ValueError, match="not under the models volume's prefix"):
        vol.path_of("datasets/gsm8k/train.parquet")


def test_a_changed_nominal_oss_capacity_never_replaces_a_bound_volume_or_claim():
    from tests.conftest import record

    rec = record("dev")
    for r in rec.resources:
        if r.type == "kubernetes:core/v1:PersistentVolume" and r.inputs["spec"].get("csi", {}).get(
                "driver") == "ossplugin.csi.alibabacloud.com":
            assert r.options["ignore_changes"] == ["spec.capacity"], r.name
        if r.type == "kubernetes:core/v1:PersistentVolumeClaim" and r.inputs["spec"].get("storageClassName") == "":
            assert r.options["ignore_changes"] == ["spec.resources"], r.name
