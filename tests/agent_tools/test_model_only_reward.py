"""The final reward scores only what the model generated, never a tool's reply: a scripted model on a real dataset
row (ground truth 72) runs through verl's own `ToolAgentLoop.run` (registered as the generated agent-loop file
registers it, built the way AgentLoopWorker builds it with hydra), verl's Continuous Token builder (which marks tool
tokens 0 in response_mask) and verl's `NaiveRewardManager.run_single` with the job's reward function as verl loads
it (path, name and reward_kwargs from the generated configs)."""

from __future__ import annotations

import asyncio
import functools
import types

import hydra
import pytest
import yaml

from components.model.layout import resolve_layout
from components.workloads.training.verl_config import (
    AGENT_LOOPS_FILE,
    REWARD_MODULE_FILE,
    TRAINER_FILE,
    hydra_overrides,
)
from pipeline.gsm8k import build_row
from tests.agent_tools.harness import ChatTokenizer, ScriptedModel, ToolListWrap, reward_of, rollout_config, tool_call
from tests.agent_tools.test_verl_ack_tools import manager_result
from tests.components.workloads.training.test_rayjob import settings_for

ROW = build_row({"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
                             "in May. How many clips did Natalia sell altogether in April and May?",
                 "answer": "Natalia sold 48/2 = 24 clips in May.\n#### 72"}, 0, "train")


def job(verl, build_tools, fake_client, s=None):
    """(the job's agent loop class as verl registers it, the reward function as verl calls it) from the ConfigMap."""
    s = s or settings_for("dev")
    module, tools = build_tools(s, client=fake_client)
    config_dir = __import__("pathlib").Path(module.__file__).parent
    overrides = dict(hydra_overrides(s, resolve_layout(s)))
    assert overrides["actor_rollout_ref.rollout.agent.agent_loop_config_path"].endswith(f"/{AGENT_LOOPS_FILE}")
    loops = {c["name"]: c for c in yaml.safe_load((config_dir / AGENT_LOOPS_FILE).read_text())}
    raw = verl.import_utils.load_extern_object(str(config_dir / REWARD_MODULE_FILE),
                                               overrides["reward.custom_reward_function.name"])
    trainer = yaml.safe_load((config_dir / TRAINER_FILE).read_text())
    reward_kwargs = trainer["reward"]["custom_reward_function"]["reward_kwargs"]
    # verl's get_custom_reward_fn: partial(_call_with_kwargs, raw_fn, reward_kwargs), kwargs taking precedence.
    compute_score = functools.partial(lambda fn, extra, **kw: fn(**{**kw, **extra}), raw, reward_kwargs)
    return loops, tools, compute_score, s


def rollout(loops, tools, s, turns: list[str], agent_name: str = ROW["agent_name"], target: str | None = None):
    tokenizer = ChatTokenizer()
    model = ScriptedModel(tokenizer, turns)
    # As AgentLoopWorker._run_agent_loop does: the registry entry itself (its `name` included) and these kwargs.
    entry = dict(loops[agent_name]) if target is None else {"_target_": target}
    trainer_config = types.SimpleNamespace(config=types.SimpleNamespace(
        actor_rollout_ref=types.SimpleNamespace(rollout=rollout_config(s))))
    loop = hydra.utils.instantiate(entry, trainer_config=trainer_config, server_manager=model, tokenizer=tokenizer,
                                   processor=None, hf_model_type="qwen2", dataset_cls=None,
                                   data_config=types.SimpleNamespace(config={}), tools=ToolListWrap(list(tools.values())))
    kwargs = {"raw_prompt": ROW["prompt"], "tools_kwargs": ROW["extra_info"]["tools_kwargs"],
              "extra_info": ROW["extra_info"]}
    return asyncio.run(loop.run({}, **kwargs)), tokenizer


ECHO = [tool_call("calc_gsm8k_reward", answer="#### 72"), "Done."]
PRINT = [tool_call("run_code_once", code="print('#### ' + str(48+24))"), "Done."]


@pytest.fixture
def prints_72(fake_client):
    fake_client.reply = manager_result({"logs": {"stdout": ["#### 72\n"], "stderr": []}, "results": [],
                                        "sandbox_id": "s"})
    return fake_client


@pytest.mark.parametrize("turns,acc", [
    (ECHO, 0.0),   # the reward tool's reply holds "#### 72": it is the tool's text, not the model's
    (PRINT, 0.0),  # the program printed "#### 72": the sandbox's text
    (["Done."], 0.0),
    ([tool_call("run_code_once", code="print(48+24)"), "48 + 24 = 72.\n#### 72"], 1.0),  # the model wrote it
    ([tool_call("calc_gsm8k_reward", answer="72"), "#### 72"], 1.0),
])
def test_the_final_reward_scores_only_what_the_model_generated(verl, build_tools, prints_72, turns, acc):
    loops, tools, compute_score, s = job(verl, build_tools, prints_72)
    output, tokenizer = rollout(loops, tools, s, turns)
    result = reward_of(verl, output, ROW, tokenizer, compute_score)
    assert result["reward_extra_info"]["acc"] == acc
    # val-core reads `acc`; the training reward adds the tool rewards (none of these calls was a wrong answer).
    assert result["reward_score"] == acc


