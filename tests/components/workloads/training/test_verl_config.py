"""verl's configuration: the trainer file plus every override composes with Hydra against the INSTALLED
verl 0.9.1 config tree (struct mode, so a renamed key fails), nothing mandatory is left missing, the
overrides survive two shells, and the tool config has the shape verl's tool registry reads."""

from __future__ import annotations

import ast
import copy
import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from components.config import REPO_ROOT
from components.model.layout import resolve_layout
from components.wiring import dataset_files, mcp_url, model_cache_key, task_tools
from components.workloads.training.verl_config import (
    CODE_TOOL,
    CONFIG_DIR,
    GSM8K_TOOL,
    MCP_DIR,
    MCP_FILE,
    REWARD_FUNCTION,
    REWARD_MODULE_FILE,
    REWARD_SOURCE,
    TOOL_CONFIG_FILE,
    TOOLS_MODULE,
    TOOLS_MODULE_FILE,
    TOOLS_SOURCE,
    TRAINER_CONFIG_NAME,
    TRAINER_FILE,
    VERL_CONFIG_SEARCHPATH,
    OverrideError,
    config_files,
    config_sha256,
    entrypoint,
    hydra_overrides,
    list_overrides,
    mcp_servers_document,
    render_override,
    tool_config,
    trainer_config,
    verl_command,
)
from components.workloads.training.volumes import oss_volumes
from tests.components.workloads.training.test_rayjob import SITE, settings_for

VERL = SITE / "verl"


# --------------------------------------------------------------------------------------------- helpers
@pytest.fixture
def verl_config_package(monkeypatch):
    """Make `pkg://verl.trainer.config` resolvable without importing verl (its __init__ needs numpy/torch):
    package modules whose search path is the installed tree, none of their code executed."""
    for name, path in (("verl", VERL), ("verl.trainer", VERL / "trainer"),
                       ("verl.trainer.config", VERL / "trainer" / "config")):
        spec = importlib.util.spec_from_file_location(name, path / "__init__.py",
                                                      submodule_search_locations=[str(path)])
        monkeypatch.setitem(sys.modules, name, importlib.util.module_from_spec(spec))


# Composed configs by (trainer file, overrides): a composition reads only those and the installed verl tree, and
# several tests compose the same stack's (~0.4 s each). Each caller gets its own copy; a failure is never kept.
_composed: dict[tuple[str, ...], object] = {}


def compose_job(tmp_path: Path, s, extra: list[str] = ()):
    """What main_ppo does with the ConfigMap: --config-path=<dir> --config-name=verl_ack_trainer <overrides>."""
    trainer = config_files(s)[TRAINER_FILE]
    (tmp_path / TRAINER_FILE).write_text(trainer)
    words = shlex.split(entrypoint(s, resolve_layout(s)))
    # The verl command: after the entrypoint program's `--` and, when it runs, the preflight's.
    words = words[len(words) - words[::-1].index("--"):]
    assert words[:5] == ["python3", "-m", "verl.trainer.main_ppo", f"--config-path={CONFIG_DIR}",
                         f"--config-name={TRAINER_CONFIG_NAME}"]
    key = (trainer, *words[5:], *extra)
    if key not in _composed:
        with initialize_config_dir(config_dir=str(tmp_path), version_base=None):
            _composed[key] = compose(config_name=TRAINER_CONFIG_NAME, overrides=[*words[5:], *extra])
    return copy.deepcopy(_composed[key])


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------------------- trainer config
def test_trainer_file_extends_verls_own_ppo_trainer_from_the_installed_package():
    doc = trainer_config()
    assert doc["defaults"] == ["ppo_trainer", "_self_"]
    assert doc["hydra"]["searchpath"] == [VERL_CONFIG_SEARCHPATH] == ["pkg://verl.trainer.config"]
    assert (VERL / "trainer" / "config" / "ppo_trainer.yaml").is_file()
    assert yaml.safe_load(config_files(settings_for("dev"))[TRAINER_FILE]) == trainer_config(settings_for("dev"))
    with_lists = trainer_config(settings_for("dev"))
    for key, _ in list_overrides(settings_for("dev")):  # the settings add only the list- and mapping-valued keys
        *parents, leaf = key.split(".")
        nodes = [with_lists]
        for part in parents:
            nodes.append(nodes[-1][part])
        del nodes[-1][leaf]
        for parent, part, node in reversed(list(zip(nodes[:-1], parents, nodes[1:], strict=True))):
            if not node:
                del parent[part]  # a section the settings alone put there
    assert with_lists == doc


