"""pipeline/rows.py write_splits: the dataset Jobs' one way to write rows, every row checked before the first write."""

from __future__ import annotations

import pytest

from pipeline.rows import RowError, parse_agent_name, write_splits


def row(index: int, **over) -> dict:
    base = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": f"q{index}"}],
            "reward_model": {"style": "rule", "ground_truth": str(index)}, "extra_info": {"index": index}}
    return {**base, **over}


def test_a_row_verl_cannot_read_fails_naming_file_row_and_column_before_anything_is_written(tmp_path):
    rows = {"train": [row(0), row(1)], "test": [row(0), row(1, reward_model={"style": "rule"})]}
    with pytest.raises(RowError, match=r"^test\.parquet: row 1, column reward_model\.ground_truth: missing"):
        write_splits(rows, tmp_path / "out", {"train": 1})
    assert not (tmp_path / "out").exists(), "no file of any split is written"


def test_an_empty_split_is_refused_naming_its_file(tmp_path):
    with pytest.raises(RowError, match=r"^test\.parquet: no rows"):
        write_splits({"train": [row(0)], "test": []}, tmp_path, {})


def test_only_verls_two_agent_loops_are_accepted_as_agent_name():
    assert parse_agent_name("tool_agent") == "tool_agent"
    assert parse_agent_name("single_turn_agent") == "single_turn_agent"
    with pytest.raises(ValueError, match="AGENT_NAME='react_agent' is not one of verl's agent loops"):
        parse_agent_name("react_agent")
