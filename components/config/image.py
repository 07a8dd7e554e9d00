"""Pinned versions (images, charts, add-ons, packages) and the training image choice."""

from __future__ import annotations

import re
from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from components.config.cloud import DEFAULT_ADDONS, OPTIONAL_ADDONS, AddonSetting, SandboxManagerAddonKeys
from components.config.training import PIPELINE_IMPORTS
from components.config.types import PIN, Strict


class VersionSettings(Strict):
    verl: str = Field("0.9.1", description="verl release installed in the job (pip) or baked into the built image.")
    verl_image: str = Field(
        "verlai/verl:vllm024.latest",
        description="Base training image (Docker Hub verlai/verl; ships verl's dependencies, not verl). verl 0.9.x "
        "pins vllm==0.24.0 in its [vllm] extra and needs transformers>=5.5.3, so the vllm012 images of the "
        "tutorial cannot run it (verl docker/README.md names verlai/verl:vllm024.latest).")
    ray: str = Field(
        "2.52.1", description="Ray version inside verl_image, for RayCluster rayVersion. Verify: "
        "`docker run --rm <image> ray --version`.")
    transformers: str = Field(
        "5.5.3", description="transformers pin installed beside verl (verl 0.9.1 needs >=5.5.3,<5.11, the vllm024 image "
        "ships 5.3.0; 5.5.3 is verl's own CI pin). Keep it equal to image/requirements-nodeps.txt.")
    mlflow: str = Field(
        "3.17.2", description="mlflow pip pin for the job (tracking client; verl does not depend on it). 3.18.0 needs "
        "mlflow-skinny 3.18.0, which the package index did not serve when this was pinned; keep it equal to "
        "image/requirements.txt.")
    fastmcp: str = Field(
        "2.14.7", description="fastmcp pip pin for the job: the MCP client of the run_code_once tool "
        "(agent_tools/verl_ack_tools.py; verl 0.9 has no MCP client of its own). Keep it equal to image/requirements.txt.")
    kuberay: str = Field("1.7.0", description="KubeRay operator version (decides which RayJob features are valid).")
    kuberay_source: Literal["addon", "helm"] = Field(
        "helm", description="Install KubeRay from the ACK add-on (`addons.kuberay`) or the upstream Helm chart.")
    kuberay_chart_repo: str = Field("https://ray-project.github.io/kuberay-helm/", description="KubeRay Helm repository.")
    mlflow_image: str = Field("ghcr.io/mlflow/mlflow:v3.18.0", description="MLflow tracking server image.")
    dataset_image: str = Field("python:3.11-slim", description="Image of the dataset and model staging Jobs.")
    sandbox_runtime_image: str = Field(
        "registry-cn-hangzhou.ack.aliyuncs.com/acs/agent-runtime:v0.0.1", description="Sandbox runtime (envd) init image.")
    code_interpreter_image: str = Field(
        "acs-image-test-01-registry.cn-hangzhou.cr.aliyuncs.com/e2b/code-interpreter:v1.6",
        description="Code-interpreter sandbox image (the tutorial's).")
    sandbox_manager_image: str = Field(
        "openkruise/sandbox-manager:v0.3.0",
        description="Open-source sandbox manager image. It MUST be built with MCP support (unmerged PR "
        "openkruise/agents#165, commit 136236a8): the released images have no --mcp-enabled flag and exit on it.")
    sandbox_chart_repo: str = Field(
        "https://openkruise.github.io/charts/", description="Helm repository of the open-source agent-sandbox charts.")
    sandbox_controller_chart: str = Field(
        "agents-sandbox-controller", description="Chart of the open-source agent-sandbox controller (CRDs, webhooks). "
        "The published index names it agents-sandbox-controller; the source folder is "
        "kruise-agents-sandbox-controller.")
    sandbox_controller_chart_version: str = Field(
        "0.2.0", description="Chart version (0.2.0 installs controller v0.2.0, the newest in the published index; "
        "check `helm search repo openkruise/agents-sandbox-controller --versions`).")
    pipeline_packages: dict[str, str] = Field(
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
    pip_index_url: Optional[str] = Field(
        None, description="pip index for the data Jobs (e.g. https://mirrors.aliyun.com/pypi/simple/ in mainland "
        "regions). Empty = PyPI.")
    addons: dict[str, AddonSetting] = Field(
        default_factory=lambda: {role: AddonSetting(name=name) for role, name in DEFAULT_ADDONS.items()},
        description="ACK add-ons by role (" + ", ".join(DEFAULT_ADDONS) + "). A stack lists only the roles and "
        "keys it changes; the rest keep the built-in names. Names marked uncertain in docs/cloud.md must be checked "
        "per region with cs.get_kubernetes_addons.")
    sandbox_manager_config_keys: SandboxManagerAddonKeys = Field(
        default_factory=SandboxManagerAddonKeys,
        description="Key paths of the sandbox manager add-on config (shape unverified; see docs/cloud.md).")

    @field_validator("addons", mode="before")
    @classmethod
    def _merge_addons(cls, v):
        given = dict(v or {})
        unknown = sorted(set(given) - set(DEFAULT_ADDONS))
        if unknown:
            raise ValueError(f"unknown add-on role(s) {unknown}; roles are {sorted(DEFAULT_ADDONS)}")
        merged = {}
        for role, name in DEFAULT_ADDONS.items():
            entry = given.get(role) or {}
            entry = entry.model_dump() if isinstance(entry, AddonSetting) else dict(entry)
            merged[role] = {**entry, "name": entry.get("name") or name}
        return merged

    @field_validator("addons")
    @classmethod
    def _required_addons(cls, v: dict[str, AddonSetting]) -> dict[str, AddonSetting]:
        off = sorted(role for role, a in v.items() if not a.enabled and role not in OPTIONAL_ADDONS)
        if off:
            raise ValueError(f"add-on role(s) {off} cannot be disabled (only {list(OPTIONAL_ADDONS)} are optional); "
                             "remove `enabled: false`")
        return v

    @field_validator("verl", "kuberay", "ray", "sandbox_controller_chart_version")
    @classmethod
    def _semver(cls, v: str) -> str:
        if not re.fullmatch(r"\d+\.\d+\.\d+", v):
            raise ValueError(f"{v!r} must be an exact version like 1.7.0 (pins, not ranges)")
        return v

    @field_validator("pipeline_packages")
    @classmethod
    def _pins(cls, v: dict[str, str]) -> dict[str, str]:
        missing = sorted({pkg for pkgs in PIPELINE_IMPORTS.values() for pkg in pkgs} - set(v))
        if missing:
            raise ValueError(f"pipeline_packages lacks {', '.join(missing)}: the data Jobs import them")
        for name, version in v.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or not PIN.fullmatch(version):
                raise ValueError(f"{name}: {version!r} must be an exact version like 1.4.1 (pins, not ranges)")
        return v

    @field_validator("pip_index_url", "sandbox_chart_repo")
    @classmethod
    def _https(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not re.fullmatch(r"https://[^\s'\"]+", v):
            raise ValueError(f"{v!r} must be an https:// URL")
        return v

    def kuberay_tuple(self) -> tuple[int, int, int]:
        return tuple(int(x) for x in self.kuberay.split("."))  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------- image
class ImageSettings(Strict):
    source: Literal["official", "built"] = Field(
        "official", description="`official`: versions.verl_image plus a runtime pip install of verl, mlflow and fastmcp "
        "(slow start); `built`: the image built from image/ and pushed to the registry below (no runtime install).")
    registry: Literal["personal", "enterprise", "existing"] = Field(
        "personal", description="Where a built image lives: an ACR Personal Edition namespace/repository this program "
        "creates, a repository it creates in an existing ACR Enterprise instance, or an existing repository.")
    namespace: str = Field("verl-ack", description="ACR namespace (personal/enterprise).")
    repository: str = Field("verl", description="ACR repository name (personal/enterprise).")
    enterprise_instance_id: str | None = Field(None, description="ACR Enterprise instance id (cri-...) when registry=enterprise.")
    registry_host: str | None = Field(
        None, description="Registry host nodes pull from. Default for personal: registry-vpc.<region>.aliyuncs.com "
        "(VPC endpoint). Required for enterprise (e.g. <instance>-registry-vpc.<region>.cr.aliyuncs.com) and existing.")
    existing_repository: str | None = Field(
        None, description="Full repository path (host/namespace/repo) when registry=existing.")
    tag: str | None = Field(None, description="Image tag. Empty = the content hash of image/ (what the build workflow pushes).")
    credential_helper: bool = Field(
        True, description="Install managed-aliyun-acr-credential-helper so nodes pull private ACR images without "
        "imagePullSecrets (built images only).")
    credential_helper_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Config JSON of the credential helper add-on (empty = its defaults). UNVERIFIED shape: the helper "
        "serves only the namespaces/service accounts and ACR instances its config names, so set them (job namespace, "
        "service accounts verl-train and default) after reading `cs.get_kubernetes_addon_metadata(cluster_id, "
        "'managed-aliyun-acr-credential-helper', version).config_schema`.")
    prepull: bool = Field(
        True, description="Pull the training image onto each GPU node as soon as it joins (a DaemonSet), "
        "overlapping model and data staging.")
    pause_image: str = Field(
        "registry.k8s.io/pause:3.10",
        description="Tiny image the pre-pull DaemonSet idles in after pulling. Mainland regions may need a mirror of it.")

    @field_validator("namespace", "repository")
    @classmethod
    def _acr_name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,63}", v):
            raise ValueError(f"{v!r} is not a valid ACR name (2-64 lowercase letters, digits, '.', '_' or '-')")
        return v

    @model_validator(mode="after")
    def _registry(self) -> ImageSettings:
        if self.registry == "enterprise" and not (self.enterprise_instance_id and self.registry_host):
            raise ValueError("registry=enterprise needs enterprise_instance_id and registry_host "
                             "(copy both from the ACR Enterprise console)")
        if self.registry == "existing" and not self.existing_repository:
            raise ValueError("registry=existing needs existing_repository (host/namespace/repo)")
        return self
