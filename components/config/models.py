"""The models a stack can train, declared once: model families, the presets and their architecture numbers.

Everything else derives from these tables: the settings' allowed preset names (`PRESET_NAMES`), the per-GPU
memory estimate (components/model/layout.py), the memory tool's model build (tools/measure_memory.py reads
`export_presets`), the chat template and tool-call format verl is given, and the presets table of
docs/settings.md.

Sources (docs/facts.md, "Models"):
- Architecture numbers are each model's `config.json` on the Hugging Face hub (`Qwen/<name>`): `model_type`
  (the family), `num_hidden_layers`, `hidden_size`, `intermediate_size`, `num_attention_heads`,
  `num_key_value_heads`, `head_dim` (Qwen3 states it; Qwen2 derives it as hidden / heads), `vocab_size`,
  `tie_word_embeddings`. Qwen3's values as mirrored in rasbt/LLMs-from-scratch
  `pkg/llms_from_scratch/qwen3.py` (commit 0405b0c), which copies them from those files.
- `card_params_billion` is the model card's "Number of Parameters"; the estimate uses the exact count computed
  from the shapes (`Architecture.params`), and a test holds the two together (which also pins
  `tie_word_embeddings`: a tied 8B would count 7.57 B, the card says 8.2 B).
- Default layouts come from verl's own scripts where verl has one for the model (examples/grpo_trainer/
  run_qwen3-8b.sh, examples/sglang_multiturn/run_qwen3-4b_gsm8k_multiturn.sh, examples/tuning/<size>/ and
  docs/perf/device_tuning.rst for Qwen2.5); elsewhere they are the nearest Qwen2.5 size's, which each
  preset's `layout_source` says. A stack may override every one in `model:`; the planner checks the result.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from components.config.project import STACKS_DIR
from components.config.types import Strict, _text

Family = Literal["qwen2", "qwen3"]


@dataclass(frozen=True)
class ModelFamily:
    """What a `model_type` decides: the layer shapes the estimate assumes and what verl needs to run it."""

    model_type: str
    transformers_config: str  # transformers' config class; tools/measure_memory.py builds the model from it
    transformers_model: str
    transformers_decoder_layer: str  # the FSDP wrap unit (verl wraps each decoder layer)
    qkv_bias: bool  # q/k/v projections carry biases
    qk_norm: bool  # RMSNorm over head_dim on queries and keys
    # verl's rollout.multi_turn.format: the tool-call parser of verl/experimental/agent_loop/tool_parser.py.
    # Both families' chat templates wrap calls in <tool_call>{json}</tool_call> (Hermes style).
    tool_parser: str
    # The chat template ships in the model's tokenizer_config.json; verl applies it unchanged (no
    # custom_chat_template). Whether it has a thinking switch (`enable_thinking`, Qwen3's template).
    thinking: bool
    source: str


FAMILIES: dict[str, ModelFamily] = {
    "qwen2": ModelFamily(
        model_type="qwen2", transformers_config="Qwen2Config", transformers_model="Qwen2ForCausalLM",
        transformers_decoder_layer="Qwen2DecoderLayer", qkv_bias=True, qk_norm=False, tool_parser="hermes",
        thinking=False,
        source="transformers models/qwen2/modeling_qwen2.py (q/k/v Linear bias=True); Qwen2.5 tokenizer_config.json "
               "chat template (`<tool_call>` JSON, no thinking switch)"),
    "qwen3": ModelFamily(
        model_type="qwen3", transformers_config="Qwen3Config", transformers_model="Qwen3ForCausalLM",
        transformers_decoder_layer="Qwen3DecoderLayer", qkv_bias=False, qk_norm=True, tool_parser="hermes",
        thinking=True,
        source="transformers models/qwen3/modeling_qwen3.py (attention_bias False, q_norm/k_norm over head_dim); "
               "Qwen3 model card: enable_thinking in apply_chat_template, `<tool_call>` JSON (Hermes) tool calls"),
}
# Families the estimate does not cover: refused with this reason until it does.
REFUSED_MODEL_TYPES: dict[str, str] = {
    "qwen2_moe": "a mixture-of-experts model", "qwen3_moe": "a mixture-of-experts model",
    "mixtral": "a mixture-of-experts model", "deepseek_v2": "a mixture-of-experts model",
    "deepseek_v3": "a mixture-of-experts model",
}


@dataclass(frozen=True)
class Architecture:
    """The numbers of a model's config.json that decide its memory and its valid tensor-parallel sizes."""

    family: Family
    layers: int
    hidden_size: int
    intermediate_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool

    @property
    def qkv_bias(self) -> bool:
        return FAMILIES[self.family].qkv_bias

    @property
    def qk_norm(self) -> bool:
        return FAMILIES[self.family].qk_norm

    @property
    def q_size(self) -> int:
        return self.attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def layer_params(self) -> int:
        """One decoder layer: q/k/v/o projections (biases on q/k/v in Qwen2), q/k norms over head_dim (Qwen3),
        the SwiGLU MLP and the two RMSNorms."""
        h = self.hidden_size
        attn = h * self.q_size + 2 * h * self.kv_size + self.q_size * h
        if self.qkv_bias:
            attn += self.q_size + 2 * self.kv_size
        if self.qk_norm:
            attn += 2 * self.head_dim
        return attn + 3 * h * self.intermediate_size + 2 * h

    @property
    def embedding_params(self) -> int:
        """The root FSDP unit's tables: the embedding, and the LM head when it is not tied to it."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.embedding_params + self.hidden_size  # + final norm

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Layout:
    """Default parallelism of a model; every value can be overridden in the stack's `model:` section."""

    rollout_tp: int
    actor_param_offload: bool
    actor_optimizer_offload: bool
    ref_param_offload: bool
    gpu_memory_utilization: float
    ppo_micro_batch_size_per_gpu: int
    log_prob_micro_batch_size_per_gpu: int


