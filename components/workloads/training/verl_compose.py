"""The job's whole verl config, composed at plan time as `verl.trainer.main_ppo` will compose it (pure functions).

verl's trainer composes `verl_ack_trainer.yaml` (which extends verl's `ppo_trainer`) with the command line's
overrides through Hydra, in struct mode: a key its config tree does not have fails the job at start, after the
nodes, the image pull and the model read are paid for. `compose` runs that composition here, against the verl
config tree installed beside the program (requirements-verl.txt pins the release the image runs), for every stack:

- every key of `training.verl_overrides` must exist in the composed tree (an unknown one is refused naming the
  nearest verl key), and may not be one the program owns (paths, GPUs and nodes, tool and reward config) or one a
  setting writes (refused naming the setting to change instead);
- then the trainer file and the whole command line compose in struct mode, and nothing mandatory (`???`) is left.

Hydra and verl's YAML tree import neither torch nor Ray. verl's own `validate_config` and config dataclasses (the
critic's `CriticConfig.__post_init__` included) do; `validate` runs them where they are installed (`make
verl-validate STACK=...`, and the test suite where it has them) and says otherwise that it did not run. The rules
they enforce that need no torch are the layout check's (components/model/layout.py).

Without Hydra or verl's tree installed (the runtime requirements alone), `compose` says so and checks nothing;
plan.md shows which of these ran (`Composition.summary`).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.config import Problem, Settings, SettingsError
from components.config.models import CONFIG_JSON_KEYS
from components.model.layout import Layout
from components.model.presets import preset_of
from components.workloads.training.verl_config import (
    TRAINER_CONFIG_NAME,
    TRAINER_FILE,
    VERL_CONFIG_SEARCHPATH,
    hydra_overrides,
    list_overrides,
    render_override,
    trainer_config,
)
from components.workloads.training.verl_recipes import uses_critic

# Keys the program derives from its own resources: an override would point verl somewhere the program did not put
# anything (or, for GPUs and nodes, disagree with the Ray cluster it sized). The value names what to change instead.
OWNED_KEYS: dict[str, str] = {
    "data.train_files": "dataset.* (the dataset Job writes these files)",
    "data.val_files": "dataset.* (the dataset Job writes these files)",
    "data.tool_config_path": "training.answer_tool / sandbox.* (the program's tool config)",
    "actor_rollout_ref.model.path": "model.preset or model.custom (the staged model)",
    "critic.model.path": "training.critic.model_path",
    "trainer.default_local_dir": "storage.* and training.project_name/experiment_name (the checkpoint folder)",
    "trainer.n_gpus_per_node": "gpu_pool.gpus_per_node",
    "trainer.nnodes": "gpu_pool.nodes",
    "trainer.resume_mode": "training.resume_from (else the program resumes from the newest checkpoint)",
    "trainer.resume_from_path": "training.resume_from",
    "trainer.val_only": "training.val_only",
    "actor_rollout_ref.rollout.multi_turn.function_tool_path": "task.tools (the program's tool files)",
    "actor_rollout_ref.rollout.multi_turn.tool_config_path": "training.answer_tool / sandbox.* (the program's tool config)",
    "actor_rollout_ref.rollout.agent.agent_loop_config_path": "(none: the program's agent loop scores model text only)",
    "reward.custom_reward_function.path": "training.gsm8k_scoring (the program's reward function)",
    "reward.custom_reward_function.name": "training.gsm8k_scoring (the program's reward function)",
    "reward.custom_reward_function.reward_kwargs": "training.gsm8k_scoring",
    "reward.reward_model.rollout.name": "training.rollout_engine",
    "actor_rollout_ref.rollout.multi_turn.format": "model.preset (the family's tool-call parser)",
    "hydra.searchpath": "(none: the program's trainer file finds verl's installed tree)",
}
# Prefixes a user override may not reach into (a whole program-made section).
OWNED_PREFIXES: dict[str, str] = {"hydra.": "(none: Hydra's own settings)"}

# The setting behind each key the settings write (so an override of it is refused naming the setting).
SETTING_OF: dict[str, str] = {
    "algorithm.adv_estimator": "training.algorithm",
    "algorithm.use_kl_in_reward": "training.use_kl_in_reward",
    "data.train_batch_size": "training.train_batch_size",
    "data.max_prompt_length": "training.max_prompt_length",
    "data.max_response_length": "training.max_response_length",
    "data.apply_chat_template_kwargs": "model.thinking",
    "data.gen_batch_size": "training.dapo.gen_batch_size",
    "actor_rollout_ref.actor.optim.lr": "training.lr",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "training.ppo_mini_batch_size",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "model.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.actor.use_dynamic_bsz": "training.use_dynamic_bsz",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": "training.ppo_max_token_len_per_gpu",
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": "training.ulysses_sequence_parallel_size",
    "actor_rollout_ref.actor.use_kl_loss": "training.use_kl_loss",
    "actor_rollout_ref.actor.kl_loss_coef": "training.kl_loss_coef",
    "actor_rollout_ref.actor.kl_loss_type": "training.kl_loss_type",
    "actor_rollout_ref.actor.entropy_coeff": "training.entropy_coeff",
    "actor_rollout_ref.actor.loss_agg_mode": "training.loss_agg_mode",
    "actor_rollout_ref.actor.clip_ratio_low": "training.dapo.clip_ratio_low",
    "actor_rollout_ref.actor.clip_ratio_high": "training.dapo.clip_ratio_high",
    "actor_rollout_ref.actor.fsdp_config.param_offload": "model.actor_param_offload",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": "model.actor_optimizer_offload",
    "actor_rollout_ref.actor.checkpoint.save_contents": "training.save_contents",
    "actor_rollout_ref.actor.checkpoint.load_contents": "training.save_contents",
    "actor_rollout_ref.model.lora_rank": "model.lora_rank",
    "actor_rollout_ref.model.lora_alpha": "model.lora_alpha",
    "actor_rollout_ref.model.target_modules": "model.target_modules",
    "actor_rollout_ref.rollout.name": "training.rollout_engine",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "model.rollout_tp",
    "actor_rollout_ref.rollout.gpu_memory_utilization": "model.gpu_memory_utilization",
    "actor_rollout_ref.rollout.n": "training.rollout_n",
    "actor_rollout_ref.rollout.temperature": "training.temperature",
    "actor_rollout_ref.rollout.top_p": "training.top_p",
    "actor_rollout_ref.rollout.val_kwargs.temperature": "training.val_temperature",
    "actor_rollout_ref.rollout.val_kwargs.top_p": "training.val_top_p",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": "model.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": "training.max_assistant_turns",
    "actor_rollout_ref.rollout.multi_turn.max_parallel_calls": "training.max_parallel_calls",
    "actor_rollout_ref.rollout.multi_turn.max_tool_response_length": "training.max_tool_response_chars",
    "actor_rollout_ref.rollout.agent.num_workers": "training.agent_num_workers",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": "model.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.fsdp_config.param_offload": "model.ref_param_offload",
    "algorithm.filter_groups.enable": "training.dapo.filter_groups",
    "algorithm.filter_groups.metric": "training.dapo.filter_groups_metric",
    "algorithm.filter_groups.max_num_gen_batches": "training.dapo.max_num_gen_batches",
    "reward.reward_manager.name": "training.dapo.reward_manager",
    "reward.reward_kwargs": "training.dapo.overlong_buffer*",
    "critic.optim.lr": "training.critic.lr",
    "critic.optim.lr_warmup_steps_ratio": "training.critic.lr_warmup_steps_ratio",
    "critic.ppo_micro_batch_size_per_gpu": "training.critic.ppo_micro_batch_size_per_gpu",
    "critic.fsdp.param_offload": "training.critic.param_offload",
    "critic.fsdp.optimizer_offload": "training.critic.optimizer_offload",
    "trainer.critic_warmup": "training.critic.warmup_steps",
    "trainer.project_name": "training.project_name",
    "trainer.experiment_name": "training.experiment_name",
    "trainer.save_freq": "training.save_freq",
    "trainer.test_freq": "training.test_freq",
    "trainer.total_training_steps": "training.total_training_steps",
    "trainer.total_epochs": "training.total_epochs",
    "trainer.val_before_train": "training.val_before_train",
    "trainer.max_actor_ckpt_to_keep": "training.max_actor_ckpt_to_keep",
    "trainer.logger": "training.logger",
}

FIELD = "training.verl_overrides"
# What importing verl.utils.config and instantiating verl's config dataclasses needs (verl's package imports them).
VALIDATE_NEEDS = ("numpy", "torch", "ray", "tensordict", "transformers")


@dataclass(frozen=True)
class Composition:
    """What plan time learned from verl: whether the composition ran (and why not), the errors it found (field,
    message), the composed config as a plain mapping, and whether verl's validate_config ran."""

    ran: bool
    reason: str = ""
    errors: tuple[tuple[str, str], ...] = ()
    config: dict | None = field(default=None, compare=False, repr=False)
    validated: bool = False
    validate_reason: str = ""

    def summary(self) -> str:
        composed = ("composed against the installed verl config tree in Hydra's struct mode"
                    if self.ran else f"not composed ({self.reason})")
        verdict = "refused it" if self.errors else "accepted it"
        validated = (f"verl's validate_config and config dataclasses (critic included) {verdict}" if self.validated
                     else f"verl's validate_config not run ({self.validate_reason or 'torch and Ray not installed here'}"
                          "; `make verl-validate STACK=<stack>` where they are)")
        return f"{composed}; {validated}"


