"""The training image: which image the job runs, and the ACR repository a built image is pushed to.

`image.source: official` runs `versions.verl_image` pinned by `versions.verl_image_digest` (Docker Hub
`verlai/verl`, which ships verl's dependencies but not verl) and installs the pinned verl, mlflow and
fastmcp at job start through the RayJob's runtime env. `image.source: built` runs the image built from
`image/` (tag = content hash of that folder, what `.github/workflows/image.yml` pushes) from an ACR
repository, with nothing installed at start. Nodes pull private ACR images through the
`managed-aliyun-acr-credential-helper` add-on, so no imagePullSecrets are needed.
"""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path

import pulumi
import pulumi_alicloud as alicloud

from components.cloud.addon_config import addon_config
from components.config import REPO_ROOT, Settings, addon_installed
from components.wiring import PREPULL_SERVICE_ACCOUNT, TRAINING_SERVICE_ACCOUNT, ClusterRefs, ray_namespace

IMAGE_DIR = REPO_ROOT / "image"


@cache
def _image_tag_module():
    # image/tag.py is shared with the image workflow, which runs it as a script before any install.
    spec = importlib.util.spec_from_file_location("verl_ack_image_tag", IMAGE_DIR / "tag.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def image_tag(s: Settings, image_dir: Path = IMAGE_DIR) -> str:
    """The tag a built image carries: the stack's explicit tag, else the content hash of image/."""
    return s.image.tag or _image_tag_module().image_tag(image_dir)


def registry_repository(s: Settings) -> str:
    """host/namespace/repository the built image is pushed to and pulled from."""
    if s.image.registry == "existing":
        return s.image.existing_repository  # type: ignore[return-value]
    return f"{s.registry_namespace()}/{s.image.repository}"


def sandbox_repository(s: Settings) -> str:
    """Repository name of the mirrored code-interpreter image (upstream's, e.g. `code-interpreter`)."""
    return s.versions.code_interpreter_image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]


def training_image(s: Settings) -> str:
    if s.image.source == "official":
        # repository:tag@sha256:…, the reference the pre-pull DaemonSet pulls too (both take this function's value).
        return s.versions.verl_image_ref()
    ref = f"{registry_repository(s)}:{image_tag(s)}"
    # Pinned by digest when the stack gives one (platform stacks must): a re-pushed tag cannot change what runs.
    return f"{ref}@{s.image.digest}" if s.image.digest else ref


# ACR hosts that name their region: Personal Edition registry[-vpc].<region>.aliyuncs.com, Enterprise Edition
# <instance>-registry[-vpc].<region>.cr.aliyuncs.com.
_ACR_HOST_REGION = re.compile(r"(?:[a-z0-9-]+-)?registry(?:-[a-z]+)*\.([a-z0-9-]+)\.(?:cr\.)?aliyuncs\.com")


def credential_helper_config(s: Settings) -> dict:
    """Config of managed-aliyun-acr-credential-helper: the stack's `image.credential_helper_config` when given,
    else derived. The helper attaches its pull Secret only to the namespaces and service accounts its config
    names (default: `default` SAs of the `default` namespace), so the derived config names the job namespace (and the
    RDMA Ray pods' own, wiring.ray_namespace, where the RayJob and its submitter run) and
    the service accounts whose pods pull the built image: the RayJob's pods (verl-train) and the pre-pull
    DaemonSet and the KubeRay submitter Job (`default`), and the sandbox namespace when its pods pull a mirrored
    code-interpreter image (as `default`). A platform stack serves experiments whose namespaces it
    does not know (each brings its own job.namespace), so it watches `all` namespaces, still for those two service
    accounts only. `AcrInstanceInfo` names the instance: instanceId for Enterprise (empty for Personal), regionId
    from the registry host. Keys and JSON spelling: docs/facts.md §5 (Alibaba's helper page for the labels, a
    recorded InstallClusterAddons call for the JSON)."""
    img = s.image
    if img.credential_helper_config:
        return dict(img.credential_helper_config)
    host = registry_repository(s).split("/", 1)[0]
    match = _ACR_HOST_REGION.fullmatch(host)
    # The warm sandboxes (and their pre-pull) pull a mirrored code-interpreter image as `default` of their namespace.
    mirrored = s.kind == "single" and s.sandbox.enabled and s.sandbox_image_mirrored()
    watched = [s.job.namespace, ray_namespace(s)] + ([s.sandbox.namespace] if mirrored else [])
    return {
        "AcrInstanceInfo": [{"instanceId": img.enterprise_instance_id or "", "regionId": match[1] if match else s.region}],
        "enableRRSA": False,
        "expiringThreshold": "15m",
        "serviceAccount": ",".join(dict.fromkeys([TRAINING_SERVICE_ACCOUNT, PREPULL_SERVICE_ACCOUNT])),
        "watchNamespace": "all" if s.kind == "platform" else ",".join(dict.fromkeys(watched)),
    }


