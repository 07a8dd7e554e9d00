"""The GSM8K job: answer extraction, verl's tool-agent and single-turn row formats, the row check, parquet files and
the upload."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from pipeline import gsm8k
from pipeline.gsm8k import JobConfig, build_row, build_rows, extract_answer
from pipeline.rows import RowError, check_rows, parse_subsets, write_splits
from tests.fakeoss import FakeOss

# Shaped like openai/gsm8k `main`: a worked solution with <<calculator>> annotations, then `#### <n>`.
EXAMPLES = {
    "train": [
        {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
                     "May. How many clips did Natalia sell altogether in April and May?",
         "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
                   "altogether in April and May.\n#### 72"},
        {"question": "A company pays 1,000 workers $1.5 each. How much does it pay?",
         "answer": "1000 * 1.5 = <<1000*1.5=1500>>1500\n#### 1,500"},
        {"question": "The temperature was 3 degrees and fell by 8. What is it now?",
         "answer": "3 - 8 = <<3-8=-5>>-5\n#### -5"},
    ],
    "test": [
        {"question": "Janet has 7 apples and eats half. How many are left?",
         "answer": "7 / 2 = <<7/2=3.5>>3.5\n#### 3.5"},
        {"question": "What is 2 + 2?", "answer": "2 + 2 = 4\n#### 4"},
    ],
}


@pytest.fixture
def fake_oss():
    with FakeOss() as server:
        yield server


def test_answer_extraction_strips_thousands_separators():
    assert extract_answer("so 1,234 in all\n#### 1,234") == "1234"
    assert extract_answer("#### 1,000,000") == "1000000"


def test_answer_extraction_keeps_negative_numbers_and_decimals():
    assert extract_answer("3 - 8 = -5\n#### -5") == "-5"
    assert extract_answer("7 / 2 = 3.5\n#### 3.5") == "3.5"
    assert extract_answer("#### -1,250.75") == "-1250.75"


def test_answer_extraction_tolerates_missing_space_and_a_sentence_ending_period():
    assert extract_answer("####72") == "72"
    assert extract_answer("#### 72.") == "72"


def test_answer_extraction_fails_clearly_without_the_marker():
    with pytest.raises(ValueError, match="no '####' answer marker"):
        extract_answer("Natalia sold 72 clips.")


def test_answer_extraction_fails_clearly_when_the_marker_has_no_number():
    with pytest.raises(ValueError, match="no number after it"):
        extract_answer("#### seventy-two")


def test_a_row_has_exactly_verls_tool_agent_layout():
    example = EXAMPLES["train"][0]
    question = example["question"] + " Let's think step by step and output the final answer after `####`."
    assert build_row(example, 0, "train") == {
        "data_source": "openai/gsm8k",
        "agent_name": "tool_agent",
        "prompt": [
            {"role": "system", "content": (
                "You are a math expert. You are given a question and you need to solve it step by step. "
                "Reasoning step by step before any tool call. "
                "You should use the `calc_gsm8k_reward` tool after step by step solving the question, "
                "before generate final answer at least once and refine your answer if necessary. "
                "Put your final answer in the format of `#### <answer>`.")},
            {"role": "user", "content": question},
        ],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "72"},
        "extra_info": {
            "split": "train",
            "index": 0,
            "answer": example["answer"],
            "question": example["question"],
            "need_tools_kwargs": True,
            "tools_kwargs": {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "72"}}},
            "interaction_kwargs": {"query": question, "ground_truth": "72"},
        },
    }


def test_a_single_turn_row_names_verls_single_turn_agent_and_offers_no_tool():
    example = EXAMPLES["train"][0]
    row = build_row(example, 0, "train", "single_turn_agent")
    assert row["agent_name"] == "single_turn_agent"
    assert "tools_kwargs" not in row["extra_info"] and "need_tools_kwargs" not in row["extra_info"]
    system = row["prompt"][0]
    assert system["role"] == "system" and "calc_gsm8k_reward" not in system["content"] and "tool" not in system["content"]
    assert "`#### <answer>`" in system["content"], "the reward still reads the answer after ####"
    tool = build_row(example, 0, "train")
    assert row["prompt"][1] == tool["prompt"][1] and row["reward_model"] == tool["reward_model"]
    assert row["data_source"] == tool["data_source"] == "openai/gsm8k", "the same scorer scores both"


@pytest.mark.parametrize("agent", ["tool_agent", "single_turn_agent"])
def test_every_built_row_passes_verls_row_rule(agent):
    for split, examples in EXAMPLES.items():
        summary = check_rows(build_rows(examples, split, agent), f"{split}.parquet")
        assert summary.agent_names == {agent: len(examples)}


def test_an_example_without_an_answer_fails_naming_the_split_row_and_column():
    broken = [EXAMPLES["test"][0], {"question": "How many?", "answer": "no marker here"}]
    with pytest.raises(RowError, match=r"test split, row 1, column answer: .*no '####' answer marker"):
        build_rows(broken, "test")


def test_rows_are_indexed_by_position_within_their_split():
    rows = build_rows(EXAMPLES["test"], "test")
    assert [(r["extra_info"]["split"], r["extra_info"]["index"]) for r in rows] == [("test", 0), ("test", 1)]
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["3.5", "4"]


def test_parquet_files_hold_every_split_and_the_requested_head_subsets(tmp_path):
    rows = {split: build_rows(examples, split) for split, examples in EXAMPLES.items()}
    files = write_splits(rows, tmp_path, {"train": 2, "test": 1})
    assert sorted(p.name for p in files) == ["test.parquet", "test1.parquet", "train.parquet", "train2.parquet"]
    assert pq.read_table(tmp_path / "train.parquet").to_pylist() == rows["train"]
    assert pq.read_table(tmp_path / "train2.parquet").to_pylist() == rows["train"][:2]
    assert pq.read_table(tmp_path / "test1.parquet").to_pylist() == rows["test"][:1]


def test_a_subset_larger_than_its_split_or_of_an_unknown_split_is_refused(tmp_path):
    rows = {split: build_rows(examples, split) for split, examples in EXAMPLES.items()}
    with pytest.raises(ValueError, match="more rows than the split has"):
        write_splits(rows, tmp_path, {"test": 3})
    with pytest.raises(ValueError, match="split that does not exist"):
        write_splits(rows, tmp_path, {"validation": 1})


def test_subset_spec_parses_and_rejects_malformed_entries():
    assert parse_subsets("train:20,test:100") == {"train": 20, "test": 100}
    assert parse_subsets("") == {}
    for bad in ("train", "train:0", "train:x", ":5"):
        with pytest.raises(ValueError, match="must look like `train:20`"):
            parse_subsets(bad)


def test_config_defaults_match_the_training_job_paths():
    config = gsm8k.config_from_env({"OSS_BUCKET": "b", "OSS_REGION": "ap-southeast-1"})
    assert (config.dataset_name, config.dataset_config) == ("openai/gsm8k", "main")
    assert config.prefix == "datasets/gsm8k/"
    assert config.subsets == {"train": 20, "test": 100}
    assert config.hf_token is None
    assert config.agent_name == "tool_agent", "today's tool-agent rows stay the default"


def test_agent_name_selects_single_turn_rows_and_an_unknown_loop_exits_2(capsys):
    env = {"OSS_BUCKET": "b", "OSS_REGION": "ap-southeast-1"}
    assert gsm8k.config_from_env({**env, "AGENT_NAME": "single_turn_agent"}).agent_name == "single_turn_agent"
    assert gsm8k.main({**env, "AGENT_NAME": "react_agent"}) == 2
    assert "AGENT_NAME='react_agent'" in capsys.readouterr().err


def test_only_gsm8k_is_accepted_and_anything_else_exits_2(capsys):
    code = gsm8k.main({"DATASET_NAME": "hiyouga/geometry3k", "OSS_BUCKET": "b", "OSS_REGION": "ap-southeast-1"})
    assert code == 2
    assert "hiyouga/geometry3k" in capsys.readouterr().err


def test_a_missing_bucket_exits_2_naming_the_variable(capsys):
    assert gsm8k.main({"OSS_REGION": "ap-southeast-1"}) == 2
    assert "OSS_BUCKET" in capsys.readouterr().err


def test_the_job_uploads_its_files_then_its_marker_and_a_second_run_stages_nothing(fake_oss, tmp_path):
    config = JobConfig(dataset_name="openai/gsm8k", dataset_config="main", bucket="data", prefix="datasets/gsm8k/k/",
                       subsets={"train": 2, "test": 1}, output_dir=tmp_path / "out", hf_token=None)
    client = fake_oss.client()
    first = gsm8k.run(config, client, load=lambda _: EXAMPLES, log=lambda _: None)
    expected = ["datasets/gsm8k/k/test.parquet", "datasets/gsm8k/k/test1.parquet",
                "datasets/gsm8k/k/train.parquet", "datasets/gsm8k/k/train2.parquet"]
    assert fake_oss.keys("data") == sorted(expected + ["datasets/gsm8k/k.complete"])
    assert sorted(first.uploaded) == expected
    assert fake_oss.get("data", "datasets/gsm8k/k/train.parquet") == (tmp_path / "out" / "train.parquet").read_bytes()
    puts = fake_oss.requests(op="PutObject")
    assert puts[-1].key == "datasets/gsm8k/k.complete", "the marker is the last write"

    fake_oss.clear_log()
    loads = []
    second = gsm8k.run(config, client, load=lambda c: loads.append(c) or EXAMPLES, log=lambda _: None)
    assert second is None and loads == [], "a complete prefix is neither downloaded nor converted again"
    assert fake_oss.requests(op="PutObject") == []


def test_a_prefix_without_its_marker_is_staged_again_and_only_the_missing_files_upload(fake_oss, tmp_path):
    config = JobConfig(dataset_name="openai/gsm8k", dataset_config="main", bucket="data", prefix="datasets/gsm8k/k/",
                       subsets={"train": 2}, output_dir=tmp_path / "out", hf_token=None)
    client = fake_oss.client()
    gsm8k.run(config, client, load=lambda _: EXAMPLES, log=lambda _: None)
    with fake_oss._lock:  # an interrupted run: the files are there, the marker is not
        del fake_oss.objects[("data", "datasets/gsm8k/k.complete")]
    again = gsm8k.run(config, client, load=lambda _: EXAMPLES, log=lambda _: None)
    assert again.uploaded == [] and len(again.skipped) == 3
    assert "datasets/gsm8k/k.complete" in fake_oss.keys("data")


def test_main_runs_the_whole_job_from_environment_variables(fake_oss, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gsm8k, "load_gsm8k", lambda config: EXAMPLES)
    env = {"OSS_BUCKET": "data", "OSS_REGION": "ap-southeast-1", "OSS_ENDPOINT": fake_oss.endpoint,
           "OSS_ACCESS_KEY_ID": "id", "OSS_ACCESS_KEY_SECRET": "not-printed", "SUBSETS": "train:1",
           "OUTPUT_DIR": str(tmp_path), "OSS_PREFIX": "/data/gsm8k"}
    assert gsm8k.main(env) == 0
    assert fake_oss.keys("data") == ["data/gsm8k.complete", "data/gsm8k/test.parquet", "data/gsm8k/train.parquet",
                                     "data/gsm8k/train1.parquet"]
    out = capsys.readouterr().out
    assert "uploaded 3 objects" in out
    assert "not-printed" not in out


def test_a_bad_example_exits_2_naming_it_and_nothing_is_uploaded(fake_oss, tmp_path, monkeypatch, capsys):
    broken = {"train": EXAMPLES["train"], "test": [{"question": "How many?", "answer": "#### many"}]}
    monkeypatch.setattr(gsm8k, "load_gsm8k", lambda config: broken)
    env = {"OSS_BUCKET": "data", "OSS_REGION": "ap-southeast-1", "OSS_ENDPOINT": fake_oss.endpoint,
           "OSS_ACCESS_KEY_ID": "id", "OSS_ACCESS_KEY_SECRET": "secret", "SUBSETS": "", "OUTPUT_DIR": str(tmp_path),
           "OSS_PREFIX": "data/gsm8k"}
    assert gsm8k.main(env) == 2
    assert "test split, row 0, column answer" in capsys.readouterr().err
    assert fake_oss.keys("data") == [] and list(tmp_path.iterdir()) == []


def test_the_marker_names_the_agent_loop_so_single_turn_rows_never_reuse_tool_rows(fake_oss, tmp_path):
    tool = JobConfig(dataset_name="openai/gsm8k", dataset_config="main", bucket="data", prefix="datasets/gsm8k/k/",
                     subsets={}, output_dir=tmp_path / "out", hf_token=None)
    client = fake_oss.client()
    gsm8k.run(tool, client, load=lambda _: EXAMPLES, log=lambda _: None)
    single = JobConfig(**{**tool.__dict__, "agent_name": "single_turn_agent", "output_dir": tmp_path / "out2"})
    assert gsm8k.run(single, client, load=lambda _: EXAMPLES, log=lambda _: None) is not None
    staged = pq.read_table(tmp_path / "out2" / "train.parquet").to_pylist()
    assert {r["agent_name"] for r in staged} == {"single_turn_agent"}


def test_main_without_credentials_exits_2_naming_the_variables(capsys, tmp_path):
    assert gsm8k.main({"OSS_BUCKET": "b", "OSS_REGION": "ap-southeast-1", "OUTPUT_DIR": str(tmp_path)}) == 2
    assert "OSS_ACCESS_KEY_ID" in capsys.readouterr().err
