"""The two tools the GRPO agent loop offers the model: `calc_gsm8k_reward` and `run_code_once`.

verl 0.9.1 no longer ships tools of its own: `verl.tools.gsm8k_tool.Gsm8kTool`, `MCPBaseTool` and
`MCPSearchTool` were removed (verl PR #6302; `verl/tools/tool_registry.py` says "MCP tool is removed for
now" and only knows `type: native`). What remains is the native contract this module implements:

- `tool_registry.initialize_tools_from_config` imports `class_name`, validates `tool_schema` with
  `OpenAIFunctionToolSchema` and calls `cls(config=<the config mapping>, tool_schema=<schema>)`;
- `ToolAgentLoop._call_tool` runs, for EVERY call, `create(create_kwargs=tools_kwargs[name]["create_kwargs"])`,
  then `execute(instance_id, arguments, agent_data=...)` and finally `release(instance_id)`. It cuts the text
  at `multi_turn.max_tool_response_length` characters in the middle, turns an exception into a tool message
  plus one WARNING line, keeps the tool reward in `AgentData.tool_rewards` and drops execute's metrics dict.

So the tools clip their own text (head and tail, under the limit), catch their own failures and count calls,
errors and latencies themselves (`ToolStats`); the tool reward reaches the trajectory's reward through
`verl_ack_reward.compute_score`.

This file is mounted into every Ray pod from the job's ConfigMap and put on PYTHONPATH, so the class names in
the tool config (`verl_ack_tools.<Class>`) import in the driver, the dataset loader and every agent-loop worker.
Longer than 500 lines because it is that one file: the ConfigMap ships it alone onto every worker's PYTHONPATH and
verl's tool registry imports the classes by this module's name, so the tools, their text clipping and their call
counters stay together. The job's end (each run's final state) is the entrypoint's (verl_ack_entrypoint.py): a
worker's own atexit never runs when Ray kills the actor.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import re
import socket
import sys
import threading
import time
from collections import Counter
from typing import Any, Optional
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.reward_score import gsm8k

logger = logging.getLogger("verl_ack_tools")


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (Ray forwards a worker's stderr to the driver log)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def _own_logging() -> None:
    """INFO lines of the tools appear whatever the root logger says: `import verl` runs
    `logging.basicConfig(level=WARNING)` (verl/__init__.py, set_basic_config), which would drop every healthy
    interval's INFO line. The logger gets its own level and stderr handler (verl's format) and does not
    propagate, so a line is printed once. Idempotent: the module may be imported again in one process."""
    if not any(getattr(h, "verl_ack", False) for h in logger.handlers):
        handler = _StderrHandler()
        handler.verl_ack = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter("%(levelname)s:%(asctime)s:%(name)s:%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


_own_logging()

# A call whose answer does not match the ground truth costs this much tool reward (the value of verl's
# removed Gsm8kTool). verl_ack_reward.compute_score adds the tool rewards to the trajectory's reward, so
# guessing against the ground-truth oracle is not free.
WRONG_ANSWER_PENALTY = -0.05
# Seconds the client allows beyond the code's own time limit (claiming a sandbox, the reply), and for
# connecting plus the MCP initialize handshake.
CLIENT_GRACE_SECONDS = 30.0
# verl's own default for multi_turn.max_tool_response_length; the generator passes the stack's value.
DEFAULT_MAX_RESPONSE_CHARS = 256
DEFAULT_METRICS_INTERVAL_SECONDS = 60.0
# Set in every Ray worker of the job by the entrypoint (verl_ack_entrypoint.py, same names there): the trainer's
# MLflow run (MLFLOW_RUN_ID, which verl's Tracking attaches to) and the Ray job's submission id.
TRAINER_RUN_ENV = "MLFLOW_RUN_ID"
JOB_ENV = "VERL_ACK_JOB_ID"
JOB_TAG = "verl_ack.job"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # IPython colours its tracebacks


# --------------------------------------------------------------------------------------------- text
def clip_text(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, keeping the head and the (larger) tail around a marker that
    says how much is gone: a traceback's last lines name the error, its first ones where output started.
    verl cuts at the same limit without saying how much (`...(truncated)...`), and only if this did not."""
    if len(text) <= limit:
        return text
    # The marker is sized for the largest possible count, so the real one never makes the result longer.
    width = len(f"\n[... {len(text)} characters cut ...]\n")
    budget = max(0, limit - width)
    head_len = budget // 3
    head, tail = text[:head_len], text[len(text) - (budget - head_len):]
    # Cut at line boundaries where one is near, so no line is shown half.
    if "\n" in head[head_len // 2:]:
        head = head[:head.rindex("\n")]
    if "\n" in tail[:len(tail) // 2]:
        tail = tail[tail.index("\n") + 1:]
    cut = len(text) - len(head) - len(tail)
    clipped = f"{head}\n[... {cut} characters cut ...]\n{tail}"
    return clipped if len(clipped) <= limit else text[:limit]


def render_result(result: Any) -> tuple[str, bool]:
    """Text for the model from an MCP CallToolResult, and whether the program raised.

    The sandbox manager's result (`RunCodeResponse`, openkruise/agents PR #165 at 136236a8,
    pkg/servers/mcp/types.go: logs.stdout/stderr, results[].text, error{name,value,traceback}) arrives as
    `structuredContent` and, identically, as JSON text; it is condensed to what a math solution needs. A failed
    call (`isError`, e.g. "tool execution failed: Failed to create sandbox: ...") is shown whole, as is
    anything that is not that JSON."""
    text = "\n".join(getattr(part, "text", "") or "" for part in getattr(result, "content", None) or []).strip()
    is_error = bool(getattr(result, "isError", False))
    raw = f"error: {text}" if is_error else text
    data = getattr(result, "structuredContent", None)
    if not isinstance(data, dict):
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            return raw, False
    if not isinstance(data, dict):
        return raw, False
    logs = data.get("logs") or {}
    parts = []
    stdout = "".join(logs.get("stdout") or [])
    stderr = "".join(logs.get("stderr") or [])
    if stdout:
        parts.append(f"stdout:\n{stdout.rstrip()}")
    if stderr:
        parts.append(f"stderr:\n{_ANSI.sub('', stderr).rstrip()}")
    for item in data.get("results") or []:
        value = item.get("text") if isinstance(item, dict) else item
        if value:
            parts.append(f"result: {value}")
    error = data.get("error")
    if isinstance(error, dict):
        traceback = _ANSI.sub("", str(error.get("traceback") or "")).rstrip()
        if traceback:
            parts.append(f"traceback:\n{traceback}")
        # Last, so a clipped text still ends with what went wrong.
        parts.append(f"error: {error.get('name') or 'Error'}: {error.get('value') or ''}".rstrip())
    elif error:
        parts.append(f"error: {error}")
    if parts:
        return "\n".join(parts), bool(error) and not is_error
    return (raw if is_error else "(no output)"), False


# --------------------------------------------------------------------------------------------- metrics
class ToolStats:
    """What the tools of this process (one agent-loop worker) did, for the operator.

    verl 0.9.1 keeps none of it: ToolAgentLoop drops execute's metrics dict, and the v1 trainer logs no tool
    numbers. Every call is recorded here with its outcome and latency. The first call starts a daemon thread
    that every `interval_seconds`
    - writes one log line per tool (WARNING when calls failed, with the error kinds and the last message;
      INFO otherwise) to the worker's stderr, which Ray forwards to the job's driver log;
    - logs the same numbers to MLflow when MLFLOW_TRACKING_URI is set (the Ray pods have it when tracking is
      enabled): one run per worker process, `<experiment>-tools-<host>-<pid>` in the trainer's MLflow
      experiment, nested under the trainer's run (MLFLOW_RUN_ID, from the entrypoint; never found by name) and
      tagged with the job (VERL_ACK_JOB_ID), so the entrypoint gives it the job's final state.
    The driver and the dataset loader build the tools only for their schemas and never call them, so they
    start nothing and create no run."""

    # Outcomes that mean the tool could not do its job (the sandbox service failed), not that the model erred.
    FAILURES = ("failed",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._configured = False
        self.interval = DEFAULT_METRICS_INTERVAL_SECONDS
        self.experiment: Optional[str] = None
        self.parent_run: Optional[str] = None
        self._totals: dict[str, Counter] = {}
        self._window: dict[str, dict[str, Any]] = {}
        self._step = 0
        self._sink: Optional[_MlflowSink] = None
        self._sink_failed = False

    def configure(self, config: Optional[dict]) -> None:
        """From the tool config's `metrics` mapping; the first tool built in the process decides."""
        with self._lock:
            if self._configured or not config:
                return
            self._configured = True
            self.interval = float(config.get("interval_seconds", DEFAULT_METRICS_INTERVAL_SECONDS))
            self.experiment = config.get("mlflow_experiment")
            self.parent_run = config.get("mlflow_parent_run")

    def record(self, tool: str, outcome: str, seconds: float, error: Optional[BaseException | str] = None) -> None:
        kind = (failure_kind(error) if isinstance(error, BaseException) else "isError") if error is not None else None
        with self._lock:
            totals = self._totals.setdefault(tool, Counter())
            totals["calls"] += 1
            totals[outcome] += 1
            w = self._window.setdefault(tool, {"calls": 0, "failed": 0, "latency": [], "kinds": Counter(),
                                               "last": ""})
            w["calls"] += 1
            w["latency"].append(seconds)
            if outcome in self.FAILURES:
                w["failed"] += 1
                w["kinds"][kind or outcome] += 1
                w["last"] = f"{kind}: {error}" if isinstance(error, BaseException) else str(error or "")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="verl-ack-tool-stats", daemon=True)
                self._thread.start()
                atexit.register(self.flush, final=True)

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            self.flush()

    def take(self) -> Optional[dict[str, float]]:
        """The metrics of the calls since the last take (None when there were none), with running totals."""
        with self._lock:
            if not any(w["calls"] for w in self._window.values()):
                return None
            metrics: dict[str, float] = {}
            for tool, totals in self._totals.items():
                for outcome, n in totals.items():
                    metrics[f"tools/{tool}/{outcome}_total"] = float(n)
            for tool, w in self._window.items():
                if not w["calls"]:
                    continue
                lat = sorted(w["latency"])
                metrics[f"tools/{tool}/calls"] = float(w["calls"])
                metrics[f"tools/{tool}/failure_rate"] = w["failed"] / w["calls"]
                metrics[f"tools/{tool}/latency_p50_s"] = lat[len(lat) // 2]
                metrics[f"tools/{tool}/latency_p95_s"] = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
                metrics[f"tools/{tool}/latency_max_s"] = lat[-1]
                self._log(tool, w)
            self._window = {}
            self._step += 1
            return metrics

    def _log(self, tool: str, w: dict) -> None:
        lat = sorted(w["latency"])
        line = (f"{tool}: {w['calls']} calls in the last {self.interval:.0f} s, {w['failed']} failed; latency "
                f"p50 {lat[len(lat) // 2]:.2f} s, max {lat[-1]:.2f} s")
        if w["failed"]:
            kinds = ", ".join(f"{k} x{n}" for k, n in w["kinds"].most_common())
            logger.warning("%s (%s; last: %s)", line, kinds, w["last"][:300])
        else:
            logger.info(line)

    def flush(self, final: bool = False) -> None:
        metrics = self.take()
        step = self._step
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri or not self.experiment or self._sink_failed:
            return
        try:
            if self._sink is None:
                self._sink = _MlflowSink(uri, self.experiment, self.parent_run)
            if metrics:
                self._sink.log(metrics, step)
            if final:
                self._sink.close()
        except Exception as e:  # an MLflow outage must not take the rollout down; say so once
            self._sink_failed = True
            logger.warning("tool metrics are no longer sent to MLflow (%s: %s); the log lines continue",
                           type(e).__name__, e)


class _MlflowSink:
    """One MLflow run per worker process, created on the first flush (MlflowClient: no global active run, so
    nothing else in the process is affected)."""

    def __init__(self, uri: str, experiment: str, parent_run: Optional[str]) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(uri)
        exp = self.client.get_experiment_by_name(experiment)
        if exp is not None:
            exp_id = exp.experiment_id
        else:
            try:
                exp_id = self.client.create_experiment(experiment)
            except Exception:  # another worker created it first
                exp_id = self.client.get_experiment_by_name(experiment).experiment_id
        host, pid = socket.gethostname(), os.getpid()
        tags = {"verl_ack.role": "agent-tools", "verl_ack.worker": f"{host}/{pid}"}
        # The job's entrypoint (verl_ack_entrypoint.py) creates the trainer's run and hands its id and the job's
        # to every Ray worker of the job (runtime_env env_vars): the nesting and the job are exact, not a name.
        job = os.environ.get(JOB_ENV)
        if job:
            tags[JOB_TAG] = job
        # Never looked up by name: another job may run under the same names. Without the id (the entrypoint could
        # not create the trainer's run) the tools run stands alone.
        if os.environ.get(TRAINER_RUN_ENV):
            tags["mlflow.parentRunId"] = os.environ[TRAINER_RUN_ENV]
        name = f"{parent_run or experiment}-tools-{host}-{pid}"
        self.run_id = self.client.create_run(exp_id, tags=tags, run_name=name).info.run_id

    def log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), now, step) for k, v in sorted(metrics.items())])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


