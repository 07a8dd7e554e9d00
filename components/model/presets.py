"""The model a stack trains, resolved from the declaration in components/config/models.py: a preset, or the
stack's own model (model.preset: custom) with the layout defaults of the same-family preset nearest in size;
the vLLM tensor-parallel rule; and the presets table of docs/settings.md.

Nothing here re-declares a model fact: families, shapes, parameter counts and default layouts are the config
leaf's (`components.config.models`), so the settings' allowed names, the estimate, tools/measure_memory.py and
the docs table cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import math

from components.config import CUSTOM, FAMILIES, PRESETS, Settings
from components.config.models import Architecture, ModelPreset


def allowed_rollout_tp(preset: ModelPreset, limit: int = 64) -> list[int]:
    """TP sizes vLLM accepts for this model: heads divisible by TP, and KV heads divisible by TP
    (TP <= kv_heads) or TP divisible by KV heads (KV heads replicated, TP > kv_heads)."""
    return [tp for tp in range(1, limit + 1) if vllm_tp_ok(preset, tp)]


def vllm_tp_ok(preset: ModelPreset, tp: int) -> bool:
    a = preset.arch
    if tp < 1 or a.attention_heads % tp:
        return False
    if tp <= a.kv_heads:
        return a.kv_heads % tp == 0
    return tp % a.kv_heads == 0


def nearest_preset(arch: Architecture) -> ModelPreset:
    """The preset of the same family whose parameter count is nearest (on a log scale) to this model's."""
    same = [p for p in PRESETS.values() if p.arch.family == arch.family]
    return min(same, key=lambda p: abs(math.log(p.arch.params / arch.params)))


def custom_preset(s: Settings) -> ModelPreset:
    """The stack's own model as a preset: its architecture, and the layout of the nearest preset (vLLM's TP rule
    is checked on the model's own heads by check_layout, so an unsuitable inherited TP is refused there)."""
    c = s.model.custom
    arch = c.architecture()
    near = nearest_preset(arch)
    hf = c.hf_id or c.modelscope_id
    return ModelPreset(key=CUSTOM, hf_id=hf, modelscope_id=c.modelscope_id or hf, arch=arch,
                       card_params_billion=round(arch.params / 1e9, 3),
                       layout=dataclasses.replace(near.layout),
                       layout_source=f"the nearest {arch.family} preset, {near.key}",
                       source=f"model.custom{f' (config_json {c.config_json})' if c.config_json else ''}")


def preset_of(s: Settings) -> ModelPreset:
    """The model a stack names: a preset, or its custom model."""
    return custom_preset(s) if s.model.preset == CUSTOM else PRESETS[s.model.preset]


def _yn(b: bool) -> str:
    return "yes" if b else "no"


def render_families_table() -> str:
    """The model families (config.json model_type) the estimate covers and what verl is given for each."""
    lines = ["| family (model_type) | transformers classes | q/k/v bias | q/k norm | verl tool-call parser "
             "(`rollout.multi_turn.format`) | thinking switch (`model.thinking`) | source |",
             "|---|---|---|---|---|---|---|"]
    for f in FAMILIES.values():
        lines.append(f"| {f.model_type} | {f.transformers_config}, {f.transformers_model}, {f.transformers_decoder_layer} "
                     f"| {_yn(f.qkv_bias)} | {_yn(f.qk_norm)} | {f.tool_parser} | {_yn(f.thinking)} | {f.source} |")
    return "\n".join(lines)


def render_presets_table() -> str:
    """docs/settings.md's families and presets tables, generated from the declaration."""
    yn = _yn
    lines = ["| preset | family | params (card) | layers / hidden / MLP | heads / KV heads / head dim | vocab | tied "
             "| rollout TP (vLLM-valid up to 64) | offload actor / optim / ref | gpu_mem | micro (actor / log-prob) "
             "| layout from |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in PRESETS.values():
        a, L = p.arch, p.layout
        tps = ", ".join(str(t) for t in allowed_rollout_tp(p))
        lines.append(
            f"| {p.key} | {a.family} | {p.params_billion} B ({p.card_params_billion} B) | {a.layers} / {a.hidden_size} / "
            f"{a.intermediate_size} | {a.attention_heads} / {a.kv_heads} / {a.head_dim} | {a.vocab_size} "
            f"| {yn(a.tie_word_embeddings)} | {L.rollout_tp} ({tps}) | {yn(L.actor_param_offload)} / "
            f"{yn(L.actor_optimizer_offload)} / {yn(L.ref_param_offload)} | {L.gpu_memory_utilization} "
            f"| {L.ppo_micro_batch_size_per_gpu} / {L.log_prob_micro_batch_size_per_gpu} | {p.layout_source} |")
    return render_families_table() + "\n\n" + "\n".join(lines)
