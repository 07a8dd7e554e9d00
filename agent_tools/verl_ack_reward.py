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

The task's scorer. `task.reward` (components/config/task.py) picks what scores that text: verl's
`default_compute_score` by the row's data_source (`builtin`), the researcher's function from the stack folder
(`file`: shipped in the ConfigMap, loaded by path once per worker, `task_reward` below) or the unit tests of a code row
run in the platform's sandboxes (`sandbox`, verl_ack_sandbox_reward.py). Whatever the kind, it is handed the model's
own text, never `solution_str` of a tool trajectory: the model-only rule holds for every kind.

Single turn. verl's SingleTurnAgentLoop also sets `tool_rewards: []`, so "no model text" cannot be told from "a tool
trajectory without its model text"; the job registers its own single-turn loop (verl_ack_agent_loop.py) which writes
MODEL_TEXT_FIELD too, and any trajectory without it is refused.

A refusal stops the job. verl's v1 trainer turns an exception in the reward into ERROR log lines and a failed group
(trainer/ppo/v1/agent_loop_tq.py `_run_prompt`), i.e. a silently smaller batch. So a refusal first writes its reason
to the file named by VERL_ACK_REFUSAL_FILE (the entrypoint gives every Ray worker that variable and watches the file
on the shared checkpoint volume: verl_ack_entrypoint.py), which stops verl and fails the job with the reason.

verl loads the file by path in every reward-loop worker (`verl.utils.import_utils.load_extern_object`, from
`trainer/ppo/reward.py:get_custom_reward_fn`) and passes `reward.custom_reward_function.reward_kwargs` as keyword
arguments (`gsm8k_method`, `task_reward`, `sandbox`, from the trainer file); it is shipped in the job's ConfigMap next
to the tools.
"""

from __future__ import annotations

import importlib.util
import math
import os
from typing import Any, Callable, Optional

from verl.utils.reward_score import default_compute_score, gsm8k

# The extra field the job's agent loop writes: the decoded model-generated tokens of the trajectory.
MODEL_TEXT_FIELD = "verl_ack_model_text"
GSM8K_SOURCE = "openai/gsm8k"
GSM8K_METHODS = ("strict", "flexible")
# The file a refusal writes its reason to (set by the entrypoint in every Ray worker's environment).
REFUSAL_FILE_ENV = "VERL_ACK_REFUSAL_FILE"


class ToolTextWouldBeScored(RuntimeError):
    """A trajectory reached the reward without its model-only text, or the task's reward returned what verl cannot
    use: the job stops with the reason (`refuse`)."""


def refuse(reason: str, environ: Optional[dict] = None) -> ToolTextWouldBeScored:
    """Records the reason where the entrypoint watches (first refusal wins) and returns the error to raise."""
    path = (os.environ if environ is None else environ).get(REFUSAL_FILE_ENV)
    if path:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(reason)
        except OSError:
            pass  # another worker's refusal is already there, or the volume is gone: the raise still fails the group
    return ToolTextWouldBeScored(reason)


def scored_text(solution_str: str, extra_info: Optional[dict]) -> str:
    """The text the reward scores: the model's own tokens, which the job's agent loops (tool and single turn) put in
    MODEL_TEXT_FIELD. A trajectory without it came from a loop that is not the job's: `solution_str` may hold tool
    replies (verl's ToolAgentLoop) and cannot be told apart (verl's SingleTurnAgentLoop sets `tool_rewards: []` too),
    so it is refused."""
    info = extra_info or {}
    text = info.get(MODEL_TEXT_FIELD)
    if text is not None:
        return str(text)
    raise refuse(
        f"a trajectory reached the reward without {MODEL_TEXT_FIELD!r}: its decoded response may hold the tools' "
        "replies, which would be scored as the model's answer. The job's agent loops "
        "(actor_rollout_ref.rollout.agent.agent_loop_config_path -> verl_ack_agent_loop: ModelTextToolAgentLoop as "
        "tool_agent, ModelTextSingleTurnAgentLoop as single_turn_agent) are not in force for this row's agent_name "
        f"{info.get('agent_name', '(default)')!r}")


_LOADED: dict[tuple[str, str], Callable[..., Any]] = {}


def load_task_reward(path: str, function: str) -> Callable[..., Any]:
    """The researcher's reward function, imported from its file once per worker (as verl's load_extern_object)."""
    key = (path, function)
    if key not in _LOADED:
        spec = importlib.util.spec_from_file_location("verl_ack_task_reward", path)
        if spec is None or spec.loader is None:
            raise refuse(f"task.reward.file: cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, function, None)
        if not callable(fn):
            raise refuse(f"task.reward.function: {path} has no function {function!r}")
        _LOADED[key] = fn
    return _LOADED[key]


def score_value(result: Any, where: str) -> float:
    """A reward's result as verl reads it (a number, a bool, or a dict with `score`); anything else is refused."""
    value = result.get("score") if isinstance(result, dict) else result
    if isinstance(value, bool) or isinstance(value, (int, float)):
        value = float(value)
        if math.isfinite(value):
            return value
    raise refuse(f"{where} returned {result!r:.200}: verl needs a finite number or a dict with a numeric `score`")


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


def task_score(data_source: str, text: str, ground_truth: str, extra_info: Optional[dict], gsm8k_method: str,
               task_reward: Optional[dict], sandbox: Optional[dict]) -> float:
    """The task's score of the model's own `text`: the researcher's function, the sandbox tests, or verl's scorer."""
    if task_reward:
        fn = load_task_reward(str(task_reward["path"]), str(task_reward["function"]))
        result = fn(data_source, text, ground_truth, extra_info, **dict(task_reward.get("kwargs") or {}))
        return score_value(result, f"task.reward.function {task_reward['function']}")
    if sandbox:
        from verl_ack_sandbox_reward import sandbox_score  # shipped beside this file when the task uses it

        return sandbox_score(text, ground_truth, sandbox)
    return final_answer_score(data_source, text, ground_truth, gsm8k_method)


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Optional[dict] = None,
                  gsm8k_method: str = "strict", task_reward: Optional[dict] = None, sandbox: Optional[dict] = None,
                  **kwargs: Any) -> dict[str, float]:
    """`score` (the training reward) = the task's score of the model's own text + the sum of the tool rewards.

    The other keys become verl's `reward_extra_info`: validation logs each as `val-aux/<data_source>/<key>/...`,
    and `acc` (the answer alone, without penalties) is what verl's `val-core` accuracy reads. Every call returns
    the same keys, as verl requires."""
    acc = task_score(data_source, scored_text(solution_str, extra_info), ground_truth, extra_info, gsm8k_method,
                     task_reward, sandbox)
    tool_rewards = [float(r) for r in (extra_info or {}).get("tool_rewards") or []]
    penalty = float(sum(tool_rewards))
    return {"score": acc + penalty, "acc": acc, "tool_reward": penalty, "tool_calls": float(len(tool_rewards))}
