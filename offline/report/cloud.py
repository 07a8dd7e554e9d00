"""The cloud layer of the plan: what gets created, what is kept or deleted with the cluster."""

from __future__ import annotations

from components.cloud.addons import base_addons, retain_addon, uses_sandbox_addons
from components.cloud.cluster import DELETE_WITH_CLUSTER
from components.cloud.identity import role_specs
from components.cloud.ingress import certificate_id_suffix, dns_records, sandbox_api_url
from components.cloud.network import creates_network
from components.cloud.storage import creates_bucket, lifecycle_rules
from components.config import Settings
from offline.report.section import Section, alb_reach


def cloud_section(s: Settings, recording):
    """plan.md/plan.json section of the cloud layer: what is created, read, kept and how pods authenticate."""
    c, net, gp, st = s.cluster, s.cluster.network, s.gpu_pool, s.storage
    reads = [{"type": r.type, "name": r.name, "id": r.options.get("id")}
             for r in recording.resources if r.options.get("read")]
    managed = [r for r in recording.resources if r.custom and not r.options.get("read")
               and not r.type.startswith("pulumi:providers:")]
    rows = []
    if c.mode == "new":
        rows.append(("cluster", f"new ACK Pro `{c.cluster_spec}`, Kubernetes {c.kubernetes_version or 'newest'}, "
                                f"Terway, RRSA on, public API {c.public_api}, deletion protection "
                                f"{c.deletion_protection}; destroy deletes {', '.join(DELETE_WITH_CLUSTER)}"))
    else:
        rows.append(("cluster", f"existing `{c.existing_cluster_id}`: read only (never updated or deleted)"))
    if creates_network(s):
        rows.append(("network", f"new VPC {net.vpc_cidr}; node vSwitches {net.node_cidrs[:len(s.zones)]}, pod "
                                f"vSwitches {net.pod_cidrs[:len(s.zones)]} in {s.zones}; Enhanced NAT + "
                                f"{net.nat_bandwidth_mbps} Mbit/s pay-by-traffic EIP"))
    else:
        rows.append(("network", f"existing VPC `{net.vpc_id}`, node vSwitches {net.node_vswitch_ids}"))
    rows.append(("system pool", f"{s.system_pool.nodes} x {s.system_pool.instance_types} (pay-as-you-go)"))
    if gp.kind == "lingjun":
        assert gp.lingjun is not None
        rows.append(("GPU pool", f"Lingjun: {gp.nodes} node(s) of EFLO group `{gp.lingjun.eflo_node_group_id}` in "
                                 f"`{gp.lingjun.eflo_cluster_id}` (bought separately; bills while it exists)"))
    else:
        assert gp.ecs is not None
        rows.append(("GPU pool", f"ECS {gp.ecs.instance_types}, pay-as-you-go, no spot, autoscaled "
                                 f"{gp.ecs.min_nodes}..{gp.nodes} in {gp.zone}"))
    if creates_bucket(s):
        keep = "KEPT on destroy (protect + retain)" if st.keep_on_destroy else "DELETED with its objects on destroy"
        rows.append(("bucket", f"new `{st.bucket_name}`: private, public access blocked, {st.sse_algorithm} "
                               f"encryption, versioning {st.versioning}, {len(lifecycle_rules(s))} lifecycle rules; "
                               f"{keep}"))
    else:
        rows.append(("bucket", f"existing `{st.bucket_name}` (not managed)"))
    rows.append(("OSS auth", st.auth))
    rows.append(("KubeRay", f"{s.versions.kuberay_source} {s.versions.kuberay}"))
    if s.sandbox.domain:
        tls = s.sandbox.tls
        rows.append(("sandbox domain", f"{sandbox_api_url(s)}, reachable {_reach(recording)}; certificate "
                                       f"{'uploaded from secret config' if tls.source == 'upload' else tls.certificate_id}"
                                       f" (AlbConfig id suffix -{certificate_id_suffix(s)}); DNS "
                                       f"{sorted(dns_records(s).values()) or 'not managed (no dns_zone)'}"))
    addon_rows = [(spec.role, s.versions.addons[spec.role].name, s.versions.addons[spec.role].version or "default",
                   "kept" if retain_addon(s, spec.role) else "uninstalled") for spec in base_addons(s)]
    if uses_sandbox_addons(s):
        keep = "kept" if c.mode == "existing" else "uninstalled"
        addon_rows += [(r, s.versions.addons[r].name, s.versions.addons[r].version or "default", keep)
                       for r in ("sandbox_controller", "sandbox_manager")]
    # The roles this stack creates: a platform the CSI and MLflow roles, an experiment its data and training roles.
    created = {r.inputs.get("roleName") for r in recording.by_type("alicloud:ram/role:Role")}
    roles = [{"role": r.role_name, "subject": r.subject, "read": list(r.read), "write": list(r.write)}
             for r in role_specs(s) if r.role_name in created]
    if s.kind == "platform" and s.owns_gpu_pool():
        rows = [(k, f"{v}; owned by this platform (`gpu_pool.owner: platform`) with the image pre-pulled: experiments "
                 "schedule on it and create none" if k == "GPU pool" else v) for k, v in rows]
    elif s.kind == "platform":
        rows = [(k, "none: each experiment stack creates (and its destroy removes) its own; `gpu_pool` here only "
                 "sets the cluster's GPU needs" if k == "GPU pool" else v) for k, v in rows]
    elif s.kind == "experiment":
        # Everything but the GPU pool is the platform's, read from its outputs; the settings' values do not apply.
        rows = [("platform", f"`{s.platform_stack}` (StackReference): cluster, vSwitches, bucket, OIDC provider, "
                             "MCP URL, MLflow URI and image are read from its outputs; none is created here"),
                *[(k, f"the platform's (`gpu_pool.owner: platform`, its `gpu_pool_id` output): {v}; none is created "
                    "here" if k == "GPU pool" and not s.owns_gpu_pool() else v)
                  for k, v in rows if k in ("GPU pool", "OSS auth")]]
        addon_rows = []

    md = ["| cloud layer | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if addon_rows:
        md += ["", "| add-on role | name | version | on destroy |", "|---|---|---|---|"]
        md += [f"| {a} | `{b}` | {v} | {d} |" for a, b, v, d in addon_rows]
    if roles:
        md += ["", "| RAM role (RRSA) | trusted service account | read | write |", "|---|---|---|---|"]
        md += [f"| {r['role']} | `{r['subject']}` | {', '.join(r['read'])} | {', '.join(r['write'])} |" for r in roles]
    # The plan's header counts every registration; say what the difference is, so the two counts do not read as a bug.
    components = sum(1 for r in recording.resources if not r.custom)
    providers = sum(1 for r in recording.resources if r.custom and r.type.startswith("pulumi:providers:"))
    md += ["", f"{len(managed)} managed cloud/Kubernetes resources, of the {len(recording.resources)} the plan counts: "
           f"the other {components} are component resources (groupings, the stack itself), {providers} provider(s) and "
           f"{len(reads)} read(s), which create nothing."]
    if reads:
        md += ["", "Read, not managed (no `pulumi up` or `destroy` changes or deletes them): "
               + ", ".join(f"`{r['type']}` {r['name']} = `{r['id']}`" for r in reads)]
    data = {"rows": dict(rows), "addons": [dict(zip(("role", "name", "version", "on_destroy"), a, strict=True))
                                            for a in addon_rows],
            "rrsa_roles": roles, "reads": reads, "managed_resources": len(managed),
            "component_resources": components, "providers": providers}
    return Section("cloud", "Cloud layer (Alibaba Cloud)", "\n".join(md), data)


def _reach(recording) -> str:
    where = alb_reach(recording)
    return "through no ALB (none recorded)" if where is None else where.replace("**", "").replace("VPC only", "from the VPC only")
