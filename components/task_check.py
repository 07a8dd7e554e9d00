"""The task's proof on the CPU, before anything is paid for: run by plan.py and by the Pulumi program (so `pulumi
preview` refuses a broken task too) and alone by `make task-check STACK=<stack>`.

- Dataset: a local train/val file is read and every row checked with the dataset Job's own rule (pipeline/rows.py);
  prompt lengths are estimated (ESTIMATE_CHARS_PER_TOKEN: no tokenizer offline) against data.max_prompt_length.
- Reward: the job's reward function (agent_tools/verl_ack_reward.py), with the task's file or sandbox harness beside
  it as in the ConfigMap, scores the stack's checks and the preset's own examples (a correct answer scores the
  maximum; a tool's echo and an empty answer the minimum), in a subprocess with a time limit, no credentials in its
  environment and a scratch folder as its working directory (agent_tools/verl_ack_task_check.py).
- Tools: the researcher's classes are imported and their schemas validated with verl's own schema model.

Problems are (setting, message) pairs: the plan exits 2 with them and the program fails the preview; nothing is
created. Proofs are cached per task content within one process (the tests render a stack many times).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from components.config import REPO_ROOT, Problem, Settings, SettingsError
from components.config.loading import raw_settings, stack_file
from components.config.task import CODE_DATA_SOURCES, is_oss, resolve_task_path, task_root
from components.model import parse_settings
from components.wiring import single_turn, task_tools
from components.workloads.data import TASK_SCRIPT_FILE, task_script
from components.workloads.training import verl_config as vc
from components.workloads.training.verl_config import SINGLE_TURN_AGENT_NAME, TOOL_AGENT_NAME

WORKER = REPO_ROOT / "agent_tools" / "verl_ack_task_check.py"
ROW_RULE = REPO_ROOT / "pipeline" / "rows.py"  # the dataset Job's row rule, copied beside the worker (read as text)
# What the checks' subprocess may see of the environment: no cloud, Pulumi or hub credentials.
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT", "TMPDIR")
ESTIMATE_CHARS_PER_TOKEN = 4  # English text through a BPE tokenizer; the plan says it is an estimate


@dataclass(frozen=True)
class Example:
    name: str
    response: str  # what the model wrote
    ground_truth: str
    score: float
    echo: str = ""  # what a tool printed after it (in solution_str, never the model's)


# Each preset's own examples: the correct answer scores the maximum, a tool's echo of it and an empty answer the
# minimum. The code preset's program reads two numbers from stdin (the Eurus/APPS layout).
_CODE_TRUTH = json.dumps({"inputs": ["1 2\n", "40 2\n"], "outputs": ["3\n", "42\n"]})
_CODE_ANSWER = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
PRESET_EXAMPLES: dict[str, tuple[Example, ...]] = {
    "gsm8k": (Example("correct answer", "6 x 7 = 42.\n#### 42", "42", 1.0),
              Example("tool echo", "Let me check with the tool.", "42", 0.0, echo="Current parsed answer='#### 42'"),
              Example("empty answer", "", "42", 0.0)),
    "math": (Example("correct answer", "So the answer is $\\boxed{42}$.", "42", 1.0),
             Example("tool echo", "Let me check with the tool.", "42", 0.0, echo="\\boxed{42}"),
             Example("empty answer", "", "42", 0.0)),
    "code": (Example("correct program", _CODE_ANSWER, _CODE_TRUTH, 1.0),
             Example("tool echo", "I ran it with the tool.", _CODE_TRUTH, 0.0, echo=_CODE_ANSWER),
             Example("empty answer", "", _CODE_TRUTH, 0.0)),
}


@dataclass
class DatasetProof:
    location: str
    kind: str  # preset | local | oss
    rows: Optional[int] = None
    data_sources: dict[str, int] = field(default_factory=dict)
    agent_names: dict[str, int] = field(default_factory=dict)
    prompt_tokens_max: Optional[int] = None  # estimated
    over_prompt_length: int = 0


@dataclass
class TaskProof:
    kind: str  # the reward's kind
    reward_file: Optional[str] = None
    reward_sha256: Optional[str] = None
    signature: Optional[str] = None
    checks: list[dict] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    datasets: list[DatasetProof] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # what could not be checked here, and why
    single_turn: bool = False
    data_sources: list[str] = field(default_factory=list)
    hub_rows: Optional[int] = None  # a hub dataset's examples its script turned into checked rows

    def as_dict(self) -> dict:
        return {"reward": {"kind": self.kind, "file": self.reward_file, "sha256": self.reward_sha256,
                           "signature": self.signature, "checks": self.checks},
                "tools": self.tools, "single_turn": self.single_turn,
                "datasets": [vars(d) for d in self.datasets], "hub_example_rows": self.hub_rows,
                "problems": [list(p) for p in self.problems], "not_checked": [list(w) for w in self.warnings]}


def _dataset_specs(s: Settings, proof: TaskProof) -> list[dict]:
    """The local files the worker checks; a preset's or an oss:// file's proof is what the settings say."""
    task = s.task
    if task.preset is not None:
        proof.datasets.append(DatasetProof(location=task.preset.hub_id, kind="preset"))
        proof.data_sources = [task.preset.data_source]
        return []
    out = []
    for name in ("train", "val"):
        loc = getattr(task.dataset, name)
        if is_oss(loc):
            proof.datasets.append(DatasetProof(location=loc, kind="oss",
                                               rows=task.dataset.train_rows if name == "train" else None))
        else:
            out.append({"field": f"task.dataset.{name}", "path": str(resolve_task_path(loc)), "location": loc})
    return out


def _dataset_proofs(s: Settings, proof: TaskProof, checked: list[dict]) -> None:
    """The worker's row summaries as the plan states them, and what they mean for the job's agent loops and reward."""
    task = s.task
    sources: dict[str, int] = {}
    for d in checked:
        loc, name = d["location"], d["field"]
        longest = -(-max(d["prompt_chars"], default=0) // ESTIMATE_CHARS_PER_TOKEN)
        over = sum(1 for c in d["prompt_chars"] if -(-c // ESTIMATE_CHARS_PER_TOKEN) > s.training.max_prompt_length)
        proof.datasets.append(DatasetProof(
            location=loc, kind="local", rows=d["rows"], data_sources=d["data_sources"],
            agent_names=d["agent_names"], prompt_tokens_max=longest, over_prompt_length=over))
        for src, n in d["data_sources"].items():
            sources[src] = sources.get(src, 0) + n
        agents = set(d["agent_names"]) - {"(default)", SINGLE_TURN_AGENT_NAME, TOOL_AGENT_NAME}
        if agents:
            proof.problems.append((name, f"{loc}: rows name agent loop(s) {', '.join(sorted(agents))}; the job "
                                   f"registers {TOOL_AGENT_NAME} and {SINGLE_TURN_AGENT_NAME} only"))
        if TOOL_AGENT_NAME in d["agent_names"] and not task_tools(s):
            proof.problems.append(("task.tools", f"{loc}: {d['agent_names'][TOOL_AGENT_NAME]} row(s) ask for "
                                   f"{TOOL_AGENT_NAME} but the task offers no tools; list the tools in task.tools or "
                                   f"write the rows with agent_name {SINGLE_TURN_AGENT_NAME}"))
    if task.preset is None:
        proof.data_sources = sorted(sources)
    if task.reward_kind == "builtin":
        code = sorted(set(sources) & set(CODE_DATA_SOURCES))
        if code:
            proof.problems.append(("task.reward.builtin", f"rows of {', '.join(code)} would be scored by verl's "
                                   "prime_code, which runs the model's program in the GPU Ray pod; use "
                                   "task.reward.sandbox: true"))


def _checks(s: Settings, proof: TaskProof) -> list[dict]:
    task, preset = s.task, s.task.preset
    default_source = preset.data_source if preset else (proof.data_sources[0] if proof.data_sources else "")
    out = []
    if preset is not None and task.reward_kind != "file":
        for ex in PRESET_EXAMPLES[task.dataset.preset_name]:
            out.append(_check(f"{task.dataset.preset_name} preset: {ex.name}", "task.reward", preset.data_source,
                              ex.response, ex.ground_truth, {}, ex.score, ex.echo))
    for i, c in enumerate(task.reward.checks):
        out.append(_check(f"check {i}", f"task.reward.checks[{i}]", c.data_source or default_source, c.response,
                          c.ground_truth, dict(c.extra_info), c.score))
    return out


def _check(name: str, where: str, source: str, response: str, truth: str, extra: dict, score: float,
           echo: str = "") -> dict:
    # The job's agent loops put the model's own text in this field; a tool's echo lands only in solution_str.
    text = response + (f"\n<tool_response>\n{echo}\n</tool_response>" if echo else "")
    return {"name": name, "field": where, "data_source": source, "solution_str": text, "ground_truth": truth,
            "extra_info": {**extra, "verl_ack_model_text": response, "tool_rewards": []}, "score": score}


def _spec(s: Settings, proof: TaskProof) -> tuple[dict, dict[str, str]]:
    files = {name: text for name, text in vc.config_files(s).items() if name.endswith(".py")}
    kwargs = vc.reward_kwargs(s)
    spec = {"checks": _checks(s, proof), "reward_kwargs": kwargs, "reward_file": s.task.reward_kind == "file",
            "sandbox": s.task.reward_kind == "sandbox", "function": s.task.reward.function,
            "data_sources": proof.data_sources if s.task.reward_kind == "builtin" else [],
            "tools": [{"module": vc.TASK_TOOL_MODULE.format(index=i), "class": t.class_name, "file": t.file,
                       "schema": t.tool_schema, "config": dict(t.config), "field": f"task.tools[{i}]"}
                      for i, t in vc.own_tools(s)],
            "functions_module": vc.TASK_FUNCTIONS_FILE[:-3] if vc.function_tools_file(s) else None,
            "functions_file": vc.function_tools_file(s).file if vc.function_tools_file(s) else None}
    return spec, files


def _run_worker(spec: dict, files: dict[str, str], timeout: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="verl-ack-task-") as tmp:
        root = Path(tmp)
        for name, text in files.items():
            (root / name).write_text(text, encoding="utf-8")
        shutil.copy(WORKER, root / WORKER.name)
        shutil.copy(ROW_RULE, root / ROW_RULE.name)
        (root / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
        env["HOME"] = tmp
        try:
            run = subprocess.run([sys.executable, "-I", str(root / WORKER.name), str(root / "spec.json")],
                                 cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"problems": [["task.reward.check_timeout_seconds",
                                  f"the reward checks did not finish within {timeout} s (a reward that hangs, or "
                                  "too slow a scorer); fix the reward or raise the limit"]]}
        lines = run.stdout.strip().splitlines()
        if run.returncode != 0 or not lines:
            return {"problems": [["task.reward", f"the checks' process failed (exit {run.returncode}): "
                                                 f"{run.stderr.strip()[-600:]}"]]}
        return json.loads(lines[-1])


_CACHE: dict[str, TaskProof] = {}


def prove_task(s: Settings) -> TaskProof:
    """The task's proof (see the module doc); `problems` empty when the task may run."""
    try:
        key = _spec_key(s)
    except (OSError, ValueError) as err:
        return TaskProof(kind=s.task.reward_kind, problems=[("task", str(err))])
    if key in _CACHE:
        return _CACHE[key]
    proof = TaskProof(kind=s.task.reward_kind, single_turn=single_turn(s))
    if s.task.reward_kind == "file":
        proof.reward_file = s.task.reward.file
        proof.reward_sha256 = hashlib.sha256(resolve_task_path(s.task.reward.file).read_bytes()).hexdigest()
        if not s.task.reward.checks:
            proof.problems.append(("task.reward.checks", "a reward file needs at least one check (a response, its "
                                   "ground truth and the score it must get): the plan runs it on them before any "
                                   "GPU is paid for"))
    datasets = _dataset_specs(s, proof)
    hub = s.task.dataset.hub
    hub_spec = {"file": TASK_SCRIPT_FILE, "script": hub.script, "function": hub.function,
                "examples": list(hub.examples), "data_source": hub.data_source} if hub else None
    # The rows first (in the worker, by the dataset Job's own rule): the reward's checks need their data_sources.
    checked = _run_worker({"datasets": datasets, "rows_only": True, "hub": hub_spec,
                           "answer_tool": "answer" in task_tools(s)},
                          {TASK_SCRIPT_FILE: task_script(s)} if hub else {},
                          s.task.reward.check_timeout_seconds) if datasets or hub else {}
    proof.problems += [tuple(p) for p in checked.get("problems", [])]
    proof.hub_rows = checked.get("hub_rows")
    _dataset_proofs(s, proof, checked.get("datasets", []))
    spec, files = _spec(s, proof)
    result = _run_worker(spec, files, s.task.reward.check_timeout_seconds)
    proof.checks = result.get("checks", [])
    proof.tools = [t for t in task_tools(s) if isinstance(t, str)] + result.get("tools", [])  # built-in, then own
    proof.signature = result.get("signature")
    proof.problems += [tuple(p) for p in result.get("problems", [])]
    proof.warnings += [tuple(w) for w in result.get("warnings", [])]
    _CACHE[key] = proof
    return proof


