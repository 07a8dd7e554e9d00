"""Model presets carry the architecture facts the layout rules depend on."""

import pytest

from components.model.presets import PRESETS, allowed_rollout_tp, vllm_tp_ok

# num_attention_heads / num_key_value_heads / num_hidden_layers from each model's config.json.
EXPECTED = {
    "qwen2.5-0.5b-instruct": (14, 2, 24),
    "qwen2.5-1.5b-instruct": (12, 2, 28),
    "qwen2.5-3b-instruct": (16, 2, 36),
    "qwen2.5-7b-instruct": (28, 4, 28),
    "qwen2.5-14b-instruct": (40, 8, 48),
    "qwen2.5-32b-instruct": (40, 8, 64),
    "qwen2.5-72b-instruct": (64, 8, 80),
}


def test_every_qwen25_instruct_size_has_a_preset():
    assert set(PRESETS) == set(EXPECTED)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_preset_carries_the_models_head_counts_and_depth(key):
    p = PRESETS[key]
    assert (p.attention_heads, p.kv_heads, p.layers) == EXPECTED[key]
    assert p.hf_id == f"Qwen/{p.dir_name}" and p.dir_name.endswith("-Instruct")


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_preset_default_rollout_tp_is_one_vllm_accepts(key):
    p = PRESETS[key]
    assert vllm_tp_ok(p, p.rollout_tp), f"{key}: default TP {p.rollout_tp} violates vLLM head divisibility"


@pytest.mark.parametrize("key,allowed", [
    ("qwen2.5-3b-instruct", [1, 2, 4, 8, 16]),
    ("qwen2.5-7b-instruct", [1, 2, 4]),
    ("qwen2.5-14b-instruct", [1, 2, 4, 8]),
    ("qwen2.5-32b-instruct", [1, 2, 4, 8]),
    ("qwen2.5-72b-instruct", [1, 2, 4, 8, 16]),
])
def test_allowed_rollout_tp_matches_vllm_rules_for_powers_of_two(key, allowed):
    powers = [tp for tp in allowed_rollout_tp(PRESETS[key]) if tp & (tp - 1) == 0 and tp <= 16]
    assert powers == allowed


def test_tp_8_is_refused_for_7b_because_28_heads_do_not_split_eight_ways():
    assert not vllm_tp_ok(PRESETS["qwen2.5-7b-instruct"], 8)


def test_bigger_models_default_to_offloading_the_actor():
    for key in ("qwen2.5-14b-instruct", "qwen2.5-32b-instruct", "qwen2.5-72b-instruct"):
        p = PRESETS[key]
        assert p.actor_param_offload and p.actor_optimizer_offload and p.ref_param_offload
