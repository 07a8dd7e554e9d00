"""The model declaration (components/config/models.py): presets carry what the estimate and the layout rules need,
their numbers agree with each model's card and with transformers' own model, and nothing declares them twice."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from components.config import FAMILIES, PRESET_NAMES, PRESETS, ModelSettings
from components.config.models import export_presets
from components.model.presets import allowed_rollout_tp, nearest_preset, vllm_tp_ok

REPO = Path(__file__).resolve().parents[3]


def test_the_qwen3_dense_family_from_0_6b_to_32b_and_the_qwen25_instruct_family_are_presets():
    qwen3 = {k for k, p in PRESETS.items() if p.arch.family == "qwen3"}
    assert qwen3 == {"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b"}
    assert {p.hf_id for p in PRESETS.values() if p.arch.family == "qwen2"} == {
        f"Qwen/Qwen2.5-{s}-Instruct" for s in ("0.5B", "1.5B", "3B", "7B", "14B", "32B", "72B")}


@pytest.mark.parametrize("key", PRESET_NAMES)
def test_the_exact_parameter_count_rounds_to_the_model_cards_figure(key):
    # The card's figure is rounded (to 0.1 B for Qwen3-1.7B; Qwen2.5-32B's card says 32.5 B for 32.76 B); a wrong
    # tie_word_embeddings is off by the vocabulary x hidden size (0.6 B for Qwen3-8B, 0.16 B for Qwen3-0.6B).
    p = PRESETS[key]
    assert abs(p.arch.params - p.card_params_billion * 1e9) <= max(0.01 * p.card_params_billion * 1e9, 0.05e9)


@pytest.mark.parametrize("key", PRESET_NAMES)
def test_the_parameter_count_is_transformers_own_models(key):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    a = PRESETS[key].arch
    assert FAMILIES[a.family].transformers_config
    cfg = transformers.AutoConfig.for_model(
        a.family, vocab_size=a.vocab_size, hidden_size=a.hidden_size, intermediate_size=a.intermediate_size,
        num_hidden_layers=a.layers, num_attention_heads=a.attention_heads, num_key_value_heads=a.kv_heads,
        head_dim=a.head_dim, tie_word_embeddings=a.tie_word_embeddings)
    assert type(cfg).__name__ == FAMILIES[a.family].transformers_config
    with torch.device("meta"):
        model = MODEL_FOR_CAUSAL_LM_MAPPING[type(cfg)](cfg)
    assert type(model).__name__ == FAMILIES[a.family].transformers_model
    assert FAMILIES[a.family].transformers_decoder_layer in model._no_split_modules
    assert sum(t.numel() for t in model.parameters()) == a.params


@pytest.mark.parametrize("key", PRESET_NAMES)
def test_the_shapes_split_into_heads_and_qwen3_states_its_head_dim(key):
    a = PRESETS[key].arch
    assert a.attention_heads % a.kv_heads == 0
    if a.family == "qwen2":  # Qwen2's config.json has no head_dim: transformers uses hidden / heads
        assert a.head_dim * a.attention_heads == a.hidden_size
    else:
        assert a.head_dim == 128 and not a.qkv_bias and a.qk_norm


@pytest.mark.parametrize("key", PRESET_NAMES)
def test_a_presets_default_rollout_tp_is_one_vllm_accepts(key):
    p = PRESETS[key]
    assert vllm_tp_ok(p, p.layout.rollout_tp), f"{key}: default TP {p.layout.rollout_tp} violates vLLM head divisibility"


@pytest.mark.parametrize("key,allowed", [
    ("qwen2.5-3b-instruct", [1, 2, 4, 8, 16]),
    ("qwen2.5-7b-instruct", [1, 2, 4]),
    ("qwen2.5-14b-instruct", [1, 2, 4, 8]),
    ("qwen2.5-72b-instruct", [1, 2, 4, 8, 16]),
    ("qwen3-0.6b", [1, 2, 4, 8, 16]),
    ("qwen3-14b", [1, 2, 4, 8]),
    ("qwen3-32b", [1, 2, 4, 8, 16]),
])
def test_allowed_rollout_tp_matches_vllm_rules_for_powers_of_two(key, allowed):
    powers = [tp for tp in allowed_rollout_tp(PRESETS[key]) if tp & (tp - 1) == 0 and tp <= 16]
    assert powers == allowed


def test_tp_8_is_refused_for_7b_because_28_heads_do_not_split_eight_ways():
    assert not vllm_tp_ok(PRESETS["qwen2.5-7b-instruct"], 8)


def test_models_of_14b_and_up_default_to_offloading_the_actor():
    for p in PRESETS.values():
        big = p.arch.params > 12e9
        assert (p.layout.actor_param_offload and p.layout.actor_optimizer_offload) == big, p.key


def test_every_preset_names_where_its_numbers_and_its_layout_come_from():
    for p in PRESETS.values():
        assert "config.json" in p.source and "card" in p.source
        assert p.layout_source


def test_qwen3_8b_and_4b_take_their_layout_from_verls_own_scripts():
    assert "run_qwen3-8b.sh" in PRESETS["qwen3-8b"].layout_source
    assert "run_qwen3-4b_gsm8k_multiturn.sh" in PRESETS["qwen3-4b"].layout_source
    assert (PRESETS["qwen3-8b"].layout.rollout_tp, PRESETS["qwen3-8b"].layout.gpu_memory_utilization) == (2, 0.6)


def test_a_custom_model_takes_the_layout_of_its_familys_nearest_preset():
    assert nearest_preset(PRESETS["qwen3-8b"].arch).key == "qwen3-8b"
    assert nearest_preset(PRESETS["qwen2.5-7b-instruct"].arch).key == "qwen2.5-7b-instruct"


def test_the_settings_allow_exactly_the_declared_presets_and_custom():
    allowed = ModelSettings.model_json_schema()["properties"]["preset"]["enum"]
    assert allowed == [*PRESET_NAMES, "custom"]


def test_the_memory_tools_export_is_the_declaration():
    exported = export_presets()
    assert list(exported) == list(PRESET_NAMES)
    for key, row in exported.items():
        a = PRESETS[key].arch
        assert row["params"] == a.params and row["family"] == a.family and row["head_dim"] == a.head_dim
        assert json.loads(json.dumps(row)) == row  # plain data for a bare GPU box


_KEY = re.compile(r"qwen[0-9.]+-[0-9.]+b(-instruct)?")


def _key_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and _KEY.fullmatch(n.value)}


def test_no_module_but_the_declaration_lists_presets_and_none_names_a_stale_one():
    declaration = REPO / "components" / "config" / "models.py"
    for path in sorted(REPO.rglob("*.py")):
        rel = path.relative_to(REPO)
        if path == declaration or rel.parts[0] in ("tests", ".venv") or rel.parts[0].startswith("."):
            continue
        keys = _key_constants(path)
        assert len(keys) <= 1, f"{rel} lists presets {sorted(keys)}: derive them from components/config/models.py"
        assert keys <= set(PRESET_NAMES), f"{rel} names {sorted(keys - set(PRESET_NAMES))}, which is no preset"
