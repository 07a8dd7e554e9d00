"""The plan's section "Time to first training step (ESTIMATE)": plan.md text and plan.json data."""

from __future__ import annotations

from dataclasses import asdict
from typing import Optional

from components.cloud.registry import runtime_pip_packages
from components.config import Settings
from components.model.layout import model_prefetch_gib
from offline.engine import Recording
from offline.report.latency.kinds import RAYJOB_TYPE, create_minutes, kind_of
from offline.report.latency.pair import PlatformRun, with_platform_network
from offline.report.latency.path import critical_path, plan_critical_path, unavoidable_chain_minutes
from offline.report.latency.staging import staging_case, staging_markdown
from offline.report.latency.targets import (
    Target,
    experiment_targets,
    gpu_price,
    minutes_text,
    single_targets,
    split_figures,
    split_markdown,
    targets_markdown,
)
from offline.report.section import Section, table
from offline.report.warm_pool import WarmPool


def warm_pool_row(s: Settings, w: WarmPool, on_path: bool) -> tuple[str, str]:
    where = (f"through the NAT: {s.cluster.network.nat_bandwidth_mbps} Mbit/s shared by the sandbox nodes"
             if w.via_nat else "in-region VPC endpoint")
    return ("warm sandbox pool ready " + ("(on the critical path: the first tool call waits)" if on_path
                                          else "(off the critical path)"),
            f"{w.ready:.1f} min: {s.latency.sandbox_image_gib:g} GiB of {w.image} at {w.mbps:.0f} Mbit/s per node "
            f"({where}) from {w.pull_start:.1f} min, then {s.latency.sandbox_start_minutes:g} min pod start")


def latency_section(s: Settings, recording: Recording):
    if s.kind == "platform":
        return platform_latency_section(s, recording)
    platform: Optional[PlatformRun] = getattr(recording, "platform", None)
    cp = plan_critical_path(recording, s)
    s = with_platform_network(s, platform)
    p = cp.image_pull
    pull_note = (f"{p.gib:g} GiB at {p.mbps:.0f} Mbit/s per node"
                 + (f" (through the NAT: {s.cluster.network.nat_bandwidth_mbps} Mbit/s shared by "
                    f"{s.gpu_pool.nodes} node(s))" if p.via_nat else "")
                 + (", already on the platform's GPU nodes (its pre-pull)" if p.prepulled and not s.owns_gpu_pool()
                    else ", pre-pulled from GPU-pool ready" if p.prepulled else ", pulled when the Ray pods start"))
    rows = [
        ("modelled time to first training step", minutes_text(cp.first_step_minutes)),
        ("all resources created (`pulumi up` returns)", minutes_text(cp.graph_minutes)),
        ("serial sum of the same steps (manual, one after another)", minutes_text(cp.serial_minutes)),
        ("GPU pool ready", minutes_text(cp.gpu_pool_ready_minutes)),
        ("GPU idle before the first step", minutes_text(cp.gpu_idle_minutes)),
        ("image pull " + ("(on the critical path)" if p.on_critical_path else "(off the critical path)"),
         f"{p.minutes:.1f} min: {pull_note}"),
    ]
    if cp.warm_pool:
        rows.append(warm_pool_row(s, cp.warm_pool, cp.warm_pool_on_critical_path))
    md = "**ESTIMATE** from typical durations in `latency` settings (docs/latency.md), not a measurement.\n\n"
    if s.kind == "experiment":
        md += ("Times below are from the start of this experiment's `pulumi up` on a platform that is already up "
               "(everything the platform stack owns is excluded).\n\n")
    md += table(rows, ("time to first step", "value"))
    md += "\n\nCritical path:\n\n| start | minutes | step | kind |\n|---|---|---|---|\n"
    md += "\n".join(f"| {st.start:.1f} | {st.minutes:.2f} | {st.name} | {st.kind} |" for st in cp.path)
    if cp.notes:
        md += "\n\n" + "\n".join(f"- note: {n}" for n in cp.notes)
    data = cp.as_dict()
    has_job = bool(recording.by_type(RAYJOB_TYPE))
    if p.via_nat and p.on_critical_path and s.owns_gpu_pool():
        # The one line a stack gets when its GPU nodes pull the training image through the NAT (docs/image.md).
        md += (f"\n\n- note: the training image crosses the NAT ({p.minutes:.1f} min on the critical path, "
               f"{p.mbps:.0f} Mbit/s per node): it costs {_pull_price(s, p.minutes)}; `image.source: built` with an "
               "ACR registry in the region (docs/image.md) pulls it over the VPC endpoint instead")
    targets: list[Target] = []
    if s.kind == "single" and has_job:
        chain = unavoidable_chain_minutes(s, cp)
        data["chain_minutes"], data["chain_ratio"] = round(chain, 2), round(cp.first_step_minutes / chain, 2)
        first = "cluster" if s.cluster.mode == "new" else "existing cluster (no creation)"
        md += (f"\n\nUnavoidable chain ({first} -> GPU pool join -> in-region image on node -> Ray start -> verl "
               f"init): {minutes_text(chain)}; the modelled first step is {cp.first_step_minutes / chain:.2f}x of it.")
        targets = single_targets(s, cp, chain)
    data["assumptions"] = s.latency.model_dump(exclude=unused_inputs(s))
    if has_job:
        staging = staging_case(s, recording, cp)
        md += "\n\n" + staging_markdown(staging)
        data["staging"] = staging.as_dict()
    if s.kind == "experiment":
        split = None
        if platform is not None and platform.fresh is not None:
            split = split_figures(s, cp, platform)
            md += "\n\n" + split_markdown(split)
            data["split"] = {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(split).items()}
            data["chain_minutes"], data["chain_ratio"] = round(split.chain_minutes, 2), round(split.fresh_ratio, 2)
        else:
            md += "\n\n- note: the platform stack was not rendered, so only the warm-platform figure is shown"
        if has_job:
            targets = experiment_targets(s, cp, split, staging.repeat_minutes)
        md += "\n\n" + ownership(s)
    if targets:
        md += "\n\n" + targets_markdown(targets)
        data["targets"] = [t.as_dict() for t in targets]
        data["meets_targets"] = all(t.holds for t in targets)
    return Section("latency", "Time to first training step (ESTIMATE)", md, data)


