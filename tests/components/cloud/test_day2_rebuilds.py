"""Day 2: no accidental rebuilds, and what a new cluster waits for (issue 19 items 8 and 12)."""

from __future__ import annotations

from components.cloud.ingress import certificate_name_for
from components.config import PROJECT, STACKS_DIR
from offline import fakes
from offline.engine import run_program
from offline.plan import stack_config
from tests.components.cloud.test_common import EXISTING_VPC, NEW_VPC, depends_on, settings_of
from tests.conftest import REPO, record

CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
SNAT = "alicloud:vpc/snatEntry:SnatEntry"


def test_a_new_cluster_waits_for_every_snat_entry_so_acks_own_snat_default_cannot_race_them():
    rec = record("dev", NEW_VPC)
    cluster = rec.get(CLUSTER, "ack-cluster")
    assert rec.by_type(SNAT) and all(depends_on(cluster, e) for e in rec.by_type(SNAT))


def test_a_cluster_in_a_given_vpc_waits_for_no_snat_entries():
    rec = record("dev", EXISTING_VPC)
    assert not rec.by_type(SNAT)
    rec.get(CLUSTER, "ack-cluster")


# ------------------------------------------------------------------------------------------------ certificate renewal
CERT = "alicloud:cas/serviceCertificate:ServiceCertificate"
ALBCONFIG = "kubernetes:alibabacloud.com/v1:AlbConfig"


def render_with_certificate(pem: str):
    config, secret_keys, _ = stack_config(STACKS_DIR / "Pulumi.dev.yaml", {"tlsCertificate": pem})
    return run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack="dev")


def test_a_renewed_certificate_gets_a_new_name_and_the_albconfig_moves_to_its_id_before_the_old_is_deleted():
    old, new = render_with_certificate("-----BEGIN CERTIFICATE-----\nold\n"), \
        render_with_certificate("-----BEGIN CERTIFICATE-----\nnew\n")
    old_cert, new_cert = old.get(CERT, "ingress-cert"), new.get(CERT, "ingress-cert")
    s = settings_of("dev")
    assert old_cert.inputs["certificateName"] != new_cert.inputs["certificateName"], "names are unique per account"
    assert new_cert.inputs["certificateName"] == certificate_name_for(s, "-----BEGIN CERTIFICATE-----\nnew\n")
    assert new_cert.inputs["cert"] == "[secret]" and new_cert.inputs["key"] == "[secret]"
    assert not new_cert.options["delete_before_replace"], "create-before-delete: the listener is never without one"

    def listener_certificate(rec) -> str:
        spec = rec.get(ALBCONFIG, "ingress-albconfig").inputs["spec"]
        return spec["listeners"][0]["certificates"][0]["CertificateId"]

    assert listener_certificate(old) != listener_certificate(new)
    assert listener_certificate(new).startswith(f"{fakes.resource_id(CERT, 'ingress-cert', new_cert.inputs)}-")
    assert depends_on(new.get(ALBCONFIG, "ingress-albconfig"), new_cert)


# ------------------------------------------------------------------------------------------------ MLflow disk
DISK = "alicloud:ecs/ecsDisk:EcsDisk"


def test_the_mlflow_backend_disk_is_owned_by_pulumi_and_deleted_only_after_the_cluster():
    rec = record("dev")
    s = settings_of("dev")
    disk, cluster = rec.get(DISK, "ack-mlflow-disk"), rec.get(CLUSTER, "ack-cluster")
    assert (disk.inputs["zoneId"], disk.inputs["size"]) == (s.zones[0], s.tracking.disk_gib)
    assert disk.inputs["paymentType"] == "PayAsYouGo"
    # Destroy deletes dependents first: the pools, then the cluster (no node holds the disk any more), then it.
    assert depends_on(cluster, disk)
    pv = rec.get("kubernetes:core/v1:PersistentVolume", "tracking-backend-pv").inputs["spec"]
    assert pv["csi"]["driver"] == "diskplugin.csi.alibabacloud.com"
    assert pv["csi"]["volumeHandle"] == fakes.resource_id(DISK, "ack-mlflow-disk", disk.inputs)
    assert pv["persistentVolumeReclaimPolicy"] == "Retain", "Pulumi deletes the disk, not the CSI provisioner"
    pvc = rec.get("kubernetes:core/v1:PersistentVolumeClaim", "tracking-backend-pvc").inputs["spec"]
    assert pvc["volumeName"] == rec.get("kubernetes:core/v1:PersistentVolume", "tracking-backend-pv").inputs[
        "metadata"]["name"] and pvc["storageClassName"] == ""


def test_an_existing_cluster_keeps_the_dynamically_provisioned_backend_disk():
    rec = record("existing-ecs")
    assert not rec.by_type(DISK)
    pvc = rec.get("kubernetes:core/v1:PersistentVolumeClaim", "tracking-backend-pvc").inputs["spec"]
    assert pvc["storageClassName"] == settings_of("existing-ecs").tracking.storage_class and "volumeName" not in pvc
