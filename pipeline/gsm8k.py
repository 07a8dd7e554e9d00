"""Turn GSM8K into verl's parquet files and upload them to OSS.

Run in the dataset Job as `python -m pipeline.gsm8k`. By default each row has the layout of verl's
examples/data_preprocess/gsm8k_tool_agent_loop.py: the `agent_name: tool_agent` column makes
verl's agent loop offer the `calc_gsm8k_reward` tool (without it rollouts fall back to
single_turn_agent and no tool is ever called). With AGENT_NAME=single_turn_agent (a task without tools) the rows
name verl's single_turn_agent, carry no tools_kwargs and their system prompt mentions no tool (it still asks for
`#### <answer>`, the format the reward reads).

Every row is checked against verl's RLHFDataset layout (pipeline/rows.py) before anything is written or uploaded:
a row verl could not train on exits with status 2 naming the file, the row and the column.

Environment:
  DATASET_NAME    only `openai/gsm8k` (default); anything else exits with status 2.
  DATASET_CONFIG  GSM8K config, default `main`.
  AGENT_NAME      `tool_agent` (default) or `single_turn_agent`: the agent loop every row names.
  OSS_BUCKET      bucket to upload to (required).
  OSS_REGION      bucket region, e.g. ap-southeast-1 (required).
  OSS_ENDPOINT    optional endpoint override (a test server, or a specific domain).
  OSS_INTERNAL_ENDPOINT  default true: use oss-<region>-internal.aliyuncs.com when OSS_ENDPOINT is unset.
  OSS_PREFIX      key prefix of the files, default `datasets/gsm8k/`; the program names a content-addressed one
                  (components/wiring.py dataset_files). The Job writes `<prefix>.complete` last and skips the
                  whole run when that marker names this config and every file it lists is there (pipeline/marker.py).
  SUBSETS         small head-of-split files, default `train:20,test:100` -> train20.parquet, test100.parquet;
                  empty for none.
  OUTPUT_DIR      local scratch directory, default /tmp/gsm8k.
  HF_TOKEN        optional Hugging Face token (GSM8K is public; a token raises rate limits).
  Credentials: see pipeline/oss_client.py (RRSA first, access keys from a Secret as a fallback).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.oss_client import normalize_prefix, require
from pipeline.rows import SINGLE_TURN_AGENT, TOOL_AGENT, RowError, parse_agent_name, parse_subsets
from pipeline.staging import job_main, stage_unless_complete

DATA_SOURCE = "openai/gsm8k"
SUPPORTED_DATASETS = (DATA_SOURCE,)

# Verbatim from verl's gsm8k_tool_agent_loop.py: the reward function and the Gsm8kTool parse the
# answer after `#### `, so the prompt must ask for exactly that format.
SYSTEM_PROMPT = (
    "You are a math expert. You are given a question and you need to solve it step by step. "
    "Reasoning step by step before any tool call. "
    "You should use the `calc_gsm8k_reward` tool after step by step solving the question, "
    "before generate final answer at least once and refine your answer if necessary. "
    "Put your final answer in the format of `#### <answer>`."
)
# The same instructions without the tool, for single-turn rows (no tool is offered; the reward still reads `####`).
SINGLE_TURN_SYSTEM_PROMPT = (
    "You are a math expert. You are given a question and you need to solve it step by step. "
    "Put your final answer in the format of `#### <answer>`."
)
INSTRUCTION = "Let's think step by step and output the final answer after `####`."

# Same number shape as verl's extract_solution (`#### (\-?[0-9\.\,]+)`), but it must end in a digit
# so a sentence-ending period or comma is not taken into the answer.
_ANSWER = re.compile(r"####\s*(-?[0-9.,]*[0-9])")


def extract_answer(solution: str) -> str:
    """The number after `####` in a GSM8K solution, with thousands separators removed."""
    if "####" not in solution:
        raise ValueError(f"GSM8K solution has no '####' answer marker: {solution[-80:]!r}")
    m = _ANSWER.search(solution)
    if m is None:
        tail = solution[solution.index("####"):][:40]
        raise ValueError(f"GSM8K solution has '####' but no number after it: {tail!r}")
    return m.group(1).replace(",", "")


def build_row(example: Mapping[str, str], index: int, split: str, agent_name: str = TOOL_AGENT) -> dict:
    """One verl row from a GSM8K example ({"question", "answer"}): a tool-agent row (the default) or, with
    `agent_name` single_turn_agent, one without tools."""
    question_raw = example["question"]
    answer_raw = example["answer"]
    question = question_raw + " " + INSTRUCTION
    answer = extract_answer(answer_raw)
    if agent_name == SINGLE_TURN_AGENT:
        return {
            "data_source": DATA_SOURCE,
            "agent_name": SINGLE_TURN_AGENT,
            "prompt": [
                {"role": "system", "content": SINGLE_TURN_SYSTEM_PROMPT},
                {"role": "user", "content": question},
            ],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": answer},
            # verl's examples/data_preprocess/gsm8k.py (its single-turn rows) keeps these four.
            "extra_info": {"split": split, "index": index, "answer": answer_raw, "question": question_raw},
        }
    return {
        "data_source": DATA_SOURCE,
        "agent_name": "tool_agent",
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": question},
        ],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {
            "split": split,
            "index": index,
            "answer": answer_raw,
            "question": question_raw,
            "need_tools_kwargs": True,
            # Keyed by tool name: verl passes create_kwargs to Gsm8kTool.create() for each trajectory.
            "tools_kwargs": {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": answer}}},
            # verl's script sends the prompt as shown to the model (question + instruction) as the query.
            "interaction_kwargs": {"query": question, "ground_truth": answer},
        },
    }


def build_rows(examples, split: str, agent_name: str = TOOL_AGENT) -> list[dict]:
    """Every example's row; an example without a usable answer is a RowError naming the split, row and column."""
    rows = []
    for index, example in enumerate(examples):
        try:
            rows.append(build_row(example, index, split, agent_name))
        except ValueError as err:
            raise RowError(f"{DATA_SOURCE} {split} split, row {index}, column answer: {err}") from None
    return rows


