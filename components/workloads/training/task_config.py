"""The researcher's task in the job's verl configuration (components/config/task.py): what the reward function is
handed (its file or the sandbox reward), which agent loops the rows may run, the researcher's tools and the files the
ConfigMap ships for them."""

from __future__ import annotations

from typing import Any, Optional

from components.config import Settings
from components.config.task import OwnTool, resolve_task_path
from components.wiring import task_tools
from components.workloads.training.config_names import (
    AGENT_LOOP_CLASS,
    CODE_TOOL,
    CONFIG_DIR,
    GSM8K_TOOL,
    MCP_DIR,
    MCP_FILE,
    SANDBOX_REWARD_FILE,
    SANDBOX_REWARD_SOURCE,
    SINGLE_TURN_AGENT_NAME,
    SINGLE_TURN_LOOP_CLASS,
    TASK_FUNCTIONS_FILE,
    TASK_REWARD_FILE,
    TASK_TOOL_MODULE,
    TOOL_AGENT_NAME,
    TOOL_METRICS_INTERVAL_SECONDS,
    TOOLS_MODULE,
)


def reward_kwargs(s: Settings) -> dict:
    """What verl passes the job's reward function (agent_tools/verl_ack_reward.py compute_score): the GSM8K mode,
    and the task's own function (by its ConfigMap path) or the sandbox reward's MCP settings."""
    out: dict[str, Any] = {"gsm8k_method": s.training.gsm8k_scoring}
    task, kind = s.task, s.task.reward_kind
    if kind == "file":
        out["task_reward"] = {"path": f"{CONFIG_DIR}/{TASK_REWARD_FILE}", "function": task.reward.function,
                              "kwargs": dict(task.reward.kwargs)}
    elif kind == "sandbox":
        out["sandbox"] = sandbox_reward_config(s)
    return out


def sandbox_reward_config(s: Settings) -> dict:
    """The sandbox reward's call: the code tool's MCP server and tool, the code's time limit."""
    return {"mcp_servers_config_path": f"{MCP_DIR}/{MCP_FILE}", "mcp_tool": CODE_TOOL,
            "timeout_seconds": s.training.tool_timeout_seconds,
            # Each call holds a warm sandbox: a reward worker takes the code tool's share of the pool.
            "max_concurrency": sandbox_share(s)}


