#!/usr/bin/env python3
"""Measure the per-GPU memory of verl's FSDP actor step for a model preset, on the GPUs of this machine.

    torchrun --nproc_per_node 2 tools/measure_memory.py --preset qwen2.5-3b-instruct --seq-len 2048 --out 3b.json
    python tools/measure_memory.py --preset qwen2.5-7b-instruct --simulate-world 8 --out 7b-w8.json  # one GPU
    python tools/measure_memory.py presets --out presets.json   # where the repository's requirements are installed
    python tools/measure_memory.py collect DIR --out table.json # merge point files into a calibration table

tools/calibrate.sh runs the calibration sweep; docs/memory.md says how to calibrate on your own GPUs.

Reproduces what verl 0.9.1 does for the training phase of a hybrid-engine GRPO step, as the verl-ack stack
configures it (workers/engine/fsdp/transformer_impl.py, workers/engine_workers.py, trainer/ppo/ray_trainer.py):
the model family's own transformers model (`AutoConfig.for_model(<model_type>)`: Qwen2Config, Qwen3Config)
built from the preset's shapes with random weights (nothing is downloaded), fp32 master weights
(`fsdp_config.model_dtype: fp32`), gradient checkpointing (non-reentrant), FSDP1 FULL_SHARD wrapping each
decoder layer (the model's `_no_split_modules`, as verl's wrap policy) with MixedPrecision(param bf16,
reduce fp32, buffer fp32), AdamW (torch.optim, lr 1e-6, weight decay 0.01) with gradient clipping at 1.0,
remove-padding (one packed row per micro batch), then per step: the old-log-prob forward (no grad, entropy
on, `log_prob_micro_batch_size_per_gpu`) and the update
(`ppo_micro_batch_size_per_gpu`, gradient accumulation over micro batches, PPO-clip + low-var KL loss,
token-mean). Log-probs are taken in fp32 over the vocabulary with flash-attn's Triton cross-entropy
(backward in place into the bf16 logits) as verl does when flash-attn is installed; without flash-attn an
equivalent chunked torch function with the same memory profile is used and recorded. Every sequence is at
the full length (prompt + response), the worst case the layout check must cover. The training phase runs
with `expandable_segments:True`, as verl sets it after each weight sync.

Each rank writes its peak allocated and reserved memory (torch.cuda.max_memory_*) per phase; rank 0 merges
them with the machine, the versions and the exact configuration into one JSON file. An OOM is a result,
recorded as such. `--simulate-world N` plays rank 0 of N GPUs in one process with torch's fake process group:
every shard, gather and buffer PyTorch allocates is sized as on N GPUs, the collectives move no data.
The arguments, shapes and JSON layout are plain functions without torch so CI can test them.

Longer than 500 lines because it must run as one file on a bare GPU box (torch and transformers only, nothing of
this repository importable there): model building, verl's actor step, the simulated process group and the JSON
writer travel together.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import socket
import sys
import time
import traceback
from dataclasses import asdict, dataclass, fields
from pathlib import Path

GIB = 1024**3
SCHEMA = 1
REPO = Path(__file__).resolve().parent.parent
ROPE_THETA = 1_000_000.0  # Qwen2.5's and Qwen3's rope_theta; does not change memory
CE_CHUNK_ROWS = 256  # rows of the fallback cross-entropy / entropy processed at once (a ~150 MiB fp32 chunk)


# --------------------------------------------------------------------------------------------- shapes
@dataclass(frozen=True)
class Shape:
    """The config.json numbers that decide memory. `family` is transformers' `model_type` (qwen2, qwen3): the
    model class, its biases and norms are the family's own, never re-declared here."""

    family: str
    layers: int
    hidden_size: int
    intermediate_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool


SHAPE_FIELDS = tuple(f.name for f in fields(Shape))


def export_presets() -> dict[str, dict]:
    """The presets' shapes, exact parameter counts and actor defaults as plain data, for a GPU box without the
    program's dependencies (the declaration is components/config/models.py)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from components.config.models import export_presets as export

    return export()


def load_presets(path: str | Path | None = None) -> dict[str, dict]:
    """Presets from a file written by `measure_memory.py presets`, or from the repository when it imports."""
    return json.loads(Path(path).read_text()) if path else export_presets()


def shape_of_preset(preset: dict) -> Shape:
    """The preset's shapes, as its config.json states them (tie_word_embeddings and head_dim included)."""
    return Shape(**{f: preset[f] for f in SHAPE_FIELDS})


