"""The job's tool agent loop: verl 0.9.1's `ToolAgentLoop`, plus the text the model itself generated.

verl marks every response token it did not sample with 0 in `response_mask` (tool replies and the chat template's
turn markers between them: `ContinuousTokenBuilder.align_response_metadata` gives context tokens 0 and assistant
tokens 1; `AgentLoopWorker.generate_sequences` documents `1 for LLM generated tokens, 0 for observation/padding
tokens`). The mask reaches the policy loss but not the reward: `AgentLoopWorker._compute_score` sends the reward
loop the plain `responses`, which the reward manager decodes whole. So this loop decodes the tokens with mask 1,
one generated stretch at a time, and puts the text in the output's `extra_fields[MODEL_TEXT_FIELD]`; verl passes
the extra fields to the reward loop (`tool_extra_fields`), whose naive manager merges them into `extra_info`
(verl_ack_reward.py scores that text).

It is registered under verl's own name `tool_agent` through `rollout.agent.agent_loop_config_path` (the file
replaces the registry entry in every `AgentLoopWorker.__init__`), so every dataset row that asks for the tool agent
gets it, whatever wrote the row. `ModelTextSingleTurnAgentLoop` does the same for verl's `single_turn_agent` (and
rows without agent_name, which verl runs with `rollout.agent.default_agent_loop`, single_turn_agent): a single turn
holds only generated tokens, but verl's loop also sets `tool_rewards: []`, so the reward cannot tell it from a tool
trajectory without its model text; with the field written by both loops, the reward refuses anything else.
Shipped in the job's ConfigMap, imported through the runtime_env's PYTHONPATH.
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl_ack_reward import MODEL_TEXT_FIELD


def generated_stretches(token_ids: list[int], mask: list[int]) -> list[list[int]]:
    """The runs of consecutive tokens whose mask is 1 (what the model sampled), in order."""
    stretches: list[list[int]] = []
    current: list[int] = []
    for token, keep in zip(token_ids, mask, strict=False):
        if keep:
            current.append(token)
        elif current:
            stretches.append(current)
            current = []
    if current:
        stretches.append(current)
    return stretches


def model_only_text(tokenizer: Any, response_ids: list[int], response_mask: list[int]) -> str:
    """The generated stretches decoded as the reward manager decodes (special tokens skipped), joined by newlines."""
    return "\n".join(tokenizer.decode(ids, skip_special_tokens=True).strip()
                     for ids in generated_stretches(response_ids, response_mask))


class ModelTextSingleTurnAgentLoop(SingleTurnAgentLoop):
    """verl's SingleTurnAgentLoop; its output also carries the model's own text (all of its response, which holds
    no tool reply), so the reward scores single-turn rows as it scores tool rows."""

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> Any:
        output = await super().run(sampling_params, **kwargs)
        output.extra_fields[MODEL_TEXT_FIELD] = model_only_text(self.tokenizer, list(output.response_ids),
                                                                list(output.response_mask))
        return output


class ModelTextToolAgentLoop(ToolAgentLoop):
    """verl's ToolAgentLoop; its output also carries the model's own text for the reward."""

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> Any:
        output = await super().run(sampling_params, **kwargs)
        output.extra_fields[MODEL_TEXT_FIELD] = await self.model_text(list(output.response_ids),
                                                                      list(output.response_mask))
        return output

    async def model_text(self, response_ids: list[int], response_mask: list[int]) -> str:
        """The model's own words: each generated stretch without special tokens (as the reward manager decodes,
        skip_special_tokens) and without its tool calls, which verl's tool parser for the job's format removes as
        it does for the conversation (`extract_tool_calls` returns the content around them). A tool call's
        arguments are a question to a tool (`calc_gsm8k_reward(answer="#### 72")`), not the answer. Stretches are
        joined by a newline, as turns are, so two turns never fuse into one number."""
        special = set(getattr(self.tokenizer, "all_special_ids", None) or [])
        parts = []
        for ids in generated_stretches(response_ids, response_mask):
            content, _ = await self.tool_parser.extract_tool_calls([i for i in ids if i not in special])
            parts.append(content.strip())
        return "\n".join(p for p in parts if p)
