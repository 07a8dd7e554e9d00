"""verl's RLHFDataset row layout, checked row by row: one rule for the dataset Job and the plan.

A row verl 0.9.1 trains on (docs/preparation/prepare_data.rst, utils/dataset/rl_dataset.py, the naive reward
manager): `prompt` a list of chat messages ({role, content} with string content), `data_source` a string (the
reward dispatches on it), `reward_model` a mapping with `ground_truth` (what the reward compares against),
optional `extra_info` a mapping (passed to the reward; `tools_kwargs` and `index` live there) and optional
`agent_name` (which agent loop runs the row). The dataset Job checks every row before it uploads anything, and the
plan checks a researcher's local files with the same function, so both name the same file, row and column.
`write_splits` is the dataset Job's one way to write rows: it checks every split first, then writes each split and
its head subsets, so a Job whose rows verl could not read fails before it writes or uploads anything.

Imported by the dataset Job in the pod (pure Python; pyarrow only where a file is read) and by the plan.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

REQUIRED_COLUMNS = ("prompt", "data_source", "reward_model")
ROLES = ("system", "user", "assistant", "tool")
# verl's agent loops a row may name (experimental/agent_loop/__init__.py registers these two by default).
SINGLE_TURN_AGENT = "single_turn_agent"
TOOL_AGENT = "tool_agent"
AGENT_NAMES = (SINGLE_TURN_AGENT, TOOL_AGENT)
MAX_REPORTED = 5  # problems listed per file before "and N more"


class RowError(ValueError):
    """A row verl could not train on, named by file, row and column."""


@dataclass
class FileSummary:
    """What a checked file holds: the plan's Task section reads it."""
    path: str
    rows: int = 0
    data_sources: dict[str, int] = field(default_factory=dict)
    agent_names: dict[str, int] = field(default_factory=dict)
    prompt_chars: list[int] = field(default_factory=list)  # per row, for the length check
    columns: tuple[str, ...] = ()

    def add(self, row: Mapping[str, Any]) -> None:
        self.rows += 1
        src = row["data_source"]
        self.data_sources[src] = self.data_sources.get(src, 0) + 1
        agent = row.get("agent_name") or "(default)"
        self.agent_names[agent] = self.agent_names.get(agent, 0) + 1
        self.prompt_chars.append(sum(len(m["content"]) for m in row["prompt"]))


