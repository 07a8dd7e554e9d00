"""Settings of the researcher's task: the dataset, the reward and the tools (`task:` in a stack file).

GSM8K with its answer tool is one preset, the default; `math` (MATH-lighteval) and `code` (Eurus-2-RL-Data's
coding problems, scored by running the model's program against the row's tests in the platform's sandboxes) are the
others, and a researcher's own parquet files in verl's RLHFDataset layout take the place of any of them. The reward
is verl's built-in scorer by each row's `data_source`, a function in a file of the stacks folder, or the sandbox
reward; the tools are the answer tool, the code tool, the researcher's own, or none (single turn).

Every file a task names is relative to the stacks folder and may not leave it (`..`, absolute, a symlink out): the
program reads it at plan time (the task's CPU proof, components/task/) and ships it in the job.

`TASK_PRESETS` is the one declaration of what each preset is; pipeline/datasets.py keeps the hub facts the
dataset Job needs (it cannot import this package in the pod) and tests/pipeline compares the two.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, model_validator

from components.config.project import STACKS_DIR
from components.config.types import Strict, _text


@dataclass(frozen=True)
class TaskPreset:
    """What a preset is: where its rows come from, what verl scores them by, and what the model is offered."""
    hub_id: str  # the Hugging Face dataset the dataset Job reads
    config: Optional[str]  # its config name (None: the dataset's default)
    data_source: str  # the rows' data_source: verl's default_compute_score dispatches on it
    train_split: str
    val_split: str
    train_rows: int  # rows of the full splits (the dataset card's figures, docs/facts.md)
    val_rows: int
    reward: Literal["builtin", "sandbox"]  # the preset's reward kind
    tools: tuple[str, ...]  # the preset's default tools (the code tool only where the sandboxes run)
    ability: str
    source: str  # where the facts above come from


TASK_PRESETS: dict[str, TaskPreset] = {
    "gsm8k": TaskPreset(
        hub_id="openai/gsm8k", config="main", data_source="openai/gsm8k", train_split="train", val_split="test",
        train_rows=7473, val_rows=1319, reward="builtin", tools=("answer", "code"), ability="math",
        source="huggingface.co/datasets/openai/gsm8k (main: train 7473, test 1319)"),
    "math": TaskPreset(
        hub_id="DigitalLearningGmbH/MATH-lighteval", config=None, data_source="DigitalLearningGmbH/MATH-lighteval",
        train_split="train", val_split="test", train_rows=7500, val_rows=5000, reward="builtin", tools=(),
        ability="math",
        source="verl examples/data_preprocess/math_dataset.py (lighteval/MATH's mirror); MATH: train 7500, test 5000"),
    "code": TaskPreset(
        hub_id="PRIME-RL/Eurus-2-RL-Data", config=None, data_source="codecontests", train_split="train",
        val_split="validation", train_rows=26758, val_rows=1024, reward="sandbox", tools=(), ability="code",
        source="verl docs/examples/sandbox_fusion_example.rst; the dataset card's statistics (coding: train 26758, "
               "validation 1024)"),
}
PRESET_NAMES = tuple(TASK_PRESETS)
DEFAULT_PRESET = "gsm8k"
# verl 0.9.1 default_compute_score's code sets: without a sandbox_fusion URL it falls back to prime_code, which runs
# the model's program inside the reward worker (utils/reward_score/__init__.py, prime_code/testing_util.py), i.e. in a
# GPU Ray pod. The built-in reward is refused for rows of these sources; the sandbox reward runs them isolated.
CODE_DATA_SOURCES = ("codecontests", "apps", "codeforces", "taco")

_REL_PATH = r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}"


def _outside(v: str) -> Optional[str]:
    if ".." in v.split("/") or v.startswith("/"):
        return "it may not leave the stack file's folder (no `..`, no leading /)"
    return None


# The folder task paths are relative to: the stacks folder (Pulumi.yaml's stackConfigDir, where `pulumi up` reads the
# stack file), or the folder of a stack file plan.py was given (`task_root`).
_ROOT: list[Path] = [STACKS_DIR]


@contextlib.contextmanager
def task_root(folder: Path) -> Iterator[None]:
    """Task paths are relative to `folder` inside the block (plan.py --config-file: the stack file's folder)."""
    _ROOT.append(Path(folder))
    try:
        yield
    finally:
        _ROOT.pop()


def resolve_task_path(rel: str, root: Optional[Path] = None) -> Path:
    """The file `rel` names inside the stack file's folder; refused when it (or a symlink on the way) leads out."""
    root = _ROOT[-1] if root is None else root
    base = root.resolve()
    path = (root / rel).resolve()
    if os.path.commonpath([base, path]) != str(base):
        raise ValueError(f"{rel!r} leads out of the stack file's folder {base} (to {path}); copy the file into it")
    if not path.is_file():
        raise ValueError(f"{rel!r}: no such file in {base}")
    return path


TaskFile = Annotated[str, _text(_REL_PATH, "a file in the stack file's folder",
                                "give a path inside that folder, relative to it (it may not leave it: no `..`, no "
                                "leading /), e.g. tasks/my-task/train.parquet", also=_outside)]
OssKey = Annotated[str, _text(r"oss://[a-z0-9][a-z0-9-]{1,61}[a-z0-9]/[A-Za-z0-9_][A-Za-z0-9._/-]{0,1000}",
                              "an OSS object URL", "write oss://<bucket>/<key>, e.g. oss://my-bucket/datasets/x.parquet",
                              also=lambda v: "its key may not contain '..'" if ".." in v.split("/") else None)]
PythonName = Annotated[str, _text(r"[A-Za-z_][A-Za-z0-9_]{0,99}", "a Python name",
                                  "use a function or class name (letters, digits, _)")]
KwargValue = Union[bool, int, float, str]


def is_oss(location: str) -> bool:
    return location.startswith("oss://")


HubId = Annotated[str, _text(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}", "a hub dataset id",
                             "use <owner>/<name>, e.g. DigitalLearningGmbH/MATH-lighteval")]
