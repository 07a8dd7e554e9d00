"""GPU layout planner: resolve the model preset against the stack, then check verl's and vLLM's start-up
rules and a per-GPU memory estimate before anything is paid for.

Longer than 500 lines because the memory estimate's terms (the actor's, the critic's, LoRA's) and the rules that
compare them with the GPU read the same resolved layout; one module keeps each term next to the check that uses it.

Rules are numbered as in `../shared/research/verl_kuberay_agents.md` §3 "Start-up checks" (read from
verl's `utils/config.py::validate_config`, `workers/fsdp_workers.py`, `workers/config/*.py`,
`experimental/agent_loop/agent_loop.py`). Rules the program satisfies by construction (it always emits
exactly one `*_micro_batch_size_per_gpu`, verl's default `hybrid_engine=True` (never overridden), `use_remove_padding=True`,
`resume_mode=auto`, validation without sampling) are listed in `BY_CONSTRUCTION` so a reader can see every
rule accounted for. Each finding names the settings field, the rule and a fix.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

from components.config import Settings
from components.config.models import ModelPreset
from components.config.recipes import GROUP_ESTIMATORS
from components.config.task import train_rows
from components.model.presets import allowed_rollout_tp, preset_of, vllm_tp_ok

GIB = 1024**3
# Memory on the GPU outside PyTorch's allocator: CUDA context, NCCL and library workspaces (1.3 GiB measured
# on an H200 with torch 2.11, NCCL 2.28; more with real NCCL peers and vLLM's sleeping process beside it).
RUNTIME_OVERHEAD_GIB = 2.5
# Fitted to tools/measure_memory.py runs of verl's actor step (components/model/memory_calibration.json,
# docs/memory.md) by memory_calibration.fit_allocator (a test holds these equal to its result): what the caching
# allocator reserves beyond the peak it hands out, as a fraction of that peak, plus a fixed reserve, plus bytes per
# embedding/LM-head parameter (the unsharded root FSDP unit's odd-sized blocks), plus a share of the largest logits
# block. Every other term is derived from the mechanism. The leave-one-out test holds each point within
# 1.00-1.15x with the constants fitted without it.
ALLOCATOR_SLACK = 0.12
ALLOCATOR_RESERVE_GIB = 1.0743
ROOT_UNIT_SLACK_BYTES = 7.0
# The caching allocator's blocks left over by the step's largest transient tensors, the vocabulary-wide logits of a
# micro batch (bf16, with their fp32 log-softmax chunks): a share of the largest logits block (update or log-prob).
LOGITS_SLACK_SHARE = 0.05


@dataclass(frozen=True)
class AllocatorFit:
    """The four fitted constants of the estimate (everything else is derived from the mechanism); the leave-one-out
    test refits them without each calibration point in turn (components/model/memory_calibration.py)."""

    slack: float = ALLOCATOR_SLACK
    reserve_gib: float = ALLOCATOR_RESERVE_GIB
    root_unit_bytes: float = ROOT_UNIT_SLACK_BYTES
    logits_share: float = LOGITS_SLACK_SHARE
WARN_FRACTION = 0.90  # warn when the estimated peak passes 90 % of a GPU
RAY_CPUS_PER_GPU = 3  # verl's placement-group bundle is {CPU: 3, GPU: 1} (single_controller/ray/base.py)
NODE_RESERVED_CPUS = 4  # kubelet, CSI fuse pods, device plugin, logging daemons
NODE_RESERVED_MEMORY_GIB = 16
# KubeRay's SidecarMode appends a `ray-job-submitter` container to the head pod with requests 500m CPU / 200Mi and
# limits 1 CPU / 1Gi (ray-project/kuberay v1.7.0 ray-operator/controllers/ray/common/job.go
# GetDefaultSubmitterContainer; rayjob_controller.go appends it to the head's containers; docs/facts.md). The head's
# Ray container gives up the sidecar's limits, so the whole head pod fits the node like a worker pod does.
SUBMITTER_CPU_LIMIT = 1
SUBMITTER_MEMORY_LIMIT_GIB = 1
# The model prefetch (job.model_prefetch): every Ray pod's `model-prefetch` container holds the copy in a
# memory-backed emptyDir, and files written there count against the writing container's memory limit (Kubernetes
# docs, emptyDir medium Memory; docs/facts.md), so its limit is the copy plus the copier's own process, and the Ray
# container gives both up, like the submitter's. The default copy: bf16 weights + 10 % + 1 GiB (tokenizer, configs).
PREFETCH_CPUS = 1
PREFETCH_PROCESS_GIB = 1
PREFETCH_MARGIN = 1.10
PREFETCH_EXTRA_GIB = 1
PREFETCH_AUTO_SHARE = 4  # auto: on when the copy and the copier fit in a quarter of the Ray pod's memory

BY_CONSTRUCTION = {
    "2/6 micro batches": "exactly one of ppo_micro_batch_size / _per_gpu (and log-prob) is always emitted: the _per_gpu form",
    "4 deprecated total micro batch": "the deprecated total micro batch keys are never emitted",
    "9 loss_agg_mode": "training.loss_agg_mode is a closed enum in the settings model",
    "10 val_kwargs": "validation samples with training.val_temperature/val_top_p (0 = greedy by default); the v1 "
                      "agent loop reads only val_kwargs temperature/top_p/top_k, so no do_sample rule applies",
    "11 sp needs remove_padding": "model.use_remove_padding=True is always emitted",
    "12 hybrid_engine": "actor_rollout_ref.hybrid_engine keeps verl's default True (never overridden)",
    "13 resume_path": "trainer.resume_mode=auto is always emitted",
    "7 pipeline parallel": "rollout pipeline parallelism is never set (vLLM/SGLang do not implement it in verl)",
}


@dataclass(frozen=True)
class Finding:
    severity: Literal["error", "warning"]
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.field}: {self.message}"


@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated peak GiB per GPU in each phase of a hybrid-engine GRPO step."""

    gpu_gib: float
    train_gib: float  # train_reserved_gib plus RUNTIME_OVERHEAD_GIB: what the GPU must hold
    train_reserved_gib: float  # what PyTorch's caching allocator reserves (the calibrated part)
    rollout_gib: float
    vllm_weights_gib: float
    vllm_share_gib: float
    host_offload_gib_per_node: float
    breakdown: dict[str, float] = field(default_factory=dict)

    @property
    def peak_gib(self) -> float:
        return max(self.train_gib, self.rollout_gib)

    @property
    def peak_fraction(self) -> float:
        return self.peak_gib / self.gpu_gib