def test_every_stack_composes_against_verl_0_9_1_with_no_missing_value(stack_name, tmp_path, verl_config_package):
    s = settings_for(stack_name)
    cfg = compose_job(tmp_path, s)
    assert OmegaConf.is_struct(cfg)
    assert OmegaConf.missing_keys(cfg) == set(), f"stack {stack_name}: mandatory verl keys left `???`"
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    for key, value in hydra_overrides(s, resolve_layout(s)):
        landed = OmegaConf.select(cfg, key, throw_on_missing=True)
        landed = OmegaConf.to_container(landed) if OmegaConf.is_config(landed) else landed
        assert landed == (list(value) if isinstance(value, (list, tuple)) else value), key


def test_a_renamed_or_unknown_key_fails_composition(tmp_path, verl_config_package):
    s = settings_for("dev")
    compose_job(tmp_path, s)  # the baseline composes ...
    with pytest.raises(ConfigCompositionException, match="nnodez"):
        compose_job(tmp_path, s, ["trainer.nnodez=1"])  # ... and one wrong key does not
    with pytest.raises(ConfigCompositionException, match="max_turns"):
        compose_job(tmp_path, s, ["actor_rollout_ref.rollout.multi_turn.max_turns=5"])  # the pre-0.4.1 name


def test_invariants_the_layout_rules_count_on_are_in_the_composed_config(tmp_path, verl_config_package):
    cfg = compose_job(tmp_path, settings_for("dev"))
    aro = cfg.actor_rollout_ref
    assert aro.hybrid_engine is True  # verl's default; the default trainer does not read it (see below)
    assert aro.model.use_remove_padding is True
    assert cfg.trainer.resume_mode == "auto"
    assert aro.rollout.val_kwargs.temperature == 0  # greedy validation: the only val_kwargs sampling key v1 reads
    assert aro.actor.ppo_micro_batch_size is None and aro.rollout.log_prob_micro_batch_size is None
    assert cfg.data.tool_config_path == f"{CONFIG_DIR}/{TOOL_CONFIG_FILE}"  # the dataset counts tool tokens too


# Keys verl 0.9.1's default trainer never reads (or reads and drops), and the files that do read them.
IGNORED_KEYS = {
    "hybrid_engine": {"trainer/ppo/ray_trainer.py", "trainer/ppo/v1/trainer_separate_async.py",
                      "experimental/fully_async_policy/fully_async_trainer.py",
                      "experimental/fully_async_policy/fully_async_rollouter.py",
                      "experimental/one_step_off_policy/ray_trainer.py"},
    "multi_turn.enable": {"trainer/ppo/ray_trainer.py", "experimental/fully_async_policy/detach_utils.py"},
    "return_raw_chat": {"utils/dataset/rl_dataset.py"},
    "truncation": {"utils/dataset/rl_dataset.py", "utils/dataset/multiturn_sft_dataset.py"},
}


