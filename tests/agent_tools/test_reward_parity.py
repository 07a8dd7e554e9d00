"""`calc_gsm8k_reward` tells the model the reward its final answer will get: for every answer string, the tool's
reward equals the score verl's own gsm8k scorer (`verl/utils/reward_score/gsm8k.py`, the installed file) gives a
response ending `#### <answer>`, and the `acc` of the job's reward function (`verl_ack_reward.compute_score`, loaded
from the ConfigMap as verl loads it). The answers are generated: signs, thousands separators, decimals, currency,
units, spacing, the `####` marker itself, and arbitrary text."""

from __future__ import annotations

import importlib
import sys
from decimal import Decimal

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from components.model.layout import resolve_layout
from components.workloads.training.verl_config import REWARD_MODULE_FILE, hydra_overrides
from pipeline.gsm8k import build_row
from tests.agent_tools.harness import write_config_map
from tests.agent_tools.test_verl_ack_tools import run_call
from tests.components.workloads.training.test_rayjob import settings_for

REASONING = "Natalia sold 48 clips in April and half as many in May.\n48 / 2 = 24 and 48 + 24 = 72.\n"


def grouped(digits: str) -> str:
    """1234567 -> 1,234,567."""
    head = len(digits) % 3 or 3
    return ",".join([digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)])


@st.composite
def case(draw) -> tuple[str, str]:
    """(ground truth as the dataset writes it, an answer the model might give for it or near it)."""
    value = draw(st.one_of(st.integers(-10**7, 10**7),
                           st.decimals(-10**5, 10**5, places=draw(st.integers(1, 2)), allow_nan=False)))
    # The ground truth goes through the dataset builder from a GSM8K-style solution, as in the job.
    truth_text = format(value, "f") if isinstance(value, Decimal) else str(value)
    truth = build_row({"question": "q", "answer": f"... #### {truth_text}"}, 0, "train")["reward_model"]["ground_truth"]
    shown = value if draw(st.booleans()) else value + draw(st.sampled_from([1, -1, 10]))
    sign = "-" if shown < 0 else draw(st.sampled_from(["", "", "+"]))
    whole, _, frac = format(abs(shown), "f").partition(".")
    number = grouped(whole) if draw(st.booleans()) else whole
    number += draw(st.sampled_from(["." + frac] if frac else ["", "", ".0", ".00", "."]))
    if sign == "-":
        sign = draw(st.sampled_from(["-", "-", "\u2212", "- "]))  # ASCII minus, the Unicode minus, a spaced one
    currency = draw(st.sampled_from(["", "", "$", "$ ", "USD ", "\u20ac"]))
    unit = draw(st.sampled_from(["", "", " dollars", "%", " kg", ".", " apples per day"]))
    lead = draw(st.sampled_from(["", "", " ", "= ", "#### ", "The answer is ", "\n"]))
    trail = draw(st.sampled_from(["", "", " ", "\n", "!"]))
    answer = lead + (currency + sign if draw(st.booleans()) else sign + currency) + number + unit + trail
    return truth, draw(st.one_of(st.just(answer), st.text(max_size=40).map(lambda t: t + answer)))


@pytest.fixture(scope="module")
def gsm8k_tool_and_reward(verl, tmp_path_factory):
    """The tool built by verl's registry from the generated ConfigMap, and the reward function verl loads."""
    tmp = tmp_path_factory.mktemp("configmap")
    s = settings_for("dev")
    path = write_config_map(tmp, s)
    sys.path.insert(0, str(path.parent))
    try:
        sys.modules.pop("verl_ack_tools", None)
        tools = {t.name: t for t in verl.registry.initialize_tools_from_config(str(path))}
        overrides = dict(hydra_overrides(s, resolve_layout(s)))
        reward = verl.import_utils.load_extern_object(str(path.parent / REWARD_MODULE_FILE),
                                                      overrides["reward.custom_reward_function.name"])
        assert importlib.import_module("verl_ack_tools").gsm8k is verl.gsm8k  # verl's module, not a copy
        yield tools["calc_gsm8k_reward"], reward
    finally:
        sys.path.remove(str(path.parent))
        sys.modules.pop("verl_ack_tools", None)