def shape_of_config_json(path: str | Path) -> dict:
    """The shape fields a Hugging Face config.json states (a custom model): head_dim defaults to hidden / heads
    and tie_word_embeddings to False, as transformers' Qwen2Config and Qwen3Config do."""
    c = json.loads(Path(path).read_text())
    if any(k in c for k in ("num_experts", "num_local_experts", "n_routed_experts")):
        raise ValueError(f"{path}: a mixture-of-experts model; the tool and the estimate cover dense models only")
    return {"family": c["model_type"], "layers": c["num_hidden_layers"], "hidden_size": c["hidden_size"],
            "intermediate_size": c["intermediate_size"], "attention_heads": c["num_attention_heads"],
            "kv_heads": c.get("num_key_value_heads", c["num_attention_heads"]),
            "head_dim": c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
            "vocab_size": c["vocab_size"], "tie_word_embeddings": bool(c.get("tie_word_embeddings", False))}


# --------------------------------------------------------------------------------------------- arguments
def _bool(v: str) -> bool:
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {v!r}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", help="model preset key (components/model/presets.py), e.g. qwen2.5-3b-instruct")
    p.add_argument("--presets-file", help="presets exported by `measure_memory.py presets` (where the repository's "
                                          "requirements are not installed); default: import them from the repository")
    shape = p.add_argument_group("explicit shapes (override the preset's, or stand alone without --preset)")
    shape.add_argument("--config-json", help="a Hugging Face config.json to take the shapes from (a custom model)")
    shape.add_argument("--family", help="transformers model_type: qwen2 (default without a preset) or qwen3")
    shape.add_argument("--layers", type=int)
    shape.add_argument("--hidden-size", type=int)
    shape.add_argument("--intermediate-size", type=int)
    shape.add_argument("--attention-heads", type=int)
    shape.add_argument("--kv-heads", type=int)
    shape.add_argument("--head-dim", type=int, help="default: hidden size / attention heads")
    shape.add_argument("--vocab-size", type=int)
    shape.add_argument("--tie-word-embeddings", type=_bool)
    run = p.add_argument_group("the step, as verl-ack configures verl")
    run.add_argument("--seq-len", type=int, default=2048, help="prompt + response tokens of every sequence")
    run.add_argument("--prompt-len", type=int, help="prompt tokens (default: half of --seq-len); only the response is in the loss")
    run.add_argument("--micro-batch", type=int, help="ppo_micro_batch_size_per_gpu (default: the preset's)")
    run.add_argument("--log-prob-micro-batch", type=int,
                     help="log_prob_micro_batch_size_per_gpu (default: the preset's; 0 skips the log-prob forward)")
    run.add_argument("--micro-batches", type=int, default=2, help="micro batches per optimizer step (gradient accumulation)")
    run.add_argument("--steps", type=int, default=2, help="training steps; Adam's state exists from the second on")
    run.add_argument("--param-offload", type=_bool, help="actor fsdp_config.param_offload (default: the preset's)")
    run.add_argument("--optimizer-offload", type=_bool, help="actor fsdp_config.optimizer_offload (default: the preset's)")
    run.add_argument("--gradient-checkpointing", type=_bool, default=True, help="model.enable_gradient_checkpointing")
    run.add_argument("--remove-padding", type=_bool, default=True, help="model.use_remove_padding (one packed row)")
    run.add_argument("--entropy-in-update", type=_bool, default=False,
                     help="compute entropy in the update (verl does when entropy_coeff != 0)")
    run.add_argument("--attn", choices=("auto", "flash_attention_2", "sdpa", "eager"), default="auto",
                     help="attention kernel; auto: flash_attention_2 if flash-attn imports, else sdpa")
    run.add_argument("--init", choices=("device", "meta"), default="device",
                     help="build the fp32 model on the GPU before FSDP shards it (device, as the committed table was "
                          "measured), or on the meta device with each layer materialised as FSDP wraps it (meta: for "
                          "models whose fp32 copy does not fit one GPU)")
    run.add_argument("--expandable-segments", type=_bool, default=True,
                     help="PyTorch allocator expandable_segments (verl turns it on for the training phase)")
    p.add_argument("--simulate-world", type=int, default=0,
                   help="one process plays rank 0 of this many GPUs on one GPU: torch's fake process group makes every "
                        "collective a no-op with the real shapes, so shards, gathers and their buffers are sized as on N "
                        "GPUs (NCCL's own buffers, outside PyTorch's allocator, are not)")
    p.add_argument("--out", required=True, help="JSON file rank 0 writes")
    p.add_argument("--label", help="free text stored with the result (e.g. the machine's name)")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = parser()
    a = p.parse_args(argv)
    preset = None
    if a.preset:
        presets = load_presets(a.presets_file)
        if a.preset not in presets:
            p.error(f"--preset {a.preset!r} is not a preset; use one of {', '.join(presets)}")
        preset = presets[a.preset]
    base = asdict(shape_of_preset(preset)) if preset else {}
    if a.config_json:
        try:
            base.update(shape_of_config_json(a.config_json))
        except (OSError, KeyError, ValueError) as e:
            p.error(f"--config-json {a.config_json}: {e}")
    for n in SHAPE_FIELDS:
        if getattr(a, n) is not None:
            base[n] = getattr(a, n)
    missing = [n for n in SHAPE_FIELDS if n not in base and n not in ("tie_word_embeddings", "family", "head_dim")]
    if missing:
        p.error("without --preset every shape is needed; missing " + ", ".join("--" + n.replace("_", "-") for n in missing))
    base.setdefault("tie_word_embeddings", False)
    base.setdefault("family", "qwen2")
    if not base.get("head_dim"):
        if base["hidden_size"] % base["attention_heads"]:
            p.error("hidden size must split into the attention heads (or give --head-dim)")
        base["head_dim"] = base["hidden_size"] // base["attention_heads"]
    a.shape = Shape(**base)
    a.expected_params = preset.get("params") if preset and not a.config_json and all(
        getattr(a, n) is None for n in SHAPE_FIELDS) else None
    if a.shape.attention_heads % a.shape.kv_heads:
        p.error("attention heads must split into the KV heads")
    for flag, field in (("micro_batch", "ppo_micro_batch_size_per_gpu"),
                        ("log_prob_micro_batch", "log_prob_micro_batch_size_per_gpu"),
                        ("param_offload", "actor_param_offload"), ("optimizer_offload", "actor_optimizer_offload")):
        if getattr(a, flag) is None:
            setattr(a, flag, preset[field] if preset else {"micro_batch": 1, "log_prob_micro_batch": 1}.get(flag, False))
    if a.prompt_len is None:
        a.prompt_len = a.seq_len // 2
    if not 0 < a.prompt_len < a.seq_len:
        p.error(f"--prompt-len {a.prompt_len} must lie between 0 and --seq-len {a.seq_len}")
    if a.simulate_world < 0 or (a.simulate_world and int(os.environ.get("WORLD_SIZE", 1)) > 1):
        p.error("--simulate-world runs as one process (python, not torchrun with several ranks)")
    if a.micro_batch < 1 or a.log_prob_micro_batch < 0 or a.micro_batches < 1 or a.steps < 1:
        p.error("micro batch, micro batches and steps must be positive (log-prob micro batch may be 0)")
    return a


