"""The sandbox and data sections of the plan."""

from __future__ import annotations

from components.config import Settings
from components.model import preset_of
from components.wiring import dataset_files, mcp_url, model_path, tracking_uri
from components.workloads.data import scratch_disk_gib
from components.workloads.sandbox import pool_size
from offline.report.section import Section, rows_data, table


def data_section(s: Settings, recording):
    """Plan section: the objects the data Jobs write, the Jobs' names and where tracking lives."""

    files = dataset_files(s)
    uri = tracking_uri(s)
    platform = getattr(recording, "platform", None)
    if s.kind == "experiment" and platform is not None:
        uri = platform.recording.outputs.get("tracking_uri") or None  # the platform's MLflow, read by reference
    jobs = [r.inputs.get("metadata", {}).get("name") for r in recording.by_type("kubernetes:batch/v1:Job")]
    rows = [
        ("dataset objects", ", ".join(f"`{k}`" for k in files.written)),
        ("trainer reads", f"`{files.train}`, `{files.test}`"),
        ("model prefix", f"`{model_path(s)}` (the bucket's own model, model.source oss: no staging Job; the "
                         f"architecture of {preset_of(s).hf_id or preset_of(s).dir_name})" if s.model.source == "oss"
         else f"`{model_path(s)}` ({preset_of(s).hf_id} from {s.model.source}; scratch disk "
              f"{scratch_disk_gib(s)} GiB)"),
        ("data Jobs", ", ".join(f"`{j}`" for j in jobs if j) or "none"),
        ("pip pins", ", ".join(f"{k}=={v}" for k, v in sorted(s.versions.pipeline_packages.items()))),
        ("MLflow", f"`{uri}`" if s.tracking.enabled else "disabled"),
    ]
    data = {"dataset_files": list(files.written), "train": files.train, "test": files.test,
            "model_path": model_path(s), "data_jobs": jobs, "tracking_uri": uri, "table": rows_data(rows)}
    return Section("data", "Data and tracking", table(rows, ("data and tracking", "value")), data)


def sandbox_section(s: Settings, recording):
    """Plan section: the warm pool's computed size, its cap and what it asks of the system pool."""

    sb, t = s.sandbox, s.training
    if not sb.enabled:
        return Section("sandbox", "Sandboxes", "sandbox.enabled is false: no sandboxes, no MCP tool.", {})
    platform = getattr(recording, "platform", None)
    if s.kind == "experiment":
        url = platform.recording.outputs.get("mcp_url") if platform is not None else None
        return Section("sandbox", "Sandboxes",
                       f"The sandboxes and their MCP server are the platform's (`{s.platform_stack}`); its plan sizes "
                       f"the warm pool. This job's MCP endpoint, read from the platform: `{url or 'not rendered'}`.",
                       {"mcp_url": url})
    p = pool_size(s)
    rows = [
        ("manager", sb.manager),
        ("in-flight run_code_once (demand)", f"train_batch_size {t.train_batch_size} x rollout_n {t.rollout_n} x "
                                             f"max_parallel_calls {t.max_parallel_calls} = {p.demand}"),
        ("pool_min / pool_cap", f"{p.pool_min} / {p.pool_cap}"),
        ("SandboxSet replicas = clamp(demand, pool_min, pool_cap)",
         f"**{p.replicas}**" + (" (capped: further claims create sandboxes on demand)" if p.capped else "")),
        ("warm pool requests", f"{p.replicas * p.cpu_per_sandbox:g} vCPU, "
                               f"{p.replicas * p.memory_gib_per_sandbox:g} GiB ({sb.cpu} CPU / {sb.memory} each)"),
        (p.host_pool, f"{p.system_cpus} vCPU, {p.system_memory_gib} GiB: at most {p.fit_on_system_pool} sandboxes "
                      "if nothing else ran there"),
        ("MCP endpoint", f"`{mcp_url(s)}`"),
        ("sandbox egress", "DNS, and the internet except cluster/VPC/private ranges and 100.100.100.200"
                           if sb.allow_internet else "DNS only"),
    ]
    md = table(rows, ("sandbox pool", "value"))
    if p.replicas > p.fit_on_system_pool:
        md += (f"\n\n- **warning** `sandbox.pool_cap`: {p.replicas} warm sandboxes need "
               f"{p.replicas * p.cpu_per_sandbox:g} vCPU / {p.replicas * p.memory_gib_per_sandbox:g} GiB but the "
               f"{p.host_pool} has {p.system_cpus} vCPU / {p.system_memory_gib} GiB; at most {p.fit_on_system_pool} "
               "can run and the rest stay Pending. Lower sandbox.pool_cap or sandbox.cpu/memory, or add "
               f"{'sandbox.dedicated_pool' if p.host_pool == 'sandbox pool' else 'system_pool'} nodes.")
    data = {"demand": p.demand, "pool_min": p.pool_min, "pool_cap": p.pool_cap, "replicas": p.replicas,
            "capped": p.capped, "fit_on_system_pool": p.fit_on_system_pool, "mcp_url": mcp_url(s),
            "table": rows_data(rows)}
    return Section("sandbox", "Sandboxes", md, data)
