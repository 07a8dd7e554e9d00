"""verl 0.9.1's own tool path, importable without its heavy dependencies (fixtures registered by conftest.py).

The installed verl files are imported as they are: the tool registry, the tool schemas and BaseTool, the hermes
tool parser, `ToolAgentLoop` (its `_call_tool` and `_handle_processing_tools_state`), the rollout tracer, the
gsm8k scorer, `default_compute_score` and `load_extern_object`. verl's package `__init__` files are not run
(they import torch), and only what these files import but never use on this path is stubbed: torch and PIL
(type annotations), transformers' `get_json_schema` (function tools), `ray_utils.get_event_loop`,
`profiler.simple_timer`, the agent-loop base module (ToolAgentLoop's base class and registry) and the rollout
replica's `TokenOutput`. The ConfigMap files are written to a directory on sys.path, as in the Ray pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import re
import sys
import time
import types
from pathlib import Path

import pytest

from components.workloads.training.verl_config import (
    MCP_DIR,
    MCP_FILE,
    TOOL_CONFIG_FILE,
    TOOLS_MODULE,
    config_files,
)
from tests.components.workloads.training.test_rayjob import SITE, settings_for

VERL = SITE / "verl"
PACKAGES = ("verl", "verl.utils", "verl.tools", "verl.experimental", "verl.experimental.agent_loop", "verl.workers",
            "verl.workers.rollout")


def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


class _AgentLoopBase:
    """Stands in for verl's AgentLoopBase: ToolAgentLoop's tool path uses only this check from it."""

    def _assert_mm_supported(self, has_mm: bool) -> None:
        assert not has_mm


@contextlib.contextmanager
def _simple_timer(name: str, timing: dict):
    start = time.perf_counter()
    yield
    timing[name] = timing.get(name, 0.0) + time.perf_counter() - start


def _stubs() -> dict[str, types.ModuleType]:
    pil_image = _module("PIL.Image", Image=type("Image", (), {}))
    return {
        "torch": _module("torch", Tensor=type("Tensor", (), {})),
        "PIL": _module("PIL", Image=pil_image),
        "PIL.Image": pil_image,
        "transformers": _module("transformers"),
        "transformers.utils": _module("transformers.utils", get_json_schema=lambda fn: {}),
        "regex": re,  # the hermes parser's patterns are plain `re` syntax
        "verl.utils.ray_utils": _module("verl.utils.ray_utils", get_event_loop=asyncio.get_event_loop),
        "verl.utils.profiler": _module("verl.utils.profiler", simple_timer=_simple_timer),
        "verl.workers.rollout.replica": _module("verl.workers.rollout.replica", TokenOutput=object),
        "verl.experimental.agent_loop.agent_loop": _module(
            "verl.experimental.agent_loop.agent_loop", AgentLoopBase=_AgentLoopBase, AgentLoopOutput=object,
            ToolListWrap=object, register=lambda name: (lambda cls: cls)),
    }


@pytest.fixture(scope="module")
def verl():
    """The installed verl's modules on the tool path, removed from sys.modules afterwards."""
    before = set(sys.modules)
    with pytest.MonkeyPatch.context() as mp:
        for name in PACKAGES:
            path = VERL.joinpath(*name.split(".")[1:])
            spec = importlib.util.spec_from_file_location(name, path / "__init__.py",
                                                          submodule_search_locations=[str(path)])
            mp.setitem(sys.modules, name, importlib.util.module_from_spec(spec))  # a shell: __init__ not run
        for name, module in _stubs().items():
            mp.setitem(sys.modules, name, module)
        ns = types.SimpleNamespace(
            registry=importlib.import_module("verl.tools.tool_registry"),
            schemas=importlib.import_module("verl.tools.schemas"),
            loop=importlib.import_module("verl.experimental.agent_loop.tool_agent_loop"),
            parser=importlib.import_module("verl.experimental.agent_loop.tool_parser"),
            reward_score=importlib.import_module("verl.utils.reward_score"),
            gsm8k=importlib.import_module("verl.utils.reward_score.gsm8k"),
            import_utils=importlib.import_module("verl.utils.import_utils"),
        )
        for module in (ns.registry, ns.loop, ns.reward_score):
            assert Path(module.__file__).is_relative_to(VERL), module.__file__
        yield ns
    for name in set(sys.modules) - before:
        if name.startswith(("verl", "PIL", "transformers", TOOLS_MODULE)) or name in ("torch", "regex"):
            del sys.modules[name]


