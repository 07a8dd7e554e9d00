"""What the operator sees of the tools as they really run: verl's logging set-up and error kinds that tell an outage
from a schema mismatch (a killed worker's MLflow run: test_verl_ack_entrypoint.py)."""

from __future__ import annotations

import importlib
import logging

import pytest

from tests.agent_tools.test_verl_ack_tools import run_call
from tests.components.workloads.training.test_rayjob import SITE


@pytest.fixture
def verl_root_logging():
    """The root logger as `import verl` leaves it (verl/__init__.py calls set_basic_config(level=WARNING)),
    restored afterwards."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    root.handlers = []
    yield root
    root.setLevel(saved[0])
    root.handlers = saved[1]


def test_healthy_interval_lines_appear_after_import_verl_sets_the_root_logger_to_warning(
        verl, build_tools, verl_root_logging, capsys):
    init = (SITE / "verl/__init__.py").read_text()
    assert "set_basic_config(level=logging.WARNING)" in init  # what every verl process runs at import
    importlib.import_module("verl.utils.logging_utils").set_basic_config(level=logging.WARNING)
    assert verl_root_logging.level == logging.WARNING
    module, tools = build_tools()
    run_call(tools["calc_gsm8k_reward"], {"answer": "2000"},
             {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "2000"}}})
    module.STATS.flush()
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if "calc_gsm8k_reward: 1 calls in the last 60 s, 0 failed" in x]
    assert len(lines) == 1 and lines[0].startswith("INFO:")  # printed once, at INFO, not dropped


@pytest.mark.parametrize("error,kind", [
    (RuntimeError("Client failed to connect: All connection attempts failed"), "RuntimeError/unreachable"),
    (RuntimeError("Client failed to connect: Failed to initialize server session"), "RuntimeError/unreachable"),
    (type("McpError", (Exception,), {})("Timed out while waiting for response to CallToolRequest. Waited 150.0 "
                                        "seconds."), "McpError/timeout"),
    (RuntimeError("Invalid structured content returned by tool run_code_once: 'logs' is a required property"),
     "RuntimeError/schema_mismatch"),
    (ValueError("something else"), "ValueError"),
])
def test_the_log_lines_error_kind_tells_an_outage_from_a_schema_mismatch(build_tools, error, kind):
    module, _ = build_tools()
    assert module.failure_kind(error) == kind
