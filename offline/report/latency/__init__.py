"""Time to the first training step: a latency model over the recorded resource graph (docs/latency.md).

Every resource gets a creation time from its type token (`kinds`); the schedule follows the engine's ordering
rules (`schedule`); the training phases follow the RayJob, and the critical path is read back from the schedule
(`path`). Platform and experiment stacks (docs/stacks.md): an experiment's own graph gives the figure on a warm
platform; plan.py also renders the pair as one program (`pair.single_of_pair`) for the figure of a new platform +
experiment, and `targets` holds every plan to its targets. `section` renders the plan's section.

Pure functions of (recording, settings); every number is a modelled ESTIMATE. The names below are this package's
API (plan.py, the cost model and the tests import them from `offline.report.latency`).
"""

from __future__ import annotations

from components.model.wait import mbit_minutes, pull_minutes
from offline.report.latency.kinds import (
    DAEMONSET_TYPE,
    INSTANT,
    JOB_TYPE,
    NODE_POOL_TYPE,
    PREFIX_KINDS,
    PREPULL_ROLE,
    RAYJOB_TYPE,
    SKIP_AWAIT,
    TYPE_KINDS,
    create_minutes,
    hub_mbps,
    is_gpu_pool,
    is_prepull,
    job_kind,
    job_minutes,
    kind_of,
    submit_minutes,
    training_image,
)
from offline.report.latency.pair import PLATFORM_SECTIONS, PlatformRun, single_of_pair, with_platform_network
from offline.report.latency.path import (
    CriticalPath,
    ImagePull,
    Step,
    Timeline,
    critical_path,
    own_start_minutes,
    plan_critical_path,
    unavoidable_chain_minutes,
)
from offline.report.latency.section import (
    latency_section,
    ownership,
    platform_latency_section,
    unused_inputs,
    warm_pool_row,
)
from offline.report.latency.targets import (
    TARGET_AVOIDABLE_IDLE_MINUTES,
    TARGET_FRESH_RATIO,
    TARGET_WARM_MINUTES,
    SplitFigures,
    split_figures,
    split_markdown,
)

__all__ = [
    "DAEMONSET_TYPE", "INSTANT", "JOB_TYPE", "NODE_POOL_TYPE", "PLATFORM_SECTIONS", "PREFIX_KINDS", "PREPULL_ROLE",
    "RAYJOB_TYPE", "SKIP_AWAIT", "TARGET_AVOIDABLE_IDLE_MINUTES", "TARGET_FRESH_RATIO", "TARGET_WARM_MINUTES",
    "TYPE_KINDS", "CriticalPath", "ImagePull", "PlatformRun", "SplitFigures", "Step", "Timeline", "create_minutes",
    "critical_path", "hub_mbps", "is_gpu_pool", "is_prepull", "job_kind", "job_minutes", "kind_of", "latency_section",
    "mbit_minutes", "own_start_minutes", "ownership", "plan_critical_path", "platform_latency_section",
    "pull_minutes", "single_of_pair", "split_figures", "split_markdown", "submit_minutes", "training_image",
    "unavoidable_chain_minutes", "unused_inputs", "warm_pool_row", "with_platform_network",
]
