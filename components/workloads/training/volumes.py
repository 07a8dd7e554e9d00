"""OSS volumes of the training job: static PersistentVolumes and their claims through the OSS CSI driver.

One bucket, three prefixes, three volumes (pure functions; `components/workloads/training/component.py` creates them):

| volume      | bucket prefix      | FUSE                 | access        | why |
|-------------|--------------------|----------------------|---------------|-----|
| datasets    | datasets_prefix    | ossfs 2.0, read-only | ReadOnlyMany  | parquet files, read sequentially |
| models      | models_prefix      | ossfs 2.0, read-only | ReadOnlyMany  | safetensors read once at start |
| checkpoints | checkpoints_prefix | ossfs 1.0            | ReadWriteMany | every actor rank writes its shard |

ossfs 2.0 is the CSI driver's choice for read-only / sequential-append AI data and ossfs 1.0 for general
read-write (alibaba-cloud-csi-driver docs/oss.md). The `volumeAttributes` keys (`bucket`, `url`, `path`,
`fuseType`, `authType`, `roleName`, `otherOpts`) are the ones the driver parses (pkg/oss/utils.go; see
../shared/research/alicloud.md §5c). With `storage.auth: rrsa` the FUSE pods assume the RAM role the cloud
layer trusts for `ack-csi-fuse/csi-fuse-ossfs`; `access_key` falls back to a Secret with `akId`/`akSecret`.
The tutorial's debug options (`-o dbglevel=debug -o curldbg`) are not used: they log every request. A
ReadOnlyMany volume is mounted read-only by the driver itself (`ro`; pkg/oss/utils.go).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Literal, Optional

from components.config import Settings
from components.wiring import checkpoint_key_prefix, dataset_files, model_path

CSI_DRIVER = "ossplugin.csi.alibabacloud.com"
# Where the volumes appear in the Ray pods. Fixed paths: the verl command line and the checkpoint layout
# the teardown tool reads are derived from them.
MOUNT_ROOT = "/mnt/oss"

VolumeKind = Literal["datasets", "models", "checkpoints"]
# ossfs 2.0 ignores PV mountOptions; options go in otherOpts. close_to_open=false: do not re-check metadata on
# every open, safe because nothing rewrites these objects while a job reads them.
OSSFS2_READ_ONLY_OPTS = "-o close_to_open=false"
# ossfs 1.0 for checkpoints: no options. The CSI driver adds allow_other itself
# (pkg/mounter/fuse_pod_manager/oss/ossfs/manager.go) and ossfs's default umask keeps each file's own mode, so
# the official image (root) and the built image (uid 1000, gid 0) can both write. The tutorial's umask=022
# would hide write access from a non-root trainer.
OSSFS_READ_WRITE_OPTS = ""


@dataclass(frozen=True)
class OssVolume:
    kind: VolumeKind
    name: str  # PV name == PVC name == CSI volumeHandle (the driver requires volumeHandle == PV name)
    prefix: str  # bucket key prefix the volume exposes, e.g. "checkpoints/"
    fuse_type: Literal["ossfs", "ossfs2"]
    access_mode: Literal["ReadOnlyMany", "ReadWriteMany"]
    other_opts: str
    mount_path: str

    @property
    def read_only(self) -> bool:
        return self.access_mode == "ReadOnlyMany"

    def path_of(self, key: str) -> str:
        """Path inside the mount of a bucket key (or key prefix) that lies under this volume's prefix."""
        if not key.startswith(self.prefix):
            raise ValueError(f"object key {key!r} is not under the {self.kind} volume's prefix {self.prefix!r}")
        rest = key[len(self.prefix):].strip("/")
        return posixpath.join(self.mount_path, rest) if rest else self.mount_path


def oss_volumes(s: Settings) -> dict[str, OssVolume]:
    """The three volumes, keyed by kind, in a fixed order."""
    st = s.storage

    def vol(kind: VolumeKind, prefix: str, read_only: bool) -> OssVolume:
        return OssVolume(
            kind=kind,
            # PVs are cluster-scoped: the environment name keeps two stacks on one cluster apart.
            name=f"{s.name}-{kind}",
            prefix=prefix,
            fuse_type="ossfs2" if read_only else "ossfs",
            access_mode="ReadOnlyMany" if read_only else "ReadWriteMany",
            other_opts=OSSFS2_READ_ONLY_OPTS if read_only else OSSFS_READ_WRITE_OPTS,
            mount_path=f"{MOUNT_ROOT}/{kind}",
        )

    return {
        "datasets": vol("datasets", st.datasets_prefix, True),
        "models": vol("models", st.models_prefix, True),
        "checkpoints": vol("checkpoints", st.checkpoints_prefix, False),
    }


def _labels(vol: OssVolume) -> dict[str, str]:
    # alicloud-pvname: the label ACK's OSS examples select static volumes by.
    return {"alicloud-pvname": vol.name, "app.kubernetes.io/part-of": "verl-ack",
            "app.kubernetes.io/component": "training-storage"}