@dataclass(frozen=True)
class ModelPreset:
    key: str
    hf_id: str
    modelscope_id: str
    arch: Architecture
    card_params_billion: float
    layout: Layout
    layout_source: str
    source: str

    @property
    def family(self) -> ModelFamily:
        return FAMILIES[self.arch.family]

    @property
    def params_billion(self) -> float:
        return round(self.arch.params / 1e9, 3)

    @property
    def dir_name(self) -> str:
        """Directory name under the models prefix; equal to the hub repo's name, as the tutorial uses."""
        return self.hf_id.split("/", 1)[1]


def _qwen25(size: str, card: float, layers: int, hidden: int, inter: int, heads: int, kv: int, tie: bool,
            layout: Layout, layout_source: str) -> ModelPreset:
    name = f"Qwen2.5-{size}-Instruct"
    return ModelPreset(
        key=f"qwen2.5-{size.lower()}-instruct", hf_id=f"Qwen/{name}", modelscope_id=f"Qwen/{name}",
        # The small models ship a 151936-entry embedding, 7B and up 152064 (config.json vocab_size).
        arch=Architecture("qwen2", layers, hidden, inter, heads, kv, hidden // heads,
                          151936 if size in ("0.5B", "1.5B", "3B") else 152064, tie),
        card_params_billion=card, layout=layout, layout_source=layout_source,
        source=f"huggingface.co/Qwen/{name} config.json and model card")


def _qwen3(size: str, card: float, layers: int, hidden: int, inter: int, heads: int, tie: bool, layout: Layout,
           layout_source: str) -> ModelPreset:
    name = f"Qwen3-{size}"
    # Every dense Qwen3 has 8 KV heads of 128 dimensions and the 151936-entry vocabulary (config.json).
    return ModelPreset(
        key=f"qwen3-{size.lower()}", hf_id=f"Qwen/{name}", modelscope_id=f"Qwen/{name}",
        arch=Architecture("qwen3", layers, hidden, inter, heads, 8, 128, 151936, tie),
        card_params_billion=card, layout=layout, layout_source=layout_source,
        source=f"huggingface.co/Qwen/{name} config.json (as in rasbt/LLMs-from-scratch qwen3.py @0405b0c) and "
               "model card")