def _readers(tree: ast.AST) -> set[str]:
    """Which IGNORED_KEYS a module reads: `x.hybrid_engine`, `x.multi_turn.enable`, `get("return_raw_chat")`..."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            if node.attr == "hybrid_engine":
                found.add("hybrid_engine")
            if node.attr == "enable" and isinstance(node.value, ast.Attribute) and node.value.attr == "multi_turn":
                found.add("multi_turn.enable")
        if isinstance(node, ast.Constant) and node.value in ("hybrid_engine", "return_raw_chat", "truncation"):
            found.add(node.value)
    return found


def test_keys_the_default_trainer_ignores_are_not_written(tmp_path, verl_config_package):
    doc = trainer_config()
    assert "return_raw_chat" not in doc["data"] and "truncation" not in doc["data"]
    assert "hybrid_engine" not in doc["actor_rollout_ref"]
    assert {"multi_turn", "trace"}.isdisjoint(doc["actor_rollout_ref"]["rollout"])
    overrides = dict(hydra_overrides(settings_for("dev"), resolve_layout(settings_for("dev"))))
    assert not [k for k in overrides if ".trace." in k or k.endswith((".enable", "hybrid_engine"))]
    cfg = compose_job(tmp_path, settings_for("dev"))
    assert cfg.trainer.use_v1 is True and cfg.trainer.v1.trainer_mode == "sync"  # the trainer checked below


def test_the_installed_verl_reads_those_keys_only_outside_the_default_trainer():
    readers: dict[str, set[str]] = {key: set() for key in IGNORED_KEYS}
    for path in VERL.rglob("*.py"):
        for key in _readers(ast.parse(path.read_text(encoding="utf-8"))):
            readers[key].add(path.relative_to(VERL).as_posix())
    assert readers == IGNORED_KEYS
    # RLHFDataset stores return_raw_chat and truncation and never uses them (raw_prompt is always returned).
    dataset = ast.parse((VERL / "utils" / "dataset" / "rl_dataset.py").read_text())
    loaded = {n.attr for n in ast.walk(dataset) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)}
    assert {"return_raw_chat", "truncation"}.isdisjoint(loaded)
    # The v1 agent-loop worker never traces a sample, whatever rollout.trace says.
    assert "trace_this_sample = False" in (VERL / "trainer" / "ppo" / "v1" / "agent_loop_tq.py").read_text()


def test_the_headers_name_the_generator():
    files = config_files(settings_for("dev"))
    for name in (TRAINER_FILE, TOOL_CONFIG_FILE):
        assert "generated by verl-ack (components/workloads/training/verl_config.py)" in files[name].replace("\n# ", " ")


def test_the_reward_function_and_the_tool_response_limit_reach_verl(tmp_path, verl_config_package):
    s = settings_for("dev")
    cfg = compose_job(tmp_path, s)
    assert cfg.reward.custom_reward_function.path == f"{CONFIG_DIR}/{REWARD_MODULE_FILE}"
    assert cfg.reward.custom_reward_function.name == REWARD_FUNCTION
    # The scoring mode reaches the function as verl's get_custom_reward_fn passes reward_kwargs.
    assert dict(cfg.reward.custom_reward_function.reward_kwargs) == {"gsm8k_method": s.training.gsm8k_scoring}
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path == f"{CONFIG_DIR}/agent_loops.yaml"
    assert cfg.actor_rollout_ref.rollout.multi_turn.max_tool_response_length == s.training.max_tool_response_chars
    (_, code) = tool_config(s)["tools"]
    assert code["config"]["max_response_chars"] == s.training.max_tool_response_chars


@pytest.mark.parametrize("training,match", [
    ({"max_tool_response_chars": 64}, "greater than or equal to 128"),
    ({"max_tool_response_chars": 100_000}, "less than or equal to 16384"),
    ({"max_tool_response_chars": 4096, "max_response_length": 1024}, "at most 2 x max_response_length"),
    ({"trace_backend": "mlflow"}, "trace_backend"),  # removed: verl 0.9.1's default trainer traces nothing
])
def test_tool_settings_are_range_checked(training, match):
    from components.config.loading import SettingsError

    with pytest.raises(SettingsError, match=match):
        settings_for("dev", {"training": training})


def test_the_tools_report_to_the_trainers_mlflow_experiment_only_with_tracking():
    s = settings_for("dev")
    (gsm8k, code) = tool_config(s)["tools"]
    assert gsm8k["config"]["metrics"] == code["config"]["metrics"] == {
        "interval_seconds": 60, "mlflow_experiment": s.training.project_name,
        "mlflow_parent_run": s.training.experiment_name}
    off = settings_for("dev", {"tracking": {"enabled": False}, "training": {"logger": ["console"]}})
    assert tool_config(off)["tools"][0]["config"]["metrics"] == {"interval_seconds": 60}


def test_a_smoke_run_does_not_validate_and_resumes_with_optimizer_state(tmp_path, verl_config_package):
    cfg = compose_job(tmp_path, settings_for("dev"))
    assert cfg.trainer.val_before_train is False and cfg.trainer.test_freq == -1
    assert cfg.trainer.total_training_steps == 1
    assert list(cfg.actor_rollout_ref.actor.checkpoint.save_contents) == ["model", "optimizer", "extra", "hf_model"]
    assert list(cfg.actor_rollout_ref.actor.checkpoint.load_contents) == ["model", "optimizer", "extra"]


def test_checkpoints_land_where_the_teardown_tool_looks(stack_name, tmp_path, verl_config_package):
    from teardown import experiment_prefix

    s = settings_for(stack_name)
    cfg = compose_job(tmp_path, s)
    vol = oss_volumes(s)["checkpoints"]
    key = experiment_prefix(s.storage.checkpoints_prefix, s.training.project_name, s.training.experiment_name)
    assert cfg.trainer.default_local_dir == f"{vol.mount_path}/{key[len(vol.prefix):].rstrip('/')}"


def test_train_and_val_files_are_files_the_dataset_job_writes(stack_name, tmp_path, verl_config_package):
    s = settings_for(stack_name)
    cfg = compose_job(tmp_path, s)
    files, vol = dataset_files(s), oss_volumes(s)["datasets"]
    for path, key in ((cfg.data.train_files, files.train), (cfg.data.val_files, files.test)):
        assert key in files.written
        assert path == f"{vol.mount_path}/{key[len(vol.prefix):]}"


def test_the_model_path_is_the_staged_preset_directory(tmp_path, verl_config_package):
    s = settings_for("dev")
    staged = f"{oss_volumes(s)['models'].mount_path}/Qwen2.5-3B-Instruct/{model_cache_key(s)}"
    # dev prefetches: verl reads the pod's copy, which the wait step moves back to the staged prefix on a failure.
    cfg = compose_job(tmp_path, s)
    assert cfg.actor_rollout_ref.model.path == f"/mnt/model-copy/Qwen2.5-3B-Instruct/{model_cache_key(s)}"
    assert f"--source={staged}" in verl_command(s, resolve_layout(s))
    off = settings_for("dev", {"job": {"model_prefetch": False}})
    (tmp_path / "off").mkdir()
    assert compose_job(tmp_path / "off", off).actor_rollout_ref.model.path == staged
    assert not [w for w in verl_command(off, resolve_layout(off)) if "prefetch" in w]


# --------------------------------------------------------------------------------------------- overrides
def test_every_override_is_one_shell_safe_word(stack_name):
    s = settings_for(stack_name)
    words = verl_command(s, resolve_layout(s))
    line = " ".join(words)
    assert entrypoint(s, resolve_layout(s)).endswith(" -- " + line)  # the entrypoint program's child
    assert shlex.split(line) == words
    assert not set(line) & set("'\"$`;&|<>(){}*?~\\#!")


@pytest.mark.parametrize("key,value,match", [
    ("trainer.experiment_name", "two words", "may only contain"),
    ("trainer.experiment_name", "it's", "may only contain"),
    ("trainer.experiment_name", "$(reboot)", "may only contain"),
    ("trainer.experiment_name", "a;b", "may only contain"),
    ("trainer.experiment_name", "a,b", "may only contain"),
    ("trainer.experiment_name", "run*", "may only contain"),
    ("trainer.experiment_name", "2024", "would read"),
    ("trainer.experiment_name", "1e5", "would read"),
    ("trainer.experiment_name", "null", "would read"),
    ("trainer.logger", ["console", "mlflow"], "glob pattern"),
    ("+trainer.extra", 1, "plain dotted Hydra key"),
    ("~trainer.logger", None, "plain dotted Hydra key"),
    ("trainer.logger", {"a": 1}, "cannot render"),
])
def test_unsafe_overrides_are_refused_with_the_key_named(key, value, match):
    with pytest.raises(OverrideError, match=match):
        render_override(key, value)


def test_overrides_render_bools_and_floats_the_way_hydra_reads_them():
    assert render_override("a.b", True) == "a.b=True"
    assert render_override("a.b", 1e-6) == "a.b=1e-06"
    assert render_override("a.b", None) == "a.b=null"


def test_list_settings_live_in_the_trainer_file_so_no_shell_can_glob_them(stack_name, tmp_path):
    # `k=[a,b]` on the command line is a glob pattern in the submitter's bash and again in Ray's job manager
    # (shell=True); no quoting survives both. A file named like the pattern in the working dir would change it.
    s = settings_for(stack_name)
    line = " ".join(verl_command(s, resolve_layout(s)))
    assert "[" not in entrypoint(s, resolve_layout(s)) and "]" not in line and "'" not in line
    doc = yaml.safe_load(config_files(s)[TRAINER_FILE])
    for key, value in list_overrides(s):
        node = doc
        for part in key.split("."):
            node = node[part]
        assert node == value and f"{key}=" not in line


def test_a_key_given_twice_is_refused():
    s = settings_for("dev")
    pairs = hydra_overrides(s, resolve_layout(s))
    with pytest.raises(OverrideError, match="duplicate"):
        entrypoint(s, resolve_layout(s), pairs + [pairs[0]])


# --------------------------------------------------------------------------------------------- tools
def _tool_types() -> set[str]:
    """Values of verl's ToolType enum, read from the installed tool_registry.py (it cannot be imported here)."""
    tree = ast.parse((VERL / "tools" / "tool_registry.py").read_text())
    enum = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ToolType")
    return {n.value.value for n in enum.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)}


