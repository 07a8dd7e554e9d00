"""The verl keys of a stack's recipe beyond GRPO (pure functions): DAPO's, the critic's, LoRA's, rollout sampling and
training.verl_overrides' scalar keys. verl_config.hydra_overrides appends them after the keys every job has;
verl_compose checks the whole list against verl's config tree."""

from __future__ import annotations

from typing import Any

from components.config import Settings
from components.config.recipes import dapo_gen_batch_size, dapo_overlong_len
from components.model.layout import Layout
from components.workloads.training.prefetch import model_read_dir

# The values the trainer file and verl's defaults already hold: a sampling key is written only when it differs.
ROLLOUT_SAMPLING_DEFAULTS = {"temperature": 1.0, "top_p": 1.0, "val_temperature": 0.0, "val_top_p": 1.0}


def recipe_overrides(s: Settings, layout: Layout) -> list[tuple[str, Any]]:
    """The keys of the recipe, the critic, LoRA and rollout sampling, each only when the stack uses it (a GRPO
    stack's command line is what it was)."""
    t, m, L = s.training, s.model, layout
    o: list[tuple[str, Any]] = []
    sampling = {"temperature": ("actor_rollout_ref.rollout.temperature", t.temperature),
                "top_p": ("actor_rollout_ref.rollout.top_p", t.top_p),
                "val_temperature": ("actor_rollout_ref.rollout.val_kwargs.temperature", t.val_temperature),
                "val_top_p": ("actor_rollout_ref.rollout.val_kwargs.top_p", t.val_top_p)}
    o += [pair for name, pair in sampling.items() if pair[1] != ROLLOUT_SAMPLING_DEFAULTS[name]]
    if t.recipe == "dapo":
        # verl's DAPO recipe (docs/algo/dapo.md, recipe/dapo/run_dapo_*.sh): clip-higher, dynamic sampling over
        # generated batches, the dapo reward manager (its overlong buffer is in the trainer file).
        d = t.dapo
        o += [
            ("actor_rollout_ref.actor.clip_ratio_low", d.clip_ratio_low),
            ("actor_rollout_ref.actor.clip_ratio_high", d.clip_ratio_high),
            ("algorithm.filter_groups.enable", d.filter_groups),
            ("algorithm.filter_groups.metric", d.filter_groups_metric),
            ("algorithm.filter_groups.max_num_gen_batches", d.max_num_gen_batches),
            ("data.gen_batch_size", dapo_gen_batch_size(t)),
            ("reward.reward_manager.name", d.reward_manager),
        ]
    if uses_critic(s):
        # verl's critic section keeps placeholders (model.path ~/models/deepseek-llm-7b-chat, no micro batch) that
        # CriticConfig.__post_init__ refuses at worker start (workers/config/critic.py): the critic is the actor's
        # model unless the stack names another, on the same GPUs (trainer/ppo/utils.py need_critic).
        c = t.critic
        o += [
            ("critic.model.path", c.model_path or model_read_dir(s)),
            ("critic.optim.lr", c.lr),
            ("critic.optim.lr_warmup_steps_ratio", c.lr_warmup_steps_ratio),
            ("critic.ppo_micro_batch_size_per_gpu", L.critic_micro_batch_size_per_gpu),
            ("critic.fsdp.param_offload", c.param_offload),
            ("critic.fsdp.optimizer_offload", c.optimizer_offload),
            ("trainer.critic_warmup", c.warmup_steps),
        ]
    if m.lora_rank:
        o += [("actor_rollout_ref.model.lora_rank", m.lora_rank), ("actor_rollout_ref.model.lora_alpha", m.lora_alpha)]
        if isinstance(m.target_modules, str):
            o.append(("actor_rollout_ref.model.target_modules", m.target_modules))
    return o


def uses_critic(s: Settings) -> bool:
    """verl 0.9.1 trainer/ppo/utils.py need_critic: critic.enable unset, so a critic exactly when the estimator is gae."""
    return s.training.algorithm == "gae"


def user_overrides(s: Settings) -> list[tuple[str, Any]]:
    """training.verl_overrides' scalar keys, on the command line after everything the settings write (the list- and
    mapping-valued ones go into the trainer file, list_overrides). verl_compose checks them against verl's tree."""
    return [(k, v) for k, v in s.training.verl_overrides.items() if not isinstance(v, (list, dict))]


def recipe_list_overrides(s: Settings) -> list[tuple[str, Any]]:
    """The recipe's list- and mapping-valued keys, which go into the trainer file (verl_config.list_overrides)."""
    t = s.training
    out: list[tuple[str, Any]] = []
    if t.recipe == "dapo" and t.dapo.reward_manager == "dapo":
        # verl's dapo reward manager reads reward.reward_kwargs (experimental/reward_loop/reward_manager/dapo.py),
        # a mapping verl's reward config does not declare.
        out.append(("reward.reward_kwargs", {
            "overlong_buffer_cfg": {"enable": t.dapo.overlong_buffer, "len": dapo_overlong_len(t),
                                    "penalty_factor": t.dapo.overlong_penalty_factor, "log": False},
            "max_resp_len": t.max_response_length}))
    if s.model.lora_rank and isinstance(s.model.target_modules, list):
        out.append(("actor_rollout_ref.model.target_modules", list(s.model.target_modules)))
    return out + [(k, v) for k, v in t.verl_overrides.items() if isinstance(v, (list, dict))]