STATS = ToolStats()


# --------------------------------------------------------------------------------------------- tools
GSM8K_METHODS = ("strict", "flexible")
# What calc_gsm8k_reward may tell the model (the tool config's `reveal`): `parsed`, the number the final reward would
# read from `#### <answer>` (or that it reads none), never whether it is right; `correctness`, verl's removed
# Gsm8kTool's `reward=1.0/0.0`, which lets a policy guess through the tool until it says 1.0.
REVEALS = ("parsed", "correctness")


def score_final_answer(answer: str, ground_truth: str, method: str = "strict") -> float:
    """What the final reward gives a response that ends `#### <answer>`: verl's own gsm8k scorer on exactly that
    text, in the job's mode. "strict" (verl's default): the number right after `#### `, `-` and digits with
    `.`/`,`, commas dropped, compared as a string, so "$18", "= 18" and " 18" score 0 here because `#### $18`,
    `#### = 18` and `####  18` score 0 there; "18 dollars" scores 1 in both. "flexible": the last number in the
    text. No extraction of our own."""
    return float(gsm8k.compute_score(f"#### {answer}", ground_truth, method=method, format_score=0.0, score=1.0))


def parsed_answer(answer: str, method: str = "strict") -> Optional[str]:
    """The string verl's scorer would compare with the ground truth for a response ending `#### <answer>`."""
    return gsm8k.extract_solution(f"#### {answer}", method=method)


