"""The runs-and-checkpoints section of the plan: where the run starts (a hub model, a model in the bucket, another
run's checkpoint), what a rerun under the same names does, whether it trains or only evaluates, where its
checkpoints and their Hugging Face export land, and what a lost node costs (the RayJob's retries, priced at their
worst case)."""

from __future__ import annotations

import math
from typing import Any, Optional

from components.config import Settings
from components.model.layout import resolve_layout
from components.wiring import checkpoint_key_prefix, model_path
from components.workloads.training.run_spec import backoff_limit
from components.workloads.training.runs import RUN_RECORD_DIR, create_only_hyperparameters
from offline.report.cost import training_steps, validation_passes
from offline.report.latency import own_start_minutes, plan_critical_path
from offline.report.latency.targets import gpu_price
from offline.report.section import Section, rows_data, table

# Where verl's FSDP checkpoint manager writes the hf_model save content inside a step's actor folder
# (verl/utils/checkpoint/fsdp_checkpoint_manager.py: os.path.join(local_path, "huggingface")).
HF_EXPORT = "actor/huggingface/"


def hf_export_prefix(s: Settings, step: str = "N") -> Optional[str]:
    """The bucket prefix of a step's loadable Hugging Face model, None when hf_model is not saved."""
    if "hf_model" not in s.training.save_contents:
        return None
    return f"{checkpoint_key_prefix(s)}global_step_{step}/{HF_EXPORT}"


def retry_worst_case(s: Settings, recording: Any) -> dict[str, Any]:
    """Every retry KubeRay may make, each at its worst: a new Ray cluster's start to the first step again (the
    in-region image pull on a replaced node, Ray start, submission, verl init and the model read:
    latency own_start_minutes) plus the steps since the last checkpoint done again (save_freq x seconds_per_step),
    on every GPU node of the job."""
    layout = resolve_layout(s)
    retries = backoff_limit(s, layout)
    cp = plan_critical_path(recording, s)
    start = own_start_minutes(s, cp)
    t = s.training
    redo = (t.save_freq if t.save_freq > 0 else training_steps(s)) * s.cost.seconds_per_step / 60
    per_retry = start + redo
    node_hours = retries * per_retry / 60 * layout.nodes
    key, price = gpu_price(s)
    return {"retries": retries, "start_minutes": round(start, 2), "redo_minutes": round(redo, 2),
            "per_retry_minutes": round(per_retry, 2), "worst_case_minutes": round(retries * per_retry, 2),
            "gpu_node_hours": round(node_hours, 3), "price_key": key,
            "worst_case_cost": None if price is None else round(node_hours * price, 2), "currency": s.cost.currency}


def runs_section(s: Settings, recording: Any) -> Section:
    if s.kind == "platform":
        return Section("runs", "Runs and checkpoints", "A platform stack runs no training job.\n", {})
    t, bucket = s.training, s.storage.bucket_name
    prefix = checkpoint_key_prefix(s)
    if s.model.source == "oss":
        start = f"the bucket's model `oss://{bucket}/{model_path(s)}` (model.source oss; no staging Job)"
    else:
        start = f"the {s.model.source} model staged at `oss://{bucket}/{model_path(s)}`"
    if t.resume_from is not None:
        resume = (f"branches from `oss://{bucket}/{t.resume_from}` (verl resume_mode resume_path: its weights, "
                  "optimizer and step); once this run has a checkpoint of its own, a retry or rerun continues "
                  "from that instead (resume_mode auto)")
    else:
        resume = (f"resume_mode auto: continues the newest `global_step_N/` under `oss://{bucket}/{prefix}` when "
                  f"one is there, else starts from {start.split(' (')[0]}")
    checked = s.kind == "experiment" or s.storage.mode == "existing"
    rerun = (f"a rerun with the same project and experiment names continues that folder; the first run records "
             f"{len(create_only_hyperparameters(s))} create-only hyperparameters in `{prefix}{RUN_RECORD_DIR}/` "
             "(model, dataset, algorithm, lr, batch sizes, rollout_n, lengths, KL, entropy, loss aggregation), and "
             + ("the preview refuses a rerun that changed one, naming it (its bucket exists before the stack)"
                if checked else "this stack creates its bucket, so the preview cannot read the record: a changed "
                "rerun continues the old checkpoint (change training.experiment_name to branch)"))
    steps, vals = training_steps(s), validation_passes(s, training_steps(s))
    what = (f"evaluation only (training.val_only): {vals} validation pass, no training step, no checkpoint"
            if t.val_only else f"{steps} training step(s), {vals} validation pass(es)")
    export = hf_export_prefix(s)
    ckpt = (f"`oss://{bucket}/{prefix}global_step_N/` every {t.save_freq} step(s) and at the last, "
            + (f"the newest {t.max_actor_ckpt_to_keep} kept" if t.max_actor_ckpt_to_keep else "every one kept")
            if t.save_freq > 0 else "none (save_freq -1)")
    hf = (f"`oss://{bucket}/{export}` (verl's hf_model save content: config, tokenizer and weights a "
          "`transformers` `from_pretrained` loads, and a next run's model.source: oss with this model.path; "
          f"teardown keeps the newest step's under `{s.storage.kept_prefix}` and prints where)"
          if export else "not saved (add hf_model to training.save_contents, or run verl's model merger on "
          "the FSDP shards)")
    r = retry_worst_case(s, recording)
    if r["retries"]:
        cost = ("unpriced" if r["worst_case_cost"] is None
                else f"{r['worst_case_cost']:.2f} {r['currency']} ({r['price_key']})")
        retry = (f"backoffLimit {r['retries']}: a lost node fails the Ray job (verl does not survive one) and KubeRay "
                 f"retries on a new Ray cluster, which continues from the newest checkpoint. Worst case per retry "
                 f"{r['per_retry_minutes']:.1f} min (start to the first step again {r['start_minutes']:.1f} min + up "
                 f"to {r['redo_minutes']:.1f} min of steps since the last checkpoint done again); all "
                 f"{r['retries']}: {r['worst_case_minutes']:.1f} min, {r['gpu_node_hours']:.2f} GPU node-hours, "
                 f"{cost}. Off: job.backoff_limit: 0. A settings or layout error is refused at preview, before any "
                 "RayJob, so it never reaches a retry")
    else:
        retry = ("backoffLimit 0: a failed run is not retried (single node, evaluation only, no checkpoint before "
                 "the last step, or job.backoff_limit: 0)")
    rows = [("starts from", start), ("resume", resume), ("rerun of the same names", rerun), ("run", what),
            ("checkpoints", ckpt), ("Hugging Face model", hf), ("lost node", retry)]
    data = {"table": rows_data(rows), "retry": r, "hf_export": export, "checkpoint_prefix": prefix,
            "val_only": t.val_only, "resume_from": t.resume_from, "model_path": model_path(s),
            "rerun_checked_at_preview": checked,
            "steps": steps, "validations": vals, "retries_hours_ceiling": math.ceil(r["worst_case_minutes"] / 60)}
    return Section("runs", "Runs and checkpoints", table(rows, ("runs and checkpoints", "")) + "\n", data)
