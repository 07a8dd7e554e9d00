"""The tools the agent loop offers (agent_tools/verl_ack_tools.py), run against verl 0.9.1's real BaseTool,
schemas and gsm8k scorer (loaded from the installed files; verl's package __init__ needs torch) and called the
way verl's ToolAgentLoop calls them: create(create_kwargs=...), execute(id, args, agent_data=...), release(id)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import types
from dataclasses import dataclass

import pytest

from components.workloads.training.verl_config import TOOLS_SOURCE, tool_config
from pipeline.gsm8k import build_row
from tests.components.workloads.training.test_rayjob import SITE, settings_for

VERL = SITE / "verl"


@dataclass
class TextContent:
    text: str
    type: str = "text"


@dataclass
class CallToolResult:
    content: list
    isError: bool = False


class FakeClient:
    """Stands in for fastmcp.Client: records each session and call, answers like the sandbox manager."""

    sessions: list = []
    calls: list = []
    in_flight = 0
    peak = 0
    reply = CallToolResult([TextContent(json.dumps({"logs": {"stdout": ["42\n"], "stderr": []}, "results": [],
                                                     "sandbox_id": "sbx-1", "execution_count": 1}))])

    def __init__(self, config, timeout=None, init_timeout=None):
        FakeClient.sessions.append(config)
        FakeClient.timeouts = (timeout, init_timeout)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    async def call_tool_mcp(self, name, arguments, timeout=None):
        FakeClient.in_flight += 1
        FakeClient.peak = max(FakeClient.peak, FakeClient.in_flight)
        FakeClient.calls.append((name, arguments, timeout))
        await asyncio.sleep(0.01)
        FakeClient.in_flight -= 1
        return FakeClient.reply


def _load(monkeypatch, name: str, path, package: bool = False):
    """Import `path` as module `name` (a package shell without running its __init__ when `package`); the
    monkeypatch restores sys.modules afterwards."""
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=[] if package else None)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    if not package:
        spec.loader.exec_module(module)
    return module


@pytest.fixture
def tools(monkeypatch):
    """verl_ack_tools imported on top of verl's real base_tool/schemas/gsm8k files and a fake fastmcp."""
    for pkg in ("verl", "verl.utils", "verl.tools", "verl.utils.reward_score"):
        _load(monkeypatch, pkg, VERL / "__init__.py", package=True)
    trace = types.ModuleType("verl.utils.rollout_trace")
    trace.rollout_trace_op = lambda fn: fn  # tracing is off in a unit test
    monkeypatch.setitem(sys.modules, "verl.utils.rollout_trace", trace)
    _load(monkeypatch, "verl.tools.schemas", VERL / "tools" / "schemas.py")
    _load(monkeypatch, "verl.tools.base_tool", VERL / "tools" / "base_tool.py")
    _load(monkeypatch, "verl.utils.reward_score.gsm8k", VERL / "utils" / "reward_score" / "gsm8k.py")
    fastmcp = types.ModuleType("fastmcp")
    fastmcp.Client = FakeClient
    monkeypatch.setitem(sys.modules, "fastmcp", fastmcp)
    FakeClient.sessions, FakeClient.calls, FakeClient.in_flight, FakeClient.peak = [], [], 0, 0
    return _load(monkeypatch, "verl_ack_tools", TOOLS_SOURCE)


def make(tools, index: int, tmp_path, **config_changes):
    """A tool as verl's tool registry builds it from our tool config."""
    entry = tool_config(settings_for("dev"))["tools"][index]
    config = dict(entry["config"])
    if "mcp_servers_config_path" in config:
        path = tmp_path / "mcp_servers.json"
        path.write_text(json.dumps({"mcpServers": {"kruise-sandbox": {"url": "http://x/mcp", "transport": "http"}}}))
        config["mcp_servers_config_path"] = str(path)
    config.update(config_changes)
    schema = sys.modules["verl.tools.schemas"].OpenAIFunctionToolSchema.model_validate(entry["tool_schema"])
    cls = getattr(tools, entry["class_name"].rsplit(".", 1)[1])
    return cls(config=config, tool_schema=schema)


def call(tool, arguments: dict, tools_kwargs: dict | None = None):
    """ToolAgentLoop._call_tool's sequence for a BaseTool."""

    async def run():
        kwargs = (tools_kwargs or {}).get(tool.name, {})
        instance_id, _ = await tool.create(create_kwargs=kwargs.get("create_kwargs", {}))
        try:
            return await tool.execute(instance_id, arguments, agent_data=None)
        finally:
            await tool.release(instance_id)

    return asyncio.run(run())


