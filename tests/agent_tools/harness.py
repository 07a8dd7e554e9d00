"""verl 0.9.1's own tool path, importable without its heavy dependencies (fixtures registered by conftest.py).

The installed verl files are imported as they are: the tool registry, the tool schemas and BaseTool, the hermes
tool parser, `ToolAgentLoop` (its whole `run`: the state machine, `_call_tool`, `_handle_processing_tools_state`),
the Continuous Token builders that build the token stream and its `response_mask`, the naive reward manager
(`run_single`) and its registry, the rollout tracer, the gsm8k scorer, `default_compute_score` and
`load_extern_object`. verl's package `__init__` files are not run (they import torch, Ray, tensordict), and only
what these files import but never use on this path is stubbed: torch and PIL (type annotations), transformers'
`get_json_schema` (function tools) and its tokenizer base classes (annotations), `ray_utils.get_event_loop`,
`profiler.simple_timer`, `verl.DataProto` (an annotation), the rollout replica's `TokenOutput`, and the
agent-loop base module (agent_loop.py imports Ray, hydra and tensordict): its `AgentLoopBase` stand-in keeps what
the base's `__init__` keeps and calls verl's real Continuous Token builder exactly as the base's `ct_*` methods do.
The ConfigMap files are written to a directory on sys.path, as in the Ray pods.
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
PACKAGES = ("verl", "verl.utils", "verl.utils.tokenizer", "verl.tools", "verl.experimental",
            "verl.experimental.agent_loop", "verl.experimental.reward_loop", "verl.experimental.reward_loop.reward_manager",
            "verl.workers", "verl.workers.rollout")


def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


class _AgentLoopBase:
    """Stands in for verl's AgentLoopBase (text only): what its `__init__` keeps, and its `ct_*` methods, which hand
    the work to verl's own Continuous Token builder for the model type and align the response mask with it."""

    def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config,
                 hf_model_type=None, **kwargs):
        self.config = trainer_config.config
        self.rollout_config = self.config.actor_rollout_ref.rollout
        self.server_manager, self.tokenizer, self.processor = server_manager, tokenizer, processor
        wiring = importlib.import_module("verl.utils.tokenizer.continuous_token_wiring")
        self.continuous_token_builder = wiring.create_continuous_token_builder(tokenizer, hf_model_type=hf_model_type)

    def _assert_mm_supported(self, has_mm: bool) -> None:
        assert not has_mm

    async def process_multi_modal_info(self, messages):
        return {}

    def _get_mm_processor_kwargs(self, audio_data=None):
        return {}

    @staticmethod
    def build_sglang_video_payload(videos, mm_inputs):
        return None

    async def ct_build_initial_tokens(self, messages, tools=None, images=None, videos=None, audios=None,
                                      mm_inputs_out=None):
        return self.continuous_token_builder.build_initial_tokens(messages, tools=tools, images=images, videos=videos,
                                                                  audios=audios, mm_inputs_out=mm_inputs_out)

    async def ct_merge_context_msg(self, previous_messages, updated_messages, runtime_token_ids, response_mask,
                                   response_logprobs=None, tools=None):
        builder = self.continuous_token_builder
        merge = builder.merge_context_tokens(previous_messages, updated_messages, runtime_token_ids, tools=tools)
        mask, logprobs = builder.align_response_metadata(merge, response_mask, response_logprobs)
        return merge, mask, logprobs

    async def ct_merge_assistant_token(self, runtime_token_ids, assistant_token_ids, response_mask,
                                       response_logprobs=None, assistant_logprobs=None):
        builder = self.continuous_token_builder
        merge = builder.merge_assistant_tokens(runtime_token_ids, assistant_token_ids)
        mask, logprobs = builder.align_response_metadata(merge, response_mask, response_logprobs,
                                                         assistant_logprobs=assistant_logprobs)
        return merge, mask, logprobs