def _pull_price(s: Settings, minutes: float) -> str:
    key, price = gpu_price(s)
    nodes = s.gpu_pool.nodes
    if price is None:
        return f"{minutes:.1f} min of {nodes} GPU node(s) ({key}: no price)"
    return f"{nodes * minutes / 60 * price:,.2f} {s.cost.currency} of {nodes} GPU node(s) idle a run"


def ownership(s: Settings) -> str:
    """Which stack owns the GPU nodes, which bill by the hour (gpu_pool.owner; docs/stacks.md says the same)."""
    if s.gpu_pool.owner == "platform":
        return ("**Who owns the GPU nodes:** the platform stack (`gpu_pool.owner: platform`). Its GPU node pool and "
                "the image pre-pull live with the platform, so an experiment starts on joined nodes with the image on "
                "disk and its destroy leaves the pool up; the GPU nodes bill to the platform. Lingjun machines are "
                "bought outside Pulumi and bill while they exist, in a pool or not; an ECS pool would bill while the "
                "platform lives. The experiment stacks own no GPU node.")
    return ("**Who owns the GPU nodes:** the experiment stack. Its GPU node pool (ECS: the instances; Lingjun: the "
            "pool that joins the EFLO node group's nodes) is created by the experiment and destroyed with it; Lingjun "
            "machines themselves are bought outside Pulumi and bill while they exist, in a pool or not. The platform "
            "stack owns no GPU node.")


def unused_inputs(s: Settings) -> set[str]:
    """Inputs of `latency` this stack's model does not read (left out of plan.json's assumptions)."""
    out = {"job_submit_no_pip_minutes"} if runtime_pip_packages(s) else set()
    if not s.image.lazy_loading:
        out.add("lazy_pull_fraction")
    if not model_prefetch_gib(s):
        out.add("local_read_mbps")  # verl reads the OSS volume: no copy in the pods
    return out


def platform_latency_section(s: Settings, recording: Recording):
    """A platform stack has no training job: its `pulumi up` time, and where the experiments' figures are."""
    cp = critical_path(recording, s)
    # rounded once, so plan.md shows exactly what plan.json holds (a 87.149 printed 87.1 beside a stored 87.15)
    serial = round(sum(create_minutes(s, kind_of(r)) for r in recording.resources), 2)
    graph = round(cp.graph_minutes, 2)
    rows = [("all resources created (`pulumi up` returns)", minutes_text(graph)),
            ("serial sum of the same steps", minutes_text(serial))]
    if cp.warm_pool:
        rows.append(warm_pool_row(s, cp.warm_pool, False))
    md = ("**ESTIMATE** from typical durations in `latency` settings (docs/latency.md), not a measurement. A platform "
          "stack runs no training: each experiment stack's plan shows its time to the first step on this platform "
          "(warm) and for a new platform + experiment.\n\n" + table(rows, ("platform", "value")) + "\n\n" + ownership(s))
    data = {"graph_minutes": graph, "serial_minutes": serial,
            "assumptions": s.latency.model_dump(exclude=unused_inputs(s))}
    if cp.warm_pool:
        data["warm_pool"] = cp.as_dict()["warm_pool"]
    return Section("latency", "Time to first training step (ESTIMATE)", md, data)