_TUNING = "verl examples/tuning and docs/perf/device_tuning.rst (Qwen2.5 ladder), ../shared/research §4"
PRESETS: dict[str, ModelPreset] = {p.key: p for p in (
    _qwen25("0.5B", 0.49, 24, 896, 4864, 14, 2, True, Layout(1, False, False, False, 0.5, 8, 16), _TUNING),
    _qwen25("1.5B", 1.54, 28, 1536, 8960, 12, 2, True, Layout(1, False, False, True, 0.5, 8, 16), _TUNING),
    _qwen25("3B", 3.09, 36, 2048, 11008, 16, 2, True, Layout(2, False, False, True, 0.5, 1, 1),
            "the tutorial's run_qwen2.5-3b_gsm8k_tool_agent_mlflow.sh: TP 2, gpu_mem 0.5, ref offload"),
    # 28 heads / 4 KV heads: TP 8 is invalid for vLLM; TP 2 as in run_qwen2-7b*.sh.
    _qwen25("7B", 7.61, 28, 3584, 18944, 28, 4, False, Layout(2, False, False, True, 0.6, 4, 8),
            "verl examples/grpo_trainer/run_qwen2-7b.sh: TP 2, gpu_mem 0.6, ref offload"),
    _qwen25("14B", 14.7, 48, 5120, 13824, 40, 8, False, Layout(4, True, True, True, 0.5, 2, 4),
            "verl examples/tuning/14b/qwen2_14b_grpo_4_h800_fsdp_vllm.sh: TP 4, gpu_mem 0.5, full offload"),
    _qwen25("32B", 32.5, 64, 5120, 27648, 40, 8, False, Layout(8, True, True, True, 0.6, 1, 2), _TUNING),
    _qwen25("72B", 72.7, 80, 8192, 29568, 64, 8, False, Layout(8, True, True, True, 0.6, 1, 1),
            "verl examples/tuning/70b/qwen2-70b_grpo_32_h800_fsdp_vllm.sh: full offload, gpu_mem 0.6"),
    _qwen3("0.6B", 0.6, 28, 1024, 3072, 16, True, Layout(1, False, False, False, 0.5, 8, 16),
           "no verl script for Qwen3-0.6B on GPUs: Qwen2.5-0.5B's layout"),
    _qwen3("1.7B", 1.7, 28, 2048, 6144, 16, True, Layout(1, False, False, True, 0.5, 8, 16),
           "no verl script for Qwen3-1.7B on GPUs: Qwen2.5-1.5B's layout"),
    _qwen3("4B", 4.0, 36, 2560, 9728, 32, True, Layout(2, False, False, True, 0.5, 32, 32),
           "verl examples/sglang_multiturn/run_qwen3-4b_gsm8k_multiturn.sh: TP 2, gpu_mem 0.5, micro 32/32, "
           "ref offload"),
    _qwen3("8B", 8.2, 36, 4096, 12288, 32, False, Layout(2, False, False, True, 0.6, 32, 32),
           "verl examples/grpo_trainer/run_qwen3-8b.sh: TP 2, gpu_mem 0.6, micro 32/32, ref offload"),
    _qwen3("14B", 14.8, 40, 5120, 17408, 40, False, Layout(4, True, True, True, 0.5, 2, 4),
           "no verl script for Qwen3-14B on GPUs: Qwen2.5-14B's (examples/tuning/14b, full offload)"),
    _qwen3("32B", 32.8, 64, 5120, 25600, 64, False, Layout(8, True, True, True, 0.6, 1, 2),
           "no verl script for Qwen3-32B on GPUs (run_qwen3-32b_npu.sh is NPU): Qwen2.5-32B's"),
)}
PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)
CUSTOM = "custom"  # model.preset value of a stack that declares its own model (model.custom)


