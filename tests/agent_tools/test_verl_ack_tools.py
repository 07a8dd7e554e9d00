"""The tools of agent_tools/verl_ack_tools.py and the reward of agent_tools/verl_ack_reward.py, built from the
generated ConfigMap by verl 0.9.1's own tool registry and driven by verl's own ToolAgentLoop tool path (hermes
parser -> `_handle_processing_tools_state` -> `_call_tool` -> create/execute/release -> tool message and
`AgentData.tool_rewards`), with the MCP client replaced (tests/agent_tools/test_mcp_schema.py runs the real one)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import types
from dataclasses import dataclass, field

import pytest

from components.model.layout import resolve_layout
from components.workloads.training.verl_config import CONFIG_DIR, REWARD_FUNCTION, REWARD_MODULE_FILE, hydra_overrides
from pipeline.gsm8k import build_row
from tests.agent_tools.harness import AgentLoop, tool_call
from tests.components.workloads.training.test_rayjob import settings_for


@dataclass
class TextContent:
    text: str
    type: str = "text"


@dataclass
class CallToolResult:
    content: list
    isError: bool = False
    structuredContent: dict | None = None


def manager_result(data: dict) -> CallToolResult:
    """What the sandbox manager's mcp-go handler sends: the JSON as text and as structured content."""
    return CallToolResult([TextContent(json.dumps(data, separators=(",", ":")))], structuredContent=data)


@dataclass
class FakeClient:
    """Stands in for fastmcp.Client: records sessions and calls, answers with `reply` (or raises it)."""

    config: dict
    timeout: float | None = None
    init_timeout: float | None = None
    calls: list = field(default_factory=list)

    log = []
    reply = manager_result({"logs": {"stdout": ["42\n"], "stderr": []}, "results": [], "sandbox_id": "sbx-1"})
    in_flight = peak = 0

    def __post_init__(self):
        FakeClient.log.append(self)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    async def call_tool_mcp(self, name, arguments, timeout=None):
        FakeClient.in_flight += 1
        FakeClient.peak = max(FakeClient.peak, FakeClient.in_flight)
        self.calls.append((name, arguments, timeout))
        await asyncio.sleep(0.01)
        FakeClient.in_flight -= 1
        if isinstance(FakeClient.reply, BaseException):
            raise FakeClient.reply
        return FakeClient.reply


@pytest.fixture
def fake_client():
    FakeClient.log, FakeClient.in_flight, FakeClient.peak = [], 0, 0
    FakeClient.reply = manager_result({"logs": {"stdout": ["42\n"], "stderr": []}, "results": [], "sandbox_id": "s"})
    return FakeClient


def limit_of(s=None) -> int:
    return (s or settings_for("dev")).training.max_tool_response_chars


def run_call(tool, arguments: dict, tools_kwargs: dict | None = None):
    """ToolAgentLoop._call_tool's sequence for a BaseTool (for direct checks of the return triple)."""

    async def run():
        kwargs = (tools_kwargs or {}).get(tool.name, {})
        instance_id, _ = await tool.create(create_kwargs=kwargs.get("create_kwargs", {}))
        try:
            return await tool.execute(instance_id, arguments, agent_data=None)
        finally:
            await tool.release(instance_id)

    return asyncio.run(run())


# --------------------------------------------------------------------------------------------- registry
def test_verls_tool_registry_builds_both_tools_from_the_generated_config_map(build_tools, fake_client):
    module, tools = build_tools(client=fake_client)
    assert list(tools) == ["calc_gsm8k_reward", "run_code_once"]
    assert type(tools["run_code_once"]).__name__ == "SandboxCodeTool"
    # Building a tool (the driver and the dataset loader do only that) starts no thread and creates no run.
    assert module.STATS._thread is None and module.STATS._sink is None


# --------------------------------------------------------------------------------------------- item 1: scoring
ROW = build_row({"question": "How many?", "answer": "... #### 2,000"}, 0, "train")


def test_the_dataset_ground_truth_has_no_separators():
    assert ROW["reward_model"]["ground_truth"] == "2000"
    assert ROW["extra_info"]["tools_kwargs"]["calc_gsm8k_reward"]["create_kwargs"]["ground_truth"] == "2000"


