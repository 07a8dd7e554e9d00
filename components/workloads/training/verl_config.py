"""verl's configuration as files and a command line, from the settings (pure functions).

- The trainer config `verl_ack_trainer.yaml` extends verl's own `ppo_trainer` (Hydra `defaults:
  [ppo_trainer, _self_]`, as verl's examples/sglang_multiturn/config/gsm8k_multiturn_grpo.yaml does) and holds
  only what never varies between stacks. `--config-path` replaces the primary config directory of
  `verl.trainer.main_ppo`, so the file adds verl's installed config tree back through
  `hydra.searchpath: pkg://verl.trainer.config` (the tutorial's `file://verl/trainer/config` only resolves from
  a source checkout as working directory).
- Everything that depends on the settings is a Hydra override on the command line (`hydra_overrides`), so the
  command line the plan shows is the complete difference from verl's defaults. Each override is rendered into
  one shell-safe word (`render_override`): the entrypoint is parsed by the submitter's bash and again by the
  Ray job manager's shell.
- The tool config names the two tools of `agent_tools/verl_ack_tools.py` (verl 0.9.1 ships no gsm8k or MCP
  tool any more; see that module), and `agent_tools/verl_ack_reward.py` is the reward function that adds their
  tool rewards to the trajectory's reward (verl's default one ignores them). The MCP servers file carries the
  sandbox API key and therefore goes into a Secret, never the ConfigMap.
- Only keys verl 0.9.1's default trainer (`trainer.use_v1`, mode `sync`) reads are written. Not written, because
  it reads them nowhere or reads and drops them: `actor_rollout_ref.hybrid_engine` and
  `rollout.multi_turn.enable` (read only by the legacy `ray_trainer.py` and the async trainers),
  `rollout.trace.*` (`AgentLoopWorkerTQ.generate_sequences` sets `trace_this_sample = False`, "TODO: add trace
  support"), `data.return_raw_chat` and `data.truncation` (`RLHFDataset.__init__` stores them and never uses
  them; `raw_prompt` is always returned).

Keys were checked against verl 0.9.1's config tree (tests compose the file plus every override with Hydra in
struct mode against the installed tree, so a renamed key fails the tests).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Optional

import yaml

from components.config import Settings
from components.model.layout import Layout, model_prefetch_gib
from components.model.presets import preset_of
from components.wiring import mcp_url, set_dotted
from components.workloads.training.config_names import (  # noqa: F401 (re-exported: tests and reports read them here)
    AGENT_LOOP_CLASS,
    AGENT_LOOP_MODULE_FILE,
    AGENT_LOOP_SOURCE,
    AGENT_LOOPS_FILE,
    CODE_TOOL,
    CONFIG_DIR,
    ENTRYPOINT_MODULE_FILE,
    ENTRYPOINT_SOURCE,
    GSM8K_TOOL,
    MCP_DIR,
    MCP_FILE,
    MCP_SERVER_NAME,
    PREFLIGHT_MEMORY_TOLERANCE,
    PREFLIGHT_MODULE,
    PREFLIGHT_MODULE_FILE,
    PREFLIGHT_RDMA_MIN_BUSBW_GBPS,
    PREFLIGHT_RESULT,
    PREFLIGHT_SOURCE,
    REFUSALS_DIR,
    REWARD_FUNCTION,
    REWARD_MODULE_FILE,
    REWARD_SOURCE,
    SANDBOX_REWARD_FILE,
    SANDBOX_REWARD_SOURCE,
    SINGLE_TURN_AGENT_NAME,
    SINGLE_TURN_LOOP_CLASS,
    STOP_GRACE_SECONDS,
    TASK_FUNCTIONS_FILE,
    TASK_REWARD_FILE,
    TASK_TOOL_MODULE,
    TOOL_AGENT_NAME,
    TOOL_CONFIG_FILE,
    TOOL_METRICS_INTERVAL_SECONDS,
    TOOLS_MODULE,
    TOOLS_MODULE_FILE,
    TOOLS_SOURCE,
    TRAINER_CONFIG_NAME,
    TRAINER_FILE,
    VERL_CONFIG_SEARCHPATH,
)
from components.workloads.training.prefetch import (
    PREFETCH_MODULE_FILE,
    PREFETCH_SOURCE,
    model_read_dir,
    prefetch_wait_words,
)
from components.workloads.training.runs import node_wait_words, record_words, run_start_overrides
from components.workloads.training.task_config import (  # noqa: F401 (re-exported)
    ANSWER_TOOL_DESCRIPTIONS,
    agent_loops_config,
    function_tools_file,
    own_tools,
    reward_kwargs,
    rows_may_be_single_turn,
    task_files,
    tool_config,
    tool_metrics_config,
)
from components.workloads.training.verl_recipes import recipe_list_overrides, recipe_overrides, user_overrides
from components.workloads.training.volumes import checkpoint_dir, dataset_paths


def preflight_min_busbw_gbps(s: Settings) -> float:
    given = s.training.preflight.min_busbw_gbps
    if given is not None:
        return given
    return PREFLIGHT_RDMA_MIN_BUSBW_GBPS if s.gpu_pool.kind == "lingjun" else 0.0


class OverrideError(ValueError):
    """A Hydra override that would not survive the two shells of the RayJob entrypoint or Hydra's parser."""