def run_config(a: argparse.Namespace, world_size: int) -> dict:
    """The exact configuration a result was measured under (stored with it)."""
    return {
        "preset": a.preset,
        "shape": asdict(a.shape),
        # The preset's count (components/config/models.py); the run replaces it with the built model's own.
        "params": a.expected_params,
        "world_size": world_size,
        "collectives": (f"fake process group: rank 0 of {world_size} simulated on one device" if a.simulate_world
                        else "nccl/gloo, one process per device"),
        "seq_len": a.seq_len,
        "prompt_len": a.prompt_len,
        "micro_batch": a.micro_batch,
        "log_prob_micro_batch": a.log_prob_micro_batch,
        "micro_batches_per_step": a.micro_batches,
        "steps": a.steps,
        "param_offload": a.param_offload,
        "optimizer_offload": a.optimizer_offload,
        "gradient_checkpointing": a.gradient_checkpointing,
        "remove_padding": a.remove_padding,
        "entropy_in_update": a.entropy_in_update,
        "expandable_segments": a.expandable_segments,
        "init": a.init,
        "fsdp": {"version": 1, "sharding": "FULL_SHARD", "wrap": "decoder layer", "param_dtype": "bf16",
                 "reduce_dtype": "fp32", "buffer_dtype": "fp32", "master_dtype": "fp32", "use_orig_params": False},
        "optimizer": {"name": "torch.optim.AdamW", "lr": 1e-6, "betas": [0.9, 0.999], "weight_decay": 0.01, "clip_grad": 1.0},
    }