@dataclass(frozen=True)
class Layout:
    """The resolved GPU layout: preset defaults with the stack's overrides applied."""

    model: str
    hf_id: str
    nodes: int
    gpus_per_node: int
    world_size: int
    rollout_tp: int
    rollout_replicas: int
    actor_param_offload: bool
    actor_optimizer_offload: bool
    ref_param_offload: bool
    gpu_memory_utilization: float
    ppo_micro_batch_size_per_gpu: int
    log_prob_micro_batch_size_per_gpu: int
    ppo_mini_batch_per_gpu: int  # mini batch after verl's normalisation: mini * n / (N / sp)
    ray_cpus_per_gpu_pod: int
    memory_gib_per_gpu_pod: int
    # The head's Ray container: the same, less KubeRay's submitter sidecar in SidecarMode (SUBMITTER_*).
    head_ray_cpus: int
    head_memory_gib: int
    # The model copy's directory in every Ray pod, GiB; 0 = no prefetch (model_prefetch_gib).
    model_copy_gib: int
    uses_ref: bool
    memory: MemoryEstimate
    # PPO with a critic (training.algorithm: gae): the critic's micro batch per GPU (its setting, else the actor's).
    uses_critic: bool = False
    critic_micro_batch_size_per_gpu: int = 0
    # Defaults the layout changed so the preset fits the stack (shown as warnings, e.g. a capped micro batch).
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        d = asdict(self)
        d["memory"]["peak_gib"] = round(self.memory.peak_gib, 1)
        return d


def _pick(override, default):
    return default if override is None else override


def gpu_pod_gib(s: Settings) -> int:
    """A GPU node's memory for its one Ray pod: the node less what its daemons keep."""
    return s.gpu_pool.memory_gib_per_node - NODE_RESERVED_MEMORY_GIB


