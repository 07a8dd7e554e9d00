"""Pinned versions (images, charts, add-ons, packages) and the training image choice."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from components.config.addons import ADDON_ROLES, DEFAULT_ADDONS, condition_text
from components.config.cloud import AddonSetting, SandboxManagerAddonKeys, is_ack_managed_addon
from components.config.training import PIPELINE_IMPORTS
from components.config.types import (
    AcrName,
    CloudId,
    Dns1123Label,
    ExactVersion,
    HttpsUrl,
    ImageDigest,
    ImageRef,
    ImageRepository,
    ImageTag,
    JsonObject,
    PackageName,
    RegistryHost,
    ReleaseVersion,
    Strict,
    mapping,
)


class VersionSettings(Strict):
    verl: ReleaseVersion = Field("0.9.1", description="verl release installed in the job (pip) or baked into the built image.")
    verl_image: ImageRef = Field(
        "verlai/verl:vllm024.dev2",
        description="Base training image, repository:tag (Docker Hub verlai/verl; ships verl's dependencies, not verl). "
        "vllm024.dev2 is the tag verl's own Dockerfile builds and its CI runs (verl@v0.9.0:docker/Dockerfile.stable.vllm, "
        ".github/workflows/vllm.yml); verl 0.9.x pins vllm==0.24.0 and needs transformers>=5.5.3, so the tutorial's "
        "vllm012 images cannot run it. `vllm024.latest`, named only as an example in verl's docker/README.md, is "
        "reported absent from Docker Hub (docs/facts.md §3). Changing it needs a matching verl_image_digest.")
    verl_image_digest: Optional[ImageDigest] = Field(
        "sha256:b867883b0dd011363e69ab2ab344922a28c5bd0409e2a324e3ee70fb27ca7543",
        description="Digest of verl_image; the job and the pre-pull pull repository:tag@digest, so a re-pushed tag "
        "cannot change what runs. THIRD-PARTY: this digest of vllm024.dev2 appears in several unrelated public repos, "
        "no verl maintainer source (docs/facts.md §3); confirm with `docker buildx imagetools inspect "
        "verlai/verl:vllm024.dev2`. Empty (null) = pull by tag only.")
    ray: ReleaseVersion = Field(
        "2.52.1", description="UNVERIFIED: Ray version inside verl_image, for RayCluster rayVersion (it picks KubeRay's "
        "probe style: HTTP from 2.53, wget exec before; the image has wget). No public source pins Ray in the image: "
        "verl v0.7.1 installs ray[default]>=2.41.0, resolved at build time. Verify: `docker run --rm <image> python3 -c "
        "'import ray; print(ray.__version__)'` and set it in the stack; the plan warns while the stack leaves it unset.")
    transformers: ExactVersion = Field(
        "5.5.3", description="transformers pin installed beside verl (verl 0.9.1 needs >=5.5.3,<5.11, the vllm024 image "
        "ships 5.3.0; 5.5.3 is verl's own CI pin). Keep it equal to image/requirements-nodeps.txt.")
    mlflow: ExactVersion = Field(
        "3.17.2", description="mlflow pip pin for the job (tracking client; verl does not depend on it). 3.18.0 needs "
        "mlflow-skinny 3.18.0, which the package index did not serve when this was pinned; keep it equal to "
        "image/requirements.txt.")
    fastmcp: ExactVersion = Field(
        "2.14.7", description="fastmcp pip pin for the job: the MCP client of the run_code_once tool "
        "(agent_tools/verl_ack_tools.py; verl 0.9 has no MCP client of its own). Keep it equal to image/requirements.txt.")
    mcp: ExactVersion = Field(
        "1.30.0", description="mcp pip pin installed beside fastmcp (the protocol client whose result-schema validation "
        "tests/agent_tools/test_mcp_schema.py exercises; fastmcp 2.14.7 accepts >=1.24,<2). Keep it equal to "
        "image/requirements.txt.")
    kuberay: ReleaseVersion = Field("1.7.0", description="KubeRay operator version (decides which RayJob features are valid).")
    kuberay_source: Literal["addon", "helm"] = Field(
        "helm", description="Install KubeRay from the ACK add-on (`addons.kuberay`) or the upstream Helm chart.")
    kuberay_chart_repo: HttpsUrl = Field("https://ray-project.github.io/kuberay-helm/", description="KubeRay Helm repository.")
    mlflow_image: ImageRef = Field("ghcr.io/mlflow/mlflow:v3.18.0", description="MLflow tracking server image.")
    dataset_image: ImageRef = Field("python:3.11-slim", description="Image of the dataset and model staging Jobs.")
    sandbox_runtime_image: ImageRef = Field(
        "registry-cn-hangzhou.ack.aliyuncs.com/acs/agent-runtime:v0.0.1", description="Sandbox runtime (envd) init image.")
    code_interpreter_image: ImageRef = Field(
        "registry-ap-southeast-1.ack.aliyuncs.com/acs/code-interpreter:v1.6",
        description="Code-interpreter sandbox image: the one openkruise/agents' own e2e workflows and examples run "
        "(openkruise/agents@0b72c83a .github/workflows/e2e-e2b-latest.yaml, examples/claude-code), on ACK's public "
        "registry, not the tutorial's test registry (acs-image-test-01-registry.cn-hangzhou). Mirror it into your "
        "in-region registry (ACR, VPC endpoint) for regions far from ap-southeast-1 and set this to the mirror.")
    code_interpreter_image_digest: Optional[ImageDigest] = Field(
        None, description="Digest (sha256:...) of code_interpreter_image; the sandbox pods then pull "
        "repository:tag@digest, so a re-pushed tag cannot change what every warm sandbox runs. Empty = pull by tag: "
        "no public source states this image's digest (the plan warns); copy it from `docker buildx imagetools "
        "inspect <image>` or your mirror's console.")
    sandbox_manager_image: Optional[ImageRef] = Field(
        None,
        description="Open-source sandbox manager image (sandbox.manager: open-source only), built with MCP support from "
        "the unmerged PR openkruise/agents#165 (commit 136236a8, dockerfiles/sandbox-manager.Dockerfile) and pushed to "
        "your registry. Empty = none: no published image serves MCP, so manager open-source refuses an empty value "
        "and any released openkruise/sandbox-manager image (v0.3.0 and master define no --mcp-* flag; pflag exits on "
        "it and the manager crash-loops).")
    sandbox_chart_repo: HttpsUrl = Field(
        "https://openkruise.github.io/charts/", description="Helm repository of the open-source agent-sandbox charts.")
    sandbox_controller_chart: Dns1123Label = Field(
        "agents-sandbox-controller", description="Chart of the open-source agent-sandbox controller (CRDs, webhooks). "
        "The published index names it agents-sandbox-controller; the source folder is "
        "kruise-agents-sandbox-controller.")
    sandbox_controller_chart_version: ReleaseVersion = Field(
        "0.2.0", description="Chart version (0.2.0 installs controller v0.2.0, the newest in the published index; "
        "check `helm search repo openkruise/agents-sandbox-controller --versions`).")
    pipeline_packages: dict[PackageName, ExactVersion] = Field(
        default_factory=lambda: {
            "datasets": "5.2.0",
            "pyarrow": "26.0.1",
            "alibabacloud-oss-v2": "1.4.1",
            "alibabacloud-credentials": "1.0.12",
            "huggingface-hub": "2.4.0",
            "modelscope": "1.40.2",
        },
        description="Exact pip pins the dataset and model staging Jobs install (package -> version). Their own "
        "dependencies are resolved by pip at run time.")
    pip_index_url: Optional[HttpsUrl] = Field(
        None, description="pip index for the data Jobs (e.g. https://mirrors.aliyun.com/pypi/simple/ in mainland "
        "regions). Empty = PyPI.")
    addons: dict[str, AddonSetting] = Field(
        default_factory=lambda: {role: AddonSetting(name=name) for role, name in DEFAULT_ADDONS.items()},
        description="ACK add-ons by role, each installed when its condition holds: " + "; ".join(
            f"{a.role} ({condition_text(a.role).replace('`', '')}{', optional' if a.optional else ''})"
            for a in ADDON_ROLES) + ". A stack lists only the roles and keys it changes; the rest keep the built-in "
        "names. Names marked uncertain in docs/cloud.md must be checked per region with cs.get_kubernetes_addons.")
    sandbox_manager_config_keys: SandboxManagerAddonKeys = Field(
        default_factory=SandboxManagerAddonKeys,
        description="Dotted key paths of the sandbox manager add-on config (default: the upstream chart's keys, also "
        "what a public stack deployed with; no Alibaba schema, docs/facts.md §1).")

    @field_validator("addons", mode="before")
    @classmethod
    def _merge_addons(cls, v):
        given = mapping(v, "versions.addons")
        unknown = sorted(set(given) - set(DEFAULT_ADDONS))
        if unknown:
            raise ValueError(f"unknown add-on role(s) {unknown}; roles are {sorted(DEFAULT_ADDONS)}")
        merged = {}
        for role, name in DEFAULT_ADDONS.items():
            entry = given.get(role) or {}
            entry = entry.model_dump() if isinstance(entry, AddonSetting) else mapping(entry, f"versions.addons.{role}")
            merged[role] = {**entry, "name": entry.get("name") or name}
        return merged

    @field_validator("addons")
    @classmethod
    def _no_pin_on_ack_managed(cls, v: dict[str, AddonSetting]) -> dict[str, AddonSetting]:
        for role, a in v.items():
            if a.version and is_ack_managed_addon(a.name):
                raise ValueError(
                    f"versions.addons.{role}.version: {a.name} is managed and upgraded by ACK, so a pin "
                    f"({a.version}) would show a diff after ACK's next upgrade and make `pulumi up` ask for a "
                    "downgrade ACK refuses; remove the version (the Lingjun minimum versions are checked against the "
                    "live add-ons instead)")
        return v

    @field_validator("pipeline_packages", mode="before")
    @classmethod
    def _pins(cls, v):
        v = mapping(v, "versions.pipeline_packages")
        missing = sorted({pkg for pkgs in PIPELINE_IMPORTS.values() for pkg in pkgs} - set(v))
        if missing:
            raise ValueError(f"pipeline_packages lacks {', '.join(missing)}: the data Jobs import them")
        return v

    @model_validator(mode="after")
    def _digest_of_this_image(self) -> VersionSettings:
        if self.code_interpreter_image_digest and "@" in self.code_interpreter_image:
            raise ValueError(f"versions.code_interpreter_image {self.code_interpreter_image} already carries a digest "
                             "and code_interpreter_image_digest is set too; give the digest once")
        if self.verl_image_digest and "@" in self.verl_image:
            raise ValueError(f"versions.verl_image {self.verl_image} already carries a digest and verl_image_digest is "
                             "set too; give the digest once, in verl_image_digest")
        default = type(self).model_fields["verl_image"].default
        if (self.verl_image != default and "verl_image_digest" not in self.model_fields_set
                and self.verl_image_digest is not None):
            raise ValueError(
                f"versions.verl_image is {self.verl_image} but versions.verl_image_digest is still the default, the digest "
                f"of {default}: a pull by tag@digest ignores the tag, so the job would run {default}. Set "
                f"verl_image_digest to the new image's digest (`docker buildx imagetools inspect {self.verl_image}`) or "
                "to null to pull by tag")
        return self

    def code_interpreter_image_ref(self) -> str:
        """repository:tag@sha256:… the sandbox pods pull (repository:tag when no digest is pinned)."""
        if self.code_interpreter_image_digest:
            return f"{self.code_interpreter_image}@{self.code_interpreter_image_digest}"
        return self.code_interpreter_image

    def verl_image_ref(self) -> str:
        """repository:tag@sha256:… the job and the pre-pull pull (repository:tag when no digest is pinned)."""
        return f"{self.verl_image}@{self.verl_image_digest}" if self.verl_image_digest else self.verl_image

    def unverified(self) -> list[tuple[str, str]]:
        """(field, how to verify) for the defaults no public source confirms, while the stack relies on them."""
        out = []
        if "ray" not in self.model_fields_set:
            out.append(("versions.ray", f"Ray {self.ray} in {self.verl_image} is unverified (no public source pins Ray "
                        "in verl's image; it only picks KubeRay's probe style). Check with `docker run --rm "
                        f"{self.verl_image_ref()} python3 -c 'import ray; print(ray.__version__)'` and set versions.ray "
                        "in the stack"))
        return out

    def kuberay_tuple(self) -> tuple[int, int, int]:
        return tuple(int(x) for x in self.kuberay.split("."))  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------- image
class ImageSettings(Strict):
    source: Literal["official", "built"] = Field(
        "official", description="`official`: versions.verl_image plus a runtime pip install of verl, mlflow and fastmcp "
        "(slow start); `built`: the image built from image/ and pushed to the registry below (no runtime install).")
    registry: Literal["personal", "enterprise", "existing"] = Field(
        "personal", description="Where a built image lives: an ACR Personal Edition namespace/repository you create "
        "once in the console (the bridged provider can no longer create one), a repository this program creates in an "
        "existing ACR Enterprise instance, or an existing repository.")
    namespace: AcrName = Field("verl-ack", description="ACR namespace (personal/enterprise).")
    repository: AcrName = Field("verl", description="ACR repository name (personal/enterprise).")
    enterprise_instance_id: CloudId | None = Field(
        None, description="ACR Enterprise instance id (cri-...) when registry=enterprise, or when registry=existing names "
        "a repository of an Enterprise instance (the credential helper's AcrInstanceInfo needs it).")
    registry_host: RegistryHost | None = Field(
        None, description="Registry host nodes pull from. Default for personal: registry-vpc.<region>.aliyuncs.com "
        "(VPC endpoint). Required for enterprise (e.g. <instance>-registry-vpc.<region>.cr.aliyuncs.com) and existing.")
    existing_repository: ImageRepository | None = Field(
        None, description="Full repository path (host/namespace/repo) when registry=existing.")
    tag: ImageTag | None = Field(
        None, description="Image tag. Empty = the content hash of image/ (what the build workflow pushes).")
    digest: ImageDigest | None = Field(
        None, description="Digest (sha256:...) of the built image, printed by the image workflow; the job and the "
        "pre-pull then pull host/namespace/repository:tag@digest. Required by kind=platform stacks.")
    lazy_loading: bool = Field(
        False, description="The GPU nodes load the image on demand (ACK Container Image Acceleration, DADI; needs an "
        "ACR Enterprise Standard/Advanced instance, containerd >= 1.6.34 and the option on the GPU node pool, which "
        "pulumi-alicloud 4.0.0 cannot set: docs/facts.md). Off = the full pull the latency model counts.")
    credential_helper: bool = Field(
        True, description="Install managed-aliyun-acr-credential-helper so nodes pull private ACR images without "
        "imagePullSecrets (built images only). It works with ACR Enterprise and with Personal Edition instances "
        "created on or before 2024-09-08 only (Alibaba's helper page; docs/facts.md §5).")
    credential_helper_config: JsonObject = Field(
        default_factory=dict,
        description="Config JSON of the credential helper add-on, replacing the derived one. Empty = derived "
        "(components/cloud/registry.py): AcrInstanceInfo [{instanceId: enterprise_instance_id or empty for Personal, "
        "regionId}], watchNamespace = job.namespace (plus sandbox.namespace when the sandbox image is mirrored), "
        "serviceAccount = verl-train,default (the training pods, the "
        "pre-pull DaemonSet and KubeRay's submitter), expiringThreshold 15m, enableRRSA false. Key spelling is "
        "third-party evidence (docs/facts.md §5); check with `cs.get_kubernetes_addon_metadata(cluster_id, "
        "'managed-aliyun-acr-credential-helper', version).config_schema`.")
    prepull: bool = Field(
        True, description="Pull the training image onto each GPU node as soon as it joins (a DaemonSet), "
        "overlapping model and data staging.")
    pause_image: ImageRef = Field(
        "registry.k8s.io/pause:3.10",
        description="Tiny image the pre-pull DaemonSet idles in after pulling. Mainland regions may need a mirror of it.")

    @model_validator(mode="after")
    def _registry(self) -> ImageSettings:
        if self.registry == "enterprise" and not (self.enterprise_instance_id and self.registry_host):
            raise ValueError("registry=enterprise needs enterprise_instance_id and registry_host "
                             "(copy both from the ACR Enterprise console)")
        if self.registry == "existing" and not self.existing_repository:
            raise ValueError("registry=existing needs existing_repository (host/namespace/repo)")
        return self
