"""`run_code_once` through the real MCP client against a server that publishes the sandbox manager's own tool
definition (kruise_run_code_once_tool.json: openkruise/agents PR #165 at 136236a8, mcp-go v0.43.2).

The Python MCP client (`mcp.ClientSession.call_tool`, which fastmcp 2.14.7's `Client.call_tool_mcp` calls) lists
the server's tools and validates every successful result's structured content against the tool's output
schema; a mismatch raises, so it would turn every call into an error. The server here answers the way mcp-go's
`NewStructuredToolHandler` does: a result as structured content plus the same JSON as text, a handler error as
`isError` with the text "tool execution failed: ...". The tool is built by verl's registry from the generated
config, with a `fastmcp.Client` stand-in that is exactly what fastmcp does on this path: an initialized
`mcp.ClientSession` and `session.call_tool(name, arguments, read_timeout_seconds=...)`."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.memory import create_connected_server_and_client_session

from components.workloads.training.verl_config import CODE_TOOL, tool_config
from tests.agent_tools.harness import AgentLoop, tool_call
from tests.components.workloads.training.test_rayjob import settings_for

TOOL = json.loads((Path(__file__).parent / "kruise_run_code_once_tool.json").read_text())
ANSI_TRACEBACK = ("\x1b[0;31m---------------------------------------------------------------------------\x1b[0m\n"
                  "\x1b[0;31mZeroDivisionError\x1b[0m                         Traceback (most recent call last)\n"
                  "Cell \x1b[0;32mIn[1], line 1\x1b[0m\n----> 1 \x1b[38;5;241m1\x1b[39m/\x1b[38;5;241m0\x1b[39m\n\n"
                  "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero")


def go_result(data: dict) -> types.CallToolResult:
    """mcp-go's NewToolResultStructuredOnly: Go's compact JSON as text, the same object as structured content."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(data, separators=(",", ":")))],
                                structuredContent=data)


def go_error(message: str) -> types.CallToolResult:
    """mcp-go's NewToolResultError, which NewStructuredToolHandler returns for any handler error."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"tool execution failed: {message}")],
                                isError=True)


def kruise_server(reply: types.CallToolResult) -> Server:
    server = Server("kruise-agents-mcp-server", version="0.0.1")
    definition = types.Tool.model_validate({k: v for k, v in TOOL.items() if not k.startswith("_")})

    @server.list_tools()
    async def list_tools():
        return [definition]

    @server.call_tool(validate_input=False)
    async def call_tool(name, arguments):
        assert name == "run_code_once"
        jsonschema.validate(arguments, definition.inputSchema)  # what the Go handler binds
        return reply  # a CallToolResult goes out as it is, unvalidated, like the Go server's

    return server


def mcp_client(server: Server):
    class Client:
        """fastmcp.Client's constructor and call_tool_mcp (2.14.7), on the mcp package's session."""

        def __init__(self, config, timeout=None, init_timeout=None):
            self.timeout = timeout

        async def __aenter__(self):
            self._session_cm = create_connected_server_and_client_session(server)
            self.session = await self._session_cm.__aenter__()
            return self

        async def __aexit__(self, *exc):
            return await self._session_cm.__aexit__(*exc)

        async def call_tool_mcp(self, name, arguments, timeout=None):
            return await self.session.call_tool(name=name, arguments=arguments,
                                                read_timeout_seconds=timedelta(seconds=float(timeout)))

    return Client


def call(verl, build_tools, reply: types.CallToolResult, code: str = "print(6*7)"):
    module, tools = build_tools(client=mcp_client(kruise_server(reply)))
    loop = AgentLoop(verl, tools, settings_for("dev").training.max_tool_response_chars)
    (message,) = loop.turn(loop.new_trajectory(), tool_call(CODE_TOOL, code=code))
    return message["content"], module.STATS.take()


def test_the_published_schema_is_the_go_types_and_our_declared_arguments_fit_it():
    out = TOOL["outputSchema"]
    assert out["required"] == ["logs", "results", "sandbox_id"]  # error and execution_count are omitempty
    assert out["properties"]["error"]["required"] == ["name", "value", "traceback"]
    (ours,) = [t for t in tool_config(settings_for("dev"))["tools"] if t["tool_schema"]["function"]["name"] == CODE_TOOL]
    for language in ours["tool_schema"]["function"]["parameters"]["properties"]["language"]["enum"]:
        jsonschema.validate({"code": "1", "language": language}, TOOL["inputSchema"])
    assert ours["tool_schema"]["function"]["parameters"]["required"] == TOOL["inputSchema"]["required"]


def test_a_successful_run_passes_the_clients_schema_check(verl, build_tools):
    text, metrics = call(verl, build_tools, go_result({
        "logs": {"stdout": ["42\n"], "stderr": []}, "results": [{"text": "42", "is_main_result": True}],
        "sandbox_id": "sbx-1", "execution_count": 1}))
    assert text == "stdout:\n42\nresult: 42"
    assert metrics["tools/run_code_once/ok_total"] == 1 and metrics["tools/run_code_once/failure_rate"] == 0


def test_code_that_raises_is_a_result_not_a_failure(verl, build_tools):
    text, metrics = call(verl, build_tools, go_result({
        "error": {"name": "ZeroDivisionError", "value": "division by zero", "traceback": ANSI_TRACEBACK},
        "logs": {"stdout": [], "stderr": []}, "results": [], "sandbox_id": "sbx-2"}), code="1/0")
    assert text.endswith("ZeroDivisionError: division by zero\nerror: ZeroDivisionError: division by zero")
    assert "\x1b" not in text and "----> 1 1/0" in text
    assert metrics["tools/run_code_once/code_error_total"] == 1 and metrics["tools/run_code_once/failure_rate"] == 0


def test_an_empty_run_is_no_output(verl, build_tools):
    text, _ = call(verl, build_tools, go_result({"logs": {"stdout": [], "stderr": []}, "results": [],
                                                 "sandbox_id": "sbx-3"}), code="x = 1")
    assert text == "(no output)"


@pytest.mark.parametrize("message", [
    "Failed to create sandbox: no available sandbox in SandboxSet code-interpreter",
    "code execution failed: sandbox returned error: status=502, body=upstream connect error",
])
def test_a_manager_error_skips_validation_and_reaches_the_model_whole(verl, build_tools, message):
    text, metrics = call(verl, build_tools, go_error(message))
    assert text == f"error: tool execution failed: {message}"
    assert metrics["tools/run_code_once/failed_total"] == 1 and metrics["tools/run_code_once/failure_rate"] == 1


def test_a_result_that_breaks_the_schema_is_a_counted_failure_not_a_crash(verl, build_tools):
    # A Go nil slice marshals as null: what a handler that forgot to initialise `results` would send.
    text, metrics = call(verl, build_tools, go_result({"logs": {"stdout": ["1\n"], "stderr": []}, "results": None,
                                                       "sandbox_id": "sbx-4"}))
    assert text.startswith("error: run_code_once failed before returning a result (RuntimeError: Invalid "
                           "structured content returned by tool run_code_once")
    assert metrics["tools/run_code_once/failed_total"] == 1