def _spec_key(s: Settings) -> str:
    """What decides the proof: the task and training settings and every file the task names, by content."""
    h = hashlib.sha256(s.task.model_dump_json(by_alias=True).encode())
    h.update(s.training.model_dump_json().encode() + s.sandbox.model_dump_json().encode())
    for _, loc in s.task.local_files():
        h.update(resolve_task_path(loc).read_bytes())
    for p in (WORKER, ROW_RULE, vc.REWARD_SOURCE, vc.SANDBOX_REWARD_SOURCE):
        h.update(p.read_bytes())
    return h.hexdigest()


def require_task(s: Settings) -> TaskProof:
    """The proof, or SettingsError listing its problems by setting (the plan's exit 2, the preview's failure)."""
    proof = prove_task(s)
    if proof.problems:
        raise SettingsError([Problem(field=f, message=m) for f, m in proof.problems], s)
    return proof


__all__ = ["PRESET_EXAMPLES", "DatasetProof", "TaskProof", "prove_task", "require_task"]


def main(argv: Optional[list[str]] = None) -> int:
    """`make task-check STACK=<stack>`: the proof alone, its result as plan.md's Task section states it."""
    ap = argparse.ArgumentParser(prog="python -m components.task_check", description=main.__doc__)
    ap.add_argument("--stack", required=True, help="a stack name (stacks/Pulumi.<name>.yaml) or a stack file's path")
    path = stack_file(ap.parse_args(argv).stack)
    try:
        with task_root(path.resolve().parent):
            proof = require_task(parse_settings(raw_settings(path)))
    except SettingsError as err:
        print(f"{path}: the task is refused:", file=sys.stderr)
        for p in err.problems:
            print(f"  - {p}", file=sys.stderr)
        return 2
    print(json.dumps(proof.as_dict(), indent=2))
    print(f"{path}: the task is proven ({len(proof.checks)} reward check(s) passed)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