def test_the_tool_config_has_the_shape_verls_tool_registry_reads(stack_name):
    schemas = _module("verl_tool_schemas_under_test", VERL / "tools" / "schemas.py")
    module_tree = ast.parse(TOOLS_SOURCE.read_text())
    classes = {n.name: n for n in module_tree.body if isinstance(n, ast.ClassDef)}
    doc = yaml.safe_load(config_files(settings_for(stack_name))[TOOL_CONFIG_FILE])
    assert set(doc) == {"tools"}
    names = []
    for tool in doc["tools"]:
        assert set(tool) == {"class_name", "config", "tool_schema"}
        assert tool["config"]["type"] in _tool_types() == {"native"}
        module, cls = tool["class_name"].rsplit(".", 1)
        assert module == TOOLS_MODULE and cls in classes, tool["class_name"]
        assert [b.id for b in classes[cls].bases] == ["BaseTool"]
        parsed = schemas.OpenAIFunctionToolSchema.model_validate(tool["tool_schema"])
        names.append(parsed.function.name)
    # The task's tools in order (components/config/task.py): the answer tool and the code tool by their names.
    assert names == [{"answer": GSM8K_TOOL, "code": CODE_TOOL}[t] for t in task_tools(settings_for(stack_name))]


def test_the_gsm8k_tool_name_is_the_key_the_dataset_rows_carry():
    from pipeline.gsm8k import build_row

    row = build_row({"question": "1+1?", "answer": "so #### 2"}, 0, "train")
    assert row["agent_name"] == "tool_agent"  # so default_agent_loop needs no override
    assert list(row["extra_info"]["tools_kwargs"]) == [GSM8K_TOOL]


