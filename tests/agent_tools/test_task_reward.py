"""The task's reward through verl's own agent loops and reward manager (the harness of test_model_only_reward.py): a
reward file and a preset's scorer both score the model's own correct answer 1 and a tool's echo 0, single turn and
multi-turn alike; a trajectory from a loop that is not the job's is refused and the refusal is written where the
entrypoint stops the job."""

from __future__ import annotations

import asyncio
import functools
import sys
import types
from pathlib import Path

import hydra
import pytest
import yaml

from components.config.task import task_root
from components.model import parse_settings
from components.model.layout import resolve_layout
from components.workloads.training.verl_config import (
    AGENT_LOOPS_FILE,
    CONFIG_DIR,
    REWARD_MODULE_FILE,
    TOOLS_MODULE,
    TRAINER_FILE,
    hydra_overrides,
)
from tests.agent_tools.harness import (
    ChatTokenizer,
    ScriptedModel,
    ToolListWrap,
    reward_of,
    rollout_config,
    tool_call,
    write_config_map,
)
from tests.agent_tools.test_verl_ack_tools import manager_result
from tests.conftest import stack_settings

SUM_ROW = {"data_source": "verl-ack/sums", "agent_name": "single_turn_agent",
           "prompt": [{"role": "user", "content": "What is 342 + 17?"}],
           "reward_model": {"style": "rule", "ground_truth": "359"}, "extra_info": {"index": 0}}
MATH_ROW = {"data_source": "DigitalLearningGmbH/MATH-lighteval", "agent_name": "single_turn_agent",
            "prompt": [{"role": "user", "content": "What is 6 x 7?"}],
            "reward_model": {"style": "rule", "ground_truth": "42"}, "extra_info": {"index": 0}}


def own_task(overrides: dict | None = None):
    with task_root(Path(__file__).resolve().parents[2] / "stacks"):
        return parse_settings(stack_settings("task-own", overrides))


def job(verl, tmp_path, monkeypatch, fake_client, s):
    """(agent loops as verl registers them, tools, the reward as verl calls it) from the job's ConfigMap, the tools
    built as the agent-loop workers build them (verl's registry on the generated tool config, when there is one)."""
    with task_root(Path(__file__).resolve().parents[2] / "stacks"):
        path = write_config_map(tmp_path, s)
    config_dir = path.parent
    monkeypatch.syspath_prepend(str(config_dir))
    monkeypatch.delitem(sys.modules, TOOLS_MODULE, raising=False)
    monkeypatch.setitem(sys.modules, "fastmcp", types.SimpleNamespace(Client=fake_client))
    tool_list = verl.registry.initialize_tools_from_config(str(path)) if yaml.safe_load(path.read_text())["tools"] \
        else []
    tools = {tool.name: tool for tool in tool_list}
    overrides = dict(hydra_overrides(s, resolve_layout(s)))
    loops = {c["name"]: c for c in yaml.safe_load((config_dir / AGENT_LOOPS_FILE).read_text())}
    raw = verl.import_utils.load_extern_object(str(config_dir / REWARD_MODULE_FILE),
                                               overrides["reward.custom_reward_function.name"])
    reward_kwargs = yaml.safe_load((config_dir / TRAINER_FILE).read_text())["reward"]["custom_reward_function"][
        "reward_kwargs"]
    if "task_reward" in reward_kwargs:  # the ConfigMap's mount path in the pods; the test's folder here
        reward_kwargs["task_reward"]["path"] = reward_kwargs["task_reward"]["path"].replace(CONFIG_DIR, str(config_dir))
    compute_score = functools.partial(lambda fn, extra, **kw: fn(**{**kw, **extra}), raw, reward_kwargs)
    return loops, tools, compute_score


def rollout(loops, tools, s, row, turns, agent_name=None, target=None):
    tokenizer = ChatTokenizer()
    entry = dict(loops[agent_name or row["agent_name"]]) if target is None else {"_target_": target}
    trainer_config = types.SimpleNamespace(config=types.SimpleNamespace(
        actor_rollout_ref=types.SimpleNamespace(rollout=rollout_config(s))))
    loop = hydra.utils.instantiate(entry, trainer_config=trainer_config, server_manager=ScriptedModel(tokenizer, turns),
                                   tokenizer=tokenizer, processor=None, hf_model_type="qwen2", dataset_cls=None,
                                   data_config=types.SimpleNamespace(config={}), tools=ToolListWrap(list(tools.values())))
    kwargs = {"raw_prompt": row["prompt"], "extra_info": row["extra_info"],
              "tools_kwargs": row["extra_info"].get("tools_kwargs", {})}
    return asyncio.run(loop.run({}, **kwargs)), tokenizer


@pytest.fixture
def prints_answer(fake_client):
    fake_client.reply = manager_result({"logs": {"stdout": ["<answer>359</answer>\n\\boxed{42}\n"], "stderr": []},
                                        "results": [], "sandbox_id": "s"})
    return fake_client


