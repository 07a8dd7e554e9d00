"""A researcher's task is proven on the CPU before anything is paid for: `plan.py` (and the program, inside `pulumi
preview`) refuses with exit 2, naming `task.*`, a reward file that does not import, lacks its function, raises,
returns what verl cannot use, disagrees with a check or hangs; a dataset file without verl's columns; a file outside
the stack's folder; and the built-in scorer on code rows. The checks run without the caller's credentials."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

import plan
from components.config import STACKS_DIR
from components.config.loading import VERL_CONCEPTS
from components.config.task import task_root
from components.model import parse_settings
from components.task_check import PRESET_EXAMPLES, prove_task
from tests.conftest import STACKS, stack_settings

OWN = STACKS_DIR / "tasks" / "own"
GOOD_REWARD = (OWN / "reward.py").read_text()


def own_stack(tmp_path: Path, reward: str = GOOD_REWARD, task: dict | None = None) -> Path:
    """task-own's stack file in a folder of its own, with its files beside it (task paths are relative to it)."""
    folder = tmp_path / "stack"
    (folder / "tasks" / "own").mkdir(parents=True)
    for name in ("train.parquet", "val.parquet"):
        shutil.copy(OWN / name, folder / "tasks" / "own" / name)
    (folder / "tasks" / "own" / "reward.py").write_text(reward)
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.task-own.yaml").read_text())
    settings = doc["config"]["verl-ack:settings"]
    for key, value in (task or {}).items():
        settings["task"][key] = {**settings["task"].get(key, {}), **value} if isinstance(value, dict) else value
    path = folder / "Pulumi.task-own.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def refused(path: Path, tmp_path: Path, capsys) -> str:
    out = tmp_path / "out"
    assert plan.main(["--config-file", str(path), "--out", str(out)]) == 2
    assert not out.exists(), "a refused task writes nothing"
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_the_worked_own_task_plans_with_its_reward_checked_and_its_rows_counted(tmp_path, capsys):
    path = own_stack(tmp_path)
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "| reward checks | 3/3 passed" in md and "64 rows checked" in md and "single turn" in md


@pytest.mark.parametrize("reward,field,says", [
    ("def compute_score(data_source, solution_str\n", "task.reward.file", "SyntaxError"),
    ("def score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n", "task.reward.file",
     "has no function 'compute_score'"),
    ("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    return 0.5\n",
     "task.reward.checks[0]", "returned 0.5, the check expects 1.0"),
    ("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    raise KeyError('x')\n",
     "task.reward.checks[0]", "raised KeyError"),
    ("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    return 'yes'\n",
     "task.reward.checks[0]", "verl needs a finite number"),
    ("import not_a_package_anyone_has\ndef compute_score(*a, **k):\n    return 1.0\n", "task.reward.file",
     "imports not_a_package_anyone_has, which is not installed here"),
    ("def compute_score(solution_str):\n    return 1.0\n", "task.reward.function", "cannot be called as verl calls it"),
], ids=["syntax-error", "missing-function", "failed-check", "raises", "not-a-number", "missing-package",
        "wrong-signature"])
def test_a_broken_reward_file_is_refused_at_plan_time_naming_the_setting(tmp_path, capsys, reward, field, says):
    err = refused(own_stack(tmp_path, reward), tmp_path, capsys)
    assert f"- {field}:" in err and says in err, err


def test_a_reward_that_hangs_is_stopped_at_its_time_limit(tmp_path, capsys):
    hang = "import time\ndef compute_score(*a, **k):\n    time.sleep(60)\n    return 1.0\n"
    err = refused(own_stack(tmp_path, hang, {"reward": {"check_timeout_seconds": 2}}), tmp_path, capsys)
    assert "task.reward.check_timeout_seconds" in err and "did not finish within 2 s" in err


def test_a_reward_file_without_checks_is_refused(tmp_path, capsys):
    err = refused(own_stack(tmp_path, task={"reward": {"checks": []}}), tmp_path, capsys)
    assert "task.reward.checks" in err and "at least one check" in err


def test_the_checks_run_without_the_callers_credentials(tmp_path, capsys, monkeypatch):
    """The checks run inside `pulumi preview`, where cloud and Pulumi credentials are in the environment."""
    monkeypatch.setenv("ALICLOUD_ACCESS_KEY", "LTAI-secret")
    monkeypatch.setenv("PULUMI_ACCESS_TOKEN", "pul-secret")
    spy = ("import os\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n"
           "    leaked = [k for k in os.environ if 'ALICLOUD' in k or 'PULUMI' in k or 'TOKEN' in k]\n"
           "    return 0.0 if leaked else (1.0 if '<answer>359</answer>' in solution_str else 0.0)\n")
    path = own_stack(tmp_path, spy)
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err