# --------------------------------------------------------------------------------------------- trainer file
def chat_template_kwargs(s: Settings) -> dict:
    """verl's `data.apply_chat_template_kwargs`: the thinking switch of a family whose chat template has one. Both
    halves of a rollout read this one key (verl 0.9.1 utils/dataset/rl_dataset.py renders the prompts with it,
    and filters overlong ones by that length; experimental/agent_loop/agent_loop.py renders every turn of the
    rollout with it), so the dataset's prompt and the rollout cannot disagree on the mode."""
    if not preset_of(s).family.thinking:
        return {}
    return {"enable_thinking": bool(s.model.thinking)}


def list_overrides(s: Settings) -> list[tuple[str, Any]]:
    """The list- and mapping-valued verl keys. They live in the trainer file, not on the command line: `k=[a,b]` is
    a glob pattern in the two shells the entrypoint passes (the submitter's bash, then Ray's job manager, which runs
    the entrypoint with shell=True after re-joining its words), and no single quoting survives both; a key inside
    verl's empty `apply_chat_template_kwargs` would need Hydra's `+`, which the command line never uses."""
    t = s.training
    out: list[tuple[str, Any]] = [
        # A mapping verl's reward config does not declare (custom_reward_function has only path and name), so it
        # cannot be a plain command-line override; verl passes it to the reward function as keyword arguments.
        ("reward.custom_reward_function.reward_kwargs", reward_kwargs(s)),
        ("actor_rollout_ref.actor.checkpoint.save_contents", list(t.save_contents)),
        # verl defaults load_contents to save_contents; hf_model is an export for serving, not resume state.
        ("actor_rollout_ref.actor.checkpoint.load_contents", [c for c in t.save_contents if c != "hf_model"]),
        ("trainer.logger", list(t.logger)),
    ]
    kwargs = chat_template_kwargs(s)
    if kwargs:
        out.append(("data.apply_chat_template_kwargs", kwargs))
    return out + recipe_list_overrides(s)


def trainer_config(s: Optional[Settings] = None) -> dict:
    """The trainer file: what every job shares plus, given settings, the list-valued keys (`list_overrides`);
    the command line carries every other setting-dependent key."""
    doc = _static_trainer_config()
    for key, value in list_overrides(s) if s is not None else []:
        set_dotted(doc, key, value)
    return doc


def _static_trainer_config() -> dict:
    return {
        "hydra": {"searchpath": [VERL_CONFIG_SEARCHPATH]},
        "defaults": ["ppo_trainer", "_self_"],
        # Drop prompts longer than data.max_prompt_length (tools included) instead of failing a batch.
        "data": {"filter_overlong_prompts": True},
        "actor_rollout_ref": {
            # Required by Ulysses sequence parallelism; cheaper attention for the rest.
            "model": {"use_remove_padding": True, "enable_gradient_checkpointing": True},
            "rollout": {
                # Greedy validation: comparable scores across runs, and no temperature rule to satisfy. The v1
                # agent loop reads only val_kwargs.temperature/top_p/top_k (trainer/ppo/v1/agent_loop_tq.py), so
                # temperature 0 is what makes it greedy; val_kwargs.do_sample is read only by the legacy trainer.
                "val_kwargs": {"temperature": 0},
            },
        },
        "trainer": {
            # Resume from the newest global_step_* under default_local_dir when a job is retried or rerun.
            "resume_mode": "auto",
            "critic_warmup": 0,
        },
    }