def verl_config_dir() -> Path | None:
    """The installed verl's config tree, found without importing verl (its __init__ imports numpy and torch)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"
    return path if (path / "ppo_trainer.yaml").is_file() else None


def owner_of(key: str) -> str | None:
    """The setting (or the program) that owns a verl key, or None for a key a user may override."""
    if key in OWNED_KEYS:
        return OWNED_KEYS[key]
    for prefix, owner in OWNED_PREFIXES.items():
        if key.startswith(prefix):
            return owner
    return SETTING_OF.get(key)


def _flat_keys(node: Any, prefix: str = "") -> list[str]:
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            key = f"{prefix}{k}"
            out.append(key)
            out += _flat_keys(v, f"{key}.")
    return out


def nearest_key(key: str, keys: list[str]) -> str | None:
    """The verl key closest to a misspelt one: by the whole dotted path, else by its last part under the same
    section."""
    match = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    if match:
        return match[0]
    leaf = key.rsplit(".", 1)[-1]
    leaves = {k.rsplit(".", 1)[-1]: k for k in keys if k.startswith(key.split(".", 1)[0] + ".")}
    match = difflib.get_close_matches(leaf, list(leaves), n=1, cutoff=0.6)
    return leaves[match[0]] if match else None


def _command_words(s: Settings, layout: Layout, pairs: list[tuple[str, Any]]) -> list[str]:
    in_file = {k for k, _ in list_overrides(s)}
    return [render_override(k, v) for k, v in pairs if k not in in_file]


def _compose(config_dir: Path, trainer: dict, words: list[str]) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    doc = dict(trainer)
    # pkg://verl.trainer.config would import verl (numpy, torch); the same tree by its file path composes the same.
    doc["hydra"] = {**doc.get("hydra", {}), "searchpath": [f"file://{config_dir}"]}
    with tempfile.TemporaryDirectory(prefix="verl-compose-") as tmp:
        (Path(tmp) / TRAINER_FILE).write_text(yaml.safe_dump(doc, sort_keys=False))
        with initialize_config_dir(config_dir=tmp, version_base=None):
            return hydra_compose(config_name=TRAINER_CONFIG_NAME, overrides=words)


_cache: dict[str, Composition] = {}


def compose(s: Settings, layout: Layout) -> Composition:
    """Compose the job's config as main_ppo will (see the module's docstring); every error names its key."""
    if importlib.util.find_spec("hydra") is None or importlib.util.find_spec("omegaconf") is None:
        return Composition(ran=False, reason="hydra-core/omegaconf not installed: `make setup` installs them")
    from omegaconf import OmegaConf
    config_dir = verl_config_dir()
    if config_dir is None:
        return Composition(ran=False, reason="verl's config tree not installed: `make setup` (requirements-verl.txt)")
    assert trainer_config()["hydra"]["searchpath"] == [VERL_CONFIG_SEARCHPATH]
    pairs = hydra_overrides(s, layout)
    user = s.training.verl_overrides
    trainer = trainer_config(s)
    words = _command_words(s, layout, pairs)
    cache_key = yaml.safe_dump([trainer, words])
    if cache_key in _cache:
        return _cache[cache_key]
    errors: list[tuple[str, str]] = []
    if user:
        # The tree without the user's keys: what each of them must name.
        plain = s.model_copy(update={"training": s.training.model_copy(update={"verl_overrides": {}})})
        base_pairs = [(k, v) for k, v in pairs if k not in user]
        try:
            base = OmegaConf.to_container(_compose(config_dir, trainer_config(plain),
                                                   _command_words(plain, layout, base_pairs)))
        except Exception as err:  # noqa: BLE001 (Hydra raises several types; each becomes a finding naming the cause)
            result = Composition(ran=True, errors=((FIELD, f"verl's config does not compose: {err}"),))
            _cache[cache_key] = result
            return result
    keys = _flat_keys(base) if user else []
    known = set(keys)
    for key in user:
        owner = owner_of(key)
        if owner is not None:
            errors.append((FIELD, f"{key} is set by the program; use {owner} instead of overriding it"))
        elif key not in known:
            near = nearest_key(key, keys)
            errors.append((FIELD, f"{key} is not a key of verl 0.9.1's config"
                                  + (f"; did you mean {near}?" if near else "; check verl's _generated_ppo_trainer.yaml")))
    config = None
    if not errors:
        try:
            composed = _compose(config_dir, trainer, words)
            missing = sorted(OmegaConf.missing_keys(composed))
            if missing:
                errors.append((FIELD, f"verl keys left mandatory (???): {', '.join(missing)}"))
            config = OmegaConf.to_container(composed, resolve=True)
        except Exception as err:  # noqa: BLE001
            # Without user keys the settings themselves wrote a key verl lacks (a program bug or another verl).
            errors.append((FIELD if user else "training", f"verl's config does not compose: {err}"))
    result = Composition(ran=True, errors=tuple(errors), config=config)
    _cache[cache_key] = result
    return result


def validate(s: Settings, layout: Layout, composition: Composition | None = None) -> Composition:
    """`compose` plus verl's own validate_config(config, use_reference_policy, use_critic) and the rollout's and
    critic's config dataclasses, as main_ppo runs them, where torch and Ray are installed."""
    composition = composition or compose(s, layout)
    if not composition.ran or composition.errors:
        return composition
    # With LoRA, validate_config asks the rollout engine for its largest LoRA rank (imports vllm).
    needs = (*VALIDATE_NEEDS, *((s.training.rollout_engine,) if s.model.lora_rank else ()))
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        return Composition(ran=True, config=composition.config, validated=False,
                           validate_reason=f"{', '.join(missing)} not installed here")
    try:
        from omegaconf import OmegaConf

        utils = importlib.import_module("verl.utils.config")
    except Exception as err:  # noqa: BLE001 (verl's package imports numpy, torch, ray...; any missing one)
        return Composition(ran=True, config=composition.config, validated=False,
                           validate_reason=f"verl does not import here: {err}")
    config = OmegaConf.create(composition.config)
    with tempfile.TemporaryDirectory(prefix="verl-validate-") as model_dir:
        # The model's config dataclass reads config.json from the model path, which exists only in the pods: the
        # same architecture's config.json, written from the preset, stands in for it (no weights, no tokenizer).
        (Path(model_dir) / "config.json").write_text(json.dumps(hf_config_json(s)))
        for section in ("actor_rollout_ref.model", "critic.model"):
            node = OmegaConf.select(config, section)
            node.path = model_dir
            node.load_tokenizer = False
        try:
            utils.validate_config(config, use_reference_policy=layout.uses_ref, use_critic=uses_critic(s))
            utils.omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
            if uses_critic(s):
                utils.omega_conf_to_dataclass(config.critic)
        except Exception as err:  # noqa: BLE001
            return Composition(ran=True, config=composition.config, validated=True,
                               errors=((FIELD if s.training.verl_overrides else "training",
                                        f"verl's validate_config: {err}"),))
    return Composition(ran=True, config=composition.config, validated=True)