def test_gsm8k_tool_scores_against_the_rows_ground_truth(tools, tmp_path):
    tool = make(tools, 0, tmp_path)
    assert tool.name == "calc_gsm8k_reward"
    row = build_row({"question": "How many?", "answer": "... #### 1,234"}, 0, "train")
    kwargs = row["extra_info"]["tools_kwargs"]
    response, tool_reward, metrics = call(tool, {"answer": "1234"}, kwargs)
    assert metrics == {"reward": 1.0} and tool_reward == 0.0
    assert "reward=1.0" in response.text
    response, tool_reward, metrics = call(tool, {"answer": "#### 1233"}, kwargs)
    assert metrics == {"reward": 0.0} and tool_reward == tools.WRONG_ANSWER_PENALTY
    assert tool._instances == {}  # released after every call


def test_gsm8k_tool_without_ground_truth_says_so_instead_of_scoring(tools, tmp_path):
    response, tool_reward, _ = call(make(tools, 0, tmp_path), {"answer": "3"})
    assert "No ground truth" in response.text and tool_reward == 0.0


def test_code_tool_runs_run_code_once_in_a_new_session_with_the_timeout(tools, tmp_path):
    tool = make(tools, 1, tmp_path)
    assert tool.name == "run_code_once"
    response, reward, metrics = call(tool, {"code": "print(6*7)", "language": "python", "extra": 1})
    assert response.text == "stdout:\n42"
    assert (reward, metrics) == (0.0, {"mcp_error": False})
    limit = settings_for("dev").training.tool_timeout_seconds
    grace = tools.CLIENT_GRACE_SECONDS
    # The sandbox enforces the limit; the client waits a grace period longer and bounds the handshake.
    assert FakeClient.calls == [("run_code_once", {"code": "print(6*7)", "language": "python"}, limit + grace)]
    assert FakeClient.timeouts == (limit + grace, grace)
    assert FakeClient.sessions == [json.loads((tmp_path / "mcp_servers.json").read_text())]


def test_code_tool_refuses_empty_code_without_claiming_a_sandbox(tools, tmp_path):
    response, _, metrics = call(make(tools, 1, tmp_path), {"code": "  "})
    assert response.text.startswith("error:") and metrics == {"mcp_error": True}
    assert FakeClient.calls == []


def test_code_tool_never_holds_more_sandboxes_than_its_share_of_the_pool(tools, tmp_path):
    tool = make(tools, 1, tmp_path, max_concurrency=3)

    async def burst():
        await asyncio.gather(*(tool.execute("i", {"code": "1"}) for _ in range(10)))

    asyncio.run(burst())
    assert len(FakeClient.calls) == 10 and FakeClient.peak == 3


def test_code_tool_refuses_a_servers_file_with_several_servers(tools, tmp_path):
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"url": "http://a"}, "b": {"url": "http://b"}}}))
    with pytest.raises(ValueError, match="exactly one MCP server"):
        make(tools, 1, tmp_path, mcp_servers_config_path=str(path))


def test_results_are_condensed_for_the_model(tools):
    render = tools.render_result
    text = json.dumps({"logs": {"stdout": ["a\n", "b\n"], "stderr": ["warn\n"]}, "results": [{"text": "7"}],
                       "error": {"name": "ZeroDivisionError", "value": "division by zero"}})
    out = render([TextContent(text)], False)
    assert out.splitlines() == ["stdout:", "a", "b", "stderr:", "warn", "result: 7",
                                'error: {"name": "ZeroDivisionError", "value": "division by zero"}']
    assert render([TextContent("sandbox pool exhausted")], True) == "error: sandbox pool exhausted"
    assert render([TextContent(json.dumps({"logs": {}}))], False) == "(no output)"


def test_an_mcp_error_that_is_not_the_result_json_reaches_the_model_whole(tools):
    render = tools.render_result
    body = json.dumps({"detail": "claim sandbox: no stock in SandboxSet code-interpreter"})
    assert render([TextContent(body)], True) == f"error: {body}"
    assert render([TextContent(json.dumps(["quota exceeded"]))], True) == 'error: ["quota exceeded"]'
