"""The staging cache in the time model: which case this plan shows (the first use of a model and dataset on the
bucket, or a repeat) and the figure of both (components/workloads/cache.py, docs/latency.md "Staging cache")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from components.config import Settings
from components.wiring import completion_marker
from components.workloads.cache import checked_before_job, staged_inputs, staged_prefix
from offline.engine import Recording
from offline.report.latency.kinds import kind_of
from offline.report.latency.path import CriticalPath, Step, plan_critical_path

JOB_KIND = {"model": "model_job", "dataset": "dataset_job"}


@dataclass(frozen=True)
class StagingCase:
    case: str  # "first use" (this `up` stages) or "repeat" (the bucket holds every staged prefix already)
    checked_before_job: bool  # the program lists the markers at preview (an experiment on its platform's bucket)
    entries: list[dict]  # what, prefix, marker, job (whether this graph has its Job)
    first_use_minutes: Optional[float]  # None when the recorded graph is a repeat (no Job to model)
    repeat_minutes: float
    repeat_path: list[Step]
    further_cuts: list[dict]  # cuts of the repeat measured in the model, not applied: name, minutes, cost

    def as_dict(self) -> dict:
        return {"case": self.case, "checked_before_job": self.checked_before_job, "entries": self.entries,
                "first_use_first_step_minutes": None if self.first_use_minutes is None else round(
                    self.first_use_minutes, 2),
                "repeat_first_step_minutes": round(self.repeat_minutes, 2),
                "repeat_path": [{"name": st.name, "kind": st.kind, "start": round(st.start, 2),
                                 "minutes": round(st.minutes, 2)} for st in self.repeat_path],
                "further_cuts": self.further_cuts}


def staging_case(s: Settings, recording: Recording, cp: CriticalPath) -> StagingCase:
    """`cp`: the recorded graph's critical path. A graph without any staging Job is a repeat (the program found
    every marker); with them it is a first use, and the repeat is modelled on the same graph."""
    kinds = {kind_of(r) for r in recording.resources}
    entries = [{"what": what, "prefix": staged_prefix(s, what), "marker": completion_marker(staged_prefix(s, what)),
                "job": JOB_KIND[what] in kinds} for what in staged_inputs(s)]
    first_use = any(e["job"] for e in entries)
    repeat = plan_critical_path(recording, s, repeat=True) if first_use else cp
    return StagingCase("first use" if first_use else "repeat", checked_before_job(s), entries,
                       cp.first_step_minutes if first_use else None, repeat.first_step_minutes, repeat.path,
                       further_cuts(s, recording, repeat.first_step_minutes))


# Cuts of the repeat path the program does not make, each modelled by zeroing one `latency` input, with its cost.
FURTHER_CUTS = {
    "gate_job_minutes": ("no node gate before the RayJob", "an empty or broken GPU pool is then found only by "
                         "KubeRay's pre-running deadline (job.pre_running_margin_*), with no message in `pulumi up`"),
    "ray_start_minutes": ("a warm Ray cluster kept on the GPU nodes between experiments", "it holds the GPU nodes "
                          "between runs (no other experiment's RayJob fits while it is up) and every experiment "
                          "shares its Ray version, image and runtime: one head per platform instead of one per run"),
}


def further_cuts(s: Settings, recording: Recording, repeat_minutes: float) -> list[dict]:
    out = []
    for field, (name, cost) in FURTHER_CUTS.items():
        if getattr(s.latency, field) <= 0:
            continue
        cut = s.model_copy(update={"latency": s.latency.model_copy(update={field: 0.0})})
        minutes = plan_critical_path(recording, cut, repeat=True).first_step_minutes
        out.append({"cut": name, "input": f"latency.{field}", "first_step_minutes": round(minutes, 2),
                    "saves_minutes": round(repeat_minutes - minutes, 2), "cost": cost})
    return out


def staging_markdown(c: StagingCase) -> str:
    how = ("the program lists each marker in the platform's bucket at preview and creates no Job for a complete "
           "prefix" if c.checked_before_job else
           "this stack's bucket is created in the same `up`, so nothing is listed before it: each Job runs, reads its "
           "marker and skips the download when it is there")
    rows = [f"| {e['what']} | `{e['prefix']}` | `{e['marker']}` | {'staged by this `up`' if e['job'] else 'cached'} |"
            for e in c.entries]
    first = "n/a (not this graph)" if c.first_use_minutes is None else f"{c.first_use_minutes:.1f} min"
    return ("Staging cache (content-addressed prefixes, each staged once per bucket; the marker is written last): "
            f"this plan is a **{c.case}**; {how}.\n\n| staged | prefix | marker | this plan |\n|---|---|---|---|\n"
            + "\n".join(rows)
            + f"\n\n| case | modelled first step |\n|---|---|\n| first use (stages the model and dataset) | {first} |\n"
            f"| repeat (the same model revision and dataset staged before) | {c.repeat_minutes:.1f} min |"
            + "".join(f"\n| repeat with {x['cut']} (modelled, not done: {x['cost']}) | {x['first_step_minutes']:.1f} "
                      "min |" for x in c.further_cuts))