# --------------------------------------------------------------------------------------------- results
RANK_KEYS = ("rank", "status", "error", "seconds", "peak_allocated_gib", "peak_reserved_gib", "outside_torch_gib", "phases")


def merge_ranks(ranks: list[dict]) -> dict:
    """One point from its rank files: the configuration, machine and versions (the same on every rank), each
    rank's numbers, and the worst rank's peaks. A missing rank (its run was cut short) makes it incomplete."""
    first = ranks[0]
    config = first["config"]
    statuses = {r["status"] for r in ranks}
    status = "oom" if "oom" in statuses else "error" if "error" in statuses else "ok"
    if status == "ok" and len(ranks) < (1 if config["collectives"].startswith("fake") else config["world_size"]):
        status = "incomplete"
    return {
        "schema": SCHEMA, "tool": "tools/measure_memory.py", "label": first.get("label"), "status": status,
        "config": config, "machine": first["env"]["machine"], "versions": first["env"]["versions"],
        "impl": first["env"]["impl"],
        "peak_allocated_gib": max(r["peak_allocated_gib"] for r in ranks),
        "peak_reserved_gib": max(r["peak_reserved_gib"] for r in ranks),
        "outside_torch_gib": max((r.get("outside_torch_gib") or 0.0) for r in ranks),
        "ranks": [{k: r.get(k) for k in RANK_KEYS} for r in sorted(ranks, key=lambda r: r["rank"])],
    }


def write_point(out: Path, ranks: list[dict]) -> dict:
    point = merge_ranks(ranks)
    out.write_text(json.dumps(point, indent=2) + "\n")
    for part in out.parent.glob(out.name + ".rank*"):
        part.unlink()
    return point


def table_record(point: dict) -> dict:
    """The calibration table's row for one measured point: the numbers, then machine, versions and config."""
    c = point["config"]
    phases: dict[str, dict] = {}
    for r in point["ranks"]:
        for name, ph in (r.get("phases") or {}).items():
            kind = name.rsplit("_", 1)[0]  # log_prob_0, log_prob_1 -> log_prob; update_oom stays update
            cur = phases.setdefault(kind, {"peak_allocated_gib": 0.0, "peak_reserved_gib": 0.0})
            cur["peak_allocated_gib"] = max(cur["peak_allocated_gib"], ph["peak_allocated_gib"])
            cur["peak_reserved_gib"] = max(cur["peak_reserved_gib"], ph["peak_reserved_gib"])
    return {
        "preset": c["preset"], "world_size": c["world_size"], "seq_len": c["seq_len"], "prompt_len": c["prompt_len"],
        "micro_batch": c["micro_batch"], "log_prob_micro_batch": c["log_prob_micro_batch"],
        "param_offload": c["param_offload"], "optimizer_offload": c["optimizer_offload"],
        "status": point["status"],
        "peak_allocated_gib": point["peak_allocated_gib"], "peak_reserved_gib": point["peak_reserved_gib"],
        "outside_torch_gib": point["outside_torch_gib"],
        "phases": phases,
        "ranks": [{k: r.get(k) for k in ("rank", "status", "peak_allocated_gib", "peak_reserved_gib", "outside_torch_gib",
                                          "seconds")} for r in point["ranks"]],
        "error": next((r["error"] for r in point["ranks"] if r.get("error")), None),
        "machine": point["machine"], "versions": point["versions"], "impl": point["impl"], "config": c,
    }


def collect(folder: Path) -> dict:
    """Every point under `folder` as one calibration table, sorted by model size, sequence length and world.
    Rank files left by a run that was cut short (one rank's OOM ends the run) are merged into their point."""
    for out in sorted({part.with_name(part.name.rsplit(".rank", 1)[0]) for part in folder.glob("*.json.rank*")}):
        if not out.exists():
            write_point(out, [json.loads(p.read_text()) for p in sorted(folder.glob(out.name + ".rank*"))])
    points = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    rows = [table_record(p) for p in points if p.get("schema") == SCHEMA]
    rows.sort(key=lambda r: (r["config"]["params"] or 0, r["seq_len"], r["world_size"]))
    return {"description": "Peak per-GPU memory of verl's FSDP actor step (old-log-prob forward and update), measured "
                           "with tools/measure_memory.py through tools/calibrate.sh; see docs/memory.md.",
            "points": rows}


