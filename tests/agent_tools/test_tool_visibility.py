"""What the operator sees of the tools as they really run: verl's logging set-up, a killed worker's MLflow run,
and error kinds that tell an outage from a schema mismatch."""

from __future__ import annotations

import importlib
import logging
import types

import pytest
import yaml

from tests.agent_tools.harness import write_config_map
from tests.agent_tools.test_verl_ack_tools import run_call
from tests.components.workloads.training.test_rayjob import SITE, settings_for


@pytest.fixture
def verl_root_logging():
    """The root logger as `import verl` leaves it (verl/__init__.py calls set_basic_config(level=WARNING)),
    restored afterwards."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    root.handlers = []
    yield root
    root.setLevel(saved[0])
    root.handlers = saved[1]


def test_healthy_interval_lines_appear_after_import_verl_sets_the_root_logger_to_warning(
        verl, build_tools, verl_root_logging, capsys):
    init = (SITE / "verl/__init__.py").read_text()
    assert "set_basic_config(level=logging.WARNING)" in init  # what every verl process runs at import
    importlib.import_module("verl.utils.logging_utils").set_basic_config(level=logging.WARNING)
    assert verl_root_logging.level == logging.WARNING
    module, tools = build_tools()
    run_call(tools["calc_gsm8k_reward"], {"answer": "2000"},
             {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "2000"}}})
    module.STATS.flush()
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if "calc_gsm8k_reward: 1 calls in the last 60 s, 0 failed" in x]
    assert len(lines) == 1 and lines[0].startswith("INFO:")  # printed once, at INFO, not dropped


@pytest.mark.parametrize("error,kind", [
    (RuntimeError("Client failed to connect: All connection attempts failed"), "RuntimeError/unreachable"),
    (RuntimeError("Client failed to connect: Failed to initialize server session"), "RuntimeError/unreachable"),
    (type("McpError", (Exception,), {})("Timed out while waiting for response to CallToolRequest. Waited 150.0 "
                                        "seconds."), "McpError/timeout"),
    (RuntimeError("Invalid structured content returned by tool run_code_once: 'logs' is a required property"),
     "RuntimeError/schema_mismatch"),
    (ValueError("something else"), "ValueError"),
])
def test_the_log_lines_error_kind_tells_an_outage_from_a_schema_mismatch(build_tools, error, kind):
    module, _ = build_tools()
    assert module.failure_kind(error) == kind


JOB = "verl-grpo-abcde"  # this job's Ray cluster (VERL_ACK_RAY_CLUSTER)
TOOLS = {"verl_ack.role": "agent-tools", "verl_ack.job": JOB}


class Runs:
    """An MLflow tracking server's runs as MlflowClient shows them (search_runs, set_terminated)."""

    def __init__(self):
        self.runs = {
            "trainer": ("FINISHED", "qwen2.5-3b-grpo-tool-agent-n16", {}),
            "old-trainer": ("FAILED", "qwen2.5-3b-grpo-tool-agent-n16", {}),
            "tools-1": ("RUNNING", "x-tools-a-1", {**TOOLS, "mlflow.parentRunId": "trainer"}),
            "tools-2": ("RUNNING", "x-tools-b-2", {**TOOLS, "mlflow.parentRunId": "trainer"}),
            "tools-done": ("FINISHED", "x-tools-c-3", {**TOOLS, "mlflow.parentRunId": "trainer"}),
            # another job with the same MLflow names (even nested under the same-named trainer): never this one's
            "other-job": ("RUNNING", "x-tools-d-4", {**TOOLS, "verl_ack.job": "verl-grpo-zzzzz",
                                                     "mlflow.parentRunId": "trainer"}),
            "not-tools": ("RUNNING", "someone-else", {"mlflow.parentRunId": "trainer"}),
        }
        self.order = ["trainer", "old-trainer"]  # start_time DESC
        self.terminated = {}

    def client(self, uri):
        runs = self

        def run(run_id):
            status, name, tags = runs.runs[run_id]
            return types.SimpleNamespace(info=types.SimpleNamespace(run_id=run_id, status=status, run_name=name),
                                         data=types.SimpleNamespace(tags=tags))

        class Client:
            def get_experiment_by_name(self, name):
                return types.SimpleNamespace(experiment_id="1") if name == "gsm8k-tool-agent" else None

            def search_runs(self, experiment_ids, filter_string="", order_by=None, max_results=1000):
                assert experiment_ids == ["1"]
                if filter_string.startswith("attributes.run_name = "):
                    name = filter_string.split("'")[1]
                    return [run(r) for r in runs.order if runs.runs[r][1] == name][:max_results]
                assert filter_string == "attributes.status = 'RUNNING'"
                return [run(r) for r, (status, _, _) in runs.runs.items() if status == "RUNNING"]

            def set_terminated(self, run_id, status="FINISHED"):
                runs.terminated[run_id] = status
                runs.runs[run_id] = (status, *runs.runs[run_id][1:])

        return Client()


def test_the_job_end_marks_the_killed_workers_runs_killed_and_nothing_else(build_tools, monkeypatch, tmp_path, capsys):
    module, _ = build_tools()
    fake = Runs()
    mlflow = types.ModuleType("mlflow")
    monkeypatch.setitem(__import__("sys").modules, "mlflow", mlflow)
    monkeypatch.setitem(__import__("sys").modules, "mlflow.tracking", types.SimpleNamespace(MlflowClient=fake.client))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.verl.svc.cluster.local:5000")
    monkeypatch.setenv(module.JOB_ENV, JOB)
    s = settings_for("dev")
    config = write_config_map(tmp_path, s)
    metrics = next(t["config"]["metrics"] for t in yaml.safe_load(config.read_text())["tools"])
    assert metrics["mlflow_experiment"] == s.training.project_name == "gsm8k-tool-agent"
    fake.runs["trainer"] = ("FINISHED", metrics["mlflow_parent_run"], {})
    assert module._close_runs_main(str(config)) == 0
    assert fake.terminated == {"tools-1": "KILLED", "tools-2": "KILLED"}
    assert "marked 2 tool run(s) KILLED" in capsys.readouterr().err
    assert module._close_runs_main(str(config)) == 0 and len(fake.terminated) == 2  # again: nothing left to close


def test_closing_runs_never_fails_the_job(build_tools, monkeypatch, tmp_path, capsys):
    module, _ = build_tools()
    monkeypatch.setitem(__import__("sys").modules, "mlflow", None)  # importing it fails
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.verl.svc.cluster.local:5000")
    monkeypatch.setenv(module.JOB_ENV, JOB)
    assert module._close_runs_main(str(write_config_map(tmp_path))) == 0
    assert "could not close the tool runs" in capsys.readouterr().err
