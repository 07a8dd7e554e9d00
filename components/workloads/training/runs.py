"""How a run starts and what it leaves for the next (docs/training.md "Runs and checkpoints"): pure functions the verl
command line (verl_config.py) and the preview's checks (components/cloud/account_checks.py) share.

- `run_start_overrides`: a branch from another run's checkpoint (verl `resume_mode: resume_path`) and the
  evaluation-only run (`val_only`).
- `create_only_hyperparameters` / `record_words`: what the entrypoint records beside a run's checkpoints, which the
  preview compares a rerun under the same names with.
- `node_wait_words`: the entrypoint's wait for every Ray node with its GPUs, bounded by the pre-running deadline.
"""

from __future__ import annotations

import hashlib
from typing import Any

from components.cloud.registry import training_image
from components.config import Settings
from components.model.layout import Layout
from components.model.wait import derived_pre_running_deadline_seconds
from components.workloads.training.volumes import checkpoint_dir, dataset_paths, model_dir, oss_volumes


def _word(value: Any) -> str:
    """A value as verl's Hydra override renders it (verl_config._scalar: True/False, repr of a float)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return repr(value) if isinstance(value, float) else str(value)


def resume_from_dir(s: Settings) -> str | None:
    """training.resume_from seen through the checkpoint volume (trainer.resume_from_path), None when unset."""
    key = s.training.resume_from
    return None if key is None else oss_volumes(s)["checkpoints"].path_of(key)


def run_start_overrides(s: Settings) -> list[tuple[str, Any]]:
    """Where the run starts and whether it trains: a branch from another run's checkpoint (`resume_path`; the
    trainer file's `auto` otherwise, which continues this experiment's newest checkpoint) and the evaluation-only
    run (trainer.val_only)."""
    t = s.training
    out: list[tuple[str, Any]] = []
    path = resume_from_dir(s)
    if path is not None:
        # The entrypoint turns this back into `auto` once this run has a checkpoint of its own (a retry or a
        # rerun continues its newest step, not the branch point): agent_tools/verl_ack_entrypoint.py.
        out += [("trainer.resume_mode", "resume_path"), ("trainer.resume_from_path", path)]
    if t.val_only:
        out.append(("trainer.val_only", True))
    return out


# The RayCluster's one worker group (rayjob.py WORKER_GROUP; a test compares them): the entrypoint's node wait
# names it when a worker has not joined.
RAY_WORKER_GROUP = "gpu"


def node_wait_seconds(s: Settings) -> int:
    """How long the entrypoint waits for every Ray node: the RayJob's pre-running deadline (the stack's or the
    derived one), past which KubeRay would fail a job whose Ray cluster is not Ready anyway."""
    given = s.job.pre_running_deadline_seconds
    return given if given is not None else derived_pre_running_deadline_seconds(s, training_image(s))


def node_wait_words(s: Settings, layout: Layout) -> list[str]:
    """The entrypoint's node wait (multi-node only: a single node is the head the entrypoint runs on)."""
    if layout.nodes <= 1:
        return []
    return [f"--nodes={layout.nodes}", f"--gpus-per-node={layout.gpus_per_node}",
            f"--worker-group={RAY_WORKER_GROUP}", f"--node-wait-seconds={node_wait_seconds(s)}"]


# The run's record beside its checkpoints: one empty object per create-only hyperparameter,
# `<checkpoint prefix>verl-ack-run/<setting>=<value>`, written by the entrypoint when the folder has none. A rerun
# with the same project and experiment names continues the newest checkpoint there (resume_mode auto); the preview
# lists the record and refuses the rerun when one of these changed (components/cloud/account_checks.py).
RUN_RECORD_DIR = "verl-ack-run"


def create_only_hyperparameters(s: Settings) -> dict[str, str]:
    """What a continued run cannot change without mixing two experiments in one checkpoint folder: the model and
    dataset (by their content addresses; a path would not be one plain word) and the optimisation hyperparameters.
    The step counts, frequencies and retention may change (that is how a run is extended)."""
    t = s.training

    def digest(text: str) -> str:
        return "sha256-" + hashlib.sha256(text.encode()).hexdigest()[:12]

    values: dict[str, Any] = {
        # The prefix the weights are read from (hub, repo and revision are in a staged prefix's name); the pod's
        # copy path is not used, as the prefetch setting changes it.
        "model": digest(model_dir(s)), "dataset": digest(" ".join(dataset_paths(s))),
        "training.algorithm": t.algorithm, "training.lr": t.lr, "training.train_batch_size": t.train_batch_size,
        "training.ppo_mini_batch_size": t.ppo_mini_batch_size, "training.rollout_n": t.rollout_n,
        "training.max_prompt_length": t.max_prompt_length, "training.max_response_length": t.max_response_length,
        "training.use_kl_loss": t.use_kl_loss, "training.kl_loss_coef": t.kl_loss_coef,
        "training.kl_loss_type": t.kl_loss_type, "training.entropy_coeff": t.entropy_coeff,
        "training.loss_agg_mode": t.loss_agg_mode,
    }
    return {k: _word(v) for k, v in values.items()}


def record_words(s: Settings) -> list[str]:
    return [f"--record-volume={oss_volumes(s)['checkpoints'].mount_path}",
            f"--record-dir={checkpoint_dir(s)}/{RUN_RECORD_DIR}",
            *(f"--hparam={k}={v}" for k, v in create_only_hyperparameters(s).items())]
