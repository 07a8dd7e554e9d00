"""Turn the `math` and `code` task presets' hub datasets into verl's parquet files and upload them to OSS.

Run in the dataset Job as `python -m pipeline.task_dataset` (the `gsm8k` preset has its own module,
pipeline/gsm8k.py). Two datasets, each read from the Hugging Face hub:

- `DigitalLearningGmbH/MATH-lighteval` (the `math` preset): rows as verl's examples/data_preprocess/math_dataset.py
  builds them: data_source `DigitalLearningGmbH/MATH-lighteval` (verl's default_compute_score scores it with its
  math scorer), one user message (the problem, a space and INSTRUCTION), ability `math`, reward_model
  {style: rule, ground_truth: the content of the solution's last \\boxed{...}} and extra_info {split, index}.
  Splits train and test.
- `PRIME-RL/Eurus-2-RL-Data` (the `code` preset): already in verl's layout; only the rows whose ability is `code`
  are kept (the set mixes math and code), each row's data_source must be one of verl's code sets (CODE_SOURCES) and
  its reward_model.ground_truth must parse as JSON test cases ({inputs: [...], outputs: [...]} of equal length,
  optional fn_name: verl's prime_code and sandbox_fusion format). Its `validation` split becomes test.parquet.

Every row names the agent loop in AGENT_NAME. A tool_agent row's extra_info also carries the answer tool's
create_kwargs (the ground truth, under ANSWER_TOOL), as pipeline/gsm8k.py's tool rows do: verl hands a tool only its
own entry, so the entry is harmless where the answer tool is not offered, and the rows depend on the agent loop alone
(which the dataset's cache key names). Every row is checked against verl's
RLHFDataset layout (pipeline/rows.py) before anything is written or uploaded: a row verl could not train on, a MATH
solution without a \\boxed answer or a code row whose tests do not parse exits with status 2 naming the file, the
row and the column.

Environment:
  DATASET_NAME    `DigitalLearningGmbH/MATH-lighteval` or `PRIME-RL/Eurus-2-RL-Data` (required); anything else
                  exits with status 2.
  DATASET_CONFIG  optional hub config name (both datasets have only their default one).
  AGENT_NAME      `single_turn_agent` (default: both presets come without tools) or `tool_agent`.
  OSS_BUCKET      bucket to upload to (required).
  OSS_REGION      bucket region, e.g. ap-southeast-1 (required).
  OSS_ENDPOINT    optional endpoint override (a test server, or a specific domain).
  OSS_INTERNAL_ENDPOINT  default true: use oss-<region>-internal.aliyuncs.com when OSS_ENDPOINT is unset.
  OSS_PREFIX      key prefix of the files (required; the program names a content-addressed one, components/wiring.py
                  dataset_files). The Job writes `<prefix>.complete` last and skips the whole run when that marker
                  names this config and every file it lists is there (pipeline/marker.py).
  SUBSETS         small head-of-split files, default `train:20,test:100` -> train20.parquet, test100.parquet;
                  empty for none. Split names are the files' (train, test).
  OUTPUT_DIR      local scratch directory, default /tmp/task-dataset.
  HF_TOKEN        optional Hugging Face token (both datasets are public; a token raises rate limits).
  Credentials: see pipeline/oss_client.py (RRSA first, access keys from a Secret as a fallback).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pipeline.oss_client import normalize_prefix, require
from pipeline.rows import (
    SINGLE_TURN_AGENT,
    TOOL_AGENT,
    RowError,
    parse_agent_name,
    parse_subsets,
)
from pipeline.staging import job_main, stage_unless_complete

MATH = "DigitalLearningGmbH/MATH-lighteval"
CODE = "PRIME-RL/Eurus-2-RL-Data"
# verl's math_dataset.py appends this to every problem: the scorer reads the last \boxed{...} of the response.
INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
# The data_source values of Eurus-2-RL-Data's coding rows (its card: APPS, CodeContests, TACO, Codeforces), the
# names verl 0.9.1 default_compute_score routes to its code scorers (utils/reward_score/__init__.py).
CODE_SOURCES = ("codecontests", "apps", "codeforces", "taco")
# The answer tool's name in the job's tool config (components/workloads/training/verl_config.py GSM8K_TOOL; a test
# compares): its create_kwargs carry the row's ground truth.
ANSWER_TOOL = "calc_gsm8k_reward"


@dataclass(frozen=True)
class HubDataset:
    """What the Job knows of a hub dataset (components/config/task.py TASK_PRESETS says the same; a test compares)."""
    hub_id: str
    data_source: str  # the rows' data_source (code: the first of CODE_SOURCES, the preset's)
    splits: dict[str, str]  # file split (train, test) -> hub split
    ability: str


# The pod cannot import components/: the facts are kept here, and tests/pipeline/test_task_dataset.py compares them
# with TASK_PRESETS.
DATASETS = {
    MATH: HubDataset(hub_id=MATH, data_source=MATH, splits={"train": "train", "test": "test"}, ability="math"),
    CODE: HubDataset(hub_id=CODE, data_source=CODE_SOURCES[0], splits={"train": "train", "test": "validation"},
                     ability="code"),
}


# --------------------------------------------------------------------------------------------- MATH
class ColumnError(ValueError):
    """An example that cannot become a row, and the column at fault."""

    def __init__(self, column: str, message: str):
        super().__init__(message)
        self.column = column


def last_boxed(solution: str) -> str:
    """The content of the last `\\boxed{...}` in a MATH solution, braces matched (`\\fbox{...}` only where there
    is no \\boxed, as verl's math scorer reads it); the `\\boxed 5` form (no braces) up to the next `$`.
    ValueError when there is none."""
    head = "\\boxed" if "\\boxed" in solution else "\\fbox"
    start = solution.rfind(head)
    if start < 0:
        raise ValueError(f"no \\boxed answer in the solution: {solution[-80:]!r}")
    rest = solution[start + len(head):]
    if rest.startswith(" "):
        answer = rest[1:].split("$", 1)[0].strip()
        if not answer:
            raise ValueError(f"{head} with nothing after it: {rest[:40]!r}")
        return answer
    if not rest.startswith("{"):
        raise ValueError(f"{head} not followed by {{...}}: {rest[:40]!r}")
    depth = 0
    for i, ch in enumerate(rest):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return rest[1:i]
    raise ValueError(f"{head}{{ without its closing brace: {rest[:80]!r}")


def _boxed_answer(solution: str) -> str:
    try:
        return last_boxed(solution)
    except ValueError as err:
        raise ColumnError("solution", str(err)) from None


def math_row(example: Mapping[str, Any], index: int, split: str) -> dict:
    """One verl row from a MATH-lighteval example ({"problem", "solution", "level", "type"})."""
    return {
        "data_source": MATH,
        "prompt": [{"role": "user", "content": example["problem"] + " " + INSTRUCTION}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": _boxed_answer(example["solution"])},
        "extra_info": {"split": split, "index": index},
    }


# --------------------------------------------------------------------------------------------- code
def cases_problem(ground_truth: Any) -> Optional[str]:
    """Why a code row's ground_truth is not test cases verl's code scorers run, or None."""
    if not isinstance(ground_truth, str):
        return f"must be a JSON string of test cases, got {type(ground_truth).__name__}"
    try:
        cases = json.loads(ground_truth)
    except json.JSONDecodeError as err:
        return f"is not JSON ({err.msg} at character {err.pos})"
    if not isinstance(cases, dict):
        return f"must be a JSON object {{inputs, outputs}}, got {type(cases).__name__}"
    inputs, outputs = cases.get("inputs"), cases.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        return "must hold `inputs` and `outputs` lists (the tests the model's program is run against)"
    if not inputs or len(inputs) != len(outputs):
        return f"must hold as many outputs as inputs, at least one (got {len(inputs)} inputs, {len(outputs)} outputs)"
    if "fn_name" in cases and not (isinstance(cases["fn_name"], str) and cases["fn_name"]):
        return "fn_name must name the function the tests call"
    return None


def code_row(example: Mapping[str, Any], index: int, split: str) -> Optional[dict]:
    """The Eurus-2-RL-Data row as verl reads it, or None for a row that is not a coding problem."""
    if example.get("ability") != "code":
        return None
    source = example.get("data_source")
    if source not in CODE_SOURCES:
        raise ColumnError("data_source", f"{source!r} is not one of verl's code sets {', '.join(CODE_SOURCES)}")
    rm = example.get("reward_model")
    problem = cases_problem(rm.get("ground_truth") if isinstance(rm, Mapping) else None)
    if problem:
        raise ColumnError("reward_model.ground_truth", problem)
    extra = dict(example.get("extra_info") or {})
    extra.setdefault("split", split)
    extra.setdefault("index", index)
    return {"data_source": source, "prompt": example["prompt"], "ability": "code", "reward_model": dict(rm),
            "extra_info": extra}


# --------------------------------------------------------------------------------------------- rows
def with_agent(row: dict, agent_name: str) -> dict:
    """`row` naming its agent loop; a tool row also carries the answer tool's create_kwargs (its ground truth)."""
    out = {"data_source": row["data_source"], "agent_name": agent_name,
           **{k: v for k, v in row.items() if k != "data_source"}}
    if agent_name == TOOL_AGENT:
        out["extra_info"] = {**out["extra_info"], "need_tools_kwargs": True, "tools_kwargs": {
            ANSWER_TOOL: {"create_kwargs": {"ground_truth": row["reward_model"]["ground_truth"]}}}}
    return out


def load_script(path: str, function: str) -> Callable[..., Optional[dict]]:
    """The researcher's conversion function from its file (task.dataset.hub.script, mounted from its ConfigMap)."""
    spec = importlib.util.spec_from_file_location("verl_ack_task_script", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"HUB_SCRIPT={path!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, function, None)
    if not callable(fn):
        raise ValueError(f"HUB_SCRIPT {path} has no function {function!r} (task.dataset.hub.function)")
    return fn


def build_rows(dataset: str, examples, split: str, agent_name: str = SINGLE_TURN_AGENT,
               convert: Optional[Callable[..., Optional[dict]]] = None) -> list[dict]:
    """Every kept example's row (`split`: the file's split name); an example that cannot become one is a RowError
    naming the dataset, split, row and column. `convert`: a hub dataset's conversion function (example, index,
    split) -> row or None, in place of the presets' own."""
    rows = []
    for index, example in enumerate(examples):
        try:
            if convert is not None:
                row = convert(dict(example), index, split)
            else:
                row = math_row(example, index, split) if dataset == MATH else code_row(example, index, split)
        except ColumnError as err:
            raise RowError(f"{dataset} {split} split, row {index}, column {err.column}: {err}") from None
        except Exception as err:  # noqa: BLE001 (the researcher's function: named with its row)
            raise RowError(f"{dataset} {split} split, row {index}: the conversion function raised "
                           f"{type(err).__name__}: {err}") from None
        if row is not None:
            rows.append(with_agent(row, agent_name))
    return rows


# --------------------------------------------------------------------------------------------- job
@dataclass(frozen=True)
class JobConfig:
    dataset_name: str
    dataset_config: Optional[str]
    bucket: str
    prefix: str
    subsets: dict[str, int]
    output_dir: Path
    hf_token: Optional[str]
    agent_name: str = SINGLE_TURN_AGENT
    # A hub dataset converted by the researcher's script (task.dataset.hub): its file, function, splits, revision.
    script: Optional[str] = None
    function: str = "build_row"
    splits: Optional[dict[str, str]] = None
    revision: Optional[str] = None
    data_source: Optional[str] = None


def config_from_env(env: Mapping[str, str]) -> JobConfig:
    name = env.get("DATASET_NAME", "")
    if env.get("HUB_SCRIPT"):
        return JobConfig(
            dataset_name=require(env, "DATASET_NAME"), dataset_config=env.get("DATASET_CONFIG") or None,
            bucket=require(env, "OSS_BUCKET"), prefix=normalize_prefix(require(env, "OSS_PREFIX")),
            subsets=parse_subsets(env.get("SUBSETS", "train:20,test:100")),
            output_dir=Path(env.get("OUTPUT_DIR") or "/tmp/task-dataset"), hf_token=env.get("HF_TOKEN") or None,
            agent_name=parse_agent_name(env.get("AGENT_NAME") or SINGLE_TURN_AGENT), script=env["HUB_SCRIPT"],
            function=env.get("HUB_FUNCTION") or "build_row", splits=parse_splits(env.get("HUB_SPLITS", "")),
            revision=env.get("DATASET_REVISION") or None, data_source=env.get("HUB_DATA_SOURCE") or None)
    if name not in DATASETS:
        raise ValueError(f"DATASET_NAME={name!r} is not supported: this job converts {', '.join(DATASETS)} "
                         "(openai/gsm8k: python -m pipeline.gsm8k)")
    return JobConfig(
        dataset_name=name,
        dataset_config=env.get("DATASET_CONFIG") or None,
        bucket=require(env, "OSS_BUCKET"),
        prefix=normalize_prefix(require(env, "OSS_PREFIX")),
        subsets=parse_subsets(env.get("SUBSETS", "train:20,test:100")),
        output_dir=Path(env.get("OUTPUT_DIR") or "/tmp/task-dataset"),
        hf_token=env.get("HF_TOKEN") or None,
        agent_name=parse_agent_name(env.get("AGENT_NAME") or SINGLE_TURN_AGENT),
    )


def parse_splits(spec: str) -> dict[str, str]:
    """`test:validation,train:train` -> {"test": "validation", "train": "train"}: file split -> hub split."""
    out = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        split, sep, hub = item.partition(":")
        if not sep or split not in ("train", "test") or not hub:
            raise ValueError(f"HUB_SPLITS entry {item!r} must look like `test:validation` (train or test, a hub split)")
        out[split] = hub
    return out or {"train": "train", "test": "test"}


def load_hub(config: JobConfig) -> dict[str, list[dict]]:
    """The raw splits by file split name (train, test) from the Hugging Face hub (needs `datasets` and network).
    The code set's math rows are dropped here already, column by column, so its 455k math problems never become
    Python objects."""
    import datasets  # imported here so the tests and the teardown tool do not need it

    if config.script is not None:  # a hub dataset of the researcher's: the splits the stack names, at its revision
        ds = datasets.load_dataset(config.dataset_name, config.dataset_config, token=config.hf_token,
                                   revision=config.revision)
        return {split: list(ds[hub_split]) for split, hub_split in (config.splits or {}).items()}
    facts = DATASETS[config.dataset_name]
    ds = datasets.load_dataset(config.dataset_name, config.dataset_config, token=config.hf_token)
    out = {}
    for split, hub_split in facts.splits.items():
        part = ds[hub_split]
        if facts.ability == "code":
            part = part.filter(lambda ability: ability == "code", input_columns=["ability"])
        out[split] = list(part)
    return out


def identity(config: JobConfig) -> dict:
    """What the marker names: a complete prefix for other values is staged again (pipeline/marker.py)."""
    out = {"dataset": config.dataset_name, "config": config.dataset_config or "",
           "subsets": ",".join(f"{k}:{v}" for k, v in sorted(config.subsets.items())),
           "agent_name": config.agent_name}
    if config.script is not None:  # the prefix is keyed by the script's content too (components/wiring.py)
        out.update(function=config.function, revision=config.revision or "",
                   splits=",".join(f"{k}:{v}" for k, v in sorted((config.splits or {}).items())))
    return out


def run(config: JobConfig, client, load: Callable[[JobConfig], Mapping[str, list]] | None = None,
        log: Callable[[str], None] = print):
    """Stage the files unless the prefix is complete (pipeline/staging.py); returns the upload summary, or None when
    nothing was staged."""
    def rows_of() -> dict[str, list[dict]]:
        raw = (load or load_hub)(config)
        convert = load_script(config.script, config.function) if config.script is not None else None
        rows = {split: build_rows(config.dataset_name, examples, split, config.agent_name, convert)
                for split, examples in raw.items()}
        if config.data_source is not None:  # the stack says which scorer reads the rows: every row must agree
            for split, split_rows in rows.items():
                other = sorted({r["data_source"] for r in split_rows} - {config.data_source})
                if other:
                    raise RowError(f"{config.dataset_name} {split} split: rows carry data_source {other}, the stack "
                                   f"says {config.data_source!r} (task.dataset.hub.data_source)")
        return rows

    return stage_unless_complete(config, client, identity(config), rows_of, log=log)


def main(env: Mapping[str, str] | None = None) -> int:
    return job_main(env, config_from_env, run)


if __name__ == "__main__":
    sys.exit(main())
