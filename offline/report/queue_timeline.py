"""A sweep's modelled queue: when each variant's RayJob is admitted and holds the GPUs, and when the last one is done.

Every variant is created suspended at once; the queue admits them in submission order (one priority: the kube-queue
priority plugin orders by priority, then first submission, docs/facts.md "Shared platform"), each only when its
whole request fits under both its team's max (`queue.teams.<ns>.gpus`) and the pool (the quota tree's root), and
nothing is preempted (preemptionPolicy Never). A variant holds its GPUs from its Ray pods' start through its run and
the finished cluster's TTL (cost.run_hold_minutes); the next one in line starts when enough are freed.

An ESTIMATE: the hold times are the cost model's, the admission itself is taken as instant, and other teams' jobs
(which may borrow the pool) are not modelled.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable

from components.config import Settings
from components.sweep import variants
from components.wiring import ray_namespace


@dataclass(frozen=True)
class QueuedRun:
    key: str
    gpus: int
    start_minutes: float  # admitted: its Ray pods start on the GPU nodes
    end_minutes: float  # its Ray cluster is gone: the GPUs are free for the next one
    queued_at: float  # when it could have started with the pool to itself

    @property
    def wait_minutes(self) -> float:
        return self.start_minutes - self.queued_at


class QueueTimelineError(ValueError):
    """A variant that needs more GPUs than the queue could ever give it."""


def queue_timeline(runs: list[tuple[str, int, float]], capacity_gpus: int, first_start_minutes: float) -> list[QueuedRun]:
    """(key, GPUs, minutes held) in submission order -> when each is admitted and done, FIFO under `capacity_gpus`
    (the smaller of the team's max and the pool). The first can start at `first_start_minutes`."""
    out: list[QueuedRun] = []
    running: list[tuple[float, int]] = []  # (end, gpus) of the runs holding GPUs
    used, t = 0, first_start_minutes
    for key, gpus, hold in runs:
        if gpus > capacity_gpus:
            raise QueueTimelineError(f"variant {key} needs {gpus} GPUs but its queue admits at most {capacity_gpus}")
        while used + gpus > capacity_gpus:
            end, freed = heapq.heappop(running)
            t, used = max(t, end), used - freed
        heapq.heappush(running, (t + hold, gpus))
        used += gpus
        out.append(QueuedRun(key, gpus, t, t + hold, first_start_minutes))
    return out


def concurrency(capacity_gpus: int, gpus: int) -> int:
    return capacity_gpus // gpus if gpus else 0


def queue_capacity(s: Settings, platform) -> tuple[int, str]:
    """The GPUs a sweep's variants may hold at once: the smaller of their team's max and the pool, from the platform's
    settings when the plan rendered it (else this stack's description of the pool), with where the figure comes from."""
    ps = platform.settings if platform is not None else None
    pool = (ps or s).gpu_pool.nodes * (ps or s).gpu_pool.gpus_per_node
    team_key = ps.queue.team_of(ray_namespace(s)) if ps is not None else None
    if team_key is None:
        return pool, "the pool"
    team = ps.queue.teams[team_key].gpus
    return min(team, pool), (f"team {team_key}'s max {team} GPUs" if team < pool else f"the pool's {pool} GPUs")


def modelled_queue(s: Settings, first_start_minutes: float, platform,
                   hold_minutes: Callable[[Settings], float]) -> tuple[list[QueuedRun], int, str]:
    """A sweep's variants through the queue: (timeline, capacity, where the capacity comes from). `hold_minutes`:
    how long one variant (its settings) holds its GPUs (the cost model's cost.run_hold_minutes)."""
    capacity, why = queue_capacity(s, platform)
    runs = [(v.key, v.layout.nodes * s.gpu_pool.gpus_per_node, hold_minutes(v.settings)) for v in variants(s)]
    return queue_timeline(runs, capacity, first_start_minutes), capacity, why