def hf_config_json(s: Settings) -> dict:
    """The model's config.json as transformers writes it, from the preset's (or custom model's) architecture."""
    preset = preset_of(s)
    a, family = preset.arch, preset.family
    doc = {key: getattr(a, field) for field, key in CONFIG_JSON_KEYS.items() if field != "family"}
    return {**doc, "model_type": family.model_type, "architectures": [family.transformers_model],
            "torch_dtype": "bfloat16", "max_position_embeddings": 32768}


def check(s: Settings, layout: Layout) -> list[Problem]:
    """The composition's errors as settings problems (plan.py and the preview refuse the stack with them)."""
    return [Problem(field=f, message=m) for f, m in compose(s, layout).errors]


def refuse_uncomposable(s: Settings, layout: Layout, runs: list[tuple[Settings, Layout]] = ()) -> None:
    """Raise SettingsError when verl would not compose the job's config (or a sweep variant's): before anything is
    created, with every problem."""
    problems = check(s, layout) + [p for rs, rl in runs for p in check(rs, rl) if p not in check(s, layout)]
    if problems:
        raise SettingsError(problems, s)


def overrides_table(s: Settings) -> list[tuple[str, str]]:
    """training.verl_overrides as plan.md lists them (key, the value as verl receives it)."""
    return [(k, yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("...").strip())
            for k, v in s.training.verl_overrides.items()]