@pytest.mark.parametrize("answer,truth,expected", [
    ("2,000", "2000", 1.0),          # the issue: verl's "flexible" kept the comma and scored 0
    ("#### 2,000", "2000", 1.0),
    ("1,234,567", "1234567", 1.0),
    ("-1,250", "-1250", 1.0),
    ("-3", "-3", 1.0),
    ("3", "-3", 0.0),                # the sign counts
    ("1,234.5", "1234.5", 1.0),
    ("0.5", "0.5", 1.0),
    ("18.0", "18", 0.0),             # verl compares strings: "#### 18.0" fails the final reward too
    ("1999", "2000", 0.0),
])
def test_the_gsm8k_tool_scores_a_number_as_the_final_reward_scores_it(verl, build_tools, answer, truth, expected):
    _, tools = build_tools()
    _, tool_reward, metrics = run_call(tools["calc_gsm8k_reward"], {"answer": answer},
                                       {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": truth}}})
    final = verl.reward_score.default_compute_score("openai/gsm8k", f"Step by step ... #### {answer.removeprefix('#### ')}",
                                                    truth)
    assert metrics["reward"] == expected == final, (answer, truth)
    assert tool_reward == (0.0 if expected else -0.05)


@pytest.mark.parametrize("answer", ["The total is 2,000 apples", "$2,000", "= 2000"])
def test_the_gsm8k_tool_scores_a_sentence_or_a_currency_sign_zero_as_the_final_reward_does(verl, build_tools, answer):
    _, tools = build_tools()
    _, tool_reward, metrics = run_call(tools["calc_gsm8k_reward"], {"answer": answer},
                                       ROW["extra_info"]["tools_kwargs"])
    # `#### $2,000` scores 0 in verl's final reward (its pattern never starts with "$"): the tool must not say 1.
    assert metrics["reward"] == verl.gsm8k.compute_score(f"#### {answer}", "2000") == 0.0
    assert tool_reward == -0.05


def test_a_correct_answer_with_separators_is_confirmed_through_verls_agent_loop(verl, build_tools):
    _, tools = build_tools()
    loop = AgentLoop(verl, tools, limit_of())
    data = loop.new_trajectory(ROW["extra_info"]["tools_kwargs"])
    (message,) = loop.turn(data, tool_call("calc_gsm8k_reward", answer="2,000"))
    # The default reveal: how the final reward reads it, not whether it is right.
    assert message["role"] == "tool" and message["content"].startswith("The final reward would read your answer as "
                                                                       "'2000'")
    assert data.tool_rewards == [0.0]


def test_the_gsm8k_tool_without_ground_truth_says_so_instead_of_scoring(build_tools):
    _, tools = build_tools()
    response, tool_reward, _ = run_call(tools["calc_gsm8k_reward"], {"answer": "3"})
    assert "No ground truth" in response.text and tool_reward == 0.0


# --------------------------------------------------------------------------------------------- item 2: penalty
def test_verls_naive_reward_manager_hands_the_tool_rewards_to_the_reward_function(verl):
    """The path compute_score relies on, read from the installed files (they need torch to run)."""
    from tests.components.workloads.training.test_rayjob import SITE

    agent_loop = (SITE / "verl/experimental/agent_loop/agent_loop.py").read_text()
    naive = (SITE / "verl/experimental/reward_loop/reward_manager/naive.py").read_text()
    tool_loop = (SITE / "verl/experimental/agent_loop/tool_agent_loop.py").read_text()
    assert '"tool_rewards": agent_data.tool_rewards' in tool_loop
    assert '"tool_extra_fields": np.array([o.extra_fields for o in outputs], dtype=object)' in agent_loop
    assert "extra_info.update(tool_extra_fields.items())" in naive


def test_a_wrong_guess_costs_reward_in_the_trajectorys_final_score(verl, build_tools, tmp_path):
    _, tools = build_tools(settings_for("dev", {"training": {"answer_tool": {"max_calls": 2}}}))
    loop = AgentLoop(verl, tools, limit_of())
    data = loop.new_trajectory(ROW["extra_info"]["tools_kwargs"])
    loop.turn(data, tool_call("calc_gsm8k_reward", answer="1999"))
    loop.turn(data, tool_call("calc_gsm8k_reward", answer="2000"))
    assert data.tool_rewards == [-0.05, 0.0]
    # The reward function as verl loads it (reward.custom_reward_function.path/.name from the overrides) ...
    overrides = dict(hydra_overrides(settings_for("dev"), resolve_layout(settings_for("dev"))))
    path = overrides["reward.custom_reward_function.path"]
    assert path == f"{CONFIG_DIR}/{REWARD_MODULE_FILE}"
    compute_score = verl.import_utils.load_extern_object(
        str(tmp_path / "config" / REWARD_MODULE_FILE), overrides["reward.custom_reward_function.name"])
    # ... called as the naive reward manager calls it: extra_info carries the agent loop's extra fields.
    extra_info = {**ROW["extra_info"], "tool_rewards": data.tool_rewards, "turn_scores": data.turn_scores,
                  "num_turns": 5, "rollout_reward_scores": {}, "verl_ack_model_text": "... #### 2,000"}
    result = compute_score(data_source=ROW["data_source"], solution_str="... #### 2,000",
                           ground_truth=ROW["reward_model"]["ground_truth"], extra_info=extra_info)
    assert result == {"score": pytest.approx(0.95), "acc": 1.0, "tool_reward": -0.05, "tool_calls": 2.0}
    no_tools = compute_score(data_source=ROW["data_source"], solution_str="#### 7", ground_truth="2000",
                             extra_info={"tool_rewards": [], "verl_ack_model_text": "#### 7"})
    assert set(no_tools) == set(result) and no_tools["score"] == 0.0  # the same keys every time, as verl needs
    assert REWARD_FUNCTION == "compute_score"


# --------------------------------------------------------------------------------------------- item 2: metrics
class FakeMlflow:
    """mlflow.tracking.MlflowClient / mlflow.entities.Metric as verl_ack_tools uses them (mlflow 3.17.2)."""

    def __init__(self):
        self.runs, self.batches, self.terminated, self.experiments = [], [], [], {}

    def modules(self):
        fake = self

        class Client:
            def __init__(self, uri):
                fake.uri = uri

            def get_experiment_by_name(self, name):
                return types.SimpleNamespace(experiment_id=fake.experiments[name]) if name in fake.experiments else None

            def create_experiment(self, name):
                fake.experiments[name] = f"exp-{len(fake.experiments)}"
                return fake.experiments[name]

            def search_runs(self, experiment_ids, filter_string, order_by, max_results):
                fake.search = (experiment_ids, filter_string)
                return [types.SimpleNamespace(info=types.SimpleNamespace(run_id="trainer-run"))]

            def create_run(self, experiment_id, tags, run_name):
                fake.runs.append((experiment_id, tags, run_name))
                return types.SimpleNamespace(info=types.SimpleNamespace(run_id="tools-run"))

            def log_batch(self, run_id, metrics):
                fake.batches.append((run_id, {m.key: m.value for m in metrics}, {m.step for m in metrics}))

            def set_terminated(self, run_id):
                fake.terminated.append(run_id)

        def metric(key, value, timestamp, step):
            return types.SimpleNamespace(key=key, value=value, timestamp=timestamp, step=step)

        return {"mlflow": types.ModuleType("mlflow"),
                "mlflow.tracking": types.SimpleNamespace(MlflowClient=Client),
                "mlflow.entities": types.SimpleNamespace(Metric=metric)}


# What fastmcp 2.14.7's Client raises when the sandbox manager's Service has no endpoint (seen with the real client).
OUTAGE = RuntimeError("Client failed to connect: All connection attempts failed")


def test_a_sandbox_outage_reaches_the_model_the_log_and_mlflow_not_just_a_verl_warning(
        verl, build_tools, fake_client, monkeypatch, caplog):
    s = settings_for("dev")
    module, tools = build_tools(client=fake_client)
    monkeypatch.setattr(module.logger, "handlers", [*module.logger.handlers, caplog.handler])  # it does not propagate
    fake_client.reply = OUTAGE
    loop = AgentLoop(verl, tools, limit_of())
    data = loop.new_trajectory()
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            (message,) = loop.turn(data, tool_call("run_code_once", code="print(6*7)"))
        assert message["content"] == ("error: run_code_once failed before returning a result (RuntimeError: Client "
                                      "failed to connect: All connection attempts failed)")
        # verl logs a tool exception as one WARNING per call; the tool catches it, so verl logged nothing ...
        assert not [r for r in caplog.records if "Error executing tool" in r.getMessage()]
        fake_client.reply = manager_result({"logs": {"stdout": ["42\n"], "stderr": []}, "results": [],
                                            "sandbox_id": "s"})
        loop.turn(data, tool_call("run_code_once", code="print(6*7)"))
        # ... and the tool's own report names the failures once per interval.
        mlflow = FakeMlflow()
        for name, mod in mlflow.modules().items():
            monkeypatch.setitem(sys.modules, name, mod)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.verl.svc.cluster.local:5000")
        monkeypatch.setenv("MLFLOW_RUN_ID", "trainer-run")  # the entrypoint gives every Ray worker the run's id
        module.STATS.flush()
    (line,) = [r for r in caplog.records if r.name == "verl_ack_tools"]
    assert line.levelno == logging.WARNING
    assert line.getMessage().startswith("run_code_once: 4 calls in the last 60 s, 3 failed;")
    assert "RuntimeError/unreachable x3" in line.getMessage() and "All connection attempts failed" in line.getMessage()
    # MLflow: the trainer's experiment, a run per worker nested under the trainer's run.
    ((exp_id, tags, run_name),) = mlflow.runs
    assert mlflow.experiments == {s.training.project_name: exp_id}
    assert tags["mlflow.parentRunId"] == "trainer-run" and tags["verl_ack.role"] == "agent-tools"
    assert not hasattr(mlflow, "search")  # the trainer's run is known by id, never searched by name
    assert run_name.startswith(f"{s.training.experiment_name}-tools-")
    ((run_id, metrics, steps),) = mlflow.batches
    assert run_id == "tools-run" and steps == {1}
    assert metrics["tools/run_code_once/calls"] == 4 and metrics["tools/run_code_once/failure_rate"] == 0.75
    assert metrics["tools/run_code_once/failed_total"] == 3 and metrics["tools/run_code_once/ok_total"] == 1
    assert metrics["tools/run_code_once/latency_max_s"] >= metrics["tools/run_code_once/latency_p50_s"] > 0
    module.STATS.flush(final=True)
    assert mlflow.terminated == ["tools-run"] and len(mlflow.batches) == 1  # nothing new: nothing logged


def test_without_a_tracking_server_the_tools_only_log(build_tools, fake_client, monkeypatch):
    s = settings_for("dev", {"tracking": {"enabled": False}, "training": {"logger": ["console"]}})
    module, tools = build_tools(s, client=fake_client)
    assert module.STATS.experiment is None  # the generated tool config names no MLflow experiment
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # importing it would fail
    run_call(tools["run_code_once"], {"code": "1"})
    module.STATS.flush()
    assert module.STATS._sink is None and module.STATS.take() is None


def test_the_gsm8k_tool_counts_wrong_answers(build_tools):
    module, tools = build_tools()
    for answer in ("1", "2000", "3"):
        run_call(tools["calc_gsm8k_reward"], {"answer": answer}, ROW["extra_info"]["tools_kwargs"])
    metrics = module.STATS.take()
    assert metrics["tools/calc_gsm8k_reward/wrong_total"] == 2 and metrics["tools/calc_gsm8k_reward/correct_total"] == 1
    assert metrics["tools/calc_gsm8k_reward/failure_rate"] == 0.0  # a wrong answer is the model's, not a failure


# --------------------------------------------------------------------------------------------- the code tool
def test_the_code_tool_runs_run_code_once_in_a_new_session_with_the_timeout(build_tools, fake_client, tmp_path):
    _, tools = build_tools(client=fake_client)
    response, reward, metrics = run_call(tools["run_code_once"],
                                         {"code": "print(6*7)", "language": "python", "extra": 1})
    assert response.text == "stdout:\n42"
    assert (reward, metrics) == (0.0, {"mcp_error": False})
    limit = settings_for("dev").training.tool_timeout_seconds
    grace = 30.0
    (client,) = fake_client.log
    # The sandbox enforces the limit; the client waits a grace period longer and bounds the handshake.
    assert client.calls == [("run_code_once", {"code": "print(6*7)", "language": "python"}, limit + grace)]
    assert (client.timeout, client.init_timeout) == (limit + grace, grace)
    assert client.config == json.loads((tmp_path / "mcp" / "mcp_servers.json").read_text())


def test_the_code_tool_refuses_empty_code_without_claiming_a_sandbox(build_tools, fake_client):
    _, tools = build_tools(client=fake_client)
    response, _, metrics = run_call(tools["run_code_once"], {"code": "  "})
    assert response.text.startswith("error:") and metrics == {"mcp_error": True}
    assert fake_client.log == []


def test_the_code_tool_never_holds_more_sandboxes_than_its_share_of_the_pool(build_tools, fake_client, verl, tmp_path):
    _, tools = build_tools(client=fake_client)
    tool = tools["run_code_once"]
    tool._slots = asyncio.Semaphore(3)

    async def burst():
        await asyncio.gather(*(tool.execute("i", {"code": "1"}) for _ in range(10)))

    asyncio.run(burst())
    assert len(fake_client.log) == 10 and fake_client.peak == 3


def test_the_code_tool_refuses_a_servers_file_with_several_servers(build_tools):
    two = json.dumps({"mcpServers": {"a": {"url": "http://a"}, "b": {"url": "http://b"}}})
    with pytest.raises(ValueError, match="exactly one MCP server"):
        build_tools(mcp_servers=two)


# --------------------------------------------------------------------------------------------- item 3: clipping
TRACEBACK = "".join(f"\x1b[0;36m  File \"<cell>\", line {i}, in f{i}\x1b[0m\n    return f{i + 1}(x)\n"
                    for i in range(400)) + "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"


def test_a_long_traceback_keeps_its_head_and_tail_under_verls_limit(verl, build_tools, fake_client):
    limit = limit_of()
    _, tools = build_tools(client=fake_client)
    fake_client.reply = manager_result({
        "logs": {"stdout": ["starting\n"], "stderr": []}, "results": [], "sandbox_id": "s",
        "error": {"name": "ZeroDivisionError", "value": "division by zero", "traceback": TRACEBACK}})
    loop = AgentLoop(verl, tools, limit)
    data = loop.new_trajectory()
    (message,) = loop.turn(data, tool_call("run_code_once", code="f0(1)"))
    text = message["content"]
    assert len(text) <= limit and "(truncated)" not in text  # verl's middle cut never ran
    assert text.startswith("stdout:\nstarting\ntraceback:\n")
    assert text.endswith("ZeroDivisionError: division by zero\nerror: ZeroDivisionError: division by zero")
    assert "characters cut ...]" in text and "\x1b[" not in text
    assert all(line.startswith(("stdout", "starting", "traceback", "  File", "    return", "[...", "Zero", "error"))
               for line in text.splitlines())  # no line cut in half


def test_verls_default_limit_is_what_the_setting_replaces(verl):
    from tests.components.workloads.training.test_rayjob import SITE

    assert "max_tool_response_length: 256" in (SITE / "verl/trainer/config/rollout/rollout.yaml").read_text()
    overrides = dict(hydra_overrides(settings_for("dev"), resolve_layout(settings_for("dev"))))
    assert overrides["actor_rollout_ref.rollout.multi_turn.max_tool_response_length"] == limit_of() > 256


@pytest.mark.parametrize("size", [0, 50, 129, 1000, 100_000])
@pytest.mark.parametrize("limit", [128, 256, 1024])
def test_clipping_never_exceeds_the_limit_and_says_how_much_is_gone(build_tools, size, limit):
    module, _ = build_tools()
    text = "".join(f"line {i}\n" for i in range(size))[:size] if size < 1000 else "x" * size
    out = module.clip_text(text, limit)
    assert len(out) <= limit
    if len(text) <= limit:
        assert out == text
    else:
        head, rest = out.split("\n[... ", 1)
        cut = int(rest.split(" ", 1)[0])
        tail = rest.split(" characters cut ...]\n", 1)[1]
        assert len(head) + cut + len(tail) == len(text) and text.startswith(head) and text.endswith(tail)
        assert len(tail) >= len(head)


# --------------------------------------------------------------------------------------------- rendering
def test_results_are_condensed_for_the_model(build_tools):
    module, _ = build_tools()
    render = module.render_result
    data = {"logs": {"stdout": ["a\n", "b\n"], "stderr": ["warn\n"]}, "results": [{"text": "7"}],
            "sandbox_id": "s", "error": {"name": "ZeroDivisionError", "value": "division by zero", "traceback": ""}}
    text, raised = render(manager_result(data))
    assert text.splitlines() == ["stdout:", "a", "b", "stderr:", "warn", "result: 7",
                                 "error: ZeroDivisionError: division by zero"]
    assert raised
    assert render(CallToolResult([TextContent("sandbox pool exhausted")], True)) == (
        "error: sandbox pool exhausted", False)
    assert render(manager_result({"logs": {}}))[0] == "(no output)"


def test_an_mcp_error_that_is_not_the_result_json_reaches_the_model_whole(build_tools):
    module, _ = build_tools()
    render = module.render_result
    body = json.dumps({"detail": "claim sandbox: no stock in SandboxSet code-interpreter"})
    assert render(CallToolResult([TextContent(body)], True))[0] == f"error: {body}"
    assert render(CallToolResult([TextContent(json.dumps(["quota exceeded"]))], True))[0] == 'error: ["quota exceeded"]'
