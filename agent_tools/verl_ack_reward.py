"""The job's reward function (`reward.custom_reward_function`): verl's score of what the MODEL wrote, plus the
trajectory's tool rewards.

What is scored. verl 0.9.1's naive reward manager decodes the whole response (`responses` cut at the attention
mask, `experimental/reward_loop/reward_manager/naive.py` `run_single`), tool-response tokens included: a tool's
echo (`Current parsed answer='#### 72' ...`, or a program's `print('#### 72')`) would be scored as the model's
answer. The batch verl sends to the reward loop carries no `response_mask` (`AgentLoopWorker._compute_score`
builds it from prompts, responses, attention mask, input and position ids), so the split between model and tool
tokens is made where verl still has it: the job's agent loop (`verl_ack_agent_loop.ModelTextToolAgentLoop`)
decodes only the tokens verl's `response_mask` marks as generated and hands that text over in the trajectory's
extra fields, which the reward manager merges into `extra_info` (`MODEL_TEXT_FIELD`). This function scores that
text and never `solution_str` when a tool ran; a ToolAgentLoop trajectory without it (the job's agent-loop
override not in force) is refused rather than scored on tool text.

The tool rewards. `ToolAgentLoop` appends each call's tool reward to `AgentData.tool_rewards` and puts the list in
`extra_fields["tool_rewards"]`; verl's default function never reads them. This one adds them.

verl loads the file by path in every reward-loop worker (`verl.utils.import_utils.load_extern_object`, from
`trainer/ppo/reward.py:get_custom_reward_fn`) and passes `reward.custom_reward_function.reward_kwargs` as keyword
arguments (`gsm8k_method`, from the trainer file); it is shipped in the job's ConfigMap next to the tools.
"""

from __future__ import annotations

from typing import Any, Optional

from verl.utils.reward_score import default_compute_score, gsm8k

# The extra field the job's agent loop writes: the decoded model-generated tokens of the trajectory.
MODEL_TEXT_FIELD = "verl_ack_model_text"
GSM8K_SOURCE = "openai/gsm8k"
GSM8K_METHODS = ("strict", "flexible")


class ToolTextWouldBeScored(RuntimeError):
    """A tool-agent trajectory reached the reward without its model-only text."""


def scored_text(solution_str: str, extra_info: Optional[dict]) -> str:
    """The text the reward scores: the model's own tokens. A trajectory from verl's ToolAgentLoop (it always sets
    `tool_rewards`) must carry MODEL_TEXT_FIELD; a single-turn one (no tools, nothing but model tokens) scores
    `solution_str`."""
    info = extra_info or {}
    text = info.get(MODEL_TEXT_FIELD)
    if text is not None:
        return str(text)
    if "tool_rewards" in info:
        raise ToolTextWouldBeScored(
            f"a tool-agent trajectory reached the reward without {MODEL_TEXT_FIELD!r}: the decoded response holds the "
            "tools' replies, which would be scored as the model's answer. The job's agent loop "
            "(actor_rollout_ref.rollout.agent.agent_loop_config_path -> verl_ack_agent_loop.ModelTextToolAgentLoop "
            "under the name tool_agent) is not in force")
    return solution_str


def final_answer_score(data_source: str, text: str, ground_truth: str, gsm8k_method: str = "strict") -> float:
    """verl's score of `text`: GSM8K through verl's own scorer in the job's mode (`strict`, verl's default: the
    number right after `#### `; `flexible`: the last number in the text), any other source through verl's
    `default_compute_score`."""
    if gsm8k_method not in GSM8K_METHODS:
        raise ValueError(f"gsm8k_method {gsm8k_method!r} is not one of verl's {GSM8K_METHODS}")
    if data_source == GSM8K_SOURCE:
        return float(gsm8k.compute_score(text, ground_truth, method=gsm8k_method))
    result = default_compute_score(data_source, text, ground_truth)
    return float(result["score"] if isinstance(result, dict) else result)


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Optional[dict] = None,
                  gsm8k_method: str = "strict", **kwargs: Any) -> dict[str, float]:
    """`score` (the training reward) = verl's score of the model's own text + the sum of the tool rewards.

    The other keys become verl's `reward_extra_info`: validation logs each as `val-aux/<data_source>/<key>/...`,
    and `acc` (the answer alone, without penalties) is what verl's `val-core` accuracy reads. Every call returns
    the same keys, as verl requires."""
    acc = final_answer_score(data_source, scored_text(solution_str, extra_info), ground_truth, gsm8k_method)
    tool_rewards = [float(r) for r in (extra_info or {}).get("tool_rewards") or []]
    penalty = float(sum(tool_rewards))
    return {"score": acc + penalty, "acc": acc, "tool_reward": penalty, "tool_calls": float(len(tool_rewards))}
