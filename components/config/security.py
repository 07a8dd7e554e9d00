"""Settings of the security posture that have a shape of their own: the dedicated, tainted node pool the code
sandboxes may run on, and the name and value rules of the hardening switches. The switches themselves live on
their sections (`cluster.*`, `sandbox.*`, `storage.*`); docs/cloud.md ("Security posture") and docs/sandbox.md
("Isolation") describe them.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field

from components.config.types import InstanceType, Strict, _text

# ALB TLS security policies that allow nothing below TLS 1.2 (the predefined policy table of
# https://www.alibabacloud.com/help/en/slb/application-load-balancer/tls-security-policies).
AlbTlsPolicy = Literal["tls_cipher_policy_1_2", "tls_cipher_policy_1_2_strict", "tls_cipher_policy_1_2_strict_with_1_3"]

# SLS project names: 3-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit.
SlsProjectName = Annotated[str, _text(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", "an SLS project name",
                                      "use 3-63 lowercase letters, digits or '-', starting and ending with a letter "
                                      "or digit")]

# Linux user ids Kubernetes accepts for runAsUser (int64, but a uid above 2^31-1 is refused by most runtimes).
Uid = Annotated[int, Field(ge=1, le=2**31 - 1)]


class SandboxPoolSettings(Strict):
    """A node pool only sandboxes run on: tainted `verl-ack/sandbox=true:NoSchedule` and labelled
    `verl-ack/pool: sandbox` (components/cloud/nodepools.py); the SandboxSet tolerates and selects it. Model-written
    code then shares no kernel with the controllers, MLflow or the data jobs."""

    instance_types: list[InstanceType] = Field(
        default_factory=lambda: ["ecs.g7.2xlarge", "ecs.g8i.2xlarge"], min_length=1, max_length=20,
        description="ECS instance types of the sandbox nodes, in order of preference (the plan prices the first). "
        "With runtime_name Sandboxed-Container.runv they must be ECS Bare Metal types (ACK's only node type for runV).")
    nodes: int = Field(2, ge=1, le=50, description="Nodes in the sandbox pool (the warm pool's capacity).")
    cpus_per_node: int = Field(8, ge=2, le=1024, description="vCPUs per sandbox node (sizes the warm pool in the plan).")
    memory_gib_per_node: int = Field(32, ge=4, le=16384, description="Memory per sandbox node, GiB (sizes the warm pool).")
    system_disk_gib: int = Field(120, ge=40, le=2048, description="System disk per sandbox node, GiB.")
    runtime_name: Optional[Literal["Sandboxed-Container.runv"]] = Field(
        None, description="Container runtime of the pool's nodes. Empty = the cluster's (containerd, runC). "
        "`Sandboxed-Container.runv` runs every pod in its own lightweight VM with its own kernel (ACK "
        "Sandboxed-Container; ECS Bare Metal only, and ACK's runtime table lists it for older Kubernetes versions "
        "only: check the cluster version first). Pair it with sandbox.runtime_class: runv.")