def test_a_dataset_file_without_ground_truth_is_refused_naming_the_column(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = own_stack(tmp_path)
    rows = pq.read_table(path.parent / "tasks" / "own" / "train.parquet").to_pylist()
    for row in rows:
        row["reward_model"] = {"style": "rule"}
    pq.write_table(pa.Table.from_pylist(rows), path.parent / "tasks" / "own" / "train.parquet")
    err = refused(path, tmp_path, capsys)
    assert "task.dataset.train" in err and "reward_model.ground_truth" in err


@pytest.mark.parametrize("where", ["../outside.py", "/etc/passwd", "tasks/own/link.py"])
def test_a_task_file_outside_the_stack_folder_is_refused(tmp_path, capsys, where):
    path = own_stack(tmp_path, task={"reward": {"file": where}})
    (tmp_path / "outside.py").write_text(GOOD_REWARD)
    (path.parent / "tasks" / "own" / "link.py").symlink_to(tmp_path / "outside.py")
    err = refused(path, tmp_path, capsys)
    assert "task.reward.file" in err and ("may not leave" in err or "leads out" in err), err


def test_the_builtin_scorer_is_refused_for_code_rows_which_it_would_run_in_the_gpu_pod(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = own_stack(tmp_path, task={"reward": {"file": None, "function": "compute_score", "checks": [],
                                                "builtin": True}})
    for split in ("train", "val"):
        f = path.parent / "tasks" / "own" / f"{split}.parquet"
        rows = pq.read_table(f).to_pylist()
        for row in rows:
            row["data_source"] = "codecontests"
        pq.write_table(pa.Table.from_pylist(rows), f)
    err = refused(path, tmp_path, capsys)
    assert "task.reward.builtin" in err and "prime_code" in err


@pytest.mark.parametrize("preset", sorted(PRESET_EXAMPLES))
def test_each_presets_own_examples_pass_the_jobs_reward(preset):
    """A correct answer scores the maximum; a tool's echo of it and an empty answer the minimum."""
    raw = stack_settings("task-math", {"task": {"dataset": {"preset": preset}, "tools": []}})
    with task_root(STACKS_DIR):
        proof = prove_task(parse_settings(raw))
    assert proof.problems == []
    assert [(c["name"].split(": ")[1], c["score"]) for c in proof.checks] == \
        [(ex.name, ex.score) for ex in PRESET_EXAMPLES[preset]]
    assert [c["score"] for c in proof.checks] == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("stack", STACKS)
def test_every_shipped_stack_proves_its_task(stack):
    with task_root(STACKS_DIR):
        proof = prove_task(parse_settings(stack_settings(stack)))
    assert proof.problems == [] and proof.checks and all(c["ok"] for c in proof.checks), proof.problems


def test_every_verl_concept_hint_names_a_real_setting():
    from components.config import Settings

    def exists(path: str) -> bool:
        model = Settings
        for part in path.split("."):
            field = model.model_fields.get(part.split("[")[0])
            if field is None:
                return False
            from components.config.loading import _inner_model

            model = _inner_model(field.annotation) or model
        return True

    for name, where in VERL_CONCEPTS.items():
        target = where.split(" ")[0]
        assert where.startswith("not supported") or exists(target), f"{name} -> {target}"


@pytest.mark.parametrize("loc,says", [
    ({"training": {"custom_reward_function": {"path": "x.py"}}}, "takes as `task.reward`"),
    ({"dataset": {"name": "DigitalLearningGmbH/MATH-lighteval"}}, "task.dataset.preset"),
    ({"training": {"reward_manager": "dapo"}}, "does not take"),
])
def test_a_verl_key_in_the_wrong_place_is_answered_with_where_the_program_takes_it(loc, says):
    from components.config import SettingsError

    with pytest.raises(SettingsError) as err:
        parse_settings(stack_settings("dev", loc))
    assert says in str(err.value) and "check the spelling" not in str(err.value)


def test_a_changed_reward_file_changes_the_jobs_config_hash_and_the_plan_names_it(tmp_path):
    """The reward file ships in the ConfigMap, whose hash the RayJob's pods carry: a change replaces the job."""
    from components.config.loading import raw_settings
    from components.workloads.training.verl_config import TASK_REWARD_FILE, config_files, config_sha256

    hashes = []
    for reward in (GOOD_REWARD, GOOD_REWARD + "\n# a comment is a change too\n"):
        path = own_stack(tmp_path / str(len(hashes)), reward)
        with task_root(path.parent):
            s = parse_settings(raw_settings(path))
            files = config_files(s)
            assert files[TASK_REWARD_FILE] == reward
            hashes.append((config_sha256(files), prove_task(s).reward_sha256))
    assert hashes[0][0] != hashes[1][0] and hashes[0][1] != hashes[1][1]


TOOL = '''
from verl.tools.base_tool import BaseTool


class LookupTool(BaseTool):
    """A researcher's own tool: verl's registry builds it with (config, tool_schema)."""

    def __init__(self, config, tool_schema):
        super().__init__(config, tool_schema)
        self.table = dict(config.get("table") or {})
'''
TOOL_SCHEMA = {"type": "function", "function": {"name": "lookup", "description": "Look a word up.", "parameters": {
    "type": "object", "properties": {"word": {"type": "string", "description": "the word"}}, "required": ["word"]}}}


def test_an_own_tool_is_built_as_verls_registry_builds_it_and_named_in_the_plan(tmp_path, capsys):
    path = own_stack(tmp_path, task={"tools": [{"file": "tasks/own/tool.py", "class": "LookupTool",
                                                "schema": TOOL_SCHEMA}]})
    (path.parent / "tasks" / "own" / "tool.py").write_text(TOOL)
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "| tools | `lookup` |" in md and "multi-turn tool agent" in md


def test_an_own_tool_whose_schema_or_constructor_fails_is_refused_naming_it(tmp_path, capsys):
    bad_schema = {"type": "function", "function": {"description": "no name"}}
    path = own_stack(tmp_path, task={"tools": [{"file": "tasks/own/tool.py", "class": "LookupTool",
                                                "schema": bad_schema}]})
    (path.parent / "tasks" / "own" / "tool.py").write_text(TOOL)
    err = refused(path, tmp_path, capsys)
    assert "task.tools[0]" in err and "not an OpenAI function schema" in err
    path = own_stack(tmp_path / "2", task={"tools": [{"file": "tasks/own/tool.py", "class": "LookupTool",
                                                      "schema": TOOL_SCHEMA, "config": {"table": "x"}}]})
    (path.parent / "tasks" / "own" / "tool.py").write_text(TOOL)
    err = refused(path, tmp_path / "2", capsys)
    assert "task.tools[0]" in err and "LookupTool(config=..., tool_schema=...) raised ValueError" in err


def test_a_function_tool_file_is_named_as_not_checked_where_verl_cannot_build_its_schema(tmp_path, capsys):
    """verl derives a @function_tool's schema with transformers (tools/function_tool.py); without it here the plan
    says so in the Task section instead of passing the file silently or refusing a task that may be fine."""
    import importlib.util

    if importlib.util.find_spec("transformers") is not None:
        pytest.skip("transformers is installed here: the file is loaded and checked")
    path = own_stack(tmp_path, task={"tools": [{"file": "tasks/own/functions.py"}]})
    (path.parent / "tasks" / "own" / "functions.py").write_text(
        "from verl.tools.function_tool import function_tool\n\n\n@function_tool\ndef add(a: int, b: int) -> int:\n"
        "    \"\"\"Add two numbers.\n\n    Args:\n        a: first\n        b: second\n    \"\"\"\n    return a + b\n")
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "| not checked here | `task.tools`: tasks/own/functions.py: not checked here" in md and "transformers" in md
    assert "multi_turn.function_tool_path=/etc/verl-ack/config/verl_ack_task_functions.py" in md


def test_the_answer_tool_on_another_scorer_is_the_tasks_check_offered_only_as_correctness():
    """GSM8K's `#### ` reading (reveal: parsed) has no general form: on a task GSM8K's scorer does not score, the answer
    tool checks an answer with the task's own reward and can only say whether it is right, offered explicitly."""
    from components.config import SettingsError
    from components.workloads.training.task_config import TASK_ANSWER_DESCRIPTION, tool_config

    with pytest.raises(SettingsError) as err:
        parse_settings(stack_settings("task-math", {"task": {"tools": ["answer"]}}))
    assert "training.answer_tool.reveal" in str(err.value) and "correctness" in str(err.value)
    s = parse_settings(stack_settings("task-math", {"task": {"tools": ["answer"]},
                                                    "training": {"answer_tool": {"reveal": "correctness"}}}))
    [tool] = tool_config(s)["tools"]
    assert tool["config"]["scorer"] == {"data_source": "DigitalLearningGmbH/MATH-lighteval", "task_reward": None}
    assert tool["tool_schema"]["function"]["description"] == TASK_ANSWER_DESCRIPTION.format(n=1)
    # GSM8K's tool is as it was: no scorer of its own.
    assert "scorer" not in tool_config(parse_settings(stack_settings("dev")))["tools"][0]["config"]


def test_own_tool_rows_without_the_answer_tools_ground_truth_are_refused(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = own_stack(tmp_path, task={"tools": ["answer"]})
    doc = yaml.safe_load(path.read_text())
    doc["config"]["verl-ack:settings"]["training"]["answer_tool"] = {"reveal": "correctness"}
    path.write_text(yaml.safe_dump(doc))
    f = path.parent / "tasks" / "own" / "train.parquet"
    rows = pq.read_table(f).to_pylist()
    for row in rows:
        row["agent_name"] = "tool_agent"
    pq.write_table(pa.Table.from_pylist(rows), f)
    err = refused(path, tmp_path, capsys)
    assert "task.dataset.train" in err and "extra_info.tools_kwargs.calc_gsm8k_reward.create_kwargs.ground_truth" in err


def test_gsm8k_tool_rows_are_not_offered_without_the_answer_tool_their_prompt_names():
    from components.config import SettingsError

    with pytest.raises(SettingsError, match="task.tools .* tell the model to call calc_gsm8k_reward"):
        parse_settings(stack_settings("dev", {"task": {"tools": ["code"]}}))
    for tools in ([], ["answer"], ["answer", "code"]):
        parse_settings(stack_settings("dev", {"task": {"tools": tools}}))
