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