@pytest.mark.parametrize("turns,acc", [
    (["342 + 17 = 359. <answer>359</answer>"], 1.0),
    (["I think it is <answer>358</answer>"], 0.0),
    ([""], 0.0),
])
def test_a_reward_file_scores_the_models_own_single_turn_answer(verl, tmp_path, monkeypatch, fake_client, turns, acc):
    s = own_task()
    loops, tools, compute_score = job(verl, tmp_path, monkeypatch, fake_client, s)
    assert loops["single_turn_agent"]["_target_"] == "verl_ack_agent_loop.ModelTextSingleTurnAgentLoop"
    assert tools == {}  # tools: [] -> no tool config at all
    output, tokenizer = rollout(loops, tools, s, SUM_ROW, turns)
    result = reward_of(verl, output, SUM_ROW, tokenizer, compute_score)
    assert result["reward_extra_info"]["acc"] == acc and result["reward_score"] == acc


@pytest.mark.parametrize("turns,acc", [
    ([tool_call("run_code_once", code="print('<answer>359</answer>')"), "Done."], 0.0),  # the sandbox printed it
    ([tool_call("run_code_once", code="print(342 + 17)"), "So <answer>359</answer>"], 1.0),  # the model wrote it
])
def test_a_reward_file_scores_a_tool_trajectory_on_the_models_text_only(verl, tmp_path, monkeypatch, prints_answer, turns, acc):
    s = own_task({"task": {"tools": ["code"]}})
    loops, tools, compute_score = job(verl, tmp_path, monkeypatch, prints_answer, s)
    row = {**SUM_ROW, "agent_name": "tool_agent"}
    output, tokenizer = rollout(loops, tools, s, row, turns)
    decoded = tokenizer.decode(output.response_ids, skip_special_tokens=True)
    assert "<answer>359</answer>" in decoded  # verl's whole response holds the tool's echo either way
    result = reward_of(verl, output, row, tokenizer, compute_score)
    assert result["reward_extra_info"]["acc"] == acc


@pytest.mark.parametrize("turns,acc", [(["6 x 7 = \\boxed{42}"], 1.0), (["\\boxed{41}"], 0.0), ([""], 0.0)])
def test_the_math_presets_builtin_scorer_scores_a_single_turn_answer(verl, tmp_path, monkeypatch, fake_client, turns, acc):
    s = parse_settings(stack_settings("task-math"))
    loops, tools, compute_score = job(verl, tmp_path, monkeypatch, fake_client, s)
    output, tokenizer = rollout(loops, tools, s, MATH_ROW, turns)
    assert reward_of(verl, output, MATH_ROW, tokenizer, compute_score)["reward_extra_info"]["acc"] == acc


def test_a_trajectory_from_verls_own_single_turn_loop_is_refused_and_the_job_told(verl, fake_client, tmp_path,
                                                                                 monkeypatch):
    """verl's SingleTurnAgentLoop sets tool_rewards: [] as its ToolAgentLoop does: without the job's loop the reward
    cannot tell a single turn from tool text, so it refuses, writing the reason where the entrypoint watches."""
    refusal = tmp_path / "refusals" / "job-1.txt"
    monkeypatch.setenv("VERL_ACK_REFUSAL_FILE", str(refusal))
    s = own_task()
    loops, tools, compute_score = job(verl, tmp_path, monkeypatch, fake_client, s)
    output, tokenizer = rollout(loops, tools, s, SUM_ROW, ["<answer>359</answer>"],
                                target="verl.experimental.agent_loop.single_turn_agent_loop.SingleTurnAgentLoop")
    assert output.extra_fields.get("tool_rewards") == []
    with pytest.raises(Exception, match="without 'verl_ack_model_text'"):
        reward_of(verl, output, SUM_ROW, tokenizer, compute_score)
    assert "single_turn_agent" in refusal.read_text()


@pytest.mark.parametrize("answer,reward,tool_reward", [("\\boxed{42}", 1.0, 0.0), ("\\boxed{41}", 0.0, -0.05)])
def test_the_answer_tool_checks_a_math_answer_with_the_tasks_scorer_and_the_final_reward_still_scores_the_model(
        verl, tmp_path, monkeypatch, fake_client, answer, reward, tool_reward):
    s = parse_settings(stack_settings("task-math", {"task": {"tools": ["answer"]},
                                                    "training": {"answer_tool": {"reveal": "correctness"}}}))
    loops, tools, compute_score = job(verl, tmp_path, monkeypatch, fake_client, s)
    row = {**MATH_ROW, "agent_name": "tool_agent",
           "extra_info": {"index": 0, "tools_kwargs": {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "42"}}}}}
    output, tokenizer = rollout(loops, tools, s, row, [tool_call("calc_gsm8k_reward", answer=answer), "Done."])
    told = tokenizer.decode([t for t, m in zip(output.response_ids, output.response_mask, strict=True) if not m],
                            skip_special_tokens=True)
    assert f"reward={reward}" in told  # the task's scorer (verl's math_reward) on the answer as written
    result = reward_of(verl, output, row, tokenizer, compute_score)
    # The model wrote only "Done." itself: the tool's check is no answer, whatever it said.
    assert result["reward_extra_info"]["acc"] == 0.0 and result["reward_extra_info"]["tool_reward"] == tool_reward
