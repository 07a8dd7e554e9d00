"""The GPU layout section of the plan: the resolved layout, the memory estimate and the rule findings."""

from __future__ import annotations

from components.config import Settings
from components.model import preset_of
from components.model.layout import check_layout, resolve_layout
from components.model.memory_calibration import calibration_error, calibration_summary
from offline.report.section import Section, rows_data, table


def layout_section(s: Settings, recording) -> Section:
    L = resolve_layout(s)
    m = L.memory
    p = preset_of(s)
    thinking = f", thinking {'on' if s.model.thinking else 'off'}" if p.family.thinking else ""
    rows = [
        ("model", f"{L.hf_id} ({p.params_billion} B parameters, {p.arch.family}; layout defaults from "
                  f"{p.layout_source})"),
        ("chat template / tool-call parser", f"the model's own / {p.family.tool_parser}{thinking}"),
        ("GPU nodes x GPUs per node", f"{L.nodes} x {L.gpus_per_node} = {L.world_size} GPUs "
                                     f"({s.gpu_pool.kind}, {s.gpu_pool.gpu_model or 'GPU'} {s.gpu_pool.gpu_memory_gib} GiB)"),
        ("rollout TP / replicas", f"{L.rollout_tp} / {L.rollout_replicas}"),
        ("gpu_memory_utilization", L.gpu_memory_utilization),
        ("offload actor params / optimizer / ref", f"{L.actor_param_offload} / {L.actor_optimizer_offload} / "
                                                    f"{L.ref_param_offload}"),
        ("micro batch per GPU (actor / log-prob)", f"{L.ppo_micro_batch_size_per_gpu} / "
                                                    f"{L.log_prob_micro_batch_size_per_gpu}"),
        ("mini batch per GPU after normalisation", L.ppo_mini_batch_per_gpu),
        ("Ray CPUs per GPU pod", L.ray_cpus_per_gpu_pod),
        ("est. training peak per GPU", f"{m.train_gib:.1f} GiB ({m.train_gib / m.gpu_gib:.0%})"),
        ("est. rollout peak per GPU", f"{m.rollout_gib:.1f} GiB ({m.rollout_gib / m.gpu_gib:.0%}; vLLM weights "
                                      f"{m.vllm_weights_gib:.1f} of its {m.vllm_share_gib:.1f} GiB share)"),
        ("est. host memory for offload per node", f"{m.host_offload_gib_per_node:.0f} GiB"),
    ]
    findings = check_layout(s)
    md = table(rows, ("layout", "value"))
    md += "\n\nMemory breakdown (GiB per GPU): " + ", ".join(f"{k} {v}" for k, v in m.breakdown.items())
    points = calibration_error(s)
    summary = calibration_summary(points, p.arch.family)
    md += ("\n\nThe memory figures are an estimate (components/model/layout.py) fitted to measured FSDP actor steps "
           f"(docs/memory.md): {summary}. Calibrate for your own GPUs with tools/measure_memory.py.")
    if findings:
        md += "\n\n" + "\n".join(f"- **{f.severity}** `{f.field}`: {f.message}" for f in findings)
    return Section("layout", "GPU layout", md, {"layout": L.as_dict(), "findings": [f.__dict__ for f in findings],
                                                "calibration": summary, "table": rows_data(rows)})