# --------------------------------------------------------------------------------------------- measuring
def _environment(torch, attn: str, ce_impl: str) -> dict:
    import transformers

    cuda = torch.cuda.is_available()
    machine = {"hostname": socket.gethostname(), "cpu": platform.machine(), "gpu_count": torch.cuda.device_count() if cuda else 0}
    if cuda:
        props = torch.cuda.get_device_properties(0)
        machine.update(gpu_name=props.name, gpu_memory_gib=round(props.total_memory / GIB, 2))
    try:
        import flash_attn
        fa = flash_attn.__version__
    except Exception:  # noqa: BLE001 - absent or broken build: both mean "not used"
        fa = None
    nccl = None
    if cuda:
        try:
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001
            nccl = None
    versions = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                "nccl": nccl, "transformers": transformers.__version__, "flash_attn": fa}
    return {"machine": machine, "versions": versions,
            "impl": {"attention": attn, "log_prob": ce_impl,
                     "entropy": "chunked eager (the memory of verl's torch.compile'd entropy_from_logits)"}}


def _flash_ce():
    try:
        from flash_attn.ops.triton.cross_entropy import cross_entropy_loss
        return cross_entropy_loss
    except Exception:  # noqa: BLE001
        return None


def _chunked_logprob_fn(torch):
    """log p(label) in fp32 row chunks, backward into the logits in place unless told otherwise: the memory
    profile of flash-attn's Triton cross_entropy_loss, which verl uses (utils/torch_functional.py; in place
    unless entropy is computed from the same logits)."""

    class LogProb(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels, inplace_backward):
            ctx.inplace_backward = inplace_backward
            lse = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
            for i in range(0, logits.shape[0], CE_CHUNK_ROWS):
                lse[i:i + CE_CHUNK_ROWS] = torch.logsumexp(logits[i:i + CE_CHUNK_ROWS].float(), dim=-1)
            picked = logits.gather(1, labels.unsqueeze(1)).squeeze(1).float()
            ctx.save_for_backward(logits, labels, lse)
            return picked - lse

        @staticmethod
        def backward(ctx, grad):
            logits, labels, lse = ctx.saved_tensors
            dlogits = logits if ctx.inplace_backward else torch.empty_like(logits)
            for i in range(0, logits.shape[0], CE_CHUNK_ROWS):
                g = -torch.exp(logits[i:i + CE_CHUNK_ROWS].float() - lse[i:i + CE_CHUNK_ROWS, None])
                g.scatter_add_(1, labels[i:i + CE_CHUNK_ROWS, None], torch.ones_like(g[:, :1]))
                dlogits[i:i + CE_CHUNK_ROWS].copy_(g * grad[i:i + CE_CHUNK_ROWS, None])
            return dlogits, None, None

    return LogProb.apply


def _entropy(torch, logits):
    out = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
    for i in range(0, logits.shape[0], CE_CHUNK_ROWS):
        x = logits[i:i + CE_CHUNK_ROWS].float()
        p = torch.softmax(x, dim=-1)
        out[i:i + CE_CHUNK_ROWS] = torch.logsumexp(x, dim=-1) - (p * x).sum(-1)
    return out


def _peaks(torch, device) -> dict:
    if device.type != "cuda":
        return {"peak_allocated_gib": 0.0, "peak_reserved_gib": 0.0}
    return {"peak_allocated_gib": round(torch.cuda.max_memory_allocated(device) / GIB, 3),
            "peak_reserved_gib": round(torch.cuda.max_memory_reserved(device) / GIB, 3)}


def _init_weights(torch, module) -> None:
    """Random weights in place of the module's own (recurse=False): norms 1, matrices N(0, 0.02)."""
    with torch.no_grad():
        for p in module.parameters(recurse=False):
            p.fill_(1.0) if p.dim() == 1 else p.normal_(0.0, 0.02)