class Gsm8kRewardTool(BaseTool):
    """`calc_gsm8k_reward(answer)`: checks an answer against the row's ground truth exactly as the final reward
    scores a response ending `#### <answer>` (score_final_answer), and tells the model only what `reveal` allows.
    The ground truth arrives per trajectory through the dataset's
    `extra_info.tools_kwargs.calc_gsm8k_reward.create_kwargs.ground_truth`.

    config keys: `reveal` (REVEALS), `max_calls` (calls one trajectory may make; later calls are refused, not
    scored), `gsm8k_method` (the final reward's mode), `metrics` (ToolStats), and `scorer` on a task GSM8K's scorer
    does not score ({data_source, task_reward}): the answer, as the model will write its final answer, is then scored
    by the job's reward (verl_ack_reward.task_score: verl's scorer by data_source, or the researcher's function),
    and only `reveal: correctness` applies. The tool reward (a penalty for a wrong answer) goes to the trajectory's
    reward, never into the model's context."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema):
        super().__init__(config, tool_schema)
        self._instances: dict[str, dict[str, Any]] = {}
        self.reveal = str(config.get("reveal", "parsed"))
        self.max_calls = int(config.get("max_calls", 1))
        self.method = str(config.get("gsm8k_method", "strict"))
        self.scorer = config.get("scorer")
        if self.scorer is not None and self.reveal != "correctness":
            raise ValueError(f"{self.name}: a task scorer ({self.scorer}) can only say whether an answer is right: "
                             "reveal must be correctness")
        if self.reveal not in REVEALS or self.method not in GSM8K_METHODS or self.max_calls < 1:
            raise ValueError(f"{self.name}: reveal must be one of {REVEALS}, gsm8k_method one of {GSM8K_METHODS} and "
                             f"max_calls >= 1 (got {self.reveal!r}, {self.method!r}, {self.max_calls})")
        STATS.configure(config.get("metrics"))

    async def create(self, instance_id: Optional[str] = None, create_kwargs: Optional[dict] = None,
                     **kwargs) -> tuple[str, ToolResponse]:
        instance_id = instance_id or uuid4().hex
        ground_truth = (create_kwargs or {}).get("ground_truth", kwargs.get("ground_truth"))
        self._instances[instance_id] = {"ground_truth": None if ground_truth is None else str(ground_truth)}
        return instance_id, ToolResponse()

    def _count_call(self, agent_data: Any) -> int:
        """This trajectory's calls of this tool so far, this one included. verl creates a new instance for every
        call, so the count lives on the trajectory's AgentData (ToolAgentLoop keeps its own per-trajectory
        attributes there too); without one (a direct call) every call is the first."""
        if agent_data is None:
            return 1
        counts = getattr(agent_data, "_verl_ack_tool_calls", None)
        if counts is None:
            counts = {}
            agent_data._verl_ack_tool_calls = counts
        counts[self.name] = counts.get(self.name, 0) + 1
        return counts[self.name]

    def message(self, answer: str, reward: float) -> str:
        """What the model reads back: never more than `reveal` allows."""
        if self.reveal == "correctness":
            return f"Current parsed answer={answer!r} reward={reward}"
        parsed = parsed_answer(answer, self.method)
        if parsed is None:
            return (f"The final reward would find no answer in '#### {answer}': write the number right after "
                    "'#### ' (digits, optionally '-', '.' and ',').")
        return f"The final reward would read your answer as {parsed!r}. It scores only what you write yourself."

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        started = time.monotonic()
        # Not stripped: "####  18" (two spaces) fails the final reward, so " 18" must fail here too.
        answer = str(parameters.get("answer", ""))
        ground_truth = self._instances.get(instance_id, {}).get("ground_truth")
        if self._count_call(kwargs.get("agent_data")) > self.max_calls:
            STATS.record(self.name, "over_limit", time.monotonic() - started)
            return ToolResponse(text=f"error: {self.name} may be called at most {self.max_calls} time(s) per question; "
                                     "this call was not checked. Write your final answer as '#### <number>'."), 0.0, {}
        if ground_truth is None:
            STATS.record(self.name, "unscored", time.monotonic() - started)
            return ToolResponse(text="No ground truth is known for this question; the answer was not scored."), 0.0, {}
        reward = self._score(answer, ground_truth)
        STATS.record(self.name, "correct" if reward > 0 else "wrong", time.monotonic() - started)
        tool_reward = 0.0 if reward > 0 else WRONG_ANSWER_PENALTY
        return ToolResponse(text=self.message(answer, reward)), tool_reward, {"reward": reward}

    async def release(self, instance_id: str, **kwargs) -> None:
        self._instances.pop(instance_id, None)

    def _score(self, answer: str, ground_truth: str) -> float:
        """GSM8K's `#### <answer>` reading, or the task's own scorer on the answer as written."""
        if self.scorer is None:
            return score_final_answer(answer, ground_truth, self.method)
        from verl_ack_reward import task_score  # beside this file in the ConfigMap

        return task_score(str(self.scorer.get("data_source") or ""), answer, ground_truth, None, self.method,
                          self.scorer.get("task_reward"), None)


# What fastmcp 2.14.7 / mcp 1.30.0 raise on this path, by message (the exception types alone do not tell an outage
# from a server whose result no longer matches its schema: both are RuntimeError). Observed with a real fastmcp
# client against a stopped, a hanging and a mismatching server (docs/facts.md, "Tool error kinds").
_KINDS = (
    ("RuntimeError", "Client failed to connect", "unreachable"),      # refused, DNS, or the handshake timed out
    ("McpError", "Timed out while waiting for response", "timeout"),  # the call outlived the client's timeout
    ("RuntimeError", "Invalid structured content returned by tool", "schema_mismatch"),
    ("RuntimeError", "has an output schema but did not return structured content", "schema_mismatch"),
    ("RuntimeError", "Invalid schema for tool", "schema_mismatch"),
    ("HTTPStatusError", "401", "auth"),
    ("HTTPStatusError", "403", "auth"),
)


def failure_kind(e: BaseException) -> str:
    """`<exception type>/<what it means>` for the log line, e.g. `RuntimeError/unreachable` (an outage) versus
    `RuntimeError/schema_mismatch` (the manager's result no longer matches its declared output schema); the bare
    type name when the message is not one of the known ones."""
    name, text = type(e).__name__, str(e)
    meaning = next((m for t, needle, m in _KINDS if t == name and needle in text), None)
    return f"{name}/{meaning}" if meaning else name


def _root_cause(e: Exception) -> Exception:
    """The one exception inside anyio's "unhandled errors in a TaskGroup (1 sub-exception)" wrappers, which the
    MCP client's transports raise around the real cause."""
    while isinstance(getattr(e, "exceptions", None), tuple) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e


def _client_class():
    # Imported on first use: the driver and the dataset loader build this tool only to read its schema and
    # never call it, and fastmcp comes from the job's pip install.
    from fastmcp import Client

    return Client


class SandboxCodeTool(BaseTool):
    """Runs the model's code in a fresh sandbox through the sandbox manager's MCP tool (`run_code_once`:
    claim a warm sandbox, execute, delete it).

    config keys:
      mcp_servers_config_path  JSON file {"mcpServers": {<name>: {url, transport, headers}}} (a mounted Secret)
      mcp_tool                 MCP tool to call (default: this tool's own name)
      timeout_seconds          the code's time limit (the server enforces it via X-Execution-Timeout); the
                               client waits that long plus CLIENT_GRACE_SECONDS for the answer, and bounds
                               connecting and the MCP handshake too, so a stuck manager cannot hold a
                               trajectory for httpx's 5-minute read timeout
      max_concurrency          calls one agent-loop worker runs at once (each holds a warm sandbox)
      max_response_chars       the text is clipped (head and tail) to this; equal to verl's
                               multi_turn.max_tool_response_length, so verl never cuts it in the middle
      metrics                  ToolStats settings (interval_seconds, mlflow_experiment, mlflow_parent_run)
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema):
        super().__init__(config, tool_schema)
        with open(config["mcp_servers_config_path"], encoding="utf-8") as f:
            self._servers = json.load(f)
        if len(self._servers.get("mcpServers") or {}) != 1:
            # With one server fastmcp does not prefix tool names, so `mcp_tool` is the server's own name.
            raise ValueError(f"{config['mcp_servers_config_path']} must define exactly one MCP server")
        self._mcp_tool = config.get("mcp_tool") or self.name
        # The sandbox stops the code at timeout_seconds; the grace covers claiming a sandbox and the reply.
        self._timeout = float(config.get("timeout_seconds", 120)) + CLIENT_GRACE_SECONDS
        self._slots = asyncio.Semaphore(int(config.get("max_concurrency", 8)))
        self._max_chars = int(config.get("max_response_chars", DEFAULT_MAX_RESPONSE_CHARS))
        STATS.configure(config.get("metrics"))

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        arguments = {k: v for k, v in parameters.items() if k in ("code", "language")}
        if not isinstance(arguments.get("code"), str) or not arguments["code"].strip():
            STATS.record(self.name, "refused", 0.0)
            return ToolResponse(text="error: `code` must be a non-empty string"), 0.0, {"mcp_error": True}
        client_cls = _client_class()
        async with self._slots:
            started = time.monotonic()
            try:
                # A new session per call: run_code_once needs no session state, and the server binds a sandbox
                # to a session, so sharing one would keep a sandbox busy between unrelated calls.
                async with client_cls(self._servers, timeout=self._timeout,
                                      init_timeout=CLIENT_GRACE_SECONDS) as client:
                    result = await client.call_tool_mcp(self._mcp_tool, arguments, timeout=self._timeout)
            except Exception as e:
                # Connection refused, a handshake or read timeout, a JSON-RPC error (e.g. -32001 auth failed), or a
                # result the MCP client rejects against the tool's output schema. Caught here rather than by verl
                # (which would log one WARNING per call and nothing else) so it is counted.
                e = _root_cause(e)
                STATS.record(self.name, "failed", time.monotonic() - started, e)
                text = f"error: {self._mcp_tool} failed before returning a result ({type(e).__name__}: {e})"
                return ToolResponse(text=clip_text(text, self._max_chars)), 0.0, {"mcp_error": True}
            seconds = time.monotonic() - started
        is_error = bool(getattr(result, "isError", False))
        text, raised = render_result(result)
        if is_error:
            STATS.record(self.name, "failed", seconds, text)
        else:
            STATS.record(self.name, "code_error" if raised else "ok", seconds)
        return ToolResponse(text=clip_text(text, self._max_chars)), 0.0, {"mcp_error": is_error}