def test_the_code_tool_reads_the_mounted_secret_and_shares_the_sandbox_pool():
    s = settings_for("dev")
    (_, code) = tool_config(s)["tools"]
    assert code["config"]["mcp_servers_config_path"] == f"{MCP_DIR}/{MCP_FILE}"
    assert code["config"]["mcp_tool"] == "run_code_once"
    assert code["config"]["timeout_seconds"] == s.training.tool_timeout_seconds
    workers = s.training.agent_num_workers
    assert code["config"]["max_concurrency"] * workers <= s.sandbox.pool_cap


def test_no_code_tool_without_sandboxes():
    doc = tool_config(settings_for("existing-ecs", {"sandbox": {"enabled": False}}))
    assert [t["tool_schema"]["function"]["name"] for t in doc["tools"]] == [GSM8K_TOOL]


def test_the_mcp_servers_file_is_valid_json_for_fastmcp_without_auth_token(stack_name):
    s = settings_for(stack_name)
    doc = json.loads(json.dumps(mcp_servers_document(s, "k-123")))
    (server,) = doc["mcpServers"].values()
    assert set(server) == {"url", "transport", "headers"}  # no auth_token: verl/fastmcp would switch to SSE+Bearer
    assert server["url"] == mcp_url(s) == (f"http://{s.sandbox.service_name}.{s.sandbox.namespace}.svc.cluster.local:"
                                           f"{s.sandbox.mcp_port}{s.sandbox.mcp_path}")
    assert server["transport"] == "http"
    assert server["headers"] == {"E2B-API-KEY": "k-123", "X-API-KEY": "k-123", "X-Template": s.sandbox.template_name,
                                 "X-Execution-Timeout": str(s.training.tool_timeout_seconds)}  # not the 60 s default


