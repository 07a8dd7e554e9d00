"""Settings of verl's recipes beyond GRPO: the estimators verl ships, PPO's critic, DAPO's keys
(components/workloads/training/verl_config.py writes them, docs/training.md "Recipes")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from components.config.sharing import Rate
from components.config.types import PlainName, Strict

# verl 0.9.1's advantage estimators (trainer/ppo/core_algos.py AdvantageEstimator; a test reads the enum). `gae` is
# the one that needs a critic (trainer/ppo/utils.py need_critic).
ADV_ESTIMATORS = ("grpo", "gae", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "opo",
                  "grpo_passk", "gpg", "rloo_vectorized", "grpo_vectorized", "optimal_token_baseline",
                  "tir_optimal_token_baseline", "gdpo")
# Group-relative estimators: every advantage is zero with one sample per prompt (layout rule 15).
GROUP_ESTIMATORS = ("grpo", "rloo", "grpo_passk", "gpg", "rloo_vectorized", "grpo_vectorized")
# A scalar verl value (training.verl_overrides); lists and mappings go into the trainer file.
VerlScalar = bool | int | float | str | None


class CriticSettings(Strict):
    """verl's `critic` section, used when training.algorithm is gae (need_critic)."""

    model_path: str | None = Field(
        None, min_length=1, max_length=512, pattern=r"^/[A-Za-z0-9._/-]+$",
        description="critic.model.path inside the Ray pods. Empty = the actor's model (the path the job reads it "
        "from), as verl's PPO examples do; verl's own default is a placeholder (~/models/deepseek-llm-7b-chat).")
    lr: Rate = Field(1e-5, description="critic.optim.lr (verl's default 1e-5).")
    lr_warmup_steps_ratio: float = Field(
        0.0, ge=0, le=1, description="critic.optim.lr_warmup_steps_ratio (verl's default 0).")
    warmup_steps: int = Field(
        0, ge=0, le=1 << 20, description="trainer.critic_warmup: steps that update only the critic before the actor "
        "starts learning.")
    ppo_micro_batch_size_per_gpu: int | None = Field(
        None, ge=1, le=1 << 20, description="critic.ppo_micro_batch_size_per_gpu (verl refuses a critic with neither "
        "this nor dynamic batch sizes: workers/config/critic.py). Empty = the actor's micro batch.")
    param_offload: bool = Field(False, description="critic.fsdp.param_offload.")
    optimizer_offload: bool = Field(False, description="critic.fsdp.optimizer_offload.")


class DapoSettings(Strict):
    """The keys verl's DAPO recipe sets (docs/algo/dapo.md; recipe/dapo run scripts), used with training.recipe: dapo."""

    clip_ratio_low: float = Field(0.2, gt=0, le=10, description="actor.clip_ratio_low (DAPO's clip-higher: 0.2).")
    clip_ratio_high: float = Field(0.28, gt=0, le=10, description="actor.clip_ratio_high (DAPO's clip-higher: 0.28).")
    filter_groups: bool = Field(
        True, description="algorithm.filter_groups.enable: drop prompt groups whose samples all score the same "
        "(dynamic sampling) and generate more until a batch is full.")
    filter_groups_metric: PlainName = Field(
        "acc", description="algorithm.filter_groups.metric: the reward field groups are compared on (`acc`, which "
        "the job's reward function returns, as DAPO's recipe does).")
    max_num_gen_batches: int = Field(
        10, ge=0, le=1 << 20, description="algorithm.filter_groups.max_num_gen_batches (0 = no limit; DAPO's 10).")
    gen_batch_size: int | None = Field(
        None, ge=1, le=1 << 20, description="data.gen_batch_size: prompts generated per round while filtering. "
        "Empty = 3 x train_batch_size, as DAPO's recipe sets it.")
    reward_manager: Literal["dapo", "naive"] = Field(
        "dapo", description="reward.reward_manager.name. `dapo` (the recipe's) adds the overlong penalty; verl "
        "0.9.1's dapo manager does not pass the tool fields (tool rewards, the model-only text) to the reward "
        "function, which the plan warns about. `naive` keeps them and drops the overlong penalty.")
    overlong_buffer: bool = Field(
        True, description="reward.reward_kwargs.overlong_buffer_cfg.enable: penalise responses in the last "
                          "overlong_buffer_len tokens before max_response_length (dapo reward manager only).")
    overlong_buffer_len: int | None = Field(
        None, ge=1, le=1 << 24, description="overlong_buffer_cfg.len, tokens. Empty = a fifth of "
        "max_response_length (DAPO's recipe: 4096 of 20480).")
    overlong_penalty_factor: float = Field(
        1.0, ge=0, le=1000, description="overlong_buffer_cfg.penalty_factor (DAPO's 1.0).")



def dapo_overlong_len(t: Any) -> int:
    """DAPO's overlong buffer in tokens: the setting, or a fifth of the response (the recipe's 4096 of 20480)."""
    given = t.dapo.overlong_buffer_len
    return given if given is not None else max(1, t.max_response_length // 5)


def dapo_gen_batch_size(t: Any) -> int:
    """data.gen_batch_size under DAPO: the setting, or 3 x train_batch_size as the recipe sets it."""
    given = t.dapo.gen_batch_size
    return given if given is not None else 3 * t.train_batch_size


def apply_recipe(t: Any) -> None:
    """TrainingSettings' recipe rules: DAPO trains without KL (docs/algo/dapo.md: use_kl_loss and use_kl_in_reward
    off) unless the stack sets either; its overlong buffer and generation batch must fit the stack."""
    if t.recipe == "dapo":
        for name in ("use_kl_loss", "use_kl_in_reward"):
            if name not in t.model_fields_set:
                t.__dict__[name] = False
        d = t.dapo
        if d.reward_manager == "dapo" and d.overlong_buffer and dapo_overlong_len(t) >= t.max_response_length:
            raise ValueError(
                f"training.dapo.overlong_buffer_len {dapo_overlong_len(t)} must be below max_response_length "
                f"{t.max_response_length} (verl's dapo reward manager asserts max_resp_len >= len, and a buffer "
                "as long as the response penalises every token); lower it or leave it empty for a fifth")
        if d.gen_batch_size is not None and d.gen_batch_size < t.train_batch_size:
            raise ValueError(f"training.dapo.gen_batch_size {d.gen_batch_size} is below train_batch_size "
                             f"{t.train_batch_size}: a round could never fill a batch; use at least "
                             f"{t.train_batch_size} (DAPO's recipe uses 3x)")
