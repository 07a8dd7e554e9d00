"""Any other hub dataset, converted by the researcher's own script in the dataset Job (task.dataset.hub): the plan
runs the script on the stack's raw examples and checks each row before anything is created; the Job mounts the
script from its own ConfigMap and converts, checks and stages the rows."""

from __future__ import annotations

from pathlib import Path

import yaml

import plan
from components.config import STACKS_DIR
from components.config.loading import raw_settings
from components.config.task import task_root
from components.model import parse_settings
from components.wiring import dataset_files
from components.workloads import data as dj
from pipeline import task_dataset
from tests.components.workloads.test_data import RRSA, SA
from tests.fakeoss import FakeOss

SCRIPT = '''
def build_row(example, index, split):
    if not example.get("answer"):
        return None  # dropped
    return {"data_source": "verl-ack/trivia",
            "prompt": [{"role": "user", "content": example["question"] + " Answer as <answer>X</answer>."}],
            "reward_model": {"style": "rule", "ground_truth": example["answer"]},
            "extra_info": {"split": split, "index": index}}
'''
REWARD = (STACKS_DIR / "tasks" / "own" / "reward.py").read_text()
EXAMPLES = [{"question": "What is 2 + 2?", "answer": "4"}, {"question": "Unanswered?", "answer": ""}]


def hub_stack(tmp_path: Path, script: str = SCRIPT, **hub) -> Path:
    folder = tmp_path / "stack"
    (folder / "tasks").mkdir(parents=True)
    (folder / "tasks" / "convert.py").write_text(script)
    (folder / "tasks" / "reward.py").write_text(REWARD)
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.task-own.yaml").read_text())
    settings = doc["config"]["verl-ack:settings"]
    settings["task"] = {
        "dataset": {"hub": {"id": "example/trivia", "revision": "0123abc", "script": "tasks/convert.py",
                            "data_source": "verl-ack/trivia", "splits": {"train": "train", "test": "validation"},
                            "train_rows": 1000, "val_rows": 200, "examples": EXAMPLES, **hub}},
        "reward": {"file": "tasks/reward.py", "checks": [{"response": "<answer>4</answer>", "ground_truth": "4",
                                                         "score": 1.0}]},
        "tools": []}
    path = folder / "Pulumi.task-hub.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_hub_dataset_with_its_script_plans_with_the_examples_converted_on_the_cpu(tmp_path, capsys):
    path = hub_stack(tmp_path)
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "`example/trivia` at `0123abc`, converted by your `build_row` in `tasks/convert.py`" in md
    assert "turned 1 of 2 example(s) into rows that passed the check" in md


def test_a_script_that_raises_or_returns_a_bad_row_is_refused_naming_the_example(tmp_path, capsys):
    bad = SCRIPT.replace('"reward_model": {"style": "rule", "ground_truth": example["answer"]},', "")
    for script, says in ((bad, "task.dataset.hub.examples[0]: the row build_row returns: column reward_model"),
                         ("def build_row(example, index, split):\n    raise KeyError('question')\n",
                          "task.dataset.hub.examples[0]: build_row raised KeyError")):
        out = tmp_path / "out"
        assert plan.main(["--config-file", str(hub_stack(tmp_path / says[-12:], script)), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert says in err and not out.exists(), err


def test_the_dataset_job_mounts_the_script_and_is_keyed_by_it(tmp_path):
    keys = []
    for script in (SCRIPT, SCRIPT + "\n# changed\n"):
        path = hub_stack(tmp_path / str(len(keys)), script)
        with task_root(path.parent):
            s = parse_settings(raw_settings(path))
            job = dj.dataset_job_manifest(s, dj.pipeline_code(), RRSA, SA)
            env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
            assert env["HUB_SCRIPT"] == f"{dj.TASK_SCRIPT_DIR}/{dj.TASK_SCRIPT_FILE}" and env["DATASET_REVISION"] == \
                "0123abc" and env["HUB_SPLITS"] == "test:validation,train:train"
            volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "task-script")
            assert volume["configMap"]["name"] == dj.task_script_configmap_name(s)
            assert dj.task_script_configmap_manifest(s)["data"] == {dj.TASK_SCRIPT_FILE: script}
            keys.append(dataset_files(s).prefix)
    assert keys[0] != keys[1]  # a changed script stages its rows under a new prefix


def test_the_job_converts_checks_and_stages_a_hub_dataset_with_the_script(tmp_path):
    script = tmp_path / "task_script.py"
    script.write_text(SCRIPT)
    env = {"DATASET_NAME": "example/trivia", "HUB_SCRIPT": str(script), "HUB_FUNCTION": "build_row",
           "HUB_SPLITS": "train:train,test:validation", "HUB_DATA_SOURCE": "verl-ack/trivia", "OSS_BUCKET": "data",
           "OSS_PREFIX": "datasets/trivia/k/", "SUBSETS": "train:1,test:1", "OUTPUT_DIR": str(tmp_path / "out")}
    config = task_dataset.config_from_env(env)
    raw = {"train": EXAMPLES * 2, "test": EXAMPLES}
    with FakeOss() as server:
        summary = task_dataset.run(config, server.client(), load=lambda c: raw, log=lambda m: None)
    assert summary is not None
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()
    assert len(rows) == 2 and {r["data_source"] for r in rows} == {"verl-ack/trivia"}
    assert rows[0]["agent_name"] == "single_turn_agent"
