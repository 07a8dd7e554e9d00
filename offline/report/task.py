"""The plan's Task section: what the job trains on, what scores it and where each part runs (the task's CPU proof,
components/task_check.py, is what it reports)."""

from __future__ import annotations

from components.config import Settings
from components.task_check import ESTIMATE_CHARS_PER_TOKEN, prove_task
from components.wiring import dataset_files
from components.workloads.training.verl_config import TASK_REWARD_FILE
from offline.report.section import Section, rows_data, table

WHERE = {
    "builtin": "the Ray pods' reward workers (verl's scorer: text comparison, no code run)",
    "file": "the Ray pods' reward workers (your function, imported from the job's ConfigMap)",
    "sandbox": "the platform's isolated sandboxes (the model's program and the tests); the Ray pods only send them",
}


def _dataset(s: Settings, proof) -> str:
    files = dataset_files(s)
    preset, hub = s.task.preset, s.task.dataset.hub
    if hub is not None:
        d = s.dataset
        rows = f"{d.train_subset} train / {d.test_subset} val rows (subsets)" if d.use_subsets else \
            f"{hub.train_rows} train / {hub.val_rows} val rows"
        return (f"`{hub.id}`" + (f" at `{hub.revision}`" if hub.revision else " (unpinned: the default branch)") +
                f", converted by your `{hub.function}` in `{hub.script}` in the dataset Job and checked row by row "
                f"into `{files.prefix}`; {rows}; data_source `{hub.data_source}`; on the CPU your function turned "
                f"{proof.hub_rows} of {len(hub.examples)} example(s) into rows that passed the check")
    if preset is not None:
        d = s.dataset
        rows = f"{d.train_subset} train / {d.test_subset} val rows (subsets)" if d.use_subsets else \
            f"{d.full_train_rows or preset.train_rows} train / {d.full_test_rows or preset.val_rows} val rows"
        return (f"preset `{s.task.dataset.preset_name}`: `{preset.hub_id}` fetched and checked row by row by the "
                f"dataset Job into `{files.prefix}`; {rows}; data_source `{preset.data_source}`")
    parts = []
    for d in proof.datasets:
        if d.kind == "oss":
            parts.append(f"`{d.location}` (in the bucket: read as is, not checked offline"
                         + (f"; {d.rows} rows as stated" if d.rows else "") + ")")
        else:
            sources = ", ".join(f"`{k}` {v}" for k, v in sorted(d.data_sources.items()))
            parts.append(f"`{d.location}`: {d.rows} rows checked (data_source {sources}); longest prompt about "
                         f"{d.prompt_tokens_max} tokens (estimate: {ESTIMATE_CHARS_PER_TOKEN} characters a token), "
                         f"{d.over_prompt_length} over data.max_prompt_length {s.training.max_prompt_length} (verl "
                         "drops those)")
    return "; ".join(parts) + f"; uploaded content-addressed to `{files.train}`, `{files.test}`"


def _reward(s: Settings, proof) -> str:
    kind = proof.kind
    if kind == "file":
        head = (f"your `{s.task.reward.function}` in `{proof.reward_file}` (sha256 `{proof.reward_sha256[:12]}`, "
                f"shipped as `{TASK_REWARD_FILE}`)")
    elif kind == "sandbox":
        head = "the row's unit tests run against the model's last code block in the sandboxes (fraction passed)"
    else:
        head = "verl's default_compute_score by data_source (" + ", ".join(f"`{d}`" for d in proof.data_sources) + ")"
        if "openai/gsm8k" in proof.data_sources:
            head += f", GSM8K in `{s.training.gsm8k_scoring}` mode"
    return head + "; it scores only what the model generated (tool replies excluded), plus the tool rewards"


def task_section(s: Settings, recording) -> Section:
    proof = prove_task(s)
    passed = sum(1 for c in proof.checks if c["ok"])
    checks = "; ".join(f"{c['name']}: {c['score']:g}" for c in proof.checks)
    rows = [
        ("dataset", _dataset(s, proof)),
        ("reward", _reward(s, proof)),
        ("reward checks", f"{passed}/{len(proof.checks)} passed on the CPU before planning ({checks})"),
        ("turns", "single turn (verl's single_turn_agent)" if proof.single_turn else
         "multi-turn tool agent (verl's tool_agent)"),
        ("tools", ", ".join(f"`{t}`" for t in proof.tools) or "none"),
        ("where the reward runs", WHERE[proof.kind]),
    ]
    if any(t == "code" for t in s.task.tools or []) or "code" in proof.tools:
        rows.append(("where the code tool runs", "the platform's isolated sandboxes, one fresh sandbox per call"))
    data = {**proof.as_dict(), "table": rows_data(rows)}
    return Section("task", "Task", table(rows, ("task", "value")), data)
