"""Model presets: the Qwen2.5 Instruct family with the architecture facts the layout rules need.

Architecture numbers come from each model's `config.json` on the Hugging Face hub (Qwen/Qwen2.5-*-Instruct):
`num_attention_heads`, `num_key_value_heads`, `num_hidden_layers`, `hidden_size`, `intermediate_size`,
`vocab_size`. Parameter counts are the model cards' figures. Default parallelism is derived from verl's
tuning scripts (`examples/tuning/<size>/`, `docs/perf/device_tuning.rst`) for 80 GB-class GPUs; see
`../shared/research/verl_kuberay_agents.md` section 4. A stack names a preset and may override any
parallelism value in `model:`; the planner checks the result, never the preset alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.config import PRESET_NAMES, Settings


@dataclass(frozen=True)
class ModelPreset:
    key: str
    hf_id: str
    modelscope_id: str
    params_billion: float
    layers: int
    hidden_size: int
    intermediate_size: int
    attention_heads: int
    kv_heads: int
    vocab_size: int
    # Default parallelism; every one of these can be overridden in the stack's `model:` section.
    rollout_tp: int
    actor_param_offload: bool
    actor_optimizer_offload: bool
    ref_param_offload: bool
    gpu_memory_utilization: float
    ppo_micro_batch_size_per_gpu: int
    log_prob_micro_batch_size_per_gpu: int

    @property
    def dir_name(self) -> str:
        """Directory name under the models prefix; equal to the hub repo's name, as the tutorial uses."""
        return self.hf_id.split("/", 1)[1]


def _qwen(size: str, params: float, layers: int, hidden: int, inter: int, heads: int, kv: int, **par) -> ModelPreset:
    name = f"Qwen2.5-{size}-Instruct"
    return ModelPreset(
        key=f"qwen2.5-{size.lower()}-instruct",
        hf_id=f"Qwen/{name}",
        modelscope_id=f"Qwen/{name}",
        params_billion=params,
        layers=layers,
        hidden_size=hidden,
        intermediate_size=inter,
        attention_heads=heads,
        kv_heads=kv,
        # The small models ship a 151936-entry embedding, 7B and up 152064.
        vocab_size=151936 if size in ("0.5B", "1.5B", "3B") else 152064,
        **par,
    )


PRESETS: dict[str, ModelPreset] = {
    p.key: p
    for p in (
        _qwen("0.5B", 0.49, 24, 896, 4864, 14, 2, rollout_tp=1, actor_param_offload=False,
              actor_optimizer_offload=False, ref_param_offload=False, gpu_memory_utilization=0.5,
              ppo_micro_batch_size_per_gpu=8, log_prob_micro_batch_size_per_gpu=16),
        _qwen("1.5B", 1.54, 28, 1536, 8960, 12, 2, rollout_tp=1, actor_param_offload=False,
              actor_optimizer_offload=False, ref_param_offload=True, gpu_memory_utilization=0.5,
              ppo_micro_batch_size_per_gpu=8, log_prob_micro_batch_size_per_gpu=16),
        # The tutorial's model: TP 2, gpu_mem 0.5, ref offload (run_qwen2.5-3b_gsm8k_tool_agent_mlflow.sh).
        _qwen("3B", 3.09, 36, 2048, 11008, 16, 2, rollout_tp=2, actor_param_offload=False,
              actor_optimizer_offload=False, ref_param_offload=True, gpu_memory_utilization=0.5,
              ppo_micro_batch_size_per_gpu=1, log_prob_micro_batch_size_per_gpu=1),
        # 28 heads / 4 KV heads: TP 8 is invalid for vLLM; TP 2 as in run_qwen2-7b*.sh.
        _qwen("7B", 7.61, 28, 3584, 18944, 28, 4, rollout_tp=2, actor_param_offload=False,
              actor_optimizer_offload=False, ref_param_offload=True, gpu_memory_utilization=0.6,
              ppo_micro_batch_size_per_gpu=4, log_prob_micro_batch_size_per_gpu=8),
        _qwen("14B", 14.7, 48, 5120, 13824, 40, 8, rollout_tp=4, actor_param_offload=True,
              actor_optimizer_offload=True, ref_param_offload=True, gpu_memory_utilization=0.5,
              ppo_micro_batch_size_per_gpu=2, log_prob_micro_batch_size_per_gpu=4),
        _qwen("32B", 32.5, 64, 5120, 27648, 40, 8, rollout_tp=8, actor_param_offload=True,
              actor_optimizer_offload=True, ref_param_offload=True, gpu_memory_utilization=0.6,
              ppo_micro_batch_size_per_gpu=1, log_prob_micro_batch_size_per_gpu=2),
        _qwen("72B", 72.7, 80, 8192, 29568, 64, 8, rollout_tp=8, actor_param_offload=True,
              actor_optimizer_offload=True, ref_param_offload=True, gpu_memory_utilization=0.6,
              ppo_micro_batch_size_per_gpu=1, log_prob_micro_batch_size_per_gpu=1),
    )
}


def allowed_rollout_tp(preset: ModelPreset, limit: int = 64) -> list[int]:
    """TP sizes vLLM accepts for this model: heads divisible by TP, and KV heads divisible by TP
    (TP <= kv_heads) or TP divisible by KV heads (KV heads replicated, TP > kv_heads)."""
    return [tp for tp in range(1, limit + 1) if vllm_tp_ok(preset, tp)]


def vllm_tp_ok(preset: ModelPreset, tp: int) -> bool:
    if tp < 1 or preset.attention_heads % tp:
        return False
    if tp <= preset.kv_heads:
        return preset.kv_heads % tp == 0
    return tp % preset.kv_heads == 0


def preset_of(s: Settings) -> ModelPreset:
    """The model preset a stack names."""
    return PRESETS[s.model.preset]


def render_presets_table() -> str:
    def yn(b: bool) -> str:
        return "yes" if b else "no"

    lines = ["| preset | params | layers / hidden | heads / KV heads | rollout TP (vLLM-valid up to 64) "
             "| offload actor / optim / ref | gpu_mem | micro (actor / log-prob) |", "|---|---|---|---|---|---|---|---|"]
    for p in PRESETS.values():
        tps = ", ".join(str(t) for t in allowed_rollout_tp(p))
        lines.append(
            f"| {p.key} | {p.params_billion} B | {p.layers} / {p.hidden_size} | {p.attention_heads} / {p.kv_heads} "
            f"| {p.rollout_tp} ({tps}) | {yn(p.actor_param_offload)} / {yn(p.actor_optimizer_offload)} / "
            f"{yn(p.ref_param_offload)} | {p.gpu_memory_utilization} | {p.ppo_micro_batch_size_per_gpu} / "
            f"{p.log_prob_micro_batch_size_per_gpu} |")
    return "\n".join(lines)


if tuple(PRESETS) != PRESET_NAMES:  # the settings' Literal and this table must name the same presets
    raise ImportError(f"components.config PRESET_NAMES {PRESET_NAMES} != presets {tuple(PRESETS)}")
