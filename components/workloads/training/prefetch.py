"""The model prefetch's wiring (job.model_prefetch; the program is agent_tools/verl_ack_model_prefetch.py): where
verl reads the weights, the wait step before the preflight and verl, and the `model-prefetch` container's command.
The pod side (the memory-backed volume, the container's resources) is rayjob.py's; the time model is
offline/report/latency/path.py `model_read_phase`."""

from __future__ import annotations

from components.config import REPO_ROOT, Settings
from components.model.layout import Layout, model_prefetch_gib
from components.model.wait import mbit_minutes, model_bytes
from components.workloads.training.volumes import model_copy_dir, model_dir

PREFETCH_MODULE = "verl_ack_model_prefetch"
PREFETCH_MODULE_FILE = f"{PREFETCH_MODULE}.py"
PREFETCH_SOURCE = REPO_ROOT / "agent_tools" / PREFETCH_MODULE_FILE


def model_read_dir(s: Settings) -> str:
    """actor_rollout_ref.model.path: the pod's copy when the prefetch runs (the wait step moves it back to the OSS
    volume if any node's copy failed), else the staged prefix on the OSS volume."""
    return model_copy_dir(s) if model_prefetch_gib(s) else model_dir(s)


def prefetch_timeout_seconds(s: Settings) -> int:
    """How long the wait step waits for the copies before verl reads OSS instead: the modelled copy (the model at
    `latency.oss_read_mbps`) with the pre-running deadline's margins (job.pre_running_margin_*)."""
    j = s.job
    minutes = mbit_minutes(model_bytes(s), s.latency.oss_read_mbps) * j.pre_running_margin_factor
    return int(round((minutes + j.pre_running_margin_minutes) * 60))


def prefetch_wait_words(s: Settings, layout: Layout) -> list[str]:
    """The wait step's command, up to the `--` after which the preflight or verl follows (it execs that): every Ray
    node's copy complete, or verl's model path moved back to the OSS volume (agent_tools/verl_ack_model_prefetch.py).
    Empty when the prefetch does not run."""
    if not layout.model_copy_gib:
        return []
    return ["python3", "-m", PREFETCH_MODULE, "wait", f"--source={model_dir(s)}", f"--dest={model_copy_dir(s)}",
            f"--nodes={layout.nodes}", f"--timeout-seconds={prefetch_timeout_seconds(s)}", "--"]


def prefetch_copy_command(s: Settings, config_dir: str) -> list[str]:
    """The `model-prefetch` container's command: copy the staged model into the pod's directory (within the copy's
    size), then wait."""
    words = ["python3", f"{config_dir}/{PREFETCH_MODULE_FILE}", "copy", f"--source={model_dir(s)}",
             f"--dest={model_copy_dir(s)}", f"--max-gib={model_prefetch_gib(s)}"]
    # A model the user put in the bucket (model.source: oss) has no staging marker: the copier lists the directory.
    return words + (["--list-source"] if s.model.source == "oss" else [])