def scores(verl, tool, reward, truth: str, answer: str) -> tuple[float, float, float]:
    """(the tool's reward, verl's gsm8k score of the final response, the job's reward function's acc)."""
    _, _, metrics = run_call(tool, {"answer": answer}, {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": truth}}})
    final = REASONING + f"#### {answer}"
    verl_score = float(verl.gsm8k.compute_score(final, truth))
    # The model wrote the whole response (the agent loop hands the reward its own text; no tool ran here).
    acc = reward(data_source="openai/gsm8k", solution_str=final, ground_truth=truth,
                 extra_info={"tool_rewards": [], "verl_ack_model_text": final})["acc"]
    return metrics["reward"], verl_score, acc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generated=case())
@example(generated=("18", "$18"))
@example(generated=("18", "= 18"))
@example(generated=("18", " 18"))
@example(generated=("2000", "$2,000"))
@example(generated=("18", "18 dollars"))
@example(generated=("-3", "-3"))
@example(generated=("-3", "\u22123"))
@example(generated=("2000", "#### 2,000"))
def test_the_gsm8k_tool_and_the_final_reward_agree_on_every_answer(verl, gsm8k_tool_and_reward, generated):
    truth, answer = generated
    tool, reward = gsm8k_tool_and_reward
    tool_score, verl_score, acc = scores(verl, tool, reward, truth, answer)
    assert tool_score == verl_score == acc, (truth, answer)


@pytest.mark.parametrize("truth,answer,expected", [
    ("18", "$18", 0.0),          # verl's number pattern never starts with "$"
    ("18", "= 18", 0.0),
    ("2000", "$2,000", 0.0),
    ("18", " 18", 0.0),          # "####  18": the pattern wants exactly one space
    ("18", "18 dollars", 1.0),   # the number right after "#### " counts, the unit after it does not
    ("2000", "2,000", 1.0),      # commas are dropped
    ("-3", "-3", 1.0),
    ("-3", "\u22123", 0.0),      # the Unicode minus is not verl's "-"
    ("18", "18.0", 0.0),         # compared as strings
])
def test_what_the_tool_says_for_the_answers_the_review_named(verl, gsm8k_tool_and_reward, truth, answer, expected):
    tool, reward = gsm8k_tool_and_reward
    assert scores(verl, tool, reward, truth, answer) == (expected, expected, expected)


@pytest.mark.parametrize("truth,answer,strict,flexible", [
    ("18", "$18", 0.0, 1.0),
    ("18", "\\boxed{18}", 0.0, 1.0),
    ("18", "= 18", 0.0, 1.0),
    ("18", "18 dollars", 1.0, 1.0),
    ("18", "18.", 0.0, 0.0),          # verl's flexible keeps the dot
    ("18", "18.0", 0.0, 0.0),         # both compare strings
    ("2000", "2,000", 1.0, 0.0),      # flexible keeps the comma
    ("18", "1,8", 1.0, 0.0),          # strict drops it
    ("-3", "\u22123", 0.0, 0.0),
])
def test_the_scoring_mode_is_verls_own_and_the_tool_and_the_reward_follow_the_setting(
        verl, tmp_path, truth, answer, strict, flexible):
    for mode, expected in (("strict", strict), ("flexible", flexible)):
        s = settings_for("dev", {"training": {"gsm8k_scoring": mode}})
        path = write_config_map(tmp_path / mode, s) if (tmp_path / mode).mkdir() is None else None
        sys.path.insert(0, str(path.parent))
        try:
            sys.modules.pop("verl_ack_tools", None)
            tool = {t.name: t for t in verl.registry.initialize_tools_from_config(str(path))}["calc_gsm8k_reward"]
            raw = verl.import_utils.load_extern_object(str(path.parent / REWARD_MODULE_FILE), "compute_score")
            kwargs = yaml.safe_load((path.parent / "verl_ack_trainer.yaml").read_text())["reward"][
                "custom_reward_function"]["reward_kwargs"]
            assert kwargs == {"gsm8k_method": mode}
            final = f"#### {answer}"
            _, _, metrics = run_call(tool, {"answer": answer},
                                     {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": truth}}})
            acc = raw(data_source="openai/gsm8k", solution_str=final, ground_truth=truth,
                      extra_info={"tool_rewards": [], "verl_ack_model_text": final}, **kwargs)["acc"]
            assert metrics["reward"] == acc == float(verl.gsm8k.compute_score(final, truth, method=mode)) == expected, \
                (mode, answer)
        finally:
            sys.path.remove(str(path.parent))
            sys.modules.pop("verl_ack_tools", None)