class _Record:
    """Stands in for verl's pydantic outputs (AgentLoopOutput): keyword fields as attributes."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


class ToolListWrap:
    def __init__(self, tools: list):
        self.tools = tools


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
        "transformers": _module("transformers", PreTrainedTokenizerBase=object, ProcessorMixin=object,
                                AutoTokenizer=object),
        "transformers.utils": _module("transformers.utils", get_json_schema=lambda fn: {}),
        "regex": re,  # the hermes parser's patterns are plain `re` syntax
        "verl.utils.ray_utils": _module("verl.utils.ray_utils", get_event_loop=asyncio.get_event_loop),
        "verl.utils.profiler": _module("verl.utils.profiler", simple_timer=_simple_timer),
        "verl.workers.rollout.replica": _module("verl.workers.rollout.replica", TokenOutput=object),
        "verl.experimental.agent_loop.agent_loop": _module(
            "verl.experimental.agent_loop.agent_loop", AgentLoopBase=_AgentLoopBase, AgentLoopOutput=_Record,
            ToolListWrap=ToolListWrap, register=lambda name: (lambda cls: cls)),
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
        sys.modules["verl"].DataProto = object  # naive.py's annotation
        # What the reward-manager package's __init__ re-exports (it also imports every other manager).
        managers = sys.modules["verl.experimental.reward_loop.reward_manager"]
        managers.register = importlib.import_module("verl.experimental.reward_loop.reward_manager.registry").register
        ns = types.SimpleNamespace(
            registry=importlib.import_module("verl.tools.tool_registry"),
            schemas=importlib.import_module("verl.tools.schemas"),
            loop=importlib.import_module("verl.experimental.agent_loop.tool_agent_loop"),
            parser=importlib.import_module("verl.experimental.agent_loop.tool_parser"),
            reward_score=importlib.import_module("verl.utils.reward_score"),
            gsm8k=importlib.import_module("verl.utils.reward_score.gsm8k"),
            import_utils=importlib.import_module("verl.utils.import_utils"),
            naive=importlib.import_module("verl.experimental.reward_loop.reward_manager.naive"),
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


# --------------------------------------------------------------------------------------------- a scripted model
class ChatTokenizer:
    """A character-level tokenizer with Qwen2.5's ChatML chat template (special tokens `<|im_start|>`,
    `<|im_end|>`, `<|endoftext|>`; tools in the system turn; consecutive tool replies in one `user` turn, each
    inside `<tool_response>`), enough for verl's Qwen Continuous Token builder, hermes parser and reward decode."""

    SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
    OFFSET = 100
    _split = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL) + ")")

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = []
        for part in self._split.split(text):
            if part in self.SPECIAL:
                ids.append(self.SPECIAL.index(part))
            else:
                ids.extend(self.OFFSET + ord(c) for c in part)
        return ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i < self.OFFSET:
                if not skip_special_tokens:
                    out.append(self.SPECIAL[i])
            else:
                out.append(chr(i - self.OFFSET))
        return "".join(out)

    @property
    def all_special_ids(self) -> list[int]:
        return list(range(len(self.SPECIAL)))

    def convert_tokens_to_ids(self, token: str):
        return self.SPECIAL.index(token) if token in self.SPECIAL else None

    def render(self, messages: list[dict], add_generation_prompt: bool, tools=None) -> str:
        text = ""
        rest = list(messages)
        if tools:
            system = rest.pop(0)["content"] if rest and rest[0]["role"] == "system" else "You are a helpful assistant."
            text += ("<|im_start|>system\n" + system + "\n\n# Tools\n\n<tools>\n"
                     + "\n".join(json.dumps(t) for t in tools) + "\n</tools><|im_end|>\n")
        for i, m in enumerate(rest):
            role, content = m["role"], m.get("content") or ""
            if role == "tool":
                if i == 0 or rest[i - 1]["role"] != "tool":
                    text += "<|im_start|>user"
                text += "\n<tool_response>\n" + content + "\n</tool_response>"
                if i == len(rest) - 1 or rest[i + 1]["role"] != "tool":
                    text += "<|im_end|>\n"
            elif role == "assistant":
                text += "<|im_start|>assistant" + ("\n" + content if content else "")
                for call in m.get("tool_calls") or []:
                    fn = call["function"]
                    text += ("\n<tool_call>\n" + json.dumps({"name": fn["name"], "arguments": fn["arguments"]})
                             + "\n</tool_call>")
                text += "<|im_end|>\n"
            else:
                text += f"<|im_start|>{role}\n{content}<|im_end|>\n"
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False, tools=None,
                            return_dict=False, **kwargs):
        text = self.render(messages, add_generation_prompt, tools)
        return self.encode(text) if tokenize else text