def csi_url(s: Settings, endpoint: Any) -> Any:
    """The PV's `url`. Without a scheme the CSI driver mounts an `-internal` endpoint over http://
    (alibaba-cloud-csi-driver pkg/oss/utils.go setTransmissionProtocol), which a bucket policy that requires HTTPS
    (storage.require_https) refuses; the explicit https:// is kept as given. An experiment stack's endpoint is an
    Output of its platform reference; the same rule applies to its value."""
    if not isinstance(endpoint, str):
        return endpoint.apply(lambda e: csi_url(s, e))
    if s.storage.require_https and "://" not in endpoint:
        return f"https://{endpoint}"
    return endpoint


def persistent_volume(s: Settings, vol: OssVolume, *, namespace: str, bucket: Any, endpoint: Any, auth: str,
                      role_name: Optional[Any] = None, access_key_secret: Optional[str] = None,
                      access_key_namespace: Optional[str] = None) -> dict:
    """The static PV. `bucket` and `role_name` may be Outputs (the component passes them through)."""
    attributes: dict[str, Any] = {
        "bucket": bucket,
        "url": csi_url(s, endpoint),
        "path": "/" + vol.prefix.rstrip("/"),
        "fuseType": vol.fuse_type,
    }
    if vol.other_opts:
        attributes["otherOpts"] = vol.other_opts
    csi: dict[str, Any] = {"driver": CSI_DRIVER, "volumeHandle": vol.name, "volumeAttributes": attributes}
    if auth == "rrsa":
        if role_name is None:
            raise ValueError("storage.auth=rrsa but the storage refs carry no csi_role_name (the RAM role the OSS "
                             "CSI FUSE pods assume); the cloud layer must create it")
        attributes["authType"] = "rrsa"
        attributes["roleName"] = role_name
    elif auth == "access_key":
        if not access_key_secret:
            raise ValueError("storage.auth=access_key but the storage refs carry no access_key_secret_name (a Secret "
                             "with akId/akSecret)")
        csi["nodePublishSecretRef"] = {"name": access_key_secret, "namespace": access_key_namespace or namespace}
    else:
        raise ValueError(f"storage auth {auth!r} is neither rrsa nor access_key")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": vol.name, "labels": _labels(vol)},
        "spec": {
            "capacity": {"storage": f"{s.storage.volume_capacity_gib}Gi"},
            "accessModes": [vol.access_mode],
            # Deleting the PV object never deletes objects in the bucket; Retain also keeps Kubernetes from
            # trying to recycle a static volume.
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "volumeMode": "Filesystem",
            # Pre-bound both ways: the claim names the volume and the volume reserves itself for the claim,
            # so no other claim in the cluster can take it.
            "claimRef": {"namespace": namespace, "name": vol.name},
            "csi": csi,
        },
    }


def persistent_volume_claim(s: Settings, vol: OssVolume, *, namespace: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": vol.name, "namespace": namespace, "labels": _labels(vol)},
        "spec": {
            "accessModes": [vol.access_mode],
            "storageClassName": "",
            "volumeName": vol.name,
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": f"{s.storage.volume_capacity_gib}Gi"}},
        },
    }


def dataset_paths(s: Settings) -> tuple[str, str]:
    """(data.train_files, data.val_files) inside the datasets mount: the keys the dataset Job writes."""
    files = dataset_files(s)
    vol = oss_volumes(s)["datasets"]
    return vol.path_of(files.train), vol.path_of(files.test)


def model_volume(s: Settings) -> OssVolume:
    """The volume the model is read through: the models volume, or for a `model.source: oss` path under the
    checkpoints prefix (a run's Hugging Face export) the checkpoint volume (the settings refuse any other prefix)."""
    vols = oss_volumes(s)
    key = model_path(s)
    return vols["models"] if key.startswith(vols["models"].prefix) else vols["checkpoints"]


def model_dir(s: Settings) -> str:
    """actor_rollout_ref.model.path inside its mount: the prefix the model staging Job fills (or model.path)."""
    return model_volume(s).path_of(model_path(s))


# The model prefetch's memory-backed emptyDir in every Ray pod (job.model_prefetch, agent_tools/
# verl_ack_model_prefetch.py): the copy is <mount>/<model dir>/<cache key>, as under the models prefix, its marker
# beside it.
MODEL_COPY_VOLUME = "model-copy"
MODEL_COPY_MOUNT = "/mnt/model-copy"


def model_copy_dir(s: Settings) -> str:
    """Where the prefetch copies the staged model in each Ray pod (named by the same content address)."""
    vol = model_volume(s)
    rest = model_path(s)[len(vol.prefix):].rstrip("/")
    return f"{MODEL_COPY_MOUNT}/{rest}" if vol.kind == "models" else f"{MODEL_COPY_MOUNT}/{vol.kind}/{rest}"


def checkpoint_dir(s: Settings) -> str:
    """trainer.default_local_dir: the checkpoint prefix seen through the shared read-write volume."""
    return oss_volumes(s)["checkpoints"].path_of(checkpoint_key_prefix(s))