@dataclass(frozen=True)
class JobConfig:
    dataset_name: str
    dataset_config: str
    bucket: str
    prefix: str
    subsets: dict[str, int]
    output_dir: Path
    hf_token: str | None
    agent_name: str = TOOL_AGENT


class UnsupportedDataset(ValueError):
    pass


def config_from_env(env: Mapping[str, str]) -> JobConfig:
    name = env.get("DATASET_NAME") or DATA_SOURCE
    if name not in SUPPORTED_DATASETS:
        # The tutorial's job defaulted to hiyouga/geometry3k and then parsed GSM8K fields; refuse instead.
        raise UnsupportedDataset(f"DATASET_NAME={name!r} is not supported: this job only preprocesses "
                                 f"{', '.join(SUPPORTED_DATASETS)} (the math and code presets: python -m pipeline.task_dataset)")
    return JobConfig(
        dataset_name=name,
        dataset_config=env.get("DATASET_CONFIG") or "main",
        bucket=require(env, "OSS_BUCKET"),
        prefix=normalize_prefix(env.get("OSS_PREFIX") or "datasets/gsm8k/"),
        subsets=parse_subsets(env.get("SUBSETS", "train:20,test:100")),
        output_dir=Path(env.get("OUTPUT_DIR") or "/tmp/gsm8k"),
        hf_token=env.get("HF_TOKEN") or None,
        agent_name=parse_agent_name(env.get("AGENT_NAME") or TOOL_AGENT),
    )


def load_gsm8k(config: JobConfig) -> dict[str, list[dict]]:
    """The raw splits from the Hugging Face hub (needs the `datasets` package and network)."""
    import datasets  # imported here so the tests and the teardown tool do not need it

    ds = datasets.load_dataset(config.dataset_name, config.dataset_config, token=config.hf_token)
    return {split: list(ds[split]) for split in ds}


def identity(config: JobConfig) -> dict:
    """What the marker names: a complete prefix for other values is staged again (pipeline/marker.py)."""
    return {"dataset": config.dataset_name, "config": config.dataset_config,
            "subsets": ",".join(f"{k}:{v}" for k, v in sorted(config.subsets.items())), "agent_name": config.agent_name}


def run(config: JobConfig, client, load: Callable[[JobConfig], Mapping[str, list]] | None = None,
        log: Callable[[str], None] = print):
    """Stage the files unless the prefix is complete (pipeline/staging.py); returns the upload summary, or None when
    nothing was staged."""
    def rows_of() -> dict[str, list[dict]]:
        raw = (load or load_gsm8k)(config)
        return {split: build_rows(examples, split, config.agent_name) for split, examples in raw.items()}

    return stage_unless_complete(config, client, identity(config), rows_of, log=log)


def main(env: Mapping[str, str] | None = None) -> int:
    return job_main(env, config_from_env, run)


if __name__ == "__main__":
    sys.exit(main())
