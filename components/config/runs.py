"""Cross-section rules of where a run starts: a model from the bucket (`model.source: oss`) and a checkpoint to branch
from (`training.resume_from`) must lie under a prefix the Ray pods mount, in a bucket that holds them before the
stack. A rule of the root settings (root.py `_runs_and_checkpoints`), kept here to keep root.py short."""

from __future__ import annotations

from typing import Any

from components.config.rules import Problems


def run_start_problems(s: Any) -> Problems:
    """Where a run starts from must be in the bucket the Ray pods mount (docs/training.md "Runs and checkpoints").
    `s`: the root settings (this module cannot import them: root.py imports this)."""
    st, m, t = s.storage, s.model, s.training
    if m.source == "oss" and m.path is not None:
        if not (m.path.startswith(st.models_prefix) or m.path.startswith(st.checkpoints_prefix)):
            yield "model.path", (
                f"model.path {m.path!r} is under neither storage.models_prefix {st.models_prefix!r} nor "
                f"storage.checkpoints_prefix {st.checkpoints_prefix!r}, the two volumes the Ray pods read; copy "
                "the model under one of them")
        if s.kind == "single" and st.mode == "new":
            yield "model.source", (
                "model.source oss reads a model already in the bucket, but this stack creates its bucket "
                "(storage.mode: new), which holds nothing yet; use storage.mode: existing with the bucket that "
                "holds it, or an experiment stack on its platform's bucket")
        if s.kind == "platform":
            yield "model.source", "model.source oss is an experiment's setting; a platform stages no model"
    if t.resume_from is not None and not t.resume_from.startswith(st.checkpoints_prefix):
        yield "training.resume_from", (
            f"training.resume_from {t.resume_from!r} is not under storage.checkpoints_prefix "
            f"{st.checkpoints_prefix!r}, the checkpoint volume verl reads it through; name a global_step_N/ "
            "folder there")
