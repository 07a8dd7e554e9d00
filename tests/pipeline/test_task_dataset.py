"""The math and code presets' dataset Job (pipeline/task_dataset.py): verl's rows for MATH-lighteval and
Eurus-2-RL-Data's coding problems, the row check, the subsets, the marker and the upload."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from components.config.task import TASK_PRESETS
from components.wiring import PRESET_CONVERTERS
from pipeline import task_dataset as td
from pipeline.rows import RowError, check_rows
from tests.fakeoss import FakeOss

# Shaped like DigitalLearningGmbH/MATH-lighteval: a LaTeX problem, a worked solution ending in \boxed{...}.
MATH_EXAMPLES = {
    "train": [
        {"problem": "What is $\\frac{1}{2} + \\frac{1}{4}$?", "level": "Level 1", "type": "Prealgebra",
         "solution": "We have $\\frac{1}{2} + \\frac{1}{4} = \\frac{2}{4} + \\frac{1}{4} = \\boxed{\\frac{3}{4}}$."},
        {"problem": "Solve $x + 3 = 5$.", "level": "Level 1", "type": "Algebra",
         "solution": "Subtract 3: $x = 2$, i.e. $\\boxed{x=1}$ is wrong, so the answer is $\\boxed{2}$."},
        {"problem": "How many sides has a hexagon?", "level": "Level 1", "type": "Geometry",
         "solution": "A hexagon has $\\boxed 6$ sides."},
    ],
    "test": [
        {"problem": "What is $2^{10}$?", "level": "Level 2", "type": "Algebra",
         "solution": "$2^{10} = \\boxed{1024}$."},
    ],
}


def eurus(ability: str, source: str, ground_truth, index: int, split: str = "train") -> dict:
    """A row shaped like PRIME-RL/Eurus-2-RL-Data (already verl's layout)."""
    return {"data_source": source,
            "prompt": [{"role": "system", "content": "When tackling complex reasoning tasks, ..."},
                       {"role": "user", "content": f"Problem {index}: read n, print n squared."}],
            "ability": ability, "reward_model": {"style": "rule", "ground_truth": ground_truth},
            "extra_info": {"split": split, "index": index}}


TESTS = json.dumps({"inputs": ["3\n", "4\n"], "outputs": ["9\n", "16\n"]})
CALL_TESTS = json.dumps({"fn_name": "square", "inputs": [[3], [4]], "outputs": [[9], [16]]})
CODE_EXAMPLES = {
    "train": [eurus("math", "numina_olympiads", "\\frac{3}{4}", 0), eurus("code", "codecontests", TESTS, 1),
              eurus("code", "apps", CALL_TESTS, 2), eurus("code", "taco", TESTS, 3)],
    "test": [eurus("code", "codeforces", TESTS, 0, "validation"), eurus("math", "numina_amc_aime", "5", 1)],
}


@pytest.fixture
def fake_oss():
    with FakeOss() as server:
        yield server


# --------------------------------------------------------------------------------------------- facts
@pytest.mark.parametrize("preset", [p for p, module in PRESET_CONVERTERS.items()
                                    if module == "task_dataset" and p in TASK_PRESETS])  # (hub: the stack's own)
def test_the_jobs_hub_facts_are_the_presets_declared_ones(preset):
    p = TASK_PRESETS[preset]
    facts = td.DATASETS[p.hub_id]
    assert facts.hub_id == p.hub_id and facts.data_source == p.data_source and facts.ability == p.ability
    assert facts.splits == {"train": p.train_split, "test": p.val_split}


def test_every_hub_dataset_the_job_knows_is_a_preset_it_is_run_for():
    ours = {TASK_PRESETS[p].hub_id for p, module in PRESET_CONVERTERS.items()
            if module == "task_dataset" and p in TASK_PRESETS}  # (hub: the stack names its own dataset)
    assert set(td.DATASETS) == ours


# --------------------------------------------------------------------------------------------- math
def test_a_math_row_has_verls_math_dataset_layout():
    example = MATH_EXAMPLES["train"][0]
    (row,) = td.build_rows(td.MATH, [example], "train")
    assert row == {
        "data_source": "DigitalLearningGmbH/MATH-lighteval",
        "agent_name": "single_turn_agent",
        "prompt": [{"role": "user", "content": "What is $\\frac{1}{2} + \\frac{1}{4}$? Let's think step by step "
                                               "and output the final answer within \\boxed{}."}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "\\frac{3}{4}"},
        "extra_info": {"split": "train", "index": 0},
    }


@pytest.mark.parametrize("solution,answer", [
    ("so $\\boxed{\\frac{3}{4}}$.", "\\frac{3}{4}"),
    ("first $\\boxed{1}$, then finally $\\boxed{2}$", "2"),
    ("nested $\\boxed{\\left\\{ 1, 2 \\right\\}}$", "\\left\\{ 1, 2 \\right\\}"),
    ("$\\boxed{\\sqrt{2}}$", "\\sqrt{2}"),
    ("a hexagon has $\\boxed 6$ sides", "6"),
    ("only a box: $\\fbox{7}$", "7"),
    ("$\\fbox{7}$ and $\\boxed{8}$", "8"),
])
def test_the_ground_truth_is_the_content_of_the_last_boxed_answer(solution, answer):
    assert td.last_boxed(solution) == answer


@pytest.mark.parametrize("solution,why", [
    ("The answer is 5.", "no \\\\boxed answer"),
    ("$\\boxed{5$", "without its closing brace"),
    ("$\\boxed$", "not followed by"),
])
def test_a_solution_without_a_usable_boxed_answer_is_refused(solution, why):
    with pytest.raises(ValueError, match=why):
        td.last_boxed(solution)


def test_a_math_example_without_a_boxed_answer_fails_naming_the_split_row_and_column():
    broken = MATH_EXAMPLES["train"][:2] + [{"problem": "x?", "solution": "It is 5."}]
    with pytest.raises(RowError, match=r"MATH-lighteval train split, row 2, column solution: no \\boxed"):
        td.build_rows(td.MATH, broken, "train")


# --------------------------------------------------------------------------------------------- code
def test_only_coding_rows_are_kept_as_they_are_with_their_agent_loop():
    rows = td.build_rows(td.CODE, CODE_EXAMPLES["train"], "train")
    assert [r["data_source"] for r in rows] == ["codecontests", "apps", "taco"]
    assert all(r["ability"] == "code" and r["agent_name"] == "single_turn_agent" for r in rows)
    source = CODE_EXAMPLES["train"][1]
    assert rows[0] == {"agent_name": "single_turn_agent", **source}, "the row is verl's already: nothing rewritten"


@pytest.mark.parametrize("ground_truth,why", [
    ("not json", "is not JSON"),
    (json.dumps([1, 2]), "JSON object"),
    (json.dumps({"inputs": ["1"]}), "`inputs` and `outputs` lists"),
    (json.dumps({"inputs": ["1", "2"], "outputs": ["1"]}), "as many outputs as inputs"),
    (json.dumps({"inputs": [], "outputs": []}), "at least one"),
    (json.dumps({"fn_name": "", "inputs": [[1]], "outputs": [[1]]}), "fn_name"),
    (None, "JSON string"),
])
def test_a_coding_row_whose_tests_do_not_parse_is_refused_naming_it(ground_truth, why):
    rows = [eurus("code", "apps", TESTS, 0), eurus("code", "apps", ground_truth, 1)]
    with pytest.raises(RowError) as info:
        td.build_rows(td.CODE, rows, "test")
    assert "Eurus-2-RL-Data test split, row 1, column reward_model.ground_truth" in str(info.value)
    assert why in str(info.value)


def test_a_coding_row_of_a_source_verls_code_scorers_do_not_know_is_refused():
    with pytest.raises(RowError, match=r"row 0, column data_source: 'leetcode' is not one of verl's code sets"):
        td.build_rows(td.CODE, [eurus("code", "leetcode", TESTS, 0)], "train")


@pytest.mark.parametrize("dataset,examples", [(td.MATH, MATH_EXAMPLES), (td.CODE, CODE_EXAMPLES)])
@pytest.mark.parametrize("agent", ["single_turn_agent", "tool_agent"])
def test_every_built_row_passes_verls_row_rule(dataset, examples, agent):
    for split, raw in examples.items():
        rows = td.build_rows(dataset, raw, split, agent)
        assert check_rows(rows, f"{split}.parquet").agent_names == {agent: len(rows)}


def test_tool_rows_carry_the_answer_tools_ground_truth_and_single_turn_rows_carry_no_tool_kwargs():
    example = MATH_EXAMPLES["test"][0]
    (tool,) = td.build_rows(td.MATH, [example], "test", "tool_agent")
    assert tool["agent_name"] == "tool_agent"
    assert tool["extra_info"]["need_tools_kwargs"] is True
    assert tool["extra_info"]["tools_kwargs"] == {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "1024"}}}
    (single,) = td.build_rows(td.MATH, [example], "test", "single_turn_agent")
    assert single["extra_info"] == {"split": "test", "index": 0}