def sandbox_share(s: Settings) -> int:
    """Sandbox calls one worker process may have in flight: the warm pool spread over the agent-loop workers, so
    the job cannot claim more sandboxes than the pool may hold (the code tool's and the sandbox reward's bound)."""
    return max(1, s.sandbox.pool_cap // s.training.agent_num_workers)


def rows_may_be_single_turn(s: Settings) -> bool:
    """Whether any row may run verl's single-turn loop: every row of a preset with tools names the tool agent
    (pipeline/); a task without tools, or the researcher's own files, may have single-turn rows."""
    return not task_tools(s) or s.task.dataset.own_files


def own_tools(s: Settings) -> list[tuple[int, OwnTool]]:
    """The researcher's BaseTool classes with their ConfigMap module index (function-tool files are separate)."""
    return [(i, t) for i, t in enumerate(task_tools(s)) if isinstance(t, OwnTool) and t.class_name]


def function_tools_file(s: Settings) -> Optional[OwnTool]:
    """The researcher's @function_tool file (verl reads one: multi_turn.function_tool_path)."""
    files = [t for t in task_tools(s) if isinstance(t, OwnTool) and not t.class_name]
    return files[0] if files else None


def task_files(s: Settings) -> dict[str, str]:
    """The task's own code in the ConfigMap: the reward file, the sandbox reward, the researcher's tools. Their content
    is in the ConfigMap's hash, which the RayJob carries, so a changed file replaces the job."""
    task, files = s.task, {}
    if task.reward_kind == "file":
        files[TASK_REWARD_FILE] = resolve_task_path(task.reward.file).read_text(encoding="utf-8")
    elif task.reward_kind == "sandbox":
        files[SANDBOX_REWARD_FILE] = SANDBOX_REWARD_SOURCE.read_text(encoding="utf-8")
    for index, own in own_tools(s):
        files[f"{TASK_TOOL_MODULE.format(index=index)}.py"] = resolve_task_path(own.file).read_text(encoding="utf-8")
    functions = function_tools_file(s)
    if functions is not None:
        files[TASK_FUNCTIONS_FILE] = resolve_task_path(functions.file).read_text(encoding="utf-8")
    return files


def tool_metrics_config(s: Settings) -> dict:
    """Where the tools report their calls (verl_ack_tools.ToolStats): always a log line per interval; MLflow too
    when the job has a tracking server, in the trainer's experiment and nested under its run."""
    doc: dict = {"interval_seconds": TOOL_METRICS_INTERVAL_SECONDS}
    if s.tracking.enabled:
        doc["mlflow_experiment"] = s.training.project_name
        doc["mlflow_parent_run"] = s.training.experiment_name
    return doc


# What the model is told the answer tool does, per `training.answer_tool.reveal` (the tool's replies say the same).
ANSWER_TOOL_DESCRIPTIONS = {
    "parsed": "Shows how the final reward will read your answer (the number it takes from `#### <answer>`), not "
              "whether it is correct. At most {n} call(s) per question.",
    "correctness": "A tool for calculating the reward of gsm8k. (1.0 if parsed answer is correct, 0.0 if parsed "
                   "answer is incorrect or not correctly parsed). At most {n} call(s) per question.",
}


def agent_loops_config(s: Optional[Settings] = None) -> list[dict]:
    """`rollout.agent.agent_loop_config_path`: the job's agent loops under verl's own names, so the reward scores
    only model-generated text (verl_ack_agent_loop.py): the tool loop, and the single-turn loop wherever a row may
    run it."""
    loops = [{"name": TOOL_AGENT_NAME, "_target_": AGENT_LOOP_CLASS}]
    if s is not None and rows_may_be_single_turn(s):
        loops.append({"name": SINGLE_TURN_AGENT_NAME, "_target_": SINGLE_TURN_LOOP_CLASS})
    return loops


def tool_config(s: Settings) -> dict:
    """The `tools:` file verl's tool registry reads (`multi_turn.tool_config_path`)."""
    metrics = tool_metrics_config(s)
    answer_tool = s.training.answer_tool
    chosen = task_tools(s)
    tools: list[dict] = []
    if "answer" in chosen:
        tools.append(_answer_tool(s, metrics, answer_tool))
    if "code" in chosen:
        tools.append(_code_tool(s, metrics))
    for index, own in own_tools(s):
        entry: dict = {"class_name": f"{TASK_TOOL_MODULE.format(index=index)}.{own.class_name}",
                       "config": {"type": "native", **own.config}}
        if own.tool_schema is not None:
            entry["tool_schema"] = own.tool_schema
        tools.append(entry)
    return {"tools": tools}


# The answer tool on a task GSM8K's scorer does not score: it checks the answer, written as the final answer will be,
# with the task's own scorer (agent_tools/verl_ack_tools.py Gsm8kRewardTool `scorer`). Only `reveal: correctness`
# (components/config/task.py): "how the reward reads your answer" is GSM8K's `#### ` reading and has no general form.
TASK_ANSWER_DESCRIPTION = ("Checks an answer, written exactly as you will write your final answer, with this task's "
                           "reward (1.0 if it is right, 0.0 if not). At most {n} call(s) per question.")


def answer_scorer(s: Settings) -> Optional[dict]:
    """What the answer tool scores with when the task is not GSM8K's: the task's data_source (verl's scorer) and, for
    a reward file, the function the job's reward loads; None for GSM8K (the tool's own `#### ` reading)."""
    preset = s.task.preset
    if preset is not None and preset.data_source == "openai/gsm8k" and s.task.reward_kind == "builtin":
        return None
    kwargs = reward_kwargs(s)
    return {"data_source": preset.data_source if preset else None, "task_reward": kwargs.get("task_reward")}


def _answer_tool(s: Settings, metrics: dict, answer_tool: Any) -> dict:
    scorer = answer_scorer(s)
    description = (ANSWER_TOOL_DESCRIPTIONS[answer_tool.reveal] if scorer is None else TASK_ANSWER_DESCRIPTION)
    return {
        "class_name": f"{TOOLS_MODULE}.Gsm8kRewardTool",
        "config": {"type": "native", "reveal": answer_tool.reveal, "max_calls": answer_tool.max_calls,
                   "gsm8k_method": s.training.gsm8k_scoring, "metrics": metrics,
                   **({"scorer": scorer} if scorer is not None else {})},
        "tool_schema": {
            "type": "function",
            "function": {
                "name": GSM8K_TOOL,
                "description": description.format(n=answer_tool.max_calls),
                "parameters": {
                    "type": "object",
                    "properties": {"answer": {
                        "type": "string",
                        "description": "The model's answer to the GSM8K math problem, must be a digits" if scorer is None
                        else "Your answer, written exactly as in your final answer."}},
                    "required": ["answer"],
                },
            },
        },
    }


def _code_tool(s: Settings, metrics: dict) -> dict:
    return {
        "class_name": f"{TOOLS_MODULE}.SandboxCodeTool",
        "config": {
            "type": "native",
            "mcp_servers_config_path": f"{MCP_DIR}/{MCP_FILE}",
            "mcp_tool": CODE_TOOL,
            "timeout_seconds": s.training.tool_timeout_seconds,
            # Every in-flight call holds one warm sandbox: spread the pool over the agent-loop workers so
            # the job cannot claim more sandboxes than the pool may hold.
            "max_concurrency": sandbox_share(s),
            # Clipped by the tool (head and tail) to exactly verl's limit, so verl never cuts it mid-line.
            "max_response_chars": s.training.max_tool_response_chars,
            "metrics": metrics,
        },
        "tool_schema": {
            "type": "function",
            "function": {
                "name": CODE_TOOL,
                "description": "Run a piece of code once in a fresh, isolated sandbox and return what it printed "
                               "(stdout, stderr), its result values and any error.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "description": "The complete program to run."},
                        "language": {"type": "string", "enum": ["python", "javascript"],
                                     "description": "Language of the code; python when omitted."},
                    },
                    "required": ["code"],
                },
            },
        },
    }