def _materialize_outside_layers(torch, model, cfg, layer_classes, device):
    """--init meta: put everything outside the decoder layers on `device` now (embeddings, LM head, final norm;
    the rotary embedding rebuilt there, since its buffers are computed, not loaded), tie the LM head back to the
    embedding when the config ties them, and return FSDP's param_init_fn for the layers: each is materialised
    when FSDP wraps it, so the unsharded fp32 model never exists at once (a 32B model is 122 GiB)."""
    inside = {id(m) for layer in model.modules() if type(layer) in layer_classes for m in layer.modules()}
    for parent in list(model.modules()):
        if id(parent) in inside:
            continue
        for name, child in list(parent.named_children()):
            if type(child).__name__.endswith("RotaryEmbedding"):
                with torch.device(device):
                    setattr(parent, name, type(child)(config=cfg))
    for m in model.modules():
        if id(m) not in inside and any(t.is_meta for t in [*m.parameters(recurse=False), *m.buffers(recurse=False)]):
            m.to_empty(device=device, recurse=False)
            _init_weights(torch, m)
    if cfg.tie_word_embeddings:
        model.get_output_embeddings().weight = model.get_input_embeddings().weight

    def param_init_fn(module):
        module.to_empty(device=device, recurse=False)
        _init_weights(torch, module)

    return param_init_fn


def _move_model(torch, fsdp_module, device) -> None:
    """verl's offload_fsdp_model_to_cpu / load_fsdp_model_to_gpu for FSDP1: move each flat parameter shard."""
    from torch.distributed.fsdp._traversal_utils import _get_fsdp_handles

    for handle in _get_fsdp_handles(fsdp_module):
        flat = handle.flat_param
        handle.flat_param_to(device, non_blocking=True)
        flat._local_shard = flat.data


def _move_optimizer(torch, optimizer, device) -> None:
    for state in optimizer.state.values():
        for k, v in state.items():
            if isinstance(v, torch.Tensor) and k != "step":
                state[k] = v.to(device, non_blocking=True)