def model_copy_size_gib(s: Settings) -> int:
    """The model copy's directory: job.model_prefetch_gib, else the bf16 weights with a margin."""
    given = s.job.model_prefetch_gib
    if given is not None:
        return given
    return math.ceil(preset_of(s).arch.params * 2 * PREFETCH_MARGIN / 2**30) + PREFETCH_EXTRA_GIB


def model_prefetch_gib(s: Settings) -> int:
    """The copy's size when the prefetch runs, else 0: job.model_prefetch, or when empty whether the copy and its
    copier fit in a quarter of the Ray pod's memory."""
    on = s.job.model_prefetch
    size = model_copy_size_gib(s)
    if on is None:
        on = (size + PREFETCH_PROCESS_GIB) * PREFETCH_AUTO_SHARE <= gpu_pod_gib(s)
    return size if on else 0


def lora_params(arch, rank: int, target_modules) -> int:
    """Trainable LoRA parameters: rank x (in + out) per wrapped linear layer of every decoder layer (PEFT's A and B
    matrices). `all-linear` wraps q/k/v/o and gate/up/down (never the LM head); a list wraps the names it gives."""
    if not rank:
        return 0
    h, q, kv, inter = arch.hidden_size, arch.q_size, arch.kv_size, arch.intermediate_size
    sizes = {"q_proj": h + q, "k_proj": h + kv, "v_proj": h + kv, "o_proj": q + h,
             "gate_proj": h + inter, "up_proj": h + inter, "down_proj": inter + h}
    names = sizes if target_modules == "all-linear" else [n for n in target_modules if n in sizes]
    return arch.layers * rank * sum(sizes[n] for n in names)