def _yaml(doc: dict, header: str) -> str:
    lines = "".join(f"# {line}\n" if line else "#\n" for line in header.strip().splitlines())
    return lines + yaml.safe_dump(doc, sort_keys=False, width=120)


def _yaml_list(doc: list, header: str) -> str:
    lines = "".join(f"# {line}\n" if line else "#\n" for line in header.strip().splitlines())
    return lines + yaml.safe_dump(doc, sort_keys=False, width=120)


def trainer_config_yaml(s: Optional[Settings] = None) -> str:
    return _yaml(trainer_config(s), """
verl trainer config, generated by verl-ack (components/workloads/training/verl_config.py); do not edit it in
the cluster.
Extends verl's ppo_trainer from the installed package. The list-valued settings are here; the RayJob's command
line adds every other setting-dependent key as a Hydra override.""")


# --------------------------------------------------------------------------------------------- tools
def tool_config_yaml(s: Settings) -> str:
    return _yaml(tool_config(s), """
verl tool config, generated by verl-ack (components/workloads/training/verl_config.py). The classes live in
verl_ack_tools.py next to this file; the MCP servers file (with the API key) is mounted from a Secret.""")


def mcp_servers_document(s: Settings, api_key: Any, url: Any = None) -> dict:
    """fastmcp's `{"mcpServers": {...}}` for the sandbox manager. `api_key` is normally a secret Output; the
    component serialises this with Output.json_dumps, so the key stays secret.

    No `auth_token`: it would switch to SSE with a Bearer header. The sandbox manager speaks Streamable HTTP and
    reads the key from `E2B-API-KEY` (final revision of openkruise/agents#165) or `X-API-KEY` (earlier
    revisions), so both are sent. `X-Template` is the SandboxSet run_code_once claims from.
    `X-Execution-Timeout` (seconds; the server's default is 60) makes the sandbox stop the code at the tool
    timeout the stack states, so a longer `training.tool_timeout_seconds` is not cut off at 60 s."""
    return {"mcpServers": {MCP_SERVER_NAME: {
        # An experiment stack passes the URL its platform exports (an Output); otherwise the settings imply it.
        "url": mcp_url(s) if url is None else url,
        "transport": "http",
        "headers": {"E2B-API-KEY": api_key, "X-API-KEY": api_key, "X-Template": s.sandbox.template_name,
                    "X-Execution-Timeout": str(s.training.tool_timeout_seconds)},
    }}}


def preflight_enabled(s: Settings) -> bool:
    p = s.training.preflight
    return p.enabled if p.enabled is not None else s.gpu_pool.nodes > 1


def config_files(s: Settings) -> dict[str, str]:
    """ConfigMap data: the trainer config, the tool config, the tools module, the reward function, the agent loop
    and its registration, the entrypoint program and, when it runs, the fabric preflight (none of it secret)."""
    files = {
        TRAINER_FILE: trainer_config_yaml(s),
        TOOL_CONFIG_FILE: tool_config_yaml(s),
        TOOLS_MODULE_FILE: TOOLS_SOURCE.read_text(encoding="utf-8"),
        REWARD_MODULE_FILE: REWARD_SOURCE.read_text(encoding="utf-8"),
        AGENT_LOOP_MODULE_FILE: AGENT_LOOP_SOURCE.read_text(encoding="utf-8"),
        AGENT_LOOPS_FILE: _yaml_list(agent_loops_config(s), """
verl agent loops, generated by verl-ack (components/workloads/training/verl_config.py): the job's tool agent loop
under verl's name tool_agent (the reward then scores only what the model generated)."""),
        ENTRYPOINT_MODULE_FILE: ENTRYPOINT_SOURCE.read_text(encoding="utf-8"),
    }
    files.update(task_files(s))
    if preflight_enabled(s):
        files[PREFLIGHT_MODULE_FILE] = PREFLIGHT_SOURCE.read_text(encoding="utf-8")
    if model_prefetch_gib(s):
        files[PREFETCH_MODULE_FILE] = PREFETCH_SOURCE.read_text(encoding="utf-8")
    return files


