"""The two tools the GRPO agent loop offers the model: `calc_gsm8k_reward` and `run_code_once`.

verl 0.9.1 no longer ships tools of its own: `verl.tools.gsm8k_tool.Gsm8kTool`, `MCPBaseTool` and
`MCPSearchTool` were removed (verl PR #6302; `verl/tools/tool_registry.py` says "MCP tool is removed for
now" and only knows `type: native`). What remains is the native contract this module implements:

- `tool_registry.initialize_tools_from_config` imports `class_name`, validates `tool_schema` with
  `OpenAIFunctionToolSchema` and calls `cls(config=<the config mapping>, tool_schema=<schema>)`;
- `ToolAgentLoop._call_tool` runs, for EVERY call, `create(create_kwargs=tools_kwargs[name]["create_kwargs"])`,
  then `execute(instance_id, arguments, agent_data=...)` and finally `release(instance_id)`.

This file is mounted into every Ray pod from the job's ConfigMap and put on PYTHONPATH, so the class names in
the tool config (`verl_ack_tools.<Class>`) import in the driver, the dataset loader and every agent-loop worker.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Optional
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.reward_score import gsm8k

# A call whose answer does not match the ground truth costs this much tool reward (the value of verl's
# removed Gsm8kTool, kept so runs stay comparable with the upstream recipe).
WRONG_ANSWER_PENALTY = -0.05
# Seconds the client allows beyond the code's own time limit (claiming a sandbox, the reply), and for
# connecting plus the MCP initialize handshake.
CLIENT_GRACE_SECONDS = 30.0


class Gsm8kRewardTool(BaseTool):
    """`calc_gsm8k_reward(answer)`: scores an answer against the row's ground truth, like verl's removed
    Gsm8kTool. The ground truth arrives per trajectory through the dataset's
    `extra_info.tools_kwargs.calc_gsm8k_reward.create_kwargs.ground_truth`."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema):
        super().__init__(config, tool_schema)
        self._instances: dict[str, dict[str, Any]] = {}

    async def create(self, instance_id: Optional[str] = None, create_kwargs: Optional[dict] = None,
                     **kwargs) -> tuple[str, ToolResponse]:
        instance_id = instance_id or uuid4().hex
        ground_truth = (create_kwargs or {}).get("ground_truth", kwargs.get("ground_truth"))
        self._instances[instance_id] = {"ground_truth": None if ground_truth is None else str(ground_truth)}
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        answer = str(parameters.get("answer", "")).strip()
        ground_truth = self._instances.get(instance_id, {}).get("ground_truth")
        if ground_truth is None:
            return ToolResponse(text="No ground truth is known for this question; the answer was not scored."), 0.0, {}
        solution = answer if answer.startswith("#### ") else f"#### {answer}"
        # The "flexible" method takes the last number in the answer, as verl's Gsm8kTool did.
        reward = float(gsm8k.compute_score(solution, ground_truth, method="flexible", format_score=0.0, score=1.0))
        tool_reward = 0.0 if reward > 0 else WRONG_ANSWER_PENALTY
        return ToolResponse(text=f"Current parsed answer={answer!r} reward={reward}"), tool_reward, {"reward": reward}

    async def release(self, instance_id: str, **kwargs) -> None:
        self._instances.pop(instance_id, None)


def _client_class():
    # Imported on first use: the driver and the dataset loader build this tool only to read its schema and
    # never call it, and fastmcp comes from the job's pip install.
    from fastmcp import Client

    return Client


def render_result(content: list, is_error: bool) -> str:
    """Text for the model from an MCP CallToolResult: the sandbox manager's JSON (stdout/stderr/results/error)
    condensed to what a math solution needs, or the raw text when it is not that JSON."""
    text = "\n".join(getattr(part, "text", "") or "" for part in content).strip()
    # An error whose body is not the result JSON (e.g. {"detail": ...}) is shown whole: the model and the
    # rollout trace need the reason, not "(no output)".
    raw = f"error: {text}" if is_error else text
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return raw
    if not isinstance(data, dict):
        return raw
    logs = data.get("logs") or {}
    parts = []
    stdout = "".join(logs.get("stdout") or [])
    stderr = "".join(logs.get("stderr") or [])
    if stdout:
        parts.append(f"stdout:\n{stdout.rstrip()}")
    if stderr:
        parts.append(f"stderr:\n{stderr.rstrip()}")
    for result in data.get("results") or []:
        value = result.get("text") if isinstance(result, dict) else result
        if value:
            parts.append(f"result: {value}")
    error = data.get("error")
    if error:
        parts.append(f"error: {error if isinstance(error, str) else json.dumps(error)}")
    if parts:
        return "\n".join(parts)
    return raw if is_error else "(no output)"


class SandboxCodeTool(BaseTool):
    """Runs the model's code in a fresh sandbox through the sandbox manager's MCP tool (`run_code_once`:
    claim a warm sandbox, execute, delete it).

    config keys:
      mcp_servers_config_path  JSON file {"mcpServers": {<name>: {url, transport, headers}}} (a mounted Secret)
      mcp_tool                 MCP tool to call (default: this tool's own name)
      timeout_seconds          the code's time limit (the server enforces it via X-Execution-Timeout); the
                               client waits that long plus CLIENT_GRACE_SECONDS for the answer, and bounds
                               connecting and the MCP handshake too, so a stuck manager cannot hold a
                               trajectory for httpx's 5-minute read timeout
      max_concurrency          calls one agent-loop worker runs at once (each holds a warm sandbox)
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema):
        super().__init__(config, tool_schema)
        with open(config["mcp_servers_config_path"], encoding="utf-8") as f:
            self._servers = json.load(f)
        if len(self._servers.get("mcpServers") or {}) != 1:
            # With one server fastmcp does not prefix tool names, so `mcp_tool` is the server's own name.
            raise ValueError(f"{config['mcp_servers_config_path']} must define exactly one MCP server")
        self._mcp_tool = config.get("mcp_tool") or self.name
        # The sandbox stops the code at timeout_seconds; the grace covers claiming a sandbox and the reply.
        self._timeout = float(config.get("timeout_seconds", 120)) + CLIENT_GRACE_SECONDS
        self._slots = asyncio.Semaphore(int(config.get("max_concurrency", 8)))

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        arguments = {k: v for k, v in parameters.items() if k in ("code", "language")}
        if not isinstance(arguments.get("code"), str) or not arguments["code"].strip():
            return ToolResponse(text="error: `code` must be a non-empty string"), 0.0, {"mcp_error": True}
        client_cls = _client_class()
        async with self._slots:
            # A new session per call: run_code_once needs no session state, and the server binds a sandbox to
            # a session, so sharing one would keep a sandbox busy between unrelated calls.
            async with client_cls(self._servers, timeout=self._timeout,
                                  init_timeout=CLIENT_GRACE_SECONDS) as client:
                result = await client.call_tool_mcp(self._mcp_tool, arguments, timeout=self._timeout)
        is_error = bool(getattr(result, "isError", False))
        return ToolResponse(text=render_result(result.content, is_error)), 0.0, {"mcp_error": is_error}