HubRevision = Annotated[str, _text(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}", "a hub revision",
                                   "give a branch, tag or commit, e.g. a 40-character commit id")]
HUB = "hub"  # the preset name of a task.dataset.hub dataset (dataset cache, Job names)


class HubTaskDataset(Strict):
    """Any other Hugging Face dataset, converted by your own script in the dataset Job (as verl's
    examples/data_preprocess/*.py convert theirs)."""

    id: HubId = Field(description="The Hugging Face dataset the dataset Job loads (datasets.load_dataset).")
    config: Optional[PythonName] = Field(None, description="Its config name. Empty = the dataset's default.")
    revision: Optional[HubRevision] = Field(
        None, description="Branch, tag or commit the Job loads; pin a commit so the staged rows stay the same. It is "
        "part of the dataset cache key. Empty = the default branch, cached as first staged.")
    script: TaskFile = Field(description="Your conversion script, relative to the stack file's folder: shipped to "
                             "the dataset Job in a ConfigMap of its own (its hash in the cache key and the Job's name).")
    function: PythonName = Field(
        "build_row", description="The script's function (example, index, split) -> a verl row, or None to drop the "
        "example. The Job checks every row it returns (pipeline/rows.py) before it uploads anything.")
    splits: dict[Literal["train", "test"], PythonName] = Field(
        default_factory=lambda: {"train": "train", "test": "test"},
        description="The hub split each file is made from: train.parquet from `train`, test.parquet (verl's val "
        "files) from `test`.")
    data_source: str = Field(
        min_length=1, max_length=200, description="The data_source your rows carry (verl's scorer dispatches on it; "
        "the plan checks the examples' rows carry it).")
    train_rows: int = Field(ge=1, le=1 << 40, description="Rows the train split gives (steps per epoch, subsets, "
                            "time and cost: the plan cannot count a hub split offline).")
    val_rows: int = Field(ge=1, le=1 << 40, description="Rows the test split gives.")
    examples: list[dict[str, Any]] = Field(
        min_length=1, max_length=50, description="A few raw examples of the hub dataset, as load_dataset yields them: "
        "the plan runs your function on each, on the CPU, and checks the row it returns.")