def test_the_answer_tool_the_rows_name_is_the_one_the_job_configures():
    from components.workloads.training.verl_config import GSM8K_TOOL

    assert td.ANSWER_TOOL == GSM8K_TOOL


# --------------------------------------------------------------------------------------------- job
def test_config_needs_a_known_dataset_and_defaults_to_single_turn_rows(capsys):
    env = {"OSS_BUCKET": "b", "OSS_REGION": "ap-southeast-1", "OSS_PREFIX": "datasets/math-lighteval/k"}
    config = td.config_from_env({**env, "DATASET_NAME": td.MATH})
    assert (config.dataset_config, config.agent_name) == (None, "single_turn_agent")
    assert config.prefix == "datasets/math-lighteval/k/" and config.subsets == {"train": 20, "test": 100}
    for name in ("openai/gsm8k", "", "hiyouga/geometry3k"):
        assert td.main({**env, "DATASET_NAME": name}) == 2
        assert f"DATASET_NAME={name!r} is not supported" in capsys.readouterr().err
    assert td.main({**env, "DATASET_NAME": td.MATH, "AGENT_NAME": "react_agent"}) == 2
    assert "AGENT_NAME" in capsys.readouterr().err


def test_the_code_job_writes_validation_as_test_with_subsets_then_its_marker_and_a_rerun_stages_nothing(
        fake_oss, tmp_path):
    config = td.JobConfig(dataset_name=td.CODE, dataset_config=None, bucket="data", prefix="datasets/c/k/",
                          subsets={"train": 2, "test": 1}, output_dir=tmp_path / "out", hf_token=None)
    client = fake_oss.client()
    first = td.run(config, client, load=lambda _: CODE_EXAMPLES, log=lambda _: None)
    expected = ["datasets/c/k/test.parquet", "datasets/c/k/test1.parquet", "datasets/c/k/train.parquet",
                "datasets/c/k/train2.parquet"]
    assert sorted(first.uploaded) == expected
    assert fake_oss.keys("data") == sorted(expected + ["datasets/c/k.complete"])
    assert fake_oss.requests(op="PutObject")[-1].key == "datasets/c/k.complete", "the marker is the last write"
    test_rows = pq.read_table(tmp_path / "out" / "test.parquet").to_pylist()
    assert [r["data_source"] for r in test_rows] == ["codeforces"]
    assert len(pq.read_table(tmp_path / "out" / "train2.parquet").to_pylist()) == 2

    fake_oss.clear_log()
    loads = []
    assert td.run(config, client, load=lambda c: loads.append(c) or CODE_EXAMPLES, log=lambda _: None) is None
    assert loads == [] and fake_oss.requests(op="PutObject") == []