def row_problem(row: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """(column, what is wrong) for the first problem of one row, or None."""
    for col in REQUIRED_COLUMNS:
        if row.get(col) is None:
            return col, "missing (verl's RLHFDataset needs it)"
    prompt = row["prompt"]
    if not isinstance(prompt, (list, tuple)) or not prompt:
        return "prompt", f"must be a non-empty list of chat messages, got {type(prompt).__name__}"
    for i, msg in enumerate(prompt):
        if not isinstance(msg, Mapping) or not isinstance(msg.get("content"), str) or msg.get("role") not in ROLES:
            return f"prompt[{i}]", f"must be {{role: one of {', '.join(ROLES)}, content: text}}, got {msg!r:.80}"
    if not isinstance(row["data_source"], str) or not row["data_source"]:
        return "data_source", "must be a non-empty string (the reward dispatches on it)"
    rm = row["reward_model"]
    if not isinstance(rm, Mapping):
        return "reward_model", f"must be a mapping with ground_truth, got {type(rm).__name__}"
    if rm.get("ground_truth") is None:
        return "reward_model.ground_truth", "missing (what the reward compares the model's answer against)"
    if not isinstance(rm["ground_truth"], (str, int, float)):
        return "reward_model.ground_truth", f"must be text or a number, got {type(rm['ground_truth']).__name__}"
    extra = row.get("extra_info")
    if extra is not None and not isinstance(extra, Mapping):
        return "extra_info", f"must be a mapping, got {type(extra).__name__}"
    agent = row.get("agent_name")
    if agent is not None and not isinstance(agent, str):
        return "agent_name", f"must be a string, got {type(agent).__name__}"
    return None


def check_rows(rows: Iterable[Mapping[str, Any]], path: str) -> FileSummary:
    """Every row checked; RowError naming the file, the first rows and columns at fault (nothing is uploaded)."""
    summary = FileSummary(path=path)
    problems: list[str] = []
    for index, row in enumerate(rows):
        found = row_problem(row)
        if found:
            problems.append(f"row {index}, column {found[0]}: {found[1]}")
            continue
        summary.add(row)
    if problems:
        more = f" (and {len(problems) - MAX_REPORTED} more)" if len(problems) > MAX_REPORTED else ""
        raise RowError(f"{path}: {'; '.join(problems[:MAX_REPORTED])}{more}")
    if summary.rows == 0:
        raise RowError(f"{path}: no rows")
    return summary


def read_parquet_rows(path: str) -> tuple[list[dict], tuple[str, ...]]:
    """The rows of a parquet file as Python values, and its columns (pyarrow, imported here)."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several types for a file that is not parquet
        raise RowError(f"{path}: not a readable parquet file ({err})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise RowError(f"{path}: column {', '.join(missing)} missing (verl's RLHFDataset needs "
                       f"{', '.join(REQUIRED_COLUMNS)}); the file has {', '.join(table.column_names)}")
    rm_type = table.schema.field("reward_model").type
    if hasattr(rm_type, "num_fields"):  # a struct column: its fields are the schema's, whatever the rows hold
        names = [rm_type.field(i).name for i in range(rm_type.num_fields)]
        if "ground_truth" not in names:
            raise RowError(f"{path}: column reward_model.ground_truth missing (reward_model has "
                           f"{', '.join(names)}); add ground_truth, what the reward compares against")
    return table.to_pylist(), tuple(table.column_names)


def check_parquet(path: str) -> FileSummary:
    rows, columns = read_parquet_rows(path)
    summary = check_rows(rows, path)
    summary.columns = columns
    return summary


def parse_subsets(spec: str) -> dict[str, int]:
    """`train:20,test:100` -> {"train": 20, "test": 100}; '' -> {}."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        split, sep, count = item.partition(":")
        if not sep or not split or not count.isdigit() or int(count) < 1:
            raise ValueError(f"SUBSETS entry {item!r} must look like `train:20` (split name, colon, count >= 1)")
        out[split] = int(count)
    return out


def parse_agent_name(value: str) -> str:
    """The AGENT_NAME a dataset Job writes into every row: one of verl's two default agent loops."""
    if value not in AGENT_NAMES:
        raise ValueError(f"AGENT_NAME={value!r} is not one of verl's agent loops {', '.join(AGENT_NAMES)} "
                         f"({SINGLE_TURN_AGENT}: no tools, {TOOL_AGENT}: the task's tools)")
    return value


def write_splits(rows_by_split: Mapping[str, list[dict]], out_dir: str | os.PathLike,
                 subsets: Mapping[str, int]) -> list[Path]:
    """Check every row of every split (RowError naming `<split>.parquet`, the rows and columns at fault), then
    write `<split>.parquet` for every split and `<split><n>.parquet` holding its first n rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for split, rows in rows_by_split.items():
        check_rows(rows, f"{split}.parquet")
    for split, n in subsets.items():
        if split not in rows_by_split:
            raise ValueError(f"subset {split}:{n} names a split that does not exist; splits are "
                             f"{', '.join(sorted(rows_by_split))}")
        if n > len(rows_by_split[split]):
            raise ValueError(f"subset {split}:{n} asks for more rows than the split has ({len(rows_by_split[split])})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    targets = [(f"{split}.parquet", rows) for split, rows in rows_by_split.items()]
    targets += [(f"{split}{n}.parquet", rows_by_split[split][:n]) for split, n in subsets.items()]
    for name, rows in targets:
        path = out / name
        pq.write_table(pa.Table.from_pylist(rows), path)
        written.append(path)
    return written