def export_presets() -> dict[str, dict]:
    """The presets as plain data for tools/measure_memory.py on a GPU box without the repo's dependencies."""
    return {k: {"hf_id": p.hf_id, **p.arch.as_dict(), "params": p.arch.params,
                **{f: getattr(p.layout, f) for f in ("ppo_micro_batch_size_per_gpu", "log_prob_micro_batch_size_per_gpu",
                                                     "actor_param_offload", "actor_optimizer_offload")}}
            for k, p in PRESETS.items()}


# --------------------------------------------------------------------------------------------- custom model
# A stack's own model (model.preset: custom): a hub repo with its architecture numbers, given in the stack or read
# offline from a config.json in the stacks folder. It is validated like a preset: a family the estimate covers,
# shapes that split into heads, and the layout rules of components/model run on it unchanged.
ARCH_FIELDS = ("family", "layers", "hidden_size", "intermediate_size", "attention_heads", "kv_heads", "head_dim",
               "vocab_size", "tie_word_embeddings")
# config.json key of each architecture field (transformers' PretrainedConfig names).
CONFIG_JSON_KEYS = {"family": "model_type", "layers": "num_hidden_layers", "hidden_size": "hidden_size",
                    "intermediate_size": "intermediate_size", "attention_heads": "num_attention_heads",
                    "kv_heads": "num_key_value_heads", "head_dim": "head_dim", "vocab_size": "vocab_size",
                    "tie_word_embeddings": "tie_word_embeddings"}
# Keys whose presence in a config.json means routed experts (transformers' MoE configs: Qwen2-MoE/Qwen3-MoE
# num_experts, Mixtral num_local_experts, DeepSeek n_routed_experts).
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
_REPO = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
HubRepo = Annotated[str, _text(_REPO, "a hub repository id", "use <owner>/<name>, e.g. Qwen/Qwen3-8B")]
_CONFIG_JSON = r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}\.json"
ConfigJsonPath = Annotated[str, _text(_CONFIG_JSON, "a config.json path",
                                      "give a path relative to the stacks folder, e.g. models/my-model.json",
                                      also=lambda v: "it may not leave the stacks folder" if ".." in v.split("/")
                                      else None)]


def refusal(model_type: str, config: dict | None = None) -> str | None:
    """Why a model family cannot be planned, or None when the estimate covers it."""
    moe = [k for k in MOE_KEYS if (config or {}).get(k)]
    if moe or model_type in REFUSED_MODEL_TYPES:
        why = f" (config.json sets {', '.join(moe)})" if moe else ""
        return (f"{model_type!r} is a mixture-of-experts model{why}: the memory estimate does not cover routed "
                f"experts yet, so the stack is refused; use a dense model ({', '.join(FAMILIES)})")
    if model_type not in FAMILIES:
        return (f"model family {model_type!r} is not one the memory estimate covers; use a model whose config.json "
                f"model_type is one of {', '.join(FAMILIES)}")
    return None


def read_config_json(path: Path) -> dict:
    """The architecture fields of a Hugging Face config.json (transformers' defaults where a key is absent:
    head_dim = hidden / heads, kv heads = heads, untied embeddings as Qwen2Config and Qwen3Config)."""
    try:
        c = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read {path}: {e}") from None
    if not isinstance(c, dict) or "model_type" not in c:
        raise ValueError(f"{path} is not a Hugging Face config.json (no model_type)")
    why = refusal(str(c["model_type"]), c)
    if why:
        raise ValueError(why)
    out = {f: c[k] for f, k in CONFIG_JSON_KEYS.items() if c.get(k) is not None}
    missing = [CONFIG_JSON_KEYS[f] for f in ARCH_FIELDS if f not in out and f not in
               ("kv_heads", "head_dim", "tie_word_embeddings")]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}")
    out.setdefault("kv_heads", out["attention_heads"])
    out.setdefault("tie_word_embeddings", False)
    return out