@pytest.mark.parametrize("turns", [ECHO, PRINT])
def test_verls_decoded_response_holds_the_tools_text_that_would_have_scored_one(verl, build_tools, prints_72, turns):
    """The defect the job's agent loop removes, in verl's own objects: the whole response the reward manager decodes
    holds a `#### 72` the model never wrote as its answer (a tool's reply, or a tool call's argument), which verl's
    scorer rewards; the text the job scores has none."""
    loops, tools, _, s = job(verl, build_tools, prints_72)
    output, tokenizer = rollout(loops, tools, s, turns)
    decoded = tokenizer.decode(output.response_ids, skip_special_tokens=True)
    assert verl.gsm8k.compute_score(decoded, "72") == 1.0
    assert "####" not in output.extra_fields["verl_ack_model_text"]
    assert output.extra_fields["verl_ack_model_text"].endswith("Done.")


def test_a_plain_tool_agent_trajectory_is_refused_rather_than_scored_on_tool_text(verl, build_tools, prints_72):
    loops, tools, compute_score, s = job(verl, build_tools, prints_72)
    output, tokenizer = rollout(loops, tools, s, ECHO,
                                target="verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop")
    with pytest.raises(Exception, match="agent loops .* are not in force"):
        reward_of(verl, output, ROW, tokenizer, compute_score)


def test_the_generated_agent_loop_file_replaces_verls_tool_agent_under_the_datasets_name(verl, build_tools,
                                                                                        fake_client):
    loops, _, _, _ = job(verl, build_tools, fake_client)
    assert ROW["agent_name"] == "tool_agent" and set(loops) == {"tool_agent"}
    assert loops["tool_agent"]["_target_"] == "verl_ack_agent_loop.ModelTextToolAgentLoop"
    # verl's AgentLoopWorker writes each entry into its registry by name, over the built-in one.
    agent_loop = (verl.loop.__file__.replace("tool_agent_loop.py", "agent_loop.py"))
    assert "_agent_loop_registry[agent_loop_config.name] = agent_loop_config" in open(agent_loop).read()


# --------------------------------------------------------------------------------------------- what the tool reveals
def tool_text(output, tokenizer) -> str:
    """What the tools wrote into the trajectory (the tokens response_mask marks 0)."""
    return tokenizer.decode([t for t, m in zip(output.response_ids, output.response_mask, strict=True) if not m],
                            skip_special_tokens=True)


def test_by_default_the_answer_tool_never_says_whether_an_answer_is_right(verl, build_tools, fake_client):
    loops, tools, _, s = job(verl, build_tools, fake_client)
    assert s.training.answer_tool.reveal == "parsed"
    seen = {}
    for answer in ("72", "71"):
        output, tokenizer = rollout(loops, tools, s, [tool_call("calc_gsm8k_reward", answer=answer), "Done."])
        seen[answer] = tool_text(output, tokenizer)
    assert seen["72"].replace("72", "N") == seen["71"].replace("71", "N")  # the same words, right or wrong
    assert "reward=" not in seen["72"] and "read your answer as '72'" in seen["72"]


def test_a_trajectory_may_check_its_answer_only_max_calls_times(verl, build_tools, fake_client):
    s = settings_for("dev")
    loops, tools, compute_score, s = job(verl, build_tools, fake_client, s)
    assert s.training.answer_tool.max_calls == 1
    turns = [tool_call("calc_gsm8k_reward", answer="70"), tool_call("calc_gsm8k_reward", answer="71"),
             tool_call("calc_gsm8k_reward", answer="72"), "#### 72"]
    output, tokenizer = rollout(loops, tools, s, turns)
    assert tool_text(output, tokenizer).count("may be called at most 1 time(s)") == 2
    assert output.extra_fields["tool_rewards"] == [-0.05, 0.0, 0.0]  # only the first, checked, guess costs
    result = reward_of(verl, output, ROW, tokenizer, compute_score)
    assert result["reward_extra_info"]["acc"] == 1.0 and result["reward_score"] == pytest.approx(0.95)


def test_correctness_mode_is_verls_old_oracle_and_says_so(verl, build_tools, fake_client):
    s = settings_for("dev", {"training": {"answer_tool": {"reveal": "correctness", "max_calls": 3}}})
    loops, tools, _, s = job(verl, build_tools, fake_client, s)
    output, tokenizer = rollout(loops, tools, s, [tool_call("calc_gsm8k_reward", answer="72"), "Done."])
    assert "reward=1.0" in tool_text(output, tokenizer)
    assert "1.0 if parsed answer is correct" in tools["calc_gsm8k_reward"].tool_schema.function.description