def test_the_config_map_holds_no_secret_and_ships_the_tool_module():
    s = settings_for("dev")
    files = config_files(s)
    assert set(files) == {TRAINER_FILE, TOOL_CONFIG_FILE, TOOLS_MODULE_FILE, REWARD_MODULE_FILE,
                          "verl_ack_agent_loop.py", "agent_loops.yaml", "verl_ack_entrypoint.py",
                          "verl_ack_model_prefetch.py"}  # dev prefetches the model (job.model_prefetch)
    for name in ("verl_ack_agent_loop.py", "verl_ack_entrypoint.py", "verl_ack_model_prefetch.py"):
        assert files[name] == (REPO_ROOT / "agent_tools" / name).read_text()
    assert files[TOOLS_MODULE_FILE] == TOOLS_SOURCE.read_text()
    assert files[REWARD_MODULE_FILE] == REWARD_SOURCE.read_text()
    configs = files[TRAINER_FILE] + files[TOOL_CONFIG_FILE]
    assert "API-KEY" not in configs and "mcpServers" not in configs  # the key file is the Secret's, by path only


def test_the_config_hash_follows_the_files():
    files = config_files(settings_for("dev"))
    assert config_sha256(files) == config_sha256(dict(files))
    assert config_sha256(files) != config_sha256({**files, TOOL_CONFIG_FILE: files[TOOL_CONFIG_FILE] + "#"})
    no_sandbox = settings_for("existing-ecs", {"sandbox": {"enabled": False}})
    assert config_sha256(files) != config_sha256(config_files(no_sandbox))


# --------------------------------------------------------------------------------------------- models
QWEN3_8B = {"model": {"preset": "qwen3-8b", "ppo_micro_batch_size_per_gpu": 16}}
CUSTOM_QWEN3 = {"model": {"preset": "custom", "ppo_micro_batch_size_per_gpu": 8, "log_prob_micro_batch_size_per_gpu": 16,
                          "custom": {"hf_id": "acme/qwen3-4b-math", "family": "qwen3", "layers": 36, "hidden_size": 2560,
                                     "intermediate_size": 9728, "attention_heads": 32, "kv_heads": 8, "head_dim": 128,
                                     "vocab_size": 151936, "tie_word_embeddings": True}}}


@pytest.mark.parametrize("overrides,thinking", [(QWEN3_8B, False), ({"model": {**QWEN3_8B["model"], "thinking": True}}, True),
                                                (CUSTOM_QWEN3, False)], ids=["qwen3-8b", "qwen3-8b-thinking", "custom"])
def test_a_qwen3_preset_and_a_custom_model_compose_against_verl_with_the_familys_parser_and_one_thinking_switch(
        overrides, thinking, tmp_path, verl_config_package):
    s = settings_for("dev", overrides)
    cfg = compose_job(tmp_path, s)
    assert OmegaConf.missing_keys(cfg) == set()
    OmegaConf.to_container(cfg, resolve=True)
    assert cfg.actor_rollout_ref.rollout.multi_turn.format == "hermes"  # verl's parser for <tool_call> JSON
    assert cfg.actor_rollout_ref.model.custom_chat_template is None  # the model's own template
    # The one key both the dataset's prompt rendering and the agent loop's rollout read.
    assert OmegaConf.to_container(cfg.data.apply_chat_template_kwargs) == {"enable_thinking": thinking}
    name = s.model.custom.repo_name if s.model.custom else "Qwen3-8B"
    # the staging cache keys the folder by repo and revision: models/<name>/<key>
    assert f"/{name}/" in cfg.actor_rollout_ref.model.path  # the staged prefix or its copy in the pod