def write_config_map(tmp_path: Path, s=None, mcp_servers: str | None = None) -> Path:
    """The job's ConfigMap files in `tmp_path/config` (the tool config pointing at `tmp_path/mcp`), and the
    MCP servers file in `tmp_path/mcp`. Returns the tool config path."""
    s = s or settings_for("dev")
    config_dir, mcp_dir = tmp_path / "config", tmp_path / "mcp"
    config_dir.mkdir(exist_ok=True)
    mcp_dir.mkdir(exist_ok=True)
    for name, text in config_files(s).items():
        (config_dir / name).write_text(text.replace(MCP_DIR, str(mcp_dir)))
    (mcp_dir / MCP_FILE).write_text(mcp_servers or
                                    '{"mcpServers": {"kruise-sandbox": {"url": "http://x/mcp", "transport": "http"}}}')
    return config_dir / TOOL_CONFIG_FILE


@pytest.fixture
def build_tools(verl, tmp_path, monkeypatch):
    """Build the tools exactly as the agent-loop workers do: the ConfigMap directory on sys.path, then verl's
    `initialize_tools_from_config` on the generated tool config. Returns (module, {name: tool})."""

    def build(s=None, client=None, **kwargs):
        path = write_config_map(tmp_path, s, **kwargs)
        monkeypatch.syspath_prepend(str(path.parent))
        monkeypatch.delitem(sys.modules, TOOLS_MODULE, raising=False)  # a fresh module: fresh ToolStats
        if client is not None:
            monkeypatch.setitem(sys.modules, "fastmcp", _module("fastmcp", Client=client))
        tools = verl.registry.initialize_tools_from_config(str(path))
        module = sys.modules[TOOLS_MODULE]
        assert Path(module.__file__).parent == path.parent
        return module, {tool.name: tool for tool in tools}

    yield build
    sys.modules.pop(TOOLS_MODULE, None)


class AgentLoop:
    """verl's ToolAgentLoop with the state its tool path reads; the model turn is given as text and parsed by
    verl's hermes tool parser (Qwen2.5's format)."""

    def __init__(self, verl, tools: dict, max_tool_response_length: int, max_parallel_calls: int = 1):
        loop = verl.loop.ToolAgentLoop.__new__(verl.loop.ToolAgentLoop)
        loop.tools = tools
        loop.tool_schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools.values()]
        loop.max_parallel_calls = max_parallel_calls
        loop.max_tool_response_length = max_tool_response_length
        loop.tool_response_truncate_side = "middle"  # verl's default
        loop.processor = None
        loop.response_length = 10**6
        self.texts: list[str] = []
        loop.tool_parser = verl.parser.ToolParser.get_tool_parser(
            "hermes", types.SimpleNamespace(decode=lambda ids: self.texts[ids[0]]))

        async def merge(previous, messages, prompt_ids, response_mask, logprobs, tools=None):
            return types.SimpleNamespace(token_ids=prompt_ids + [0]), response_mask + [0], logprobs

        loop.ct_merge_context_msg = merge
        self.loop, self.verl = loop, verl

    def new_trajectory(self, tools_kwargs: dict | None = None):
        return self.verl.loop.AgentData(messages=[], image_data=None, video_data=None, audio_data=None,
                                        mm_processor_kwargs=None, metrics={}, request_id="r",
                                        tools_kwargs=tools_kwargs or {})

    def turn(self, agent_data, model_text: str) -> list[dict]:
        """One assistant turn with tool calls, then verl's tool processing; returns the new tool messages."""

        async def run():
            self.texts.append(model_text)
            _, agent_data.tool_calls = await self.loop.tool_parser.extract_tool_calls([len(self.texts) - 1])
            assert agent_data.tool_calls, model_text
            before = len(agent_data.messages)
            await self.loop._handle_processing_tools_state(agent_data)
            return agent_data.messages[before:]

        return asyncio.run(run())


def tool_call(name: str, **arguments) -> str:
    """A Qwen2.5 (hermes) tool call as the model writes it."""
    return f"Let me check.\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
