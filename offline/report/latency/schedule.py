"""The schedule of `pulumi up` over the recorded graph under the engine's ordering rules: a resource starts when
every resource it depends on (explicit `depends_on`, property dependencies and its provider) has finished and never
before its parent could start; a component finishes when its last child does (docs/latency.md)."""

from __future__ import annotations

from typing import Optional

from components.config import Settings
from components.model.wait import gpu_pool_autoscales, pull_minutes
from components.workloads.cache import checked_before_job
from offline.engine import Recording
from offline.report.latency.kinds import (
    SKIP_AWAIT,
    STAGING_KINDS,
    annotations_of,
    create_minutes,
    is_prepull,
    kind_of,
    training_image,
)


def _provider_urn(ref: str) -> str:
    return ref.rsplit("::", 1)[0] if ref else ""


Event = tuple[str, str]  # ("ready", urn) or ("finish", urn)


class Schedule:
    """Earliest start ("ready") and finish of every resource under the engine's ordering rules, evaluated
    iteratively (no recursion limit however long the dependency chains grow)."""

    def __init__(self, recording: Recording, s: Settings, repeat: bool = False):
        """`repeat`: the staging cache holds the model and dataset already (components/workloads/cache.py): where
        the program checks before the `up`, their Jobs are not created (0 minutes); else each only starts and reads
        its marker."""
        self.regs = {r.urn: r for r in recording.resources}
        self.children: dict[str, list[str]] = {}
        for r in recording.resources:
            if r.parent in self.regs:
                self.children.setdefault(r.parent, []).append(r.urn)
        self.kind = {u: kind_of(r) for u, r in self.regs.items()}
        self.minutes = {u: create_minutes(s, k, cached=repeat) for u, k in self.kind.items()}
        if repeat and checked_before_job(s):
            self.minutes.update({u: 0.0 for u, k in self.kind.items() if k in STAGING_KINDS})
        for u, r in self.regs.items():  # Pulumi does not wait for these (the sandbox image pull DaemonSet)
            if r.custom and annotations_of(r).get(SKIP_AWAIT) == "true":
                self.minutes[u] = create_minutes(s, "k8s_object")
        self.pull = pull_minutes(s, training_image(s, recording))[0]
        self.gpu_pool = next((u for u, k in self.kind.items() if k == "gpu_node_pool"), None)
        # An ECS pool below its node count autoscales: creating it boots only min_nodes (modelled as a plain
        # node pool) and the GPU nodes' boot (`gpu_node_pool` minutes) follows the Ray pods (critical_path).
        self.autoscaled = bool(self.gpu_pool) and gpu_pool_autoscales(s)
        self.boot = create_minutes(s, "gpu_node_pool")
        if self.autoscaled:
            self.minutes[self.gpu_pool] = create_minutes(s, "node_pool")
        self.prepull = next((u for u, r in self.regs.items() if is_prepull(r)), None)
        if self.prepull:
            self.kind[self.prepull] = "prepull"
            self.minutes[self.prepull] = create_minutes(s, "k8s_object")  # the pull itself is modelled apart
        self.pull_end: Optional[float] = None
        self.time: dict[Event, float] = {}
        self.why: dict[Event, Optional[Event]] = {}  # the event that decided this one (None: t=0)
        for u in self.regs:
            self._evaluate(("finish", u))

    def deps(self, urn: str) -> set[str]:
        r = self.regs[urn]
        out = set(r.dependencies) | {d for ds in r.property_dependencies.values() for d in ds}
        out.add(_provider_urn(r.provider))
        out.discard(urn)
        return {d for d in out if d in self.regs}

    def _inputs(self, ev: Event) -> list[Event]:
        what, u = ev
        if what == "finish":
            return [("ready", u)] + [("finish", c) for c in self.children.get(u, [])
                                     if self.kind[u] == "component"]
        out = [("finish", d) for d in sorted(self.deps(u))]
        parent = self.regs[u].parent
        if parent in self.regs:
            out.append(("ready", parent))  # a child never starts before its parent could
        if u == self.prepull and self.gpu_pool and self.gpu_pool != u:
            out.append(("finish", self.gpu_pool))  # its pods run on the GPU nodes
        return out

    def _evaluate(self, root: Event) -> None:
        stack: list[tuple[Event, bool]] = [(root, False)]
        open_: set[Event] = set()
        while stack:
            ev, expanded = stack.pop()
            if ev in self.time:
                continue
            if not expanded:
                if ev in open_:
                    r = self.regs[ev[1]]
                    raise ValueError(f"dependency cycle through {r.type}::{r.name}")
                open_.add(ev)
                stack.append((ev, True))
                stack += [(i, False) for i in self._inputs(ev) if i not in self.time]
                continue
            open_.discard(ev)
            best, why = 0.0, None
            for i in self._inputs(ev):
                if self.time[i] > best or (why is None and i[0] == "ready" and ev[0] == "finish"):
                    best, why = max(best, self.time[i]), i
            if ev[0] == "finish" and self.kind[ev[1]] != "component":
                best += self.minutes[ev[1]]
                if ev[1] == self.prepull:
                    self.pull_end = best + self.pull
                    if annotations_of(self.regs[ev[1]]).get(SKIP_AWAIT) != "true":
                        best += self.pull  # Pulumi awaits the DaemonSet's rollout, i.e. the pull on every node
            self.time[ev], self.why[ev] = best, why

    def start(self, urn: str) -> float:
        return self.time[("ready", urn)]

    def finish(self, urn: str) -> float:
        return self.time[("finish", urn)]

    def trace(self, urn: str) -> list[str]:
        """Custom resources on the chain of events that decided `urn`'s finish, latest first."""
        out: list[str] = []
        ev: Optional[Event] = ("finish", urn)
        while ev is not None:
            if ev[0] == "finish" and self.kind[ev[1]] != "component":
                out.append(ev[1])
            ev = self.why[ev]
        return out
