"""The job's reward function (`reward.custom_reward_function`): verl's own score plus the trajectory's tool rewards.

Without it the tool rewards go nowhere in verl 0.9.1. `ToolAgentLoop` appends each call's tool reward to
`AgentData.tool_rewards` and puts that list in the output's `extra_fields["tool_rewards"]`;
`AgentLoopWorker._compute_score` hands the extra fields to the reward loop as `tool_extra_fields`, and the
`naive` reward manager merges them into `extra_info` before it calls the reward function. verl's default
function (`default_compute_score`) never reads them, so `calc_gsm8k_reward`'s penalty for a wrong answer
changed nothing. This function adds them.

verl loads the file by path in every reward-loop worker (`verl.utils.import_utils.load_extern_object`, from
`trainer/ppo/reward.py:get_custom_reward_fn`); it is shipped in the job's ConfigMap next to the tools.
"""

from __future__ import annotations

from typing import Any, Optional

from verl.utils.reward_score import default_compute_score


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Optional[dict] = None,
                  **kwargs: Any) -> dict[str, float]:
    """`score` (the training reward) = verl's score of the final answer + the sum of the tool rewards.

    The other keys become verl's `reward_extra_info`: validation logs each as `val-aux/<data_source>/<key>/...`,
    and `acc` (the answer alone, without penalties) is what verl's `val-core` accuracy reads. Every call returns
    the same keys, as verl requires."""
    result = default_compute_score(data_source, solution_str, ground_truth, extra_info)
    acc = float(result["score"] if isinstance(result, dict) else result)
    tool_rewards = [float(r) for r in (extra_info or {}).get("tool_rewards") or []]
    penalty = sum(tool_rewards)
    return {"score": acc + penalty, "acc": acc, "tool_reward": penalty, "tool_calls": float(len(tool_rewards))}
