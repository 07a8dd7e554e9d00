"""Settings of the code sandboxes behind the MCP tool, and their TLS certificate."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from components.config.types import DNS1035, DNS1123_LABEL, LABEL_KEY, LABEL_VALUE, CpuQuantity, MemoryQuantity, Port, Strict


# --------------------------------------------------------------------------------------------- sandbox
class TlsSettings(Strict):
    source: Literal["upload", "certificate_id"] = Field(
        "upload", description="`upload` sends tlsCertificate/tlsPrivateKey secret config to Certificate Management; "
        "`certificate_id` uses a certificate already there.")
    certificate_id: str | None = Field(None, description="Certificate Management (CAS) cert id when source=certificate_id.")
    certificate_id_suffix: Literal["cn-hangzhou", "ap-southeast-1"] | None = Field(
        None, description="Suffix the AlbConfig appends to the CAS cert id: `cn-hangzhou` for certificates in the "
        "Chinese-mainland CAS site, `ap-southeast-1` outside it. Empty = derived from `region` (cn-* except "
        "cn-hongkong -> cn-hangzhou, else ap-southeast-1).")

    @field_validator("certificate_id")
    @classmethod
    def _cert_id(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"\d{1,20}", v):
            raise ValueError(f"{v!r} is not a CAS certificate id: digits only, without a -cn-hangzhou style suffix "
                             "(certificate_id_suffix adds it)")
        return v

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
    namespace: str = Field("sandbox-system", description="Namespace of the sandbox manager and the SandboxSet.")
    domain: str | None = Field(
        None, description="E2B domain (api.<domain>, *.<domain>) served by the ALB with TLS. Required with manager "
        "ack-addon (the add-on serves the E2B API there); not allowed otherwise (open-source: in-cluster MCP only).")
    dns_zone: str | None = Field(
        None, description="Alibaba Cloud DNS zone that holds `domain` (e.g. example.com); adds the wildcard record.")
    tls: TlsSettings = Field(default_factory=TlsSettings, description="Certificate for the sandbox domain.")
    template_name: str = Field("code-interpreter", description="SandboxSet name = the E2B template the MCP server claims from.")
    mcp_port: Port = Field(
        18082, description="Sandbox manager MCP port. ACK's image uses 18082 (tutorial), open-source PR #165 uses 8082.")
    mcp_path: str = Field("/mcp", description="HTTP path of the MCP Streamable-HTTP endpoint.")
    service_name: str = Field("sandbox-mcp", description="In-cluster Service name the training job reaches MCP at.")
    manager_selector: Optional[dict[str, str]] = Field(
        None, description="Pod labels of the sandbox manager (the MCP Service selects them; only they may reach "
        "sandboxes). Empty = the default for `manager`: ack-addon {app.kubernetes.io/name: ack-sandbox-manager, "
        "component: sandbox-manager} (the tutorial's selector without the Helm placeholder "
        "app.kubernetes.io/instance: release-name); open-source {app.kubernetes.io/name: sandbox-manager, "
        "component: sandbox-manager} (upstream config/sandbox-manager). Check: "
        "`kubectl -n <namespace> get pods --show-labels`.")
    manager_replicas: int = Field(
        1, ge=1, le=10, description="Sandbox manager replicas (manager=open-source only; peers sync MCP sessions).")
    manager_cpu: CpuQuantity = Field("1", description="CPU request and limit of the open-source sandbox manager.")
    manager_memory: MemoryQuantity = Field("2Gi", description="Memory request and limit of the open-source sandbox manager.")
    pool_cap: int = Field(
        24, description="Upper bound on the warm sandbox pool (SandboxSet replicas); size it to what the system pool "
        "can hold (the plan warns when it cannot).")
    pool_min: int = Field(3, ge=0, description="Lower bound on the warm sandbox pool.")
    allow_internet: bool = Field(False, description="Let sandboxes reach the public internet (DNS is always allowed).")
    cpu: CpuQuantity = Field("500m", description="CPU request and limit of one sandbox (a Jupyter kernel running short snippets).")
    memory: MemoryQuantity = Field("1Gi", description="Memory request and limit of one sandbox.")

    @field_validator("pool_cap")
    @classmethod
    def _cap(cls, v: int) -> int:
        if v < 1:
            raise ValueError("pool_cap must be at least 1: every run_code_once call needs a warm sandbox")
        return v

    @field_validator("namespace", "template_name", "service_name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not DNS1123_LABEL.fullmatch(v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a DNS-1123 label (lowercase letters, digits, '-', at most 63)")
        return v

    @field_validator("service_name")
    @classmethod
    def _service_name(cls, v: str) -> str:
        # The API server validates Service names as DNS-1035 labels: a leading digit is refused at apply time.
        if not DNS1035.fullmatch(v):
            raise ValueError(f"{v!r} is not a Service name: a DNS-1035 label must start with a letter")
        return v

    @field_validator("mcp_port", mode="before")
    @classmethod
    def _mcp_port(cls, v):
        if isinstance(v, int) and not 1 <= v <= 65535:
            raise ValueError(f"mcp_port {v} is not a TCP port: use 1-65535 (18082 for the ACK add-on, 8082 upstream)")
        return v

    @field_validator("mcp_path")
    @classmethod
    def _mcp_path(cls, v: str) -> str:
        if not re.fullmatch(r"/[A-Za-z0-9._~/-]*", v):
            raise ValueError(f"mcp_path {v!r} must be a URL path starting with '/' (e.g. /mcp)")
        return v

    @field_validator("manager_selector")
    @classmethod
    def _selector(cls, v: Optional[dict[str, str]]) -> Optional[dict[str, str]]:
        if v is not None:
            if not v:
                raise ValueError("manager_selector must not be empty (it would select every pod); leave it unset "
                                 "for the default of `manager`")
            for key, value in v.items():
                if not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
                    raise ValueError(f"{key}: {value} is not a valid Kubernetes label (key [prefix/]name, value at "
                                     "most 63 letters, digits, '-', '_' or '.')")
        return v

    @model_validator(mode="after")
    def _pool(self) -> SandboxSettings:
        if self.pool_min > self.pool_cap:
            raise ValueError(f"pool_min {self.pool_min} exceeds pool_cap {self.pool_cap}; raise pool_cap or lower pool_min")
        if self.dns_zone and not self.domain:
            raise ValueError("dns_zone is set but domain is empty; set sandbox.domain (a name inside dns_zone)")
        if self.domain and self.dns_zone and not (self.domain == self.dns_zone or self.domain.endswith("." + self.dns_zone)):
            raise ValueError(f"domain {self.domain!r} is not inside dns_zone {self.dns_zone!r}")
        if self.manager == "open-source" and self.mcp_path != "/mcp":
            raise ValueError(f"mcp_path {self.mcp_path!r}: the open-source MCP server (PR openkruise/agents#165) "
                             "serves a fixed /mcp path; set mcp_path: /mcp")
        return self