def test_the_dataset_and_the_agent_loop_both_read_the_thinking_switch_from_that_one_key():
    for rel, reader in (("utils/dataset/rl_dataset.py", "RLHFDataset"),
                        ("experimental/agent_loop/agent_loop.py", "AgentLoopBase")):
        text = (VERL / rel).read_text()
        assert 'get("apply_chat_template_kwargs", {})' in text, rel
        assert f"class {reader}" in text, rel


def test_a_family_without_the_switch_writes_no_chat_template_kwargs(tmp_path, verl_config_package):
    cfg = compose_job(tmp_path, settings_for("dev"))  # Qwen2.5-3B
    assert OmegaConf.to_container(cfg.data.apply_chat_template_kwargs) == {}
    assert cfg.actor_rollout_ref.rollout.multi_turn.format == "hermes"


# --------------------------------------------------------------------------------------------- runs and checkpoints
def test_a_branch_from_another_runs_checkpoint_reaches_verl_as_resume_path(tmp_path, verl_config_package):
    src = "checkpoints/gsm8k-tool-agent/sft-base/global_step_40/"
    s = settings_for("dev", {"training": {"experiment_name": "branch-lr2", "resume_from": src}})
    cfg = compose_job(tmp_path, s)
    assert cfg.trainer.resume_mode == "resume_path"
    vol = oss_volumes(s)["checkpoints"]
    assert cfg.trainer.resume_from_path == f"{vol.mount_path}/gsm8k-tool-agent/sft-base/global_step_40"
    # verl reads the step from the folder's name (trainer_base.py _load_checkpoint asserts "global_step_" in it).
    assert "global_step_" in cfg.trainer.resume_from_path
    # Its own checkpoints go to its own folder, which the entrypoint continues from on a retry.
    assert cfg.trainer.default_local_dir.endswith("/branch-lr2")


def test_without_resume_from_a_rerun_of_the_same_names_continues_its_newest_checkpoint(
        stack_name, tmp_path, verl_config_package):
    cfg = compose_job(tmp_path, settings_for(stack_name))
    assert cfg.trainer.resume_mode == "auto" and cfg.trainer.resume_from_path is None


def test_an_evaluation_only_run_reaches_verl_with_no_training_step(tmp_path, verl_config_package):
    s = settings_for("dev", {"training": {"val_only": True, "total_training_steps": 0}})
    cfg = compose_job(tmp_path, s)
    # verl reads val_only inside its val_before_train block only (trainer/ppo/v1/trainer_base.py fit).
    assert cfg.trainer.val_only is True and cfg.trainer.val_before_train is True
    assert cfg.trainer.total_training_steps == 0


def test_checkpoint_retention_reaches_verl(tmp_path, verl_config_package):
    cfg = compose_job(tmp_path, settings_for("dev", {"training": {"max_actor_ckpt_to_keep": 2}}))
    assert cfg.trainer.max_actor_ckpt_to_keep == 2


@pytest.mark.parametrize("training,match", [
    ({"total_training_steps": 0}, "training.val_only"),
    ({"resume_from": "checkpoints/p/e/"}, "global_step_<N>/"),
    ({"resume_from": "models/p/e/global_step_4/"}, "storage.checkpoints_prefix"),
])
def test_a_run_that_cannot_start_where_it_says_is_refused_naming_the_setting(training, match):
    from components.config import SettingsError

    with pytest.raises((SettingsError, ValueError), match=re.escape(match)):
        settings_for("dev", {"training": training})


def test_the_entrypoints_checkpoint_tracker_is_the_file_verl_writes():
    entry = importlib.import_module("agent_tools.verl_ack_entrypoint")
    text = (VERL / "utils" / "checkpoint" / "checkpoint_manager.py").read_text()
    assert f'"{entry.CHECKPOINT_TRACKER}"' in text and "def get_checkpoint_tracker_filename" in text