def measure(a: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    import transformers
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    cuda = torch.cuda.is_available()
    rank, world, local = (int(os.environ.get(k, d)) for k, d in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)))
    if a.simulate_world:
        from torch.testing._internal.distributed.fake_pg import FakeStore

        rank, world, local = 0, a.simulate_world, 0
        dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
    elif not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29512")
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
        torch.cuda.memory._set_allocator_settings(f"expandable_segments:{a.expandable_segments}")
    flash = _flash_ce()
    attn = a.attn
    if attn == "auto":
        attn = "flash_attention_2" if flash is not None and cuda else "sdpa"
    ce_impl = ("flash_attn.ops.triton.cross_entropy (inplace backward)" if flash is not None and cuda else
               "chunked torch equivalent of flash-attn's cross-entropy (fp32 log-softmax, inplace backward); flash-attn absent")
    if attn != "flash_attention_2":
        attn_note = f"{attn} over the packed row, causal (flash-attn varlen absent; same O(tokens) memory)"
    else:
        attn_note = "flash_attention_2 varlen over the packed row"
    env = _environment(torch, attn_note, ce_impl)
    config = run_config(a, world)
    if flash is not None and cuda:
        def logprob(logits, labels, inplace_backward=True):
            return -flash(logits, labels, inplace_backward=inplace_backward)[0]
    else:
        chunked = _chunked_logprob_fn(torch)

        def logprob(logits, labels, inplace_backward=True):
            return chunked(logits, labels, inplace_backward)

    result = {"rank": rank, "status": "ok", "phases": {}, "error": None}
    t0 = time.time()
    phase = "build"
    try:
        s = a.shape
        # The family's own config class (Qwen2Config, Qwen3Config, ...) and causal-LM class, by model_type.
        cfg = transformers.AutoConfig.for_model(
            s.family, vocab_size=s.vocab_size, hidden_size=s.hidden_size, intermediate_size=s.intermediate_size,
            num_hidden_layers=s.layers, num_attention_heads=s.attention_heads, num_key_value_heads=s.kv_heads,
            head_dim=s.head_dim, tie_word_embeddings=s.tie_word_embeddings, rope_theta=ROPE_THETA, use_cache=False,
            max_position_embeddings=max(32768, a.seq_len * max(a.micro_batch, a.log_prob_micro_batch)))
        cfg._attn_implementation = attn
        model_cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(cfg)]
        # Random fp32 weights (verl: model_dtype fp32; the values do not change memory): straight on the GPU, or
        # with --init meta on the meta device, each decoder layer materialised by FSDP as it wraps it.
        with torch.device("meta" if a.init == "meta" else device):
            model = model_cls(cfg).to(torch.float32)
        if getattr(cfg, "num_experts", None) or getattr(cfg, "num_local_experts", None):
            raise ValueError(f"{s.family} is a mixture-of-experts model; the tool measures dense models only")
        # verl's FSDP wrap policy wraps the classes the model names in _no_split_modules (its decoder layer).
        layer_classes = {type(m) for m in model.modules() if type(m).__name__ in set(model._no_split_modules or ())}
        counted = sum(p.numel() for p in model.parameters())
        param_init_fn = _materialize_outside_layers(torch, model, cfg, layer_classes, device) if a.init == "meta" else None
        config.update(params=counted, expected_params=a.expected_params, config_class=type(cfg).__name__,
                      model_class=model_cls.__name__, wrap_classes=sorted(c.__name__ for c in layer_classes))
        if a.expected_params is not None and counted != a.expected_params:
            print(f"warning: the built model has {counted} parameters, the preset's count is {a.expected_params}",
                  flush=True)
        if a.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        mesh = init_device_mesh(device.type, (world,), mesh_dim_names=("fsdp",))
        model = FSDP(model, auto_wrap_policy=functools.partial(transformer_auto_wrap_policy,
                                                           transformer_layer_cls=layer_classes),
                     device_id=device, sharding_strategy=ShardingStrategy.FULL_SHARD,
                     mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32,
                                                    buffer_dtype=torch.float32),
                     sync_module_states=False, device_mesh=mesh, forward_prefetch=False, use_orig_params=False,
                     param_init_fn=param_init_fn)
        if any(t.is_meta for t in [*model.parameters(), *model.buffers()]):
            raise RuntimeError("a parameter or buffer was left on the meta device")
        # The shards hold the model once (a tie lost in materialising would add the LM head): world x shard, less
        # FSDP's padding of each flat parameter to a multiple of the world size.
        sharded = sum(t.numel() for t in model.parameters()) * world
        if not counted <= sharded < counted + world * (s.layers + 1):
            raise RuntimeError(f"FSDP holds {sharded} parameters for a {counted}-parameter model")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), weight_decay=0.01)
        gen = torch.Generator(device=device).manual_seed(1234 + rank)

        def packed(micro: int):
            n = micro * a.seq_len
            ids = torch.randint(0, s.vocab_size, (1, n), device=device, generator=gen)
            # Per-sequence positions make flash-attn run varlen; sdpa gets the plain causal row instead, since
            # transformers would otherwise build a dense block mask for packed positions. Without remove-padding
            # every full-length sequence is its own row: the same tokens, attention within each.
            pos = (torch.arange(a.seq_len, device=device).repeat(micro)[None] if attn == "flash_attention_2" else None)
            if not a.remove_padding:
                ids, pos = ids.view(micro, a.seq_len), None
            resp = torch.zeros(n, dtype=torch.bool, device=device).view(micro, a.seq_len)
            resp[:, a.prompt_len - 1:-1] = True  # the token predicting response token t sits at t-1
            return ids, pos, resp.view(-1)

        def forward(ids, pos):
            out = model(input_ids=ids, position_ids=pos, use_cache=False)
            return out.logits.reshape(-1, s.vocab_size)  # bf16 (tokens, vocab)

        def offload(model_too: bool, optimizer_too: bool, to) -> None:
            if model_too:
                _move_model(torch, model, to)
            if optimizer_too:
                _move_optimizer(torch, optimizer, to)

        offload(a.param_offload, a.optimizer_offload, torch.device("cpu"))
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        for step in range(a.steps):
            # verl empties the cache around each weight sync to the rollout engine (update_weights), so every
            # step's training phase starts from an empty cache.
            if cuda:
                torch.cuda.empty_cache()
            # Old log-probs: forward only, entropy on (ray_trainer._compute_old_log_prob).
            if a.log_prob_micro_batch:
                phase = "log_prob"
                if cuda:
                    torch.cuda.reset_peak_memory_stats(device)
                offload(a.param_offload, False, device)
                model.eval()
                # One micro batch: without gradients nothing accumulates across them, so one gives the peak.
                with torch.no_grad():
                    ids, pos, _ = packed(a.log_prob_micro_batch)
                    logits = forward(ids, pos)
                    lp, ent = logprob(logits, torch.roll(ids.reshape(-1), -1)), _entropy(torch, logits)
                    del logits, lp, ent
                offload(a.param_offload, False, torch.device("cpu"))
                result["phases"][f"log_prob_{step}"] = _peaks(torch, device)
            # The update (FSDPEngine.train_batch in train_mode): zero_grad, micro batches, clip, step, zero_grad.
            phase = "update"
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            offload(a.param_offload, a.optimizer_offload, device)
            model.train()
            optimizer.zero_grad()
            for _ in range(a.micro_batches):
                ids, pos, resp = packed(a.micro_batch)
                logits = forward(ids, pos)
                labels = torch.roll(ids.reshape(-1), -1)
                ent = _entropy(torch, logits) if a.entropy_in_update else None
                lp = logprob(logits, labels, inplace_backward=ent is None)
                old, ref = lp.detach() + 0.01, lp.detach() - 0.01
                adv = torch.randn(lp.shape, device=device, generator=gen)
                ratio = torch.exp(lp - old)
                pg = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
                kl = torch.exp(ref - lp) - (ref - lp) - 1  # low_var_kl
                per_token = pg + 0.001 * kl - (0.0 if ent is None else 0.0 * ent)
                loss = (per_token * resp).sum() / resp.sum() / a.micro_batches
                loss.backward()
                del logits, lp, ent, loss, per_token, ratio, pg, kl
            model.clip_grad_norm_(1.0)
            optimizer.step()
            optimizer.zero_grad()
            offload(a.param_offload, a.optimizer_offload, torch.device("cpu"))
            result["phases"][f"update_{step}"] = _peaks(torch, device)
    except torch.OutOfMemoryError as e:
        result.update(status="oom", error=f"{phase}: {str(e).splitlines()[0]}")
        result["phases"][f"{phase}_oom"] = _peaks(torch, device)
    except Exception as e:  # noqa: BLE001 - any failure is a recorded result, not a lost point
        result.update(status="error", error=f"{phase}: {type(e).__name__}: {e}")
        traceback.print_exc()
    result["seconds"] = round(time.time() - t0, 1)
    phases = result["phases"].values()
    result["peak_allocated_gib"] = max((p["peak_allocated_gib"] for p in phases), default=0.0)
    result["peak_reserved_gib"] = max((p["peak_reserved_gib"] for p in phases), default=0.0)
    if cuda:
        free, total = torch.cuda.mem_get_info(device)
        # CUDA context, NCCL and library workspaces: on the GPU but outside PyTorch's allocator.
        result["outside_torch_gib"] = round((total - free - torch.cuda.memory_reserved(device)) / GIB, 3)
    result.update(config=config, env=env, label=a.label)
    _write_rank(a.out, rank, result)
    if result["status"] != "ok" and rank != 0:
        # Peers may be stuck in a collective this rank will never join: leave at once so torchrun stops them;
        # `collect` merges the rank files that were written.
        os._exit(1)
    if rank == 0:
        ranks = _wait_for_ranks(a.out, 1 if a.simulate_world else world, timeout_s=600.0 if result["status"] == "ok" else 60.0)
        point = write_point(Path(a.out), ranks)
        print(f"{a.out}: {config['preset'] or 'custom'} world {world} seq {a.seq_len}: {point['status']}, "
              f"peak reserved {point.get('peak_reserved_gib')} GiB, allocated {point.get('peak_allocated_gib')} GiB",
              flush=True)
        if point["status"] != "ok":
            os._exit(1)
    dist.barrier()
    dist.destroy_process_group()


