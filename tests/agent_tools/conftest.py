"""Fixtures of the agent-tool tests (defined in harness.py)."""

from tests.agent_tools.harness import build_tools, verl  # noqa: F401