class ScriptedModel:
    """The rollout server: each `generate` returns the next scripted turn's tokens, ending `<|im_end|>` (the stop
    token) as Qwen's do."""

    def __init__(self, tokenizer: ChatTokenizer, turns: list[str]):
        self.tokenizer, self.turns, self.prompts = tokenizer, list(turns), []

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        self.prompts.append(list(prompt_ids))
        text = self.turns.pop(0) if self.turns else "I have nothing to add."
        return types.SimpleNamespace(token_ids=self.tokenizer.encode(text + "<|im_end|>"), log_probs=None,
                                     num_preempted=None, routed_experts=None, extra_fields={})


def rollout_config(s) -> types.SimpleNamespace:
    """What ToolAgentLoop reads of `actor_rollout_ref.rollout`: the stack's values, verl's defaults for the rest
    (rollout.yaml: max_user_turns null, tool_response_truncate_side middle, format hermes)."""
    t = s.training
    multi_turn = types.SimpleNamespace(max_user_turns=None, max_assistant_turns=t.max_assistant_turns,
                                       max_parallel_calls=t.max_parallel_calls,
                                       max_tool_response_length=t.max_tool_response_chars,
                                       tool_response_truncate_side="middle", format="hermes")
    return types.SimpleNamespace(multi_turn=multi_turn, prompt_length=t.max_prompt_length,
                                 response_length=t.max_response_length, full_determinism=False)


class _Ids(list):
    """A 1-D token tensor as run_single uses one: shape, slices, sum."""

    @property
    def shape(self):
        return (len(self),)

    def __getitem__(self, index):
        item = super().__getitem__(index)
        return _Ids(item) if isinstance(index, slice) else item

    def sum(self):
        return sum(self)


class _Batch:
    """verl's DataProto as the naive reward manager indexes it (`data[-1:]`, `data[0]`, `.batch`, `.non_tensor_batch`),
    holding one trajectory."""

    def __init__(self, batch: dict, non_tensor_batch: dict):
        self.batch, self.non_tensor_batch = batch, non_tensor_batch

    def __getitem__(self, index):
        return self


def reward_of(verl, output, row: dict, tokenizer, compute_score) -> dict:
    """The trajectory's reward as verl computes it: the tensors and non-tensor fields `AgentLoopWorker._compute_score`
    sends (prompts, responses, an attention mask over both, the row's columns, `tool_extra_fields` = the output's
    extra fields; no response_mask), scored by verl's `NaiveRewardManager.run_single` with the job's reward
    function."""

    async def run():
        manager = verl.naive.NaiveRewardManager(config=None, tokenizer=tokenizer, compute_score=compute_score)
        data = _Batch(
            {"prompts": _Ids(output.prompt_ids), "responses": _Ids(output.response_ids),
             "attention_mask": _Ids([1] * (len(output.prompt_ids) + len(output.response_ids)))},
            {"data_source": row["data_source"], "reward_model": row["reward_model"],
             "extra_info": dict(row["extra_info"]), "tool_extra_fields": dict(output.extra_fields),
             "__num_turns__": output.num_turns})
        return await manager.run_single(data)

    return asyncio.run(run())
