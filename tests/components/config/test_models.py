"""A stack's own model (model.preset: custom) is validated like a preset; mixture-of-experts models are refused with
the reason; the thinking switch exists only where the family's chat template has one."""

from __future__ import annotations

import json

import pytest

from components.config import PRESETS, SettingsError
from components.config import models as m
from components.model import parse_settings
from components.model.layout import resolve_layout
from components.model.presets import preset_of
from tests.conftest import stack_settings

QWEN3_8B = PRESETS["qwen3-8b"].arch
# Qwen3-8B's own numbers under a fine-tune's name: what a user declares for a model of their own.
NUMBERS = {"family": "qwen3", "layers": 36, "hidden_size": 4096, "intermediate_size": 12288, "attention_heads": 32,
           "kv_heads": 8, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False}
CONFIG_JSON = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_hidden_layers": 36,
               "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32, "num_key_value_heads": 8,
               "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False, "rope_theta": 1000000}
SMALL = {"train_batch_size": 16, "ppo_mini_batch_size": 8}


def custom(**custom_fields) -> dict:
    return {"model": {"preset": "custom", "custom": {"hf_id": "acme/qwen3-8b-math", **custom_fields},
                      "ppo_micro_batch_size_per_gpu": 16}}


def problems(overrides: dict) -> str:
    with pytest.raises(SettingsError) as e:
        parse_settings(stack_settings("dev", overrides))
    return str(e.value)


@pytest.fixture
def stacks_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(m, "STACKS_DIR", tmp_path)
    return tmp_path


def test_a_custom_model_with_its_numbers_is_planned_like_the_preset_it_equals():
    s = parse_settings(stack_settings("dev", custom(**NUMBERS)))
    p = preset_of(s)
    assert p.arch == QWEN3_8B and p.hf_id == "acme/qwen3-8b-math" and p.dir_name == "qwen3-8b-math"
    assert p.layout == PRESETS["qwen3-8b"].layout and "qwen3-8b" in p.layout_source
    preset = parse_settings(stack_settings("dev", {"model": {"preset": "qwen3-8b", "ppo_micro_batch_size_per_gpu": 16}}))
    assert resolve_layout(s).memory == resolve_layout(preset).memory


def test_a_custom_models_config_json_in_the_stacks_folder_is_read_offline(stacks_dir):
    (stacks_dir / "models").mkdir()
    (stacks_dir / "models" / "math.json").write_text(json.dumps(CONFIG_JSON))
    s = parse_settings(stack_settings("dev", custom(config_json="models/math.json")))
    assert preset_of(s).arch == QWEN3_8B


def test_config_json_defaults_are_transformers_head_dim_kv_heads_and_untied_embeddings(stacks_dir):
    cfg = {k: v for k, v in CONFIG_JSON.items() if k not in ("head_dim", "tie_word_embeddings", "num_key_value_heads")}
    (stacks_dir / "c.json").write_text(json.dumps({**cfg, "model_type": "qwen2"}))
    a = parse_settings(stack_settings("dev", custom(config_json="c.json"))).model.custom.architecture()
    assert (a.head_dim, a.kv_heads, a.tie_word_embeddings) == (4096 // 32, 32, False)


@pytest.mark.parametrize("config,needle", [
    ({**CONFIG_JSON, "model_type": "qwen3_moe", "num_experts": 128}, "mixture-of-experts"),
    ({**CONFIG_JSON, "num_local_experts": 8}, "mixture-of-experts"),
    ({**CONFIG_JSON, "model_type": "llama"}, "not one the memory estimate covers"),
    ({"hidden_size": 1}, "not a Hugging Face config.json"),
    ({k: v for k, v in CONFIG_JSON.items() if k != "vocab_size"}, "lacks vocab_size"),
])
def test_a_config_json_the_estimate_cannot_cover_is_refused_with_the_reason(stacks_dir, config, needle):
    (stacks_dir / "c.json").write_text(json.dumps(config))
    text = problems(custom(config_json="c.json"))
    assert "model.custom" in text and needle in text


@pytest.mark.parametrize("fields,needle", [
    ({**NUMBERS, "family": "qwen3_moe"}, "mixture-of-experts"),
    ({**NUMBERS, "family": "gpt2"}, "not one the memory estimate covers"),
    ({**NUMBERS, "kv_heads": 5}, "do not split into 5 KV heads"),
    ({k: v for k, v in NUMBERS.items() if k != "layers"}, "lacks layers"),
    ({**NUMBERS, "config_json": "c.json"}, "gives config_json and"),
    ({"config_json": "models/../../secrets.json"}, "may not leave the stacks folder"),
    ({"config_json": "/etc/config.json"}, "relative to the stacks folder"),
])
def test_custom_numbers_are_validated_like_a_presets(fields, needle):
    text = problems(custom(**fields))
    assert "model.custom" in text and needle in text


def test_vllms_head_rule_applies_to_a_custom_models_own_heads():
    # 40 heads / 8 KV heads with the 8B preset's inherited TP 2 is fine; TP 3 is not.
    overrides = custom(**{**NUMBERS, "attention_heads": 40})
    overrides["model"]["rollout_tp"] = 3
    text = problems(overrides)
    assert "model.rollout_tp" in text and "40 attention heads / 8 KV heads" in text


def test_preset_custom_and_model_custom_come_together():
    assert "model.custom is empty" in problems({"model": {"preset": "custom"}})
    assert "set model.preset: custom" in problems({"model": {"custom": {"hf_id": "a/b", **NUMBERS}}})
    assert "no hf_id" in problems({"model": {"preset": "custom", "custom": {"modelscope_id": "a/b", **NUMBERS}}})


def test_thinking_is_refused_for_a_family_without_the_switch_and_allowed_for_qwen3():
    assert "no thinking switch" in problems({"model": {"thinking": True}})  # dev trains Qwen2.5-3B
    s = parse_settings(stack_settings("dev", {"model": {"preset": "qwen3-4b", "thinking": True,
                                                        "ppo_micro_batch_size_per_gpu": 8}}))
    assert s.model.thinking is True
