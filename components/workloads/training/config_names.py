"""Names and paths of the job's verl configuration: the ConfigMap's files and where the Ray pods mount them, the
agent loops, tools and MCP names (one declaration; verl_config.py and task_config.py build the files from them)."""

from __future__ import annotations

from components.config import REPO_ROOT

CONFIG_DIR = "/etc/verl-ack/config"  # the ConfigMap mount in every Ray pod (also on PYTHONPATH)
MCP_DIR = "/etc/verl-ack/mcp"  # the MCP servers Secret mount
TRAINER_CONFIG_NAME = "verl_ack_trainer"
TRAINER_FILE = f"{TRAINER_CONFIG_NAME}.yaml"
TOOL_CONFIG_FILE = "tool_config.yaml"
TOOLS_MODULE = "verl_ack_tools"
TOOLS_MODULE_FILE = f"{TOOLS_MODULE}.py"
TOOLS_SOURCE = REPO_ROOT / "agent_tools" / TOOLS_MODULE_FILE
REWARD_MODULE_FILE = "verl_ack_reward.py"
REWARD_SOURCE = REPO_ROOT / "agent_tools" / REWARD_MODULE_FILE
REWARD_FUNCTION = "compute_score"
AGENT_LOOP_MODULE_FILE = "verl_ack_agent_loop.py"
AGENT_LOOP_SOURCE = REPO_ROOT / "agent_tools" / AGENT_LOOP_MODULE_FILE
AGENT_LOOP_CLASS = "verl_ack_agent_loop.ModelTextToolAgentLoop"
SINGLE_TURN_LOOP_CLASS = "verl_ack_agent_loop.ModelTextSingleTurnAgentLoop"
AGENT_LOOPS_FILE = "agent_loops.yaml"
# The dataset rows' agent_name (pipeline/gsm8k.py); the agent-loop file registers the job's loop under it.
TOOL_AGENT_NAME = "tool_agent"
SINGLE_TURN_AGENT_NAME = "single_turn_agent"  # verl's default_agent_loop, and the name single-turn rows carry
# The task's own files in the ConfigMap (components/config/task.py): module names on the pods' PYTHONPATH.
TASK_REWARD_FILE = "verl_ack_task_reward.py"
TASK_TOOL_MODULE = "verl_ack_task_tool_{index}"
TASK_FUNCTIONS_FILE = "verl_ack_task_functions.py"
SANDBOX_REWARD_FILE = "verl_ack_sandbox_reward.py"
SANDBOX_REWARD_SOURCE = REPO_ROOT / "agent_tools" / SANDBOX_REWARD_FILE
ENTRYPOINT_MODULE_FILE = "verl_ack_entrypoint.py"
ENTRYPOINT_SOURCE = REPO_ROOT / "agent_tools" / ENTRYPOINT_MODULE_FILE
# agent_tools/verl_ack_entrypoint.py STOP_GRACE_SECONDS (a test compares them): how long the entrypoint lets a
# stopped verl exit before it kills it and ends the runs.
STOP_GRACE_SECONDS = 15
REFUSALS_DIR = ".verl-ack-refusals"  # under trainer.default_local_dir; the entrypoint removes its own file
PREFLIGHT_MODULE = "verl_ack_preflight"
PREFLIGHT_MODULE_FILE = f"{PREFLIGHT_MODULE}.py"
PREFLIGHT_SOURCE = REPO_ROOT / "agent_tools" / PREFLIGHT_MODULE_FILE
PREFLIGHT_RESULT = "/tmp/verl-ack-preflight.json"  # noqa: S108 (inside the head pod, read from its logs)
# nvidia-smi's memory.total is the card's memory less what the driver keeps (an "80 GB" card reports about 79.6 GiB,
# the H200 140.4 GiB: docs/preflight.md), so a GPU passes with 97 % of gpu_pool.gpu_memory_gib.
PREFLIGHT_MEMORY_TOLERANCE = 0.97
# training.preflight.min_busbw_gbps when empty: a floor under any working RDMA fabric, above NCCL's socket fallback
# (UNVERIFIED on Lingjun: docs/uncertain-facts.md); ECS nodes' VPC network varies by instance type, so none there.
PREFLIGHT_RDMA_MIN_BUSBW_GBPS = 20.0


# How often each agent-loop worker reports its tool calls (log line and MLflow); see ToolStats.
TOOL_METRICS_INTERVAL_SECONDS = 60
MCP_FILE = "mcp_servers.json"
MCP_SERVER_NAME = "kruise-sandbox"
VERL_CONFIG_SEARCHPATH = "pkg://verl.trainer.config"
GSM8K_TOOL = "calc_gsm8k_reward"  # the dataset rows' tools_kwargs are keyed by this name
CODE_TOOL = "run_code_once"  # the sandbox manager's MCP tool: fresh sandbox per call
