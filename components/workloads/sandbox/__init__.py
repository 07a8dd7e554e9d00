"""Code sandboxes behind the MCP tool: pure manifest builders (manifests.py; open_source.py for the open-source
manager) and the component that wires them (component.py). Both are re-exported so callers name `components.workloads.sandbox`."""

from components.workloads.sandbox.component import SandboxArgs, Sandboxes
from components.workloads.sandbox.manifests import *  # noqa: F403
from components.workloads.sandbox.open_source import *  # noqa: F403

__all__ = ["SandboxArgs", "Sandboxes"]