def estimate_memory(s: Settings, preset: ModelPreset, *, world: int, tp: int, param_offload: bool,
                    optimizer_offload: bool, ref_offload: bool, gpu_mem_util: float, micro: int,
                    uses_ref: bool, critic: bool = False, critic_micro: int = 0,
                    fit: AllocatorFit | None = None) -> MemoryEstimate:
    """Per-GPU memory of the two phases that peak in a verl hybrid-engine step.

    Training phase, as verl 0.9.1's FSDP engine runs it (calibrated against tools/measure_memory.py, see
    docs/memory.md). The allocator's peak is the larger of
    - the update: fp32 master parameters, gradients and Adam moments (16 B per parameter, sharded over all
      GPUs; verl loads offloaded state back for the update), plus either one micro batch's activations
      (bf16 logits over the vocabulary, whose fp32 log-softmax runs in chunks and backward in place; one bf16
      hidden state per layer kept by gradient checkpointing; one layer's recompute working set; the root
      FSDP unit, embeddings and LM head, gathered in bf16 with an fp32 gradient, unsharded) or AdamW's step,
      which holds one more fp32 temporary per parameter;
    - the old-log-prob forward (no gradients, `log_prob_micro_batch_size_per_gpu`): parameters and whatever
      optimizer state is not offloaded, the bf16 logits and the gathered root unit.
    PyTorch reserves more than that peak (ALLOCATOR_SLACK, ALLOCATOR_RESERVE_GIB, ROOT_UNIT_SLACK_BYTES), and
    the CUDA context and NCCL sit outside it (RUNTIME_OVERHEAD_GIB).
    Rollout phase: vLLM wakes up and takes `gpu_memory_utilization` of the GPU while whatever the actor and
    reference did not offload stays resident; vLLM's own bf16 weight shard must fit inside its share.
    """
    a = preset.arch
    # The exact parameter count of the family's layers (components/config/models.py, equal to transformers'
    # own model's count); the root FSDP unit holds the embedding and, when untied, the LM head.
    p = a.params
    gpu = s.gpu_pool.gpu_memory_gib
    t = s.training
    h, layers, vocab = a.hidden_size, a.layers, a.vocab_size
    embed = a.embedding_params
    seq = t.max_prompt_length + t.max_response_length
    log_prob_micro = _pick(s.model.log_prob_micro_batch_size_per_gpu, preset.layout.log_prob_micro_batch_size_per_gpu)
    sp = t.ulysses_sequence_parallel_size
    tokens = (t.ppo_max_token_len_per_gpu if t.use_dynamic_bsz else micro * seq) / sp
    log_prob_tokens = (t.ppo_max_token_len_per_gpu if t.use_dynamic_bsz else log_prob_micro * seq) / sp

    # LoRA (model.lora_rank): the base stays in its fp32 shard, frozen (no gradient, no Adam state); only the
    # adapters train, so they alone carry the 12 extra bytes and the optimizer step's temporary, and the embedding
    # (frozen) gets no fp32 gradient in the root unit.
    lora = lora_params(a, s.model.lora_rank, s.model.target_modules)
    trainable = lora if lora else p
    actor_states = 4 * (p + lora) / world + 12 * trainable / world
    adam_step = 4 * trainable / world
    logits = tokens * vocab * 2
    checkpoints = layers * tokens * h * 2
    # One layer's recompute: six hidden-wide and six query-wide bf16 tensors per token (q_size = heads x head_dim
    # equals the hidden size in Qwen2; Qwen3's head_dim 128 makes it wider or narrower) and four MLP-wide ones.
    layer_work = tokens * (h * 6 + a.q_size * 6 + a.intermediate_size * 4) * 2
    root_unit = embed * (2 + (0 if lora else 4))
    # What the actor keeps on the GPU while it does not compute (fp32 parameters and Adam's moments; gradients are
    # freed after each step), unless offloaded.
    resident_actor = (0 if param_offload else 4 * (p + lora) / world) + (
        0 if optimizer_offload else 8 * trainable / world)

    # The critic (PPO, training.algorithm: gae) shares the GPUs (verl's colocated worker group): the actor's model
    # with a one-output value head in place of the LM head (AutoModelForTokenClassification), its own fp32
    # parameters, gradients and Adam moments; no vocabulary-wide logits. Its own update and value forward run while
    # the actor's state stays resident, and the actor's phases run beside the critic's resident state.
    critic_p = p - (0 if a.tie_word_embeddings else vocab * h) + h
    critic_embed = vocab * h
    critic_resident = critic_phase = 0.0
    if critic:
        c = s.training.critic
        c_tokens = (t.ppo_max_token_len_per_gpu if t.use_dynamic_bsz else critic_micro * seq) / sp
        c_work = layers * c_tokens * h * 2 + c_tokens * (h * 6 + a.q_size * 6 + a.intermediate_size * 4) * 2
        critic_update = 16 * critic_p / world + max(c_work + critic_embed * 6, 4 * critic_p / world)
        critic_values = ((4 if c.optimizer_offload else 12) * critic_p / world + critic_embed * 2
                         + c_tokens * h * 16)
        critic_resident = (0 if c.param_offload else 4 * critic_p / world) + (
            0 if c.optimizer_offload else 8 * critic_p / world)
        critic_phase = max(critic_update, critic_values) + resident_actor
    update = actor_states + max(logits + checkpoints + layer_work + root_unit, adam_step) + critic_resident
    log_prob = (4 * (p + lora) / world + (0 if optimizer_offload else 8 * trainable / world)
                + log_prob_tokens * vocab * 2 + embed * 2 + log_prob_tokens * h * 16 + critic_resident)
    allocated = max(update, log_prob, critic_phase)
    fit = fit or AllocatorFit()
    slack = (fit.slack * allocated + fit.reserve_gib * GIB + fit.root_unit_bytes * embed
             + fit.logits_share * max(logits, log_prob_tokens * vocab * 2))
    reserved = (allocated + slack) / GIB
    train = reserved + RUNTIME_OVERHEAD_GIB

    # With LoRA verl's reference policy is the actor with its adapters off (ref_in_actor): no reference model.
    resident_ref = 0 if (ref_offload or not uses_ref or lora) else 2 * p / world
    share = gpu_mem_util * gpu
    rollout = (resident_actor + resident_ref + critic_resident) / GIB + share + RUNTIME_OVERHEAD_GIB
    # vLLM holds the adapter in bf16 beside the base weights (verl: max_loras 1, max_lora_rank = lora_rank).
    vllm_weights = (2 * p + 2 * lora) / tp / GIB

    gpus_per_node = s.gpu_pool.gpus_per_node
    host = 0.0
    if param_offload:
        host += 4 * p / world
    if optimizer_offload:
        host += 8 * trainable / world
    if ref_offload and uses_ref and not lora:
        host += 2 * p / world
    if critic:
        host += (4 * critic_p / world if s.training.critic.param_offload else 0) + (
            8 * critic_p / world if s.training.critic.optimizer_offload else 0)
    return MemoryEstimate(
        gpu_gib=gpu,
        train_gib=round(train, 2),
        train_reserved_gib=round(reserved, 2),
        rollout_gib=round(rollout, 2),
        vllm_weights_gib=round(vllm_weights, 2),
        vllm_share_gib=round(share, 2),
        host_offload_gib_per_node=round(host * gpus_per_node / GIB, 2),
        breakdown={
            "actor_fp32_params_grads_adam": round(actor_states / GIB, 2),
            "adam_step_temporary": round(adam_step / GIB, 2),
            "activation_checkpoints": round(checkpoints / GIB, 2),
            "recompute_working_set": round(layer_work / GIB, 2),
            "logits_bf16": round(logits / GIB, 2),
            "root_unit_unsharded": round(root_unit / GIB, 2),
            "log_prob_phase": round(log_prob / GIB, 2),
            "allocator_slack": round(slack / GIB, 2),
            "resident_during_rollout": round((resident_actor + resident_ref + critic_resident) / GIB, 2),
            **({"critic_resident": round(critic_resident / GIB, 2), "critic_phase": round(critic_phase / GIB, 2)}
               if critic else {}),
            **({"lora_adapters": round(16 * lora / world / GIB, 2)} if lora else {}),
            "runtime_overhead": RUNTIME_OVERHEAD_GIB,
        },
    )