def preflight_words(s: Settings, layout: Layout) -> list[str]:
    """The preflight's command, up to the `--` after which the verl command follows (it execs that on success).
    It runs as the Ray job's driver, one Ray actor per GPU of the job's Ray cluster; the module is imported from the
    ConfigMap mount, which the runtime_env's PYTHONPATH puts first."""
    p = s.training.preflight
    words = ["python3", "-m", PREFLIGHT_MODULE, "--ray", f"--nodes={layout.nodes}",
             f"--gpus-per-node={layout.gpus_per_node}",
             f"--min-gpu-memory-gib={round(s.gpu_pool.gpu_memory_gib * PREFLIGHT_MEMORY_TOLERANCE, 2):g}",
             f"--min-busbw-gbps={preflight_min_busbw_gbps(s):g}", f"--size-mib={p.size_mib}", f"--iters={p.iters}",
             f"--timeout-seconds={p.timeout_seconds}", f"--json={PREFLIGHT_RESULT}"]
    if s.tracking.enabled:
        words += [f"--mlflow-experiment={s.training.project_name}",
                  f"--mlflow-run={s.training.experiment_name}-preflight"]
    return [*words, "--"]


def config_sha256(files: dict[str, str]) -> str:
    """Content hash of the ConfigMap data; the pod templates carry it so a config change replaces the job."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------------------------- overrides
_KEY = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*")
# No spaces, quotes, `$`, globbing `*?`, `~`, `=`, `,`, `:` or braces: safe unquoted in bash and a plain
# primitive for Hydra's override grammar.
_SCALAR = re.compile(r"[A-Za-z0-9_./+-]+")
# Strings Hydra would read as a number, bool or null rather than as the string the setting holds.
_NOT_A_STRING = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|true|false|null|none|[-+]?inf|nan", re.I)


def _scalar(key: str, value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
    elif isinstance(value, str):
        if _NOT_A_STRING.fullmatch(value):
            raise OverrideError(f"{key}={value}: Hydra would read {value!r} as a number/bool/null, not a string; "
                                "choose a value with a letter in it")
        text = value
    else:
        raise OverrideError(f"{key}: cannot render a {type(value).__name__} as a Hydra override value")
    if not _SCALAR.fullmatch(text):
        raise OverrideError(f"{key}={text}: the value may only contain letters, digits and . _ / + - (it passes two "
                            "shells unquoted); change the setting it comes from")
    return text


def render_override(key: str, value: Any) -> str:
    """`key=value` as one shell word Hydra parses back to `value`: a scalar only (lists go into the trainer
    file, see `list_overrides`)."""
    if not _KEY.fullmatch(key):
        raise OverrideError(f"{key!r} is not a plain dotted Hydra key (no +/~ prefixes: every key must exist in "
                            "verl's config)")
    if isinstance(value, (list, tuple)):
        raise OverrideError(f"{key}: a list override is a glob pattern in the entrypoint's shells; put it in the "
                            "trainer file (verl_config.list_overrides)")
    return f"{key}={_scalar(key, value)}"


def tool_path_overrides(s: Settings) -> list[tuple[str, Any]]:
    """Where verl's tool registry reads the task's tools: the tool file when a native tool is offered, the function
    file when the researcher brings @function_tool functions; neither for a single-turn task."""
    out: list[tuple[str, Any]] = []
    if tool_config(s)["tools"]:
        out.append(("actor_rollout_ref.rollout.multi_turn.tool_config_path", f"{CONFIG_DIR}/{TOOL_CONFIG_FILE}"))
    if function_tools_file(s) is not None:
        out.append(("actor_rollout_ref.rollout.multi_turn.function_tool_path", f"{CONFIG_DIR}/{TASK_FUNCTIONS_FILE}"))
    return out


def hydra_overrides(s: Settings, layout: Layout) -> list[tuple[str, Any]]:
    """Every setting-dependent verl key, in a stable order (the plan and the snapshot diff on it)."""
    t, L = s.training, layout
    train_files, val_files = dataset_paths(s)
    o: list[tuple[str, Any]] = [
        ("algorithm.adv_estimator", t.algorithm),
        ("algorithm.use_kl_in_reward", t.use_kl_in_reward),
        ("data.train_files", train_files),
        ("data.val_files", val_files),
        ("data.train_batch_size", t.train_batch_size),
        ("data.max_prompt_length", t.max_prompt_length),
        ("data.max_response_length", t.max_response_length),
        ("actor_rollout_ref.model.path", model_read_dir(s)),
        ("actor_rollout_ref.actor.optim.lr", t.lr),
        ("actor_rollout_ref.actor.ppo_mini_batch_size", t.ppo_mini_batch_size),
        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", L.ppo_micro_batch_size_per_gpu),
        ("actor_rollout_ref.actor.use_dynamic_bsz", t.use_dynamic_bsz),
        ("actor_rollout_ref.actor.ppo_max_token_len_per_gpu", t.ppo_max_token_len_per_gpu),
        ("actor_rollout_ref.actor.ulysses_sequence_parallel_size", t.ulysses_sequence_parallel_size),
        ("actor_rollout_ref.actor.use_kl_loss", t.use_kl_loss),
        ("actor_rollout_ref.actor.kl_loss_coef", t.kl_loss_coef),
        ("actor_rollout_ref.actor.kl_loss_type", t.kl_loss_type),
        ("actor_rollout_ref.actor.entropy_coeff", t.entropy_coeff),
        ("actor_rollout_ref.actor.loss_agg_mode", t.loss_agg_mode),
        ("actor_rollout_ref.actor.fsdp_config.param_offload", L.actor_param_offload),
        ("actor_rollout_ref.actor.fsdp_config.optimizer_offload", L.actor_optimizer_offload),
        ("actor_rollout_ref.rollout.name", t.rollout_engine),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size", L.rollout_tp),
        ("actor_rollout_ref.rollout.gpu_memory_utilization", L.gpu_memory_utilization),
        ("actor_rollout_ref.rollout.n", t.rollout_n),
        ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", L.log_prob_micro_batch_size_per_gpu),
        ("actor_rollout_ref.rollout.multi_turn.max_assistant_turns", t.max_assistant_turns),
        ("actor_rollout_ref.rollout.multi_turn.max_parallel_calls", t.max_parallel_calls),
        *tool_path_overrides(s),
        # The tool-call parser of the model family's chat template (verl's ToolParser registry); the template
        # itself is the model's own (tokenizer_config.json), so custom_chat_template stays unset.
        ("actor_rollout_ref.rollout.multi_turn.format", preset_of(s).family.tool_parser),
        # verl cuts longer tool text in the middle (default 256 characters: a traceback loses its middle); the
        # code tool clips its own text to this same limit, keeping head and tail.
        ("actor_rollout_ref.rollout.multi_turn.max_tool_response_length", t.max_tool_response_chars),
        ("actor_rollout_ref.rollout.agent.num_workers", t.agent_num_workers),
        # The job's tool agent loop, registered under verl's name tool_agent: it hands the reward the text the model
        # generated, without the tools' replies (agent_tools/verl_ack_agent_loop.py).
        ("actor_rollout_ref.rollout.agent.agent_loop_config_path", f"{CONFIG_DIR}/{AGENT_LOOPS_FILE}"),
        ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", L.log_prob_micro_batch_size_per_gpu),
        ("actor_rollout_ref.ref.fsdp_config.param_offload", L.ref_param_offload),
        # verl 0.9.1 leaves the reward model's rollout engine mandatory (`???`) even with the reward model off;
        # name the engine the job has so the composed config has no missing value.
        ("reward.reward_model.rollout.name", t.rollout_engine),
        # verl's score of the final answer plus the tool rewards (agent_tools/verl_ack_reward.py); the default
        # reward function ignores tool rewards.
        ("reward.custom_reward_function.path", f"{CONFIG_DIR}/{REWARD_MODULE_FILE}"),
        ("reward.custom_reward_function.name", REWARD_FUNCTION),
        ("trainer.project_name", t.project_name),
        ("trainer.experiment_name", t.experiment_name),
        ("trainer.n_gpus_per_node", L.gpus_per_node),
        ("trainer.nnodes", L.nodes),
        ("trainer.save_freq", t.save_freq),
        ("trainer.test_freq", t.test_freq),
    ]
    if t.total_training_steps is not None:
        o.append(("trainer.total_training_steps", t.total_training_steps))
    o += [
        ("trainer.total_epochs", t.total_epochs),
        # verl reads val_only only inside its val_before_train block (trainer/ppo/v1/trainer_base.py fit).
        ("trainer.val_before_train", t.val_before_train or t.val_only),
        # Absolute, on the shared read-write OSS volume: every actor rank writes its shard there, and a rerun
        # resumes from it (resume_mode=auto). Matches <checkpoints_prefix><project>/<experiment>/ in the bucket.
        ("trainer.default_local_dir", checkpoint_dir(s)),
    ]
    o += run_start_overrides(s)
    if t.max_actor_ckpt_to_keep is not None:
        o.append(("trainer.max_actor_ckpt_to_keep", t.max_actor_ckpt_to_keep))
    return o + recipe_overrides(s, L) + user_overrides(s) + list_overrides(s)


def verl_command(s: Settings, layout: Layout, overrides: Optional[list[tuple[str, Any]]] = None) -> list[str]:
    """verl's PPO main with the ConfigMap's trainer config and every override, behind the fabric preflight when it
    runs (`preflight_words`): plain words only, each one reads the same in any number of shells."""
    pairs = hydra_overrides(s, layout) if overrides is None else overrides
    keys = [k for k, _ in pairs]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise OverrideError(f"duplicate Hydra overrides {dupes}; each key may appear once")
    in_file = {k for k, _ in list_overrides(s)}
    return [*prefetch_wait_words(s, layout), *(preflight_words(s, layout) if preflight_enabled(s) else []),
            "python3", "-m", "verl.trainer.main_ppo", f"--config-path={CONFIG_DIR}",
            f"--config-name={TRAINER_CONFIG_NAME}", *(render_override(k, v) for k, v in pairs if k not in in_file)]


def entrypoint_words(s: Settings, layout: Layout, overrides: Optional[list[tuple[str, Any]]] = None) -> list[str]:
    """The job's one program (agent_tools/verl_ack_entrypoint.py) with `verl_command` as its child: it waits for
    every Ray node with its GPUs (multi-node), gives the job's MLflow runs their ids, runs the preflight and verl,
    ends every run in the state that tells the truth and exits with verl's code. The tool config names the MLflow
    experiment and run when tracking is on."""
    words = ["python3", f"{CONFIG_DIR}/{ENTRYPOINT_MODULE_FILE}", *node_wait_words(s, layout), *record_words(s)]
    if s.tracking.enabled:
        words.append(f"--tool-config={CONFIG_DIR}/{TOOL_CONFIG_FILE}")
    # On the shared checkpoint volume: a reward worker on any node can write the reason it refuses a trajectory.
    words.append(f"--refusal-dir={checkpoint_dir(s)}/{REFUSALS_DIR}")
    return [*words, "--", *verl_command(s, layout, overrides)]


# Plain words: `ray job submit` joins them with subprocess.list2cmdline (Ray <= 2.55) or shlex.join (Ray >= 2.56),
# and both leave such a word exactly as it is.
PLAIN_WORD = re.compile(r"[A-Za-z0-9_./+=:-]+")


def entrypoint(s: Settings, layout: Layout, overrides: Optional[list[tuple[str, Any]]] = None) -> str:
    """The RayJob entrypoint: `entrypoint_words` joined by spaces. Every word is plain (no quote, `;`, `$` or
    space), so KubeRay's submitter shell, either join of `ray job submit` and the job supervisor's shell all pass the
    same words to the program; a word that is not plain is refused here rather than re-quoted."""
    words = entrypoint_words(s, layout, overrides)
    bad = [w for w in words if not PLAIN_WORD.fullmatch(w)]
    if bad:
        raise OverrideError(f"entrypoint words {bad} are not plain (letters, digits and _ . / + = : -): `ray job "
                            "submit` quotes them differently across Ray versions; change the setting they come from")
    return " ".join(words)
