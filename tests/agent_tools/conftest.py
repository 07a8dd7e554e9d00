"""Fixtures of the agent-tool tests (defined in harness.py)."""

import logging

import pytest

from tests.agent_tools.harness import build_tools, verl  # noqa: F401
from tests.agent_tools.test_verl_ack_tools import fake_client  # noqa: F401 (the MCP client stand-in, for every file)


@pytest.fixture(scope="session", autouse=True)
def _quiet_exit_flushes():
    """The tools flush their last interval at interpreter exit (atexit), as a real worker does; after the test
    session those INFO lines are noise under pytest's summary, so the tools' logger is raised to WARNING then."""
    yield
    logging.getLogger("verl_ack_tools").setLevel(logging.WARNING)