def _write_rank(out: str, rank: int, result: dict) -> None:
    part, tmp = Path(f"{out}.rank{rank}"), Path(f"{out}.tmp{rank}")
    part.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(result))
    tmp.rename(part)  # whole files only: rank 0 polls for them


def _wait_for_ranks(out: str, world: int, timeout_s: float = 60.0) -> list[dict]:
    """Ranks report through files, not a collective, so an OOM on one rank cannot hang the report."""
    deadline = time.time() + timeout_s
    while True:
        parts = [Path(f"{out}.rank{r}") for r in range(world)]
        if all(p.exists() for p in parts) or time.time() > deadline:
            return [json.loads(p.read_text()) for p in parts if p.exists()]
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "presets":
        p = argparse.ArgumentParser(prog="measure_memory.py presets", description="export the presets for --presets-file")
        p.add_argument("--out", type=Path, required=True)
        p.parse_args(argv[1:]).out.write_text(json.dumps(export_presets(), indent=2) + "\n")
        return 0
    if argv and argv[0] == "collect":
        p = argparse.ArgumentParser(prog="measure_memory.py collect", description="merge point files into a table")
        p.add_argument("folder", type=Path)
        p.add_argument("--out", type=Path, required=True)
        c = p.parse_args(argv[1:])
        c.out.write_text(json.dumps(collect(c.folder), indent=2) + "\n")
        return 0
    measure(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