def resolve_layout(s: Settings) -> Layout:
    """Apply overrides to the preset. Does not check anything; `check_layout` does."""
    preset = preset_of(s)
    m = s.model
    world = s.gpu_pool.nodes * s.gpu_pool.gpus_per_node
    tp = _pick(m.rollout_tp, preset.layout.rollout_tp)
    uses_ref = s.training.use_kl_loss or s.training.use_kl_in_reward
    po = _pick(m.actor_param_offload, preset.layout.actor_param_offload)
    oo = _pick(m.actor_optimizer_offload, preset.layout.actor_optimizer_offload)
    ro = _pick(m.ref_param_offload, preset.layout.ref_param_offload)
    util = _pick(m.gpu_memory_utilization, preset.layout.gpu_memory_utilization)
    sp = s.training.ulysses_sequence_parallel_size
    dp_sp = max(world // sp, 1)
    mini = s.training.ppo_mini_batch_size * s.training.rollout_n // dp_sp
    notes: list[str] = []
    micro = m.ppo_micro_batch_size_per_gpu
    if micro is None:
        micro = fitted_micro(preset.layout.ppo_micro_batch_size_per_gpu, mini, s.training.use_dynamic_bsz)
        if micro != preset.layout.ppo_micro_batch_size_per_gpu:
            notes.append(f"the {preset.key} preset's micro batch {preset.layout.ppo_micro_batch_size_per_gpu} does not "
                         f"divide this stack's per-GPU mini batch {mini}: it uses {micro}, the largest divisor of {mini} "
                         "not above it (set model.ppo_micro_batch_size_per_gpu to choose)")
    critic = s.training.algorithm == "gae"  # verl's need_critic (verl_config.uses_critic)
    critic_micro = (_pick(s.training.critic.ppo_micro_batch_size_per_gpu, micro) if critic else 0)
    mem = estimate_memory(s, preset, world=world, tp=tp, param_offload=po, optimizer_offload=oo, ref_offload=ro,
                          gpu_mem_util=util, micro=micro, uses_ref=uses_ref, critic=critic, critic_micro=critic_micro)
    copy_gib = model_prefetch_gib(s)
    ray_cpus = s.gpu_pool.cpus_per_node - NODE_RESERVED_CPUS - (PREFETCH_CPUS if copy_gib else 0)
    pod_gib = gpu_pod_gib(s) - (copy_gib + PREFETCH_PROCESS_GIB if copy_gib else 0)
    sidecar = s.job.submission_mode == "SidecarMode"
    return Layout(
        model=preset.key,
        hf_id=preset.hf_id,
        nodes=s.gpu_pool.nodes,
        gpus_per_node=s.gpu_pool.gpus_per_node,
        world_size=world,
        rollout_tp=tp,
        rollout_replicas=max(world // tp, 1),
        actor_param_offload=po,
        actor_optimizer_offload=oo,
        ref_param_offload=ro,
        gpu_memory_utilization=util,
        ppo_micro_batch_size_per_gpu=micro,
        log_prob_micro_batch_size_per_gpu=_pick(m.log_prob_micro_batch_size_per_gpu,
                                                preset.layout.log_prob_micro_batch_size_per_gpu),
        ppo_mini_batch_per_gpu=mini,
        ray_cpus_per_gpu_pod=ray_cpus,
        memory_gib_per_gpu_pod=pod_gib,
        head_ray_cpus=ray_cpus - (SUBMITTER_CPU_LIMIT if sidecar else 0),
        head_memory_gib=pod_gib - (SUBMITTER_MEMORY_LIMIT_GIB if sidecar else 0),
        model_copy_gib=copy_gib,
        uses_ref=uses_ref,
        memory=mem,
        uses_critic=critic,
        critic_micro_batch_size_per_gpu=critic_micro,
        notes=tuple(notes),
    )


def fitted_micro(preset_micro: int, mini_per_gpu: int, dynamic: bool) -> int:
    """A preset's micro batch in a stack: as the preset says when it divides the per-GPU mini batch (verl's rule 5),
    else the largest divisor of the mini batch below it (a preset's micro batch comes from verl's example at its
    batch sizes; a smaller stack would otherwise be refused for a default it never chose)."""
    if dynamic or mini_per_gpu <= 0 or mini_per_gpu % preset_micro == 0:
        return preset_micro
    return max(d for d in range(1, min(preset_micro, mini_per_gpu) + 1) if mini_per_gpu % d == 0)


def _divisors_hint(values: list[int]) -> str:
    return ", ".join(str(v) for v in values) if values else "none"


def check_layout(s: Settings) -> list[Finding]:
    """Every verl/vLLM start-up rule and the memory fit, as findings (errors refuse the stack)."""
    L = resolve_layout(s)
    preset = preset_of(s)
    t = s.training
    out: list[Finding] = []

    def err(f: str, m: str) -> None:
        out.append(Finding("error", f, m))

    def warn(f: str, m: str) -> None:
        out.append(Finding("warning", f, m))

    N, B, n, sp = L.world_size, t.train_batch_size, t.rollout_n, t.ulysses_sequence_parallel_size
    tp = L.rollout_tp
    tp_field = "model.rollout_tp"

    # vLLM: heads (and KV heads) divisible by the rollout TP.
    if not vllm_tp_ok(preset, tp):
        ok = [v for v in allowed_rollout_tp(preset, N) if N % v == 0]
        err(tp_field, f"rollout TP {tp} does not divide {preset.hf_id.split('/')[1]}'s {preset.arch.attention_heads} "
                      f"attention heads / {preset.arch.kv_heads} KV heads (vLLM rule); use {_divisors_hint(ok)}")
    # Rule 7: rollout mesh.
    if N % tp:
        err(tp_field, f"rollout TP {tp} does not divide the {N} GPUs (rule 7: world % TP == 0); "
                      f"use a TP that divides {N}")
    elif tp % min(L.gpus_per_node, tp):
        err(tp_field, f"rollout TP {tp} neither fits inside a {L.gpus_per_node}-GPU node nor spans whole nodes "
                      f"(rule 7); use a divisor of {L.gpus_per_node} or a multiple of it")
    # Ulysses sequence parallel: same head rule, divides the world, needs remove_padding (always on).
    if sp > 1:
        if preset.arch.attention_heads % sp or N % sp:
            err("training.ulysses_sequence_parallel_size",
                f"sequence parallel {sp} must divide the {preset.arch.attention_heads} attention heads and the {N} GPUs")
    if not t.use_dynamic_bsz:
        # Rule 1: (B*n) % N.
        if (B * n) % N:
            err("training.train_batch_size",
                f"train_batch_size x rollout_n = {B}x{n} = {B * n} is not divisible by the {N} GPUs (rule 1); "
                f"make train_batch_size x rollout_n a multiple of {N}")
    # Rule 3.
    if B < t.ppo_mini_batch_size:
        err("training.ppo_mini_batch_size",
            f"ppo_mini_batch_size {t.ppo_mini_batch_size} exceeds train_batch_size {B} (rule 3); lower it to <= {B}")
    # Rule 5: worker normalisation of the mini batch.
    dp = N // sp if N % sp == 0 else 0
    if dp:
        total = t.ppo_mini_batch_size * n
        if total % dp or total // dp == 0:
            err("training.ppo_mini_batch_size",
                f"ppo_mini_batch_size x rollout_n = {total} must be a positive multiple of the {dp} data-parallel "
                f"ranks (rule 5; verl floors the division silently); use a mini batch whose x{n} is a multiple of {dp}")
        elif not t.use_dynamic_bsz and L.ppo_mini_batch_per_gpu % L.ppo_micro_batch_size_per_gpu:
            err("model.ppo_micro_batch_size_per_gpu",
                f"the per-GPU mini batch {L.ppo_mini_batch_per_gpu} is not divisible by ppo_micro_batch_size_per_gpu "
                f"{L.ppo_micro_batch_size_per_gpu} (rule 5); use a divisor of {L.ppo_mini_batch_per_gpu}")
        elif L.uses_critic and not t.use_dynamic_bsz and L.ppo_mini_batch_per_gpu % L.critic_micro_batch_size_per_gpu:
            err("training.critic.ppo_micro_batch_size_per_gpu",
                f"the per-GPU mini batch {L.ppo_mini_batch_per_gpu} (the critic's mini batch is the actor's) is not "
                f"divisible by the critic's micro batch {L.critic_micro_batch_size_per_gpu} (rule 5, "
                f"workers/config/critic.py); use a divisor of {L.ppo_mini_batch_per_gpu}")
    for note in L.notes:
        warn("model.ppo_micro_batch_size_per_gpu", note)
    if t.recipe == "dapo" and t.dapo.reward_manager == "dapo":
        warn("training.dapo.reward_manager",
             "verl 0.9.1's dapo reward manager passes the reward function no tool fields (tool_extra_fields: the "
             "tool rewards and the model-only text the naive manager adds), so tool penalties do not enter the "
             "reward and the scored text includes tool replies; use reward_manager: naive to keep them (no overlong "
             "penalty)")
    # Rule 8: agent-loop workers split the batch evenly.
    if (B * n) % t.agent_num_workers:
        err("training.agent_num_workers",
            f"train_batch_size x rollout_n = {B * n} is not divisible by agent_num_workers {t.agent_num_workers} "
            "(rule 8: DataProto.chunk needs equal chunks); use a divisor such as 8")
    # Rule 14: the train dataloader drops the last partial batch.
    try:
        rows = train_rows(s)
    except ValueError:  # a missing file is the settings rule's problem, an unreadable one the task proof's
        rows = B
    if rows < B:
        err("training.train_batch_size",
            f"train_batch_size {B} is larger than the {rows} training rows (rule 14: drop_last leaves no batch); "
            f"lower it or raise dataset.train_subset" + (" (or give more rows in task.dataset.train)"
                                                         if s.task.dataset.own_files else ""))
    # Rule 15: group-relative estimators need several samples per prompt.
    if t.algorithm in GROUP_ESTIMATORS and n < 2:
        err("training.rollout_n", f"{t.algorithm} needs rollout_n >= 2 (rule 15: with one sample every advantage is "
                                  "zero and nothing is learned); use e.g. 8 or 16")
    # Rule 16: Ray resources per GPU node.
    need_cpus = RAY_CPUS_PER_GPU * L.gpus_per_node + 1  # +1: verl's TaskRunner (num_cpus=1) on the head
    prefetch_cpus = PREFETCH_CPUS if L.model_copy_gib else 0
    if L.ray_cpus_per_gpu_pod < need_cpus:
        err("gpu_pool.cpus_per_node",
            f"a GPU node offers {L.ray_cpus_per_gpu_pod} CPUs to Ray after {NODE_RESERVED_CPUS} reserved"
            + (f" and {prefetch_cpus} for the model prefetch" if prefetch_cpus else "") +
            f", but verl needs {RAY_CPUS_PER_GPU} per GPU plus 1 ({need_cpus}) (rule 16); use a node type with >= "
            f"{need_cpus + NODE_RESERVED_CPUS + prefetch_cpus} vCPUs or fewer GPUs per node"
            + (" (or job.model_prefetch: false)" if prefetch_cpus else ""))
    # The head pod with KubeRay's submitter sidecar: the head's Ray container keeps what the sidecar leaves.
    elif L.head_ray_cpus < need_cpus:
        err("gpu_pool.cpus_per_node",
            f"the head's Ray container gets {L.head_ray_cpus} CPUs ({L.ray_cpus_per_gpu_pod} less the "
            f"{SUBMITTER_CPU_LIMIT} KubeRay's SidecarMode submitter may use), but verl needs {need_cpus} (rule 16); use "
            f"a node type with >= {need_cpus + NODE_RESERVED_CPUS + prefetch_cpus + SUBMITTER_CPU_LIMIT} vCPUs or "
            "job.submission_mode "
            "K8sJobMode")
    if t.save_freq == 0:
        err("training.save_freq", "save_freq 0 is not a frequency; use -1 (never) or a positive step count")
    if t.test_freq == 0:
        err("training.test_freq", "test_freq 0 is not a frequency; use -1 (never) or a positive step count")
    if "mlflow" in t.logger and not s.tracking.enabled:
        warn("training.logger", "mlflow logging without tracking.enabled writes to the Ray head pod and is lost "
                                "when the job ends; enable tracking")
    if t.val_before_train and not t.val_only and t.total_training_steps is not None and t.total_training_steps <= 2:
        warn("training.val_before_train", "a smoke run with val_before_train spends most of its time validating")

    # Memory fit.
    mem = L.memory
    if mem.vllm_weights_gib >= mem.vllm_share_gib:
        err("model.gpu_memory_utilization",
            f"vLLM's weight shard ({mem.vllm_weights_gib:.1f} GiB at TP {tp}) does not fit in its share "
            f"({L.gpu_memory_utilization} x {mem.gpu_gib} GiB = {mem.vllm_share_gib:.1f} GiB), leaving no KV cache; "
            "raise rollout_tp or gpu_memory_utilization, or use GPUs with more memory")
    elif mem.vllm_weights_gib > 0.8 * mem.vllm_share_gib:
        warn("model.gpu_memory_utilization",
             f"vLLM's weights take {mem.vllm_weights_gib:.1f} of its {mem.vllm_share_gib:.1f} GiB; little KV cache "
             "is left and rollouts will be slow")
    for phase, gib in (("training", mem.train_gib), ("rollout", mem.rollout_gib)):
        if gib > mem.gpu_gib:
            fix = ("use more GPUs (FSDP shards the 16 bytes/parameter of training state over all of them)"
                   if phase == "training" else
                   "turn on actor_param_offload/actor_optimizer_offload/ref_param_offload or lower gpu_memory_utilization")
            err("gpu_pool.gpu_memory_gib",
                f"estimated {phase} peak {gib:.1f} GiB per GPU exceeds the {mem.gpu_gib} GiB GPU "
                f"({preset.hf_id.split('/')[1]} on {N} GPUs); {fix}")
        elif gib > WARN_FRACTION * mem.gpu_gib:
            warn("gpu_pool.gpu_memory_gib",
                 f"estimated {phase} peak {gib:.1f} GiB is above {int(WARN_FRACTION * 100)} % of the {mem.gpu_gib} GiB "
                 "GPU; the estimate is coarse, expect OOM risk")
    copy_gib = model_copy_size_gib(s)
    if s.job.model_prefetch and (copy_gib + PREFETCH_PROCESS_GIB) * 2 > gpu_pod_gib(s):
        err("job.model_prefetch",
            f"the model copy ({copy_gib} GiB, job.model_prefetch_gib) and its copier ({PREFETCH_PROCESS_GIB} GiB) are "
            f"memory-backed and would take more than half of the Ray pod's {gpu_pod_gib(s)} GiB; turn "
            "job.model_prefetch off (verl then reads the model from OSS) or use nodes with more memory")
    if mem.host_offload_gib_per_node > L.memory_gib_per_gpu_pod:
        err("gpu_pool.memory_gib_per_node",
            f"offloaded state needs {mem.host_offload_gib_per_node:.0f} GiB of host memory per node but the pod gets "
            f"{L.memory_gib_per_gpu_pod} GiB; use more nodes or hosts with more memory")
    return out
