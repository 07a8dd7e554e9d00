"""tools/measure_memory.py: what it measures is fixed by its arguments, the preset's shapes and its JSON, all
testable without a GPU; a tiny model runs the whole step on CPU where torch is installed (not in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from components.model.memory_calibration import TABLE
from components.model.presets import PRESETS
from tools import measure_memory as mm

REPO = Path(__file__).resolve().parents[2]
TINY = ["--layers", "2", "--hidden-size", "64", "--intermediate-size", "128", "--attention-heads", "4",
        "--kv-heads", "2", "--vocab-size", "300", "--seq-len", "64", "--micro-batch", "2", "--log-prob-micro-batch", "2"]


def rank(n: int, status: str = "ok", world: int = 2, reserved: float = 10.0, sim: bool = False) -> dict:
    config = mm.run_config(mm.parse_args(["--preset", "qwen2.5-0.5b-instruct", "--out", "x.json"]), world)
    if sim:
        config["collectives"] = "fake process group: rank 0 of 2 simulated on one device"
    return {"rank": n, "status": status, "error": None if status == "ok" else "update: CUDA out of memory",
            "seconds": 1.0, "peak_allocated_gib": reserved - 1, "peak_reserved_gib": reserved, "outside_torch_gib": 1.3,
            "phases": {"log_prob_0": {"peak_allocated_gib": 2.0, "peak_reserved_gib": 3.0},
                       "update_1": {"peak_allocated_gib": reserved - 1, "peak_reserved_gib": reserved}},
            "config": config, "label": None,
            "env": {"machine": {"gpu_name": "NVIDIA H200", "gpu_memory_gib": 139.8},
                    "versions": {"torch": "2.11.0", "transformers": "5.17.0", "cuda": "13.0"},
                    "impl": {"attention": "sdpa", "log_prob": "chunked", "entropy": "chunked"}}}


# ------------------------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("key", list(PRESETS))
def test_a_presets_shape_is_its_config_json_with_family_head_dim_and_tied_embeddings(key):
    shape = mm.shape_of_preset(mm.export_presets()[key])
    a = PRESETS[key].arch
    assert (shape.family, shape.head_dim, shape.tie_word_embeddings, shape.layers) == (
        a.family, a.head_dim, a.tie_word_embeddings, a.layers)
    assert mm.parse_args(["--preset", key, "--out", "x.json"]).expected_params == a.params


def test_a_custom_models_config_json_gives_the_shape_and_a_mixture_of_experts_is_refused(tmp_path, capsys):
    cfg = {"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 300,
           "tie_word_embeddings": True}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    a = mm.parse_args(["--config-json", str(tmp_path / "config.json"), "--out", "x.json"])
    assert (a.shape.family, a.shape.head_dim, a.shape.tie_word_embeddings, a.expected_params) == ("qwen3", 32, True, None)
    (tmp_path / "moe.json").write_text(json.dumps({**cfg, "model_type": "qwen3_moe", "num_experts": 128}))
    with pytest.raises(SystemExit):
        mm.parse_args(["--config-json", str(tmp_path / "moe.json"), "--out", "x.json"])
    assert "mixture-of-experts" in capsys.readouterr().err


def test_the_exported_presets_file_gives_the_same_shapes_as_the_repository(tmp_path):
    out = tmp_path / "presets.json"
    assert mm.main(["presets", "--out", str(out)]) == 0
    a = mm.parse_args(["--preset", "qwen2.5-7b-instruct", "--presets-file", str(out), "--out", "x.json"])
    b = mm.parse_args(["--preset", "qwen2.5-7b-instruct", "--out", "x.json"])
    assert a.shape == b.shape
    assert a.micro_batch == b.micro_batch == PRESETS["qwen2.5-7b-instruct"].layout.ppo_micro_batch_size_per_gpu


# ------------------------------------------------------------------------------------------- arguments
def test_a_preset_brings_its_micro_batches_and_offload_flags_and_flags_override_them():
    p = PRESETS["qwen2.5-14b-instruct"]
    L = p.layout
    a = mm.parse_args(["--preset", p.key, "--out", "x.json"])
    assert (a.micro_batch, a.log_prob_micro_batch) == (L.ppo_micro_batch_size_per_gpu, L.log_prob_micro_batch_size_per_gpu)
    assert (a.param_offload, a.optimizer_offload) == (L.actor_param_offload, L.actor_optimizer_offload)
    b = mm.parse_args(["--preset", p.key, "--micro-batch", "7", "--param-offload", "false", "--layers", "3", "--out", "x"])
    assert (b.micro_batch, b.param_offload, b.shape.layers, b.shape.hidden_size) == (7, False, 3, p.arch.hidden_size)
    assert b.expected_params is None  # a changed shape is no longer the preset's model


def test_verls_settings_for_the_stack_are_the_defaults():
    a = mm.parse_args(["--preset", "qwen2.5-3b-instruct", "--out", "x.json"])
    c = mm.run_config(a, 2)
    assert (c["gradient_checkpointing"], c["remove_padding"], c["expandable_segments"]) == (True, True, True)
    assert (c["seq_len"], c["prompt_len"], c["steps"], c["micro_batches_per_step"]) == (2048, 1024, 2, 2)
    assert c["fsdp"]["sharding"] == "FULL_SHARD" and c["fsdp"]["param_dtype"] == "bf16" and c["fsdp"]["master_dtype"] == "fp32"
    assert c["optimizer"]["name"] == "torch.optim.AdamW" and c["world_size"] == 2


def test_explicit_shapes_need_every_dimension_without_a_preset(capsys):
    a = mm.parse_args(TINY + ["--out", "x.json"])
    assert a.shape.family == "qwen2" and a.shape.head_dim == 16 and a.preset is None
    with pytest.raises(SystemExit):
        mm.parse_args(["--layers", "2", "--out", "x.json"])
    assert "--hidden-size" in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["--preset", "qwen2.5-9b", "--out", "x"], "is not a preset"),
    (["--preset", "qwen2.5-3b-instruct", "--prompt-len", "4096", "--out", "x"], "--prompt-len"),
    (["--preset", "qwen2.5-3b-instruct", "--attention-heads", "15", "--out", "x"], "split into the KV heads"),
    (TINY[:6] + TINY[8:] + ["--attention-heads", "3", "--kv-heads", "1", "--out", "x"], "split into the attention heads"),
    (["--preset", "qwen2.5-3b-instruct", "--steps", "0", "--out", "x"], "must be positive"),
])
def test_bad_arguments_are_refused_with_the_reason(argv, needle, capsys):
    with pytest.raises(SystemExit):
        mm.parse_args(argv)
    assert needle in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- results
def test_a_point_keeps_the_worst_ranks_peak_and_the_machine_and_versions():
    point = mm.merge_ranks([rank(1, reserved=12.0), rank(0, reserved=10.0)])
    assert point["status"] == "ok" and point["peak_reserved_gib"] == 12.0
    assert [r["rank"] for r in point["ranks"]] == [0, 1]
    assert point["machine"]["gpu_name"] == "NVIDIA H200" and point["versions"]["torch"] == "2.11.0"
    row = mm.table_record(point)
    assert row["phases"] == {"log_prob": {"peak_allocated_gib": 2.0, "peak_reserved_gib": 3.0},
                             "update": {"peak_allocated_gib": 11.0, "peak_reserved_gib": 12.0}}


def test_an_oom_on_any_rank_makes_the_point_an_oom_and_a_lost_rank_makes_it_incomplete():
    assert mm.merge_ranks([rank(0), rank(1, status="oom")])["status"] == "oom"
    assert mm.merge_ranks([rank(0)])["status"] == "incomplete"
    assert mm.merge_ranks([rank(0, sim=True)])["status"] == "ok"  # a simulated world has one process


def test_collect_merges_the_rank_files_of_a_run_that_was_cut_short(tmp_path):
    (tmp_path / "a.json.rank1").write_text(json.dumps(rank(1, status="oom", reserved=130.0)))
    (tmp_path / "b.json").write_text(json.dumps(mm.merge_ranks([rank(0), rank(1)])))
    table = mm.collect(tmp_path)
    assert sorted(r["status"] for r in table["points"]) == ["ok", "oom"]
    assert not list(tmp_path.glob("*.rank*")) and (tmp_path / "a.json").exists()


def test_the_committed_table_is_in_the_tools_format():
    rows = json.loads(TABLE.read_text())["points"]
    keys = set(mm.table_record(mm.merge_ranks([rank(0), rank(1)])))
    assert rows and all(set(r) == keys for r in rows)


# ------------------------------------------------------------------------------------------- a real step on CPU
@pytest.mark.parametrize("extra", [[], ["--simulate-world", "2"],
                                   ["--simulate-world", "2", "--init", "meta", "--family", "qwen3", "--head-dim", "32",
                                    "--tie-word-embeddings", "true"]],
                         ids=["one-process", "rank-0-of-2-simulated", "qwen3-tied-built-on-meta"])
def test_a_tiny_model_runs_the_whole_step_on_cpu_and_writes_one_point(tmp_path, extra):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path / "tiny.json"
    env = {**os.environ, "MASTER_PORT": str(29600 + len(extra)),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    subprocess.run([sys.executable, str(REPO / "tools" / "measure_memory.py"), *TINY, *extra, "--out", str(out)],
                   check=True, env=env, timeout=120, capture_output=True)
    point = json.loads(out.read_text())
    assert point["status"] == "ok" and point["config"]["world_size"] == (2 if extra else 1)
    assert set(point["ranks"][0]["phases"]) == {"log_prob_0", "update_0", "log_prob_1", "update_1"}
    assert "flash-attn" in point["impl"]["log_prob"] and point["versions"]["transformers"]
    # The family's own classes, and the parameter count of the model it built (the declaration's formula).
    from components.config.models import Architecture

    family = "qwen3" if "qwen3" in extra else "qwen2"
    prefix = "Qwen3" if family == "qwen3" else "Qwen2"
    c = point["config"]
    assert c["model_class"] == f"{prefix}ForCausalLM" and c["wrap_classes"] == [f"{prefix}DecoderLayer"]
    assert c["init"] == ("meta" if "meta" in extra else "device")
    assert c["params"] == Architecture(**c["shape"]).params