class CustomModelSettings(Strict):
    hf_id: HubRepo | None = Field(None, description="Hugging Face repository of the model (model.source: huggingface).")
    modelscope_id: HubRepo | None = Field(
        None, description="ModelScope repository (model.source: modelscope). Empty = the same id as hf_id.")
    config_json: ConfigJsonPath | None = Field(
        None, description="The model's config.json, copied into the stacks folder (path relative to it): the "
        "architecture numbers are read from it offline. Give either this or the numbers below.")
    family: str | None = Field(None, description=f"config.json model_type; one of {', '.join(FAMILIES)} (the "
                               "families the memory estimate covers; mixture-of-experts models are refused).")
    layers: int | None = Field(None, ge=1, le=1024, description="config.json num_hidden_layers.")
    hidden_size: int | None = Field(None, ge=1, le=1 << 20, description="config.json hidden_size.")
    intermediate_size: int | None = Field(None, ge=1, le=1 << 22, description="config.json intermediate_size.")
    attention_heads: int | None = Field(None, ge=1, le=4096, description="config.json num_attention_heads.")
    kv_heads: int | None = Field(None, ge=1, le=4096, description="config.json num_key_value_heads.")
    head_dim: int | None = Field(None, ge=1, le=4096, description="config.json head_dim. Empty = hidden_size / "
                                 "attention_heads (what transformers' Qwen2 attention uses when config.json has none).")
    vocab_size: int | None = Field(None, ge=1, le=1 << 24, description="config.json vocab_size.")
    tie_word_embeddings: bool | None = Field(None, description="config.json tie_word_embeddings.")

    @model_validator(mode="before")
    @classmethod
    def _read_config_json(cls, v):
        if not isinstance(v, dict) or v.get("config_json") is None or not isinstance(v["config_json"], str):
            return v
        given = sorted(f for f in ARCH_FIELDS if v.get(f) is not None)
        if given:
            raise ValueError(f"model.custom gives config_json and {', '.join(given)}: the numbers come from the "
                             "config.json; remove them (or config_json)")
        rel = v["config_json"]
        if not re.fullmatch(_CONFIG_JSON, rel) or ".." in rel.split("/"):
            return v  # outside the stacks folder: the field's rule reports it, nothing is read
        return {**v, **read_config_json(STACKS_DIR / rel)}

    @model_validator(mode="after")
    def _complete(self) -> "CustomModelSettings":
        if self.hf_id is None and self.modelscope_id is None:
            raise ValueError("model.custom needs hf_id or modelscope_id: the repository the staging Job downloads")
        missing = [f for f in ARCH_FIELDS if getattr(self, f) is None and f not in ("head_dim", "kv_heads")]
        if missing:
            raise ValueError(f"model.custom lacks {', '.join(missing)}; give them from the model's config.json or "
                             "set config_json")
        why = refusal(self.family)
        if why:
            raise ValueError(f"model.custom.family: {why}")
        heads, kv = self.attention_heads, self.kv_heads or self.attention_heads
        if heads % kv:
            raise ValueError(f"model.custom: {heads} attention heads do not split into {kv} KV heads; check "
                             "num_attention_heads / num_key_value_heads in config.json")
        if self.head_dim is None and self.hidden_size % heads:
            raise ValueError(f"model.custom: hidden_size {self.hidden_size} does not split into {heads} heads; give "
                             "head_dim from config.json")
        return self

    def architecture(self) -> Architecture:
        heads = self.attention_heads
        return Architecture(self.family, self.layers, self.hidden_size, self.intermediate_size, heads,
                            self.kv_heads or heads, self.head_dim or self.hidden_size // heads, self.vocab_size,
                            self.tie_word_embeddings)

    @property
    def repo_name(self) -> str:
        return (self.hf_id or self.modelscope_id).split("/", 1)[1]