class TaskDatasetSettings(Strict):
    preset: Optional[Literal[PRESET_NAMES]] = Field(  # type: ignore[valid-type]
        None, description="A dataset the dataset Job fetches and converts: `gsm8k` (openai/gsm8k, the tutorial's), "
        "`math` (DigitalLearningGmbH/MATH-lighteval, verl's math scorer) or `code` (PRIME-RL/Eurus-2-RL-Data's "
        "coding problems with their unit tests, scored in the sandboxes). Empty = gsm8k unless train/val are given.")
    hub: Optional[HubTaskDataset] = Field(
        None, description="Any other Hugging Face dataset, converted by your own script in the dataset Job.")
    train: Optional[Union[OssKey, TaskFile]] = Field(
        None, description="Your own training parquet in verl's RLHFDataset layout (prompt, data_source, "
        "reward_model.ground_truth, optional extra_info and agent_name): a file relative to the stacks folder (the "
        "program uploads it to the bucket, content-addressed) or oss://<the stack's bucket>/<key under "
        "storage.datasets_prefix>. docs/task.md shows the layout.")
    val: Optional[Union[OssKey, TaskFile]] = Field(
        None, description="Your own validation parquet (as train); required with train.")
    train_rows: Optional[int] = Field(
        None, ge=1, le=1 << 40, description="Rows of an oss:// train file (steps per epoch, time and cost; the plan "
        "cannot read the bucket offline). A local file is counted; required for an oss:// one.")

    @model_validator(mode="after")
    def _one_source(self) -> "TaskDatasetSettings":
        given = [k for k, on in (("preset", self.preset is not None), ("hub", self.hub is not None),
                                 ("train/val", bool(self.train or self.val))) if on]
        if len(given) > 1:
            raise ValueError(f"task.dataset gives {' and '.join(given)}; keep one (a preset, a hub dataset with your "
                             "script, or your own files)")
        if self.preset is not None and (self.train or self.val):
            raise ValueError("task.dataset gives both preset and train/val files; keep one (a preset is fetched by "
                             "the dataset Job, your files replace it)")
        if self.train and is_oss(self.train) and self.train_rows is None:
            raise ValueError("task.dataset.train is an oss:// file, which the plan cannot count offline; set "
                             "task.dataset.train_rows to its row count (steps per epoch, time and cost use it)")
        if self.train_rows is not None and not (self.train and is_oss(self.train)):
            raise ValueError("task.dataset.train_rows is read only for an oss:// train file (a local one is "
                             "counted, a preset's is known); remove it")
        if bool(self.train) != bool(self.val):
            missing = "val" if self.train else "train"
            raise ValueError(f"task.dataset.{missing} is empty: your own data needs both a train and a val parquet "
                             "(verl validates on val_files)")
        return self

    @property
    def own_files(self) -> bool:
        return self.train is not None

    @property
    def preset_name(self) -> Optional[str]:
        """The preset in force: the given one, `hub` for a hub dataset, gsm8k when nothing is given, None for own
        files."""
        if self.own_files:
            return None
        if self.hub is not None:
            return HUB
        return self.preset or DEFAULT_PRESET


class RewardCheck(Strict):
    response: str = Field(max_length=65536, description="What the model wrote (the text the reward scores).")
    ground_truth: str = Field(max_length=65536, description="The row's reward_model.ground_truth.")
    score: float = Field(ge=-1e9, le=1e9, description="The score the reward must return for it (within 1e-6).")
    data_source: Optional[str] = Field(
        None, max_length=200, description="The row's data_source. Empty = the preset's, or the first row's of "
        "a local train file.")
    extra_info: dict[str, KwargValue] = Field(
        default_factory=dict, description="The row's extra_info (plain values) the reward receives.")


class TaskRewardSettings(Strict):
    builtin: Optional[bool] = Field(
        None, description="verl's default_compute_score by each row's data_source (gsm8k in the mode of "
        "training.gsm8k_scoring). Empty = on unless file or sandbox is given. Refused for code rows (codecontests, "
        "apps, codeforces, taco), which verl would run in the GPU pod: use sandbox.")
    file: Optional[TaskFile] = Field(
        None, description="Your reward function's file, relative to the stacks folder: shipped in the job's "
        "ConfigMap with its content hash in the RayJob (a change replaces the job); named with the hash in plan.md.")
    function: PythonName = Field(
        "compute_score", description="The function in file, with verl's signature (data_source, solution_str, "
        "ground_truth, extra_info, **kwargs) returning a number or a dict with `score`.")
    kwargs: dict[PythonName, KwargValue] = Field(
        default_factory=dict, description="Keyword arguments your function receives (verl's reward_kwargs).")
    sandbox: Optional[bool] = Field(
        None, description="Code tasks: the model's program and the row's tests run in the platform's isolated "
        "sandboxes through the sandbox manager, never in a Ray pod; the score is the fraction of tests passed. "
        "Empty = on for the code preset. Needs sandbox.enabled.")
    checks: list[RewardCheck] = Field(
        default_factory=list, max_length=200, description="Your reward's own examples: each is scored on the CPU at "
        "plan time (and in `pulumi preview`) and must return its score; a preset's own examples run too.")
    check_timeout_seconds: int = Field(
        60, ge=1, le=3600, description="Time limit of the plan-time reward checks (one subprocess, no credentials in "
        "its environment).")

    @model_validator(mode="after")
    def _one_kind(self) -> "TaskRewardSettings":
        kinds = [k for k, on in (("builtin", self.builtin), ("file", self.file is not None),
                                 ("sandbox", self.sandbox)) if on]
        if len(kinds) > 1:
            raise ValueError(f"task.reward sets {' and '.join(kinds)}; choose one kind of reward (builtin: verl's "
                             "scorer, file: your function, sandbox: unit tests in the sandboxes)")
        if self.file is None and (self.kwargs or self.function != "compute_score"):
            raise ValueError("task.reward.function/kwargs apply to a reward file; set task.reward.file or remove them")
        return self