def runtime_pip_packages(s: Settings) -> list[str]:
    """What the job installs at start: the pins the built image bakes in, or nothing when it is built."""
    if s.image.source == "built":
        return []
    # transformers is pinned too: left to the resolver, verl's range would pull the newest 5.x, not the release
    # verl's CI (and the built image) runs with.
    v = s.versions
    return [f"verl=={v.verl}", f"transformers=={v.transformers}", f"mlflow=={v.mlflow}", f"fastmcp=={v.fastmcp}",
            f"mcp=={v.mcp}"]


class ImageRegistry(pulumi.ComponentResource):
    """ACR namespace + repository for a built image (when image.source=built) and the credential helper."""

    def __init__(self, name: str, settings: Settings, cluster: ClusterRefs, provider: pulumi.ProviderResource,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:image:Registry", name, None, opts)
        img = settings.image
        self.image = training_image(settings)
        self.ready: list[pulumi.Resource] = []
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        # A Personal Edition repository is created by hand once (the plan warns): cr.Namespace/cr.Repo drive the
        # Personal API of 2016-06-07, which the v2 provider bridged here no longer serves (docs/facts-provider.md).
        if img.source == "built" and img.registry == "enterprise":
            ns = alicloud.cs.RegistryEnterpriseNamespace(
                f"{name}-namespace", instance_id=img.enterprise_instance_id, name=img.namespace, auto_create=False,
                default_visibility="PRIVATE", opts=child)
            alicloud.cs.RegistryEnterpriseRepo(
                f"{name}-repo", instance_id=img.enterprise_instance_id, namespace=ns.name, name=img.repository,
                repo_type="PRIVATE", summary="verl training image built from image/ by the image workflow",
                # Tags are content hashes: the same tag must always mean the same bytes.
                tag_immutability=True, opts=child)
            if settings.sandbox.enabled and settings.sandbox_image_mirrored():
                # The namespace does not create repositories on push (auto_create=False): the mirror job's copy of
                # the code-interpreter image needs its repository. Its tags are upstream's releases, never re-pushed.
                alicloud.cs.RegistryEnterpriseRepo(
                    f"{name}-sandbox-repo", instance_id=img.enterprise_instance_id, namespace=ns.name,
                    name=sandbox_repository(settings), repo_type="PRIVATE",
                    summary="mirror of the code-interpreter sandbox image (image workflow, mirror job)",
                    tag_immutability=True, opts=child)
        if addon_installed(settings, "acr_credential_helper"):
            helper = settings.versions.addons["acr_credential_helper"]
            self.ready.append(alicloud.cs.KubernetesAddon(
                f"{name}-acr-credential-helper", cluster_id=cluster.cluster_id, name=helper.name,
                version=helper.version,
                config=addon_config(credential_helper_config(settings)),
                # In a cluster this stack does not own, the add-on may serve other workloads: keep it on destroy.
                opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                            retain_on_delete=True if settings.cluster.mode == "existing" else None)))
        self.register_outputs({"image": self.image})
