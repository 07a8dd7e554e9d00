"""Recipes a verl researcher runs (DAPO, PPO with a critic, LoRA, any verl key through training.verl_overrides):
each composes against the installed verl 0.9.1 config tree at plan time, exactly as the job will compose it, and
each is sized by the memory estimate before anything is paid for."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

from components.config import REPO_ROOT, SettingsError
from components.config.loading import raw_settings
from components.config.recipes import ADV_ESTIMATORS
from components.model import load_stack, parse_settings, resolve_layout
from components.model.layout import check_layout
from components.workloads.training import verl_compose
from components.workloads.training.run_spec import hashed_config
from components.workloads.training.verl_config import (
    TRAINER_FILE,
    config_files,
    config_sha256,
    entrypoint,
    hydra_overrides,
)
from offline.report.cost import training_steps
from tests.components.workloads.training.test_rayjob import SITE, settings_for

EXAMPLES = sorted((REPO_ROOT / "examples" / "stacks").glob("Pulumi.*.yaml"))
VERL = SITE / "verl"


def example(name: str):
    return load_stack(REPO_ROOT / "examples" / "stacks" / f"Pulumi.{name}.yaml")


def composed(s) -> dict:
    result = verl_compose.compose(s, resolve_layout(s))
    assert result.ran and not result.errors, result.errors
    return result.config


def dotted(doc: dict, key: str):
    for part in key.split("."):
        doc = doc[part]
    return doc


# --------------------------------------------------------------------------------------------- example stacks
def test_the_dapo_gae_and_lora_examples_are_there():
    assert {p.name for p in EXAMPLES} >= {"Pulumi.dev-dapo.yaml", "Pulumi.dev-ppo.yaml", "Pulumi.dev-lora.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem.removeprefix("Pulumi."))
def test_every_example_stack_plans_and_verl_composes_its_job_with_nothing_missing(path):
    s = load_stack(path)  # settings and layout rules
    config = composed(s)
    for key, value in hydra_overrides(s, resolve_layout(s)):
        assert dotted(config, key) == (list(value) if isinstance(value, tuple) else value), key


def test_dapo_sets_the_keys_of_verls_dapo_recipe():
    s = example("dev-dapo")
    c = composed(s)
    actor = c["actor_rollout_ref"]["actor"]
    assert (actor["clip_ratio_low"], actor["clip_ratio_high"], actor["loss_agg_mode"]) == (0.2, 0.28, "token-mean")
    assert c["algorithm"]["filter_groups"] == {**c["algorithm"]["filter_groups"], "enable": True, "metric": "acc",
                                               "max_num_gen_batches": 10}
    assert c["data"]["gen_batch_size"] == 3 * s.training.train_batch_size
    assert c["reward"]["reward_manager"]["name"] == "dapo"
    buffer = c["reward"]["reward_kwargs"]["overlong_buffer_cfg"]
    assert buffer["enable"] and buffer["len"] == s.training.max_response_length // 5
    assert c["reward"]["reward_kwargs"]["max_resp_len"] == s.training.max_response_length >= buffer["len"]
    assert actor["use_kl_loss"] is False and c["algorithm"]["use_kl_in_reward"] is False  # DAPO trains without KL
    # The dapo manager drops the tools' fields: the plan says so.
    assert any(f.field == "training.dapo.reward_manager" for f in check_layout(s))


def test_a_dapo_key_set_in_the_stack_wins_over_the_recipe():
    s = settings_for("dev", {"training": {"recipe": "dapo", "use_kl_loss": True, "dapo": {"clip_ratio_high": 0.3}}})
    c = composed(s)
    assert c["actor_rollout_ref"]["actor"]["use_kl_loss"] is True
    assert c["actor_rollout_ref"]["actor"]["clip_ratio_high"] == 0.3


def test_ppo_with_a_critic_gets_a_real_critic_in_place_of_verls_placeholders():
    s = example("dev-ppo")
    critic = composed(s)["critic"]
    actor_path = dict(hydra_overrides(s, resolve_layout(s)))["actor_rollout_ref.model.path"]
    assert critic["model"]["path"] == actor_path != "~/models/deepseek-llm-7b-chat"
    assert critic["ppo_micro_batch_size_per_gpu"] == resolve_layout(s).ppo_micro_batch_size_per_gpu
    assert critic["optim"]["lr"] == s.training.critic.lr


def test_a_critic_micro_batch_that_does_not_divide_the_mini_batch_is_refused():
    with pytest.raises(SettingsError, match="training.critic.ppo_micro_batch_size_per_gpu"):
        settings_for("dev", {"training": {"algorithm": "gae", "critic": {"ppo_micro_batch_size_per_gpu": 5}}})


def test_lora_reaches_verls_model_section():
    s = example("dev-lora")
    model = composed(s)["actor_rollout_ref"]["model"]
    assert (model["lora_rank"], model["lora_alpha"], model["target_modules"]) == (32, 32, "all-linear")
    listed = settings_for("dev", {"model": {"lora_rank": 16, "target_modules": ["q_proj", "v_proj"]}})
    assert composed(listed)["actor_rollout_ref"]["model"]["target_modules"] == ["q_proj", "v_proj"]


def test_a_grpo_stack_writes_no_recipe_critic_lora_or_sampling_key():
    keys = dict(hydra_overrides(settings_for("dev"), resolve_layout(settings_for("dev"))))
    assert not [k for k in keys if k.startswith("critic.") or "lora" in k or "clip_ratio" in k
                or k.endswith(("temperature", "top_p")) or "filter_groups" in k]


def test_rollout_sampling_reaches_the_rollout_and_its_validation():
    s = settings_for("dev", {"training": {"temperature": 0.7, "top_p": 0.9, "val_temperature": 0.6, "val_top_p": 0.95}})
    rollout = composed(s)["actor_rollout_ref"]["rollout"]
    assert (rollout["temperature"], rollout["top_p"]) == (0.7, 0.9)
    assert (rollout["val_kwargs"]["temperature"], rollout["val_kwargs"]["top_p"]) == (0.6, 0.95)


def test_the_estimators_are_the_ones_verl_ships():
    tree = ast.parse((VERL / "trainer" / "ppo" / "core_algos.py").read_text())
    enum = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "AdvantageEstimator")
    shipped = {n.value.value for n in enum.body if isinstance(n, ast.Assign)}
    assert set(ADV_ESTIMATORS) == shipped


# --------------------------------------------------------------------------------------------- sized
def test_the_gae_estimate_exceeds_grpos_and_the_lora_estimate_is_below_full_fine_tunings():
    grpo, gae, lora = (resolve_layout(s).memory for s in (load_stack("dev"), example("dev-ppo"), example("dev-lora")))
    assert gae.train_gib > grpo.train_gib and gae.rollout_gib > grpo.rollout_gib
    assert gae.breakdown["critic_resident"] > 0
    assert lora.train_gib < grpo.train_gib and lora.rollout_gib < grpo.rollout_gib
    assert lora.vllm_weights_gib > grpo.vllm_weights_gib  # vLLM holds the adapter too


def test_a_critic_that_does_not_fit_beside_the_actor_is_refused_where_grpo_fits():
    # 14B on one node of 80 GiB GPUs fits as GRPO; the critic's fp32 state, gradients and Adam moments beside it do not.
    big = {"model": {"preset": "qwen2.5-14b-instruct"}, "gpu_pool": {"gpu_memory_gib": 80}}
    settings_for("dev", big)
    with pytest.raises(SettingsError, match="training peak"):
        settings_for("dev", {**big, "training": {"algorithm": "gae"}})


# --------------------------------------------------------------------------------------------- escape hatch
def test_a_misspelt_override_is_refused_at_plan_time_naming_it_and_the_nearest_verl_key():
    s = settings_for("dev", {"training": {"verl_overrides": {"actor_rollout_ref.actor.clip_ratio_hgh": 0.3}}})
    [problem] = verl_compose.check(s, resolve_layout(s))
    assert problem.field == "training.verl_overrides"
    assert "actor_rollout_ref.actor.clip_ratio_hgh" in problem.message
    assert "actor_rollout_ref.actor.clip_ratio_high" in problem.message


def test_a_valid_override_reaches_verls_config_the_command_line_and_the_config_hash():
    s = settings_for("dev", {"training": {"verl_overrides": {"actor_rollout_ref.actor.clip_ratio_c": 10.0,
                                                             "actor_rollout_ref.rollout.engine_kwargs.vllm": {"a": 1}}}})
    c = composed(s)
    assert c["actor_rollout_ref"]["actor"]["clip_ratio_c"] == 10.0
    assert "actor_rollout_ref.actor.clip_ratio_c=10.0" in entrypoint(s, resolve_layout(s)).split()
    # A mapping cannot pass the entrypoint's shells: it goes into the trainer file.
    assert yaml.safe_load(config_files(s)[TRAINER_FILE])["actor_rollout_ref"]["rollout"]["engine_kwargs"] == {
        "vllm": {"a": 1}}
    plain = settings_for("dev")
    assert config_sha256(hashed_config(s)) != config_sha256(hashed_config(plain)) == config_sha256(config_files(plain))


@pytest.mark.parametrize("key,setting", [
    ("trainer.nnodes", "gpu_pool.nodes"),
    ("actor_rollout_ref.model.path", "model.preset"),
    ("trainer.default_local_dir", "checkpoint folder"),
    ("actor_rollout_ref.rollout.multi_turn.tool_config_path", "tool config"),
    ("actor_rollout_ref.actor.optim.lr", "training.lr"),
])
def test_an_override_of_a_key_the_program_owns_is_refused_naming_the_setting(key, setting):
    s = settings_for("dev", {"training": {"verl_overrides": {key: 1}}})
    [problem] = verl_compose.check(s, resolve_layout(s))
    assert key in problem.message and setting in problem.message


def test_plan_py_refuses_a_misspelt_override_with_exit_2_and_writes_nothing(tmp_path):
    import plan

    raw = raw_settings("dev")
    raw["training"]["verl_overrides"] = {"trainer.totl_epochs": 2}
    doc = yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    doc["config"]["verl-ack:settings"] = raw
    stack = tmp_path / "Pulumi.typo.yaml"
    stack.write_text(yaml.safe_dump(doc))
    assert plan.main(["--config-file", str(stack), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_every_key_the_settings_write_names_its_setting():
    from tests.conftest import STACKS

    stacks = [load_stack(n) for n in STACKS] + [load_stack(p) for p in EXAMPLES]
    stacks = [s for s in stacks if s.kind != "platform"]
    for s in stacks:
        for key, _ in hydra_overrides(s, resolve_layout(s)):
            assert verl_compose.owner_of(key), f"{key}: add it to verl_compose.SETTING_OF or OWNED_KEYS"


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in verl_compose.VALIDATE_NEEDS),
                    reason="verl's validate_config needs torch, Ray and verl's other dependencies")
@pytest.mark.parametrize("path", [REPO_ROOT / "stacks" / "Pulumi.dev.yaml", *EXAMPLES], ids=lambda p: p.stem)
def test_verls_validate_config_accepts_every_example_job_critic_included(path):
    s = load_stack(path)
    if s.model.lora_rank and importlib.util.find_spec(s.training.rollout_engine) is None:
        pytest.skip("validate_config checks a LoRA rank against the rollout engine, which is not installed here")
    result = verl_compose.validate(s, resolve_layout(s))
    assert result.validated and not result.errors, result.errors


def test_the_plan_says_which_of_composition_and_validate_config_ran():
    s = settings_for("dev")
    summary = verl_compose.validate(s, resolve_layout(s)).summary()
    assert summary.startswith("composed against the installed verl config tree in Hydra's struct mode")
    assert ("validate_config not run" in summary) == any(
        importlib.util.find_spec(m) is None for m in verl_compose.VALIDATE_NEEDS)


# --------------------------------------------------------------------------------------------- traps
def test_total_epochs_without_total_training_steps_trains_the_epochs():
    s = settings_for("dev", {"training": {"total_training_steps": None, "total_epochs": 3}})
    c = composed(s)
    assert c["trainer"]["total_training_steps"] is None and c["trainer"]["total_epochs"] == 3
    assert training_steps(s) == 3 * (s.dataset.train_subset // s.training.train_batch_size)
    from components.config.training import TrainingSettings
    assert TrainingSettings.model_fields["total_training_steps"].default is None


def test_a_token_budget_below_one_sequence_is_refused_with_the_fix():
    with pytest.raises(SettingsError, match="raise it to at least 2048"):
        settings_for("dev", {"training": {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 1024}})
    settings_for("dev", {"training": {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 4096}})


def test_dev_with_only_another_preset_plans_with_a_note_on_the_fitted_micro_batch():
    s = settings_for("dev", {"model": {"preset": "qwen3-8b"}})
    L = resolve_layout(s)
    assert L.ppo_mini_batch_per_gpu % L.ppo_micro_batch_size_per_gpu == 0
    assert L.ppo_micro_batch_size_per_gpu < 32  # the preset's, from verl's example
    notes = [f for f in check_layout(s) if f.field == "model.ppo_micro_batch_size_per_gpu"]
    assert notes and notes[0].severity == "warning" and "largest divisor" in notes[0].message


def test_a_micro_batch_the_stack_sets_is_not_fitted_but_checked():
    with pytest.raises(SettingsError, match="not divisible by ppo_micro_batch_size_per_gpu"):
        parse_settings({**raw_settings("dev"), "model": {"preset": "qwen3-8b", "ppo_micro_batch_size_per_gpu": 32}})


def test_the_example_stacks_are_not_in_the_stack_folder():
    # stacks/ holds the shipped stacks the README's table lists; the recipes are examples beside them.
    assert all(Path(p).parent.name == "stacks" and Path(p).parent.parent.name == "examples" for p in EXAMPLES)


def test_plan_md_lists_the_overrides_the_recipe_and_what_verl_checked():
    from offline.report.training import training_section

    class NoRecording:  # the section renders the RayJob itself when the program did not record one
        def by_type(self, _type):
            return []

    s = settings_for("dev", {"training": {"algorithm": "gae",
                                          "verl_overrides": {"actor_rollout_ref.actor.clip_ratio_c": 10.0}}})
    section = training_section(s, NoRecording())
    assert section.data["verl_overrides"] == {"actor_rollout_ref.actor.clip_ratio_c": "10.0"}
    assert section.data["critic"] is True and section.data["verl_composed"] is True
    text = section.markdown
    assert "`actor_rollout_ref.actor.clip_ratio_c=10.0`" in text and "with a critic" in text
    assert "composed against the installed verl config tree" in text


def test_without_hydra_the_plan_says_the_composition_did_not_run(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "hydra" else real(name, *a))
    s = settings_for("dev", {"training": {"total_epochs": 2}})
    result = verl_compose.compose(s, resolve_layout(s))
    assert not result.ran and "hydra-core" in result.summary() and verl_compose.check(s, resolve_layout(s)) == []