class OwnTool(Strict):
    file: TaskFile = Field(description="Python file in the stacks folder holding the tool (shipped in the job's "
                           "ConfigMap, imported by verl's tool registry).")
    class_name: Optional[PythonName] = Field(
        None, alias="class", description="A verl BaseTool subclass in the file (its OpenAI tool schema comes from "
        "the class's get_openai_tool_schema or tool_schema). Empty = the file holds @function_tool functions "
        "(verl's multi_turn.function_tool_path).")
    config: dict[PythonName, KwargValue] = Field(
        default_factory=dict, description="The tool's config mapping (verl passes it to the class; `type: native` is "
        "added).")
    tool_schema: Optional[dict[str, Any]] = Field(
        None, alias="schema", description="The tool's OpenAI function schema ({type: function, function: {name, "
        "description, parameters}}), as verl's tool config takes it. Empty = the class's own default.")


BUILTIN_TOOLS = ("answer", "code")
ToolChoice = Union[Literal[BUILTIN_TOOLS], OwnTool]  # type: ignore[valid-type]


class TaskSettings(Strict):
    dataset: TaskDatasetSettings = Field(default_factory=TaskDatasetSettings, description="Where the rows come from.")
    reward: TaskRewardSettings = Field(default_factory=TaskRewardSettings, description="What scores a response.")
    tools: Optional[list[ToolChoice]] = Field(
        None, max_length=32, description="Tools the model may call: `answer` (tells the model how the reward reads "
        "its answer), `code` (runs a program in a sandbox), or your own {file, class}; [] = single turn (verl's "
        "single_turn_agent). Empty = the preset's (gsm8k: answer and, with sandboxes, code; math and code: none; "
        "your own files: none).")

    @model_validator(mode="after")
    def _tools_once(self) -> "TaskSettings":
        names = [t if isinstance(t, str) else f"{t.file}:{t.class_name or '*'}" for t in self.tools or []]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"task.tools lists {', '.join(dupes)} twice; list each tool once")
        function_files = [t.file for t in self.tools or [] if isinstance(t, OwnTool) and not t.class_name]
        if len(function_files) > 1:
            raise ValueError(f"task.tools names {len(function_files)} @function_tool files ({', '.join(function_files)}); "
                             "verl reads one (multi_turn.function_tool_path): put the functions in one file")
        return self

    def local_files(self) -> list[tuple[str, str]]:
        """(setting, path) of every file the task names in the stack file's folder (oss:// files excluded)."""
        d = self.dataset
        named = [("task.dataset.train", d.train), ("task.dataset.val", d.val), ("task.reward.file", self.reward.file),
                 ("task.dataset.hub.script", d.hub.script if d.hub else None)]
        named += [(f"task.tools[{i}].file", t.file) for i, t in enumerate(self.tools or []) if isinstance(t, OwnTool)]
        return [(field, loc) for field, loc in named if loc and not is_oss(loc)]

    @property
    def preset(self) -> Optional[TaskPreset]:
        """What the dataset Job stages: a declared preset, or a hub dataset described as one by its settings."""
        name, hub = self.dataset.preset_name, self.dataset.hub
        if hub is not None:
            return TaskPreset(hub_id=hub.id, config=hub.config, data_source=hub.data_source,
                              train_split=hub.splits.get("train", "train"), val_split=hub.splits.get("test", "test"),
                              train_rows=hub.train_rows, val_rows=hub.val_rows, reward="builtin", tools=(), ability="",
                              source="task.dataset.hub")
        return TASK_PRESETS[name] if name else None

    @property
    def reward_kind(self) -> Literal["builtin", "file", "sandbox"]:
        r = self.reward
        if r.file is not None:
            return "file"
        if r.sandbox or (r.sandbox is None and r.builtin is None and self.preset and self.preset.reward == "sandbox"):
            return "sandbox"
        return "builtin"


def local_parquet_rows(rel: str) -> int:
    """Rows of a parquet file in the stacks folder, from its footer (pyarrow reads no data)."""
    import pyarrow.parquet as pq

    path = resolve_task_path(rel)  # ValueError naming the path when it leaves the folder or is missing
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception as err:  # pyarrow raises several types for a missing or broken file
        raise ValueError(f"task.dataset: cannot read {rel!r} as parquet ({err})") from None


