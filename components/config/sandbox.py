"""Settings of the code sandboxes behind the MCP tool, and their TLS certificate."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from components.config.security import AlbTlsPolicy, SandboxPoolSettings, Uid
from components.config.types import (
    CasCertificateId,
    Cidr,
    CpuQuantity,
    Dns1035Label,
    Dns1123Label,
    DomainName,
    LabelKey,
    LabelValue,
    MemoryQuantity,
    Port,
    Strict,
    UrlPath,
)

# --------------------------------------------------------------------------------------------- sandbox
# Released open-source manager images: built from openkruise/agents without the MCP server of the unmerged PR
# openkruise/agents#165. cmd/sandbox-manager/main.go defines no --mcp-* flag at v0.3.0 (a4e640d2) nor at master
# (0b72c83a), and pflag.Parse on the default CommandLine (ExitOnError) exits on an unknown flag, so the manager
# Deployment would crash-loop (docs/facts.md, "Sandbox manager and gateway").
RELEASED_MANAGER_REPOSITORIES = ("openkruise/sandbox-manager", "docker.io/openkruise/sandbox-manager",
                                 "registry-1.docker.io/openkruise/sandbox-manager")
MCP_BUILD = "openkruise/agents PR #165 at 136236a8 (dockerfiles/sandbox-manager.Dockerfile)"


def manager_image_problem(image: Optional[str]) -> Optional[str]:
    """Why `versions.sandbox_manager_image` cannot run the open-source manager this program renders, or None."""
    if not image:
        return (f"sandbox.manager open-source needs versions.sandbox_manager_image: an image built from {MCP_BUILD} "
                "and pushed to your registry (no published image serves MCP); or use sandbox.manager: ack-addon")
    repository = image.split("@", 1)[0]
    last = repository.rsplit("/", 1)[-1]
    if ":" in last:
        repository = repository[: len(repository) - len(last)] + last.split(":", 1)[0]
    if repository in RELEASED_MANAGER_REPOSITORIES:
        return (f"versions.sandbox_manager_image {image} is a released build without the MCP server: its "
                "cmd/sandbox-manager/main.go defines no --mcp-enabled/--mcp-port/--mcp-session-sync-port (v0.3.0 and "
                "master), pflag exits on the unknown flag and the manager crash-loops. Set it to an image built from "
                f"{MCP_BUILD}, or use sandbox.manager: ack-addon")
    return None


class TlsSettings(Strict):
    source: Literal["upload", "certificate_id"] = Field(
        "upload", description="`upload` sends tlsCertificate/tlsPrivateKey secret config to Certificate Management; "
        "`certificate_id` uses a certificate already there.")
    certificate_id: CasCertificateId | None = Field(
        None, description="Certificate Management (CAS) cert id when source=certificate_id.")
    certificate_id_suffix: Literal["cn-hangzhou", "ap-southeast-1"] | None = Field(
        None, description="Suffix the AlbConfig appends to the CAS cert id: `cn-hangzhou` for certificates in the "
        "Chinese-mainland CAS site, `ap-southeast-1` outside it. Empty = derived from `region` (cn-* except "
        "cn-hongkong -> cn-hangzhou, else ap-southeast-1).")

    @model_validator(mode="after")
    def _id(self) -> TlsSettings:
        if self.source == "certificate_id" and not self.certificate_id:
            raise ValueError("source=certificate_id needs certificate_id (the CAS certificate id, digits)")
        return self


class SandboxSettings(Strict):
    enabled: bool = Field(True, description="Deploy the code sandboxes and the MCP tool the training job calls.")
    manager: Literal["ack-addon", "open-source"] = Field(
        "ack-addon", description="`ack-addon` installs ack-agent-sandbox-controller + the sandbox manager add-on; "
        "`open-source` deploys an OpenKruise Agents sandbox manager built with MCP support.")
    namespace: Dns1123Label = Field("sandbox-system", description="Namespace of the sandbox manager and the SandboxSet.")
    domain: DomainName | None = Field(
        None, description="E2B domain (api.<domain>, *.<domain>) served by the ALB with TLS. Required with manager "
        "ack-addon (the add-on serves the E2B API there); not allowed otherwise (open-source: in-cluster MCP only).")
    dns_zone: DomainName | None = Field(
        None, description="Alibaba Cloud DNS zone that holds `domain` (e.g. example.com); adds the wildcard record.")
    tls: TlsSettings = Field(default_factory=TlsSettings, description="Certificate for the sandbox domain.")
    template_name: Dns1123Label = Field(
        "code-interpreter", description="SandboxSet name = the E2B template the MCP server claims from.")
    mcp_port: Port = Field(
        18082, description="Sandbox manager MCP port. ACK's image uses 18082 (tutorial), open-source PR #165 uses 8082.")
    mcp_path: UrlPath = Field("/mcp", description="HTTP path of the MCP Streamable-HTTP endpoint.")
    service_name: Dns1035Label = Field("sandbox-mcp", description="In-cluster Service name the training job reaches MCP at.")
    manager_selector: Optional[dict[LabelKey, LabelValue]] = Field(
        None, description="Pod labels of the sandbox manager (the MCP Service selects them; only they may reach "
        "sandboxes). Empty = the default for `manager`: ack-addon {app.kubernetes.io/name: ack-sandbox-manager, "
        "component: sandbox-manager} (the tutorial's selector without the Helm placeholder "
        "app.kubernetes.io/instance: release-name); open-source {app.kubernetes.io/name: sandbox-manager, "
        "component: sandbox-manager} (upstream config/sandbox-manager). Check: "
        "`kubectl -n <namespace> get pods --show-labels`.")
    gateway_selector: Optional[dict[LabelKey, LabelValue]] = Field(
        None, description="Pod labels of the sandbox gateway, the E2B data plane that proxies SDK traffic straight to "
        "the sandbox pods (upstream chart kruise-agents-sandbox-manager 0.6.0 `sandbox-gateway`; ACK's "
        "ack-sandbox-manager >= v0.6.6 makes it the data plane of new clusters). The isolation policy admits it next to "
        "the manager. Empty (null) = the default for `manager`: ack-addon {app.kubernetes.io/name: sandbox-gateway} "
        "(upstream's label; ACK's closed build is not published: check with `kubectl -n <namespace> get pods "
        "--show-labels`); open-source none (this program deploys no gateway). `{}` = no gateway peer.")
    manager_replicas: int = Field(
        1, ge=1, le=10, description="Sandbox manager replicas (manager=open-source only; peers sync MCP sessions).")
    manager_cpu: CpuQuantity = Field("1", description="CPU request and limit of the open-source sandbox manager.")
    manager_memory: MemoryQuantity = Field("2Gi", description="Memory request and limit of the open-source sandbox manager.")
    pool_cap: int = Field(
        24, le=10000, description="Upper bound on the warm sandbox pool (SandboxSet replicas); size it to what the system pool "
        "can hold (the plan warns when it cannot).")
    pool_min: int = Field(3, ge=0, le=10000, description="Lower bound on the warm sandbox pool.")
    allow_internet: bool = Field(False, description="Let sandboxes reach the public internet (DNS is always allowed).")
    cpu: CpuQuantity = Field("500m", description="CPU request and limit of one sandbox (a Jupyter kernel running short snippets).")
    memory: MemoryQuantity = Field("1Gi", description="Memory request and limit of one sandbox.")
    ephemeral_storage: MemoryQuantity = Field(
        "2Gi", description="Ephemeral-storage request and limit of one sandbox container (its writable layer and "
        "logs on the node's disk): the kubelet evicts the one sandbox that writes more, instead of the node filling "
        "up and evicting its neighbours. The envd sidecar gets `envd_volume_size` for itself.")
    envd_volume_size: MemoryQuantity = Field(
        "256Mi", description="sizeLimit of the sandbox pod's envd emptyDir (the envd binary and its start script the "
        "init sidecar copies there; the kubelet evicts a pod whose volume grows past it) and the envd sidecar's "
        "ephemeral-storage request and limit. UNVERIFIED: the envd build's size is not published; check with "
        "`kubectl exec <sandbox> -c sandbox -- du -sh /mnt/envd` (docs/uncertain-facts.md).")
    run_as_user: Optional[Uid] = Field(
        None, description="Non-root uid the sandbox containers run as; then the pods meet the restricted Pod "
        "Security Standard and the namespace enforces it. Empty = the image's user: the code-interpreter image runs "
        "as root (its server lives under /root and envd-run.sh creates the `user` account at start), so the pods "
        "keep every restricted control but runAsNonRoot, hold only the capabilities envd needs, and the namespace "
        "enforces baseline. Set it only with an image built to run as that uid.")
    runtime_class: Optional[Dns1123Label] = Field(
        None, description="RuntimeClass of the sandbox pods. Empty = the nodes' default runtime (runC). `runv` is "
        "ACK Sandboxed-Container (a lightweight VM per pod); it needs nodes with that runtime, e.g. "
        "dedicated_pool.runtime_name: Sandboxed-Container.runv.")
    image_mirror: Optional[bool] = Field(
        None, description="Pull the code-interpreter image from a mirror in the stack's own ACR registry (the "
        "training image's: image.source built), <registry host>/<image.namespace>/code-interpreter:<tag>@<digest>, "
        "over the VPC endpoint instead of across regions through the NAT. The image workflow's mirror job copies it "
        "there (docs/sandbox.md \"Where the sandbox image comes from\"). Empty = mirror whenever the stack has that "
        "registry; false = pull versions.code_interpreter_image itself; true = require the registry.")
    pull_ahead: bool = Field(
        True, description="Pull the code-interpreter image onto every node the sandboxes run on as soon as it joins "
        "(a DaemonSet in sandbox.namespace, created before the SandboxSet), so the warm pool's pods find it on disk.")
    dedicated_pool: Optional[SandboxPoolSettings] = Field(
        default_factory=SandboxPoolSettings, description="A tainted node pool only sandboxes run on, so model-written "
        "code shares no node with the controllers, MLflow, the KubeRay operator or the sandbox manager (holder of the "
        "E2B admin key). Default: 2 x ecs.g7.2xlarge (the plan prices it). `null` = sandboxes share the system pool "
        "(explicit opt-out). Left out with sandbox.enabled false, no pool.")
    public_api: bool = Field(
        False, description="Serve the E2B API (sandbox.domain, ack-addon) on an internet ALB. false = an intranet "
        "ALB, reachable only from the VPC: training needs only the in-cluster MCP Service.")
    api_allowed_cidrs: list[Cidr] = Field(
        default_factory=list, max_length=50,
        description="Source CIDRs the E2B API's ALB listener accepts (an AlbConfig ACL whitelist). Required with "
        "public_api (write 0.0.0.0/0 to open it to everyone, explicitly); optional for the intranet ALB.")
    tls_policy: AlbTlsPolicy = Field(
        "tls_cipher_policy_1_2", description="ALB TLS security policy of the E2B API's HTTPS listener (TLS 1.2 or "
        "newer only). The listener is HTTPS-only: there is no HTTP listener to downgrade to.")

    @model_validator(mode="before")
    @classmethod
    def _no_default_pool_without_sandboxes(cls, data):
        # The default pool exists for the sandboxes; a stack without them gets none unless it names one (refused
        # then, in the settings' rules, as nodes billing for nothing).
        if isinstance(data, dict) and data.get("enabled", True) is False and "dedicated_pool" not in data:
            return {**data, "dedicated_pool": None}
        return data

    @field_validator("pool_cap")
    @classmethod
    def _cap(cls, v: int) -> int:
        if v < 1:
            raise ValueError("pool_cap must be at least 1: every run_code_once call needs a warm sandbox")
        return v

    @field_validator("mcp_port", mode="before")
    @classmethod
    def _mcp_port(cls, v):
        if isinstance(v, int) and not 1 <= v <= 65535:
            raise ValueError(f"mcp_port {v} is not a TCP port: use 1-65535 (18082 for the ACK add-on, 8082 upstream)")
        return v

    @field_validator("manager_selector")
    @classmethod
    def _selector(cls, v: Optional[dict[str, str]]) -> Optional[dict[str, str]]:
        if v is not None and not v:
            raise ValueError("manager_selector must not be empty (it would select every pod); leave it unset "
                             "for the default of `manager`")
        return v

    @model_validator(mode="after")
    def _pool(self) -> SandboxSettings:
        if self.pool_min > self.pool_cap:
            raise ValueError(f"pool_min {self.pool_min} exceeds pool_cap {self.pool_cap}; raise pool_cap or lower pool_min")
        if self.dns_zone and not self.domain:
            raise ValueError("dns_zone is set but domain is empty; set sandbox.domain (a name inside dns_zone)")
        if self.domain and self.dns_zone and not (self.domain == self.dns_zone or self.domain.endswith("." + self.dns_zone)):
            raise ValueError(f"domain {self.domain!r} is not inside dns_zone {self.dns_zone!r}")
        if self.public_api and not self.domain:
            raise ValueError("public_api exposes the E2B API on sandbox.domain, which is empty; set domain (manager "
                             "ack-addon) or leave public_api false")
        if self.public_api and not self.api_allowed_cidrs:
            raise ValueError("public_api puts the E2B API on the internet behind one static key; list the sources "
                             "that may reach it in sandbox.api_allowed_cidrs (0.0.0.0/0 opens it to everyone)")
        if self.api_allowed_cidrs and not self.domain:
            raise ValueError("api_allowed_cidrs guards the E2B API on sandbox.domain, which is empty; remove it")
        if self.runtime_class == "runv" and self.dedicated_pool is not None \
                and self.dedicated_pool.runtime_name != "Sandboxed-Container.runv":
            raise ValueError("runtime_class runv needs nodes running ACK Sandboxed-Container: set "
                             "dedicated_pool.runtime_name: Sandboxed-Container.runv (ECS Bare Metal instance types)")
        if self.dedicated_pool is not None and self.dedicated_pool.runtime_name and self.runtime_class != "runv":
            raise ValueError("dedicated_pool.runtime_name Sandboxed-Container.runv runs pods of RuntimeClass runv "
                             "only; set sandbox.runtime_class: runv")
        if self.manager == "open-source" and self.mcp_path != "/mcp":
            raise ValueError(f"mcp_path {self.mcp_path!r}: the open-source MCP server (PR openkruise/agents#165) "
                             "serves a fixed /mcp path; set mcp_path: /mcp")
        return self