def test_a_bad_row_exits_2_naming_it_and_nothing_is_written_or_uploaded(fake_oss, tmp_path, monkeypatch, capsys):
    broken = {"train": CODE_EXAMPLES["train"], "test": [eurus("code", "apps", "{}", 0)]}
    monkeypatch.setattr(td, "load_hub", lambda config: broken)
    env = {"DATASET_NAME": td.CODE, "OSS_BUCKET": "data", "OSS_REGION": "ap-southeast-1",
           "OSS_ENDPOINT": fake_oss.endpoint, "OSS_ACCESS_KEY_ID": "id", "OSS_ACCESS_KEY_SECRET": "secret",
           "OSS_PREFIX": "datasets/c/k", "SUBSETS": "", "OUTPUT_DIR": str(tmp_path)}
    assert td.main(env) == 2
    assert "test split, row 0, column reward_model.ground_truth" in capsys.readouterr().err
    assert fake_oss.keys("data") == [] and list(tmp_path.iterdir()) == []


def test_main_runs_the_math_job_from_environment_variables(fake_oss, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(td, "load_hub", lambda config: MATH_EXAMPLES)
    env = {"DATASET_NAME": td.MATH, "OSS_BUCKET": "data", "OSS_REGION": "ap-southeast-1",
           "OSS_ENDPOINT": fake_oss.endpoint, "OSS_ACCESS_KEY_ID": "id", "OSS_ACCESS_KEY_SECRET": "not-printed",
           "OSS_PREFIX": "datasets/math-lighteval/k", "SUBSETS": "train:1", "OUTPUT_DIR": str(tmp_path)}
    assert td.main(env) == 0
    assert fake_oss.keys("data") == ["datasets/math-lighteval/k.complete", "datasets/math-lighteval/k/test.parquet",
                                     "datasets/math-lighteval/k/train.parquet", "datasets/math-lighteval/k/train1.parquet"]
    out = capsys.readouterr().out
    assert "uploaded 3 objects" in out and "not-printed" not in out
    marker = json.loads(fake_oss.get("data", "datasets/math-lighteval/k.complete"))
    assert marker["dataset"] == td.MATH and marker["agent_name"] == "single_turn_agent"


class FakeSplit(list):
    """A hub split as `datasets` gives it: iterable rows and `filter(fn, input_columns=[...])`."""

    def filter(self, fn, input_columns):
        return FakeSplit(r for r in self if fn(*(r[c] for c in input_columns)))


def test_the_hub_load_maps_the_hub_splits_to_the_files_and_drops_math_rows_of_the_code_set(monkeypatch):
    calls = []

    def load_dataset(name, config, token):
        calls.append((name, config, token))
        return {"train": FakeSplit(CODE_EXAMPLES["train"]), "validation": FakeSplit(CODE_EXAMPLES["test"])}

    monkeypatch.setitem(__import__("sys").modules, "datasets", type("datasets", (), {"load_dataset": load_dataset}))
    config = td.JobConfig(dataset_name=td.CODE, dataset_config=None, bucket="b", prefix="p/", subsets={},
                          output_dir=None, hf_token="t")
    raw = td.load_hub(config)
    assert calls == [(td.CODE, None, "t")]
    assert sorted(raw) == ["test", "train"]
    assert [r["data_source"] for r in raw["train"]] == ["codecontests", "apps", "taco"]
    assert [r["data_source"] for r in raw["test"]] == ["codeforces"]