def train_rows(s) -> int:
    """Rows of the training file the job reads (`s`: the Settings): the subset or the full split of a preset, a
    local file's count, or task.dataset.train_rows for an oss:// one."""
    task, d = s.task, s.dataset
    if task.preset is not None:
        return d.train_subset if d.use_subsets else (d.full_train_rows or task.preset.train_rows)
    if is_oss(task.dataset.train):
        return task.dataset.train_rows
    return local_parquet_rows(task.dataset.train)


def task_stack_problems(s) -> Iterator[tuple[str, str]]:
    """(setting, message) for each rule joining the task to the rest of the stack (`s`: the Settings): the files it
    names exist in the stack file's folder, subsets fit the preset, the reward and tools fit the sandboxes, an
    oss:// file is in the stack's bucket under the prefix the pods mount."""
    task, d = s.task, s.dataset
    preset = task.preset
    for field, loc in task.local_files():
        try:
            resolve_task_path(loc)
        except ValueError as err:
            yield field, str(err)
    if preset is not None:
        for split, n, field, rows in (("train", d.train_subset, "train_subset", d.full_train_rows),
                                      ("test", d.test_subset, "test_subset", d.full_test_rows)):
            rows = rows or (preset.train_rows if split == "train" else preset.val_rows)
            if n > rows:
                yield f"dataset.{field}", (
                    f"dataset.{field} {n} exceeds the {rows} rows of the {split} split of {preset.hub_id} (the "
                    f"dataset Job would fail); use at most {rows}")
    kind = task.reward_kind
    if kind == "builtin" and preset is not None and preset.data_source in CODE_DATA_SOURCES:
        yield "task.reward.builtin", (
            f"task.reward.builtin scores {preset.data_source} rows with verl's prime_code, which runs the model's "
            "program inside the GPU Ray pod; use task.reward.sandbox: true (the platform's isolated sandboxes)")
    tools = task.tools if task.tools is not None else list(preset.tools if preset else ())
    if not s.sandbox.enabled:
        if kind == "sandbox":
            yield "task.reward.sandbox", (
                "task.reward.sandbox runs the model's code in the platform's sandboxes, but sandbox.enabled is "
                "false; enable the sandboxes or choose another reward")
        if "code" in tools and task.tools is not None:
            yield "task.tools", (
                "task.tools lists code (a program run in a sandbox) but sandbox.enabled is false; enable the "
                "sandboxes or remove code from task.tools")
    scores_gsm8k = preset is not None and preset.data_source == "openai/gsm8k" and kind == "builtin"
    if task.dataset.preset_name == "gsm8k" and tools and "answer" not in tools:
        # pipeline/gsm8k.py's tool rows carry verl's GSM8K tool prompt, which tells the model to call the answer tool.
        yield "task.tools", (
            f"task.tools {tools} offers tools without answer, but the gsm8k preset's tool rows tell the model to call "
            "calc_gsm8k_reward: list answer too, or use [] (single turn)")
    if "answer" in tools and kind != "sandbox" and not scores_gsm8k and s.training.answer_tool.reveal != "correctness":
        yield "training.answer_tool.reveal", (
            "task.tools lists answer on a task GSM8K's scorer does not score: the tool then checks an answer with the "
            "task's own reward, and can say only whether it is right (`parsed`, how the reward reads `#### <answer>`, "
            "is GSM8K's). Set training.answer_tool.reveal: correctness to offer that check, or remove answer")
    if kind == "sandbox" and "answer" in tools:
        yield "task.tools", (
            "task.tools lists answer, which tells the model how the reward reads a final answer; a sandbox "
            "reward runs a program against tests instead: remove answer")
    for field in ("train", "val"):
        loc = getattr(task.dataset, field)
        if loc and is_oss(loc):
            bucket, _, key = loc.removeprefix("oss://").partition("/")
            if bucket != s.storage.bucket_name and s.kind != "experiment":
                yield f"task.dataset.{field}", (
                    f"task.dataset.{field} {loc!r} is in bucket {bucket!r}; the job mounts only the stack's "
                    f"bucket {s.storage.bucket_name!r}: copy the file there")
            if not key.startswith(s.storage.datasets_prefix):
                yield f"task.dataset.{field}", (
                    f"task.dataset.{field} {loc!r}: the key must lie under storage.datasets_prefix "
                    f"{s.storage.datasets_prefix!r}, the prefix the Ray pods mount (and the training role "
                    "may read); move the file there")
