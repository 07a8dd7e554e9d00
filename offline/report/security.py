"""The security posture of the plan: what is exposed and to whom, how the model-written code is isolated, which
NetworkPolicies guard what, and what each role may do.

Facts about what exists come from the recorded resource graph (the objects `pulumi up` would create); the settings
only explain them. docs/cloud.md ("Security posture") and docs/sandbox.md ("Isolation") describe each control
and its source.
"""

from __future__ import annotations

from typing import Any

from components.cloud.identity import role_specs
from components.config import Settings
from components.wiring import (
    job_namespace_pod_security,
    ray_namespace,
    ray_namespace_pod_security,
    ray_pods_use_rdma,
    sandbox_namespace_pod_security,
)
from components.workloads.sandbox.manifests import ROOT_SANDBOX_CAPABILITIES
from offline.report.section import Section, alb_reach

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
# A namespace the program keeps on destroy is a patch of it (components/wiring.py kept_namespace): its labels still
# are the program's.
NAMESPACE_TYPES = (NAMESPACE, "kubernetes:core/v1:NamespacePatch")
SANDBOX_SET = "kubernetes:agents.kruise.io/v1alpha1:SandboxSet"
RAYJOB = "kubernetes:ray.io/v1:RayJob"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
BUCKET_POLICY = "alicloud:oss/bucketPolicy:BucketPolicy"
BUCKET_LOGGING = "alicloud:oss/bucketLogging:BucketLogging"
ALB = "alicloud:alb/loadBalancer:LoadBalancer"
ALB_CONFIG = "kubernetes:alibabacloud.com/v1:AlbConfig"
PSA_ENFORCE = "pod-security.kubernetes.io/enforce"


def _labels(labels: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "every pod"


def _peer(peer: dict) -> str:
    if "ipBlock" in peer:
        return f"{peer['ipBlock']['cidr']} except {len(peer['ipBlock'].get('except', []))} ranges"
    pods = (peer.get("podSelector") or {}).get("matchLabels")
    ns = peer.get("namespaceSelector")
    where = "any namespace" if ns == {} else (
        f"namespace {ns['matchLabels'].get('kubernetes.io/metadata.name')}" if ns else "same namespace")
    return f"pods {_labels(pods)} ({where})" if pods else where


def _rules(rules: list[dict], direction: str) -> list[str]:
    out = []
    for rule in rules:
        peers = rule.get("from" if direction == "ingress" else "to") or []
        ports = ",".join(f"{p['port']}/{p.get('protocol', 'TCP')}" for p in rule.get("ports") or []) or "all ports"
        out.append(f"{'; '.join(_peer(p) for p in peers) or 'anywhere'} on {ports}")
    return out


def network_policies(recording) -> list[dict]:
    out = []
    for r in recording.by_type(NETWORK_POLICY):
        spec = r.inputs.get("spec") or {}
        out.append({
            "name": (r.inputs.get("metadata") or {}).get("name"),
            "namespace": (r.inputs.get("metadata") or {}).get("namespace"),
            "selects": (spec.get("podSelector") or {}).get("matchLabels"),
            "ingress": _rules(spec.get("ingress") or [], "ingress") if "Ingress" in spec.get("policyTypes", []) else None,
            "egress": _rules(spec.get("egress") or [], "egress") if "Egress" in spec.get("policyTypes", []) else None,
        })
    return out


def namespaces(s: Settings, recording) -> list[dict]:
    """Every namespace the program creates, with the Pod Security Standard level it enforces."""
    out = []
    for r in (r for r in recording.resources if r.type in NAMESPACE_TYPES):
        meta = r.inputs.get("metadata") or {}
        out.append({"name": meta.get("name"), "enforce": (meta.get("labels") or {}).get(PSA_ENFORCE, "none")})
    if s.sandbox.enabled and s.sandbox.manager == "ack-addon":
        out.append({"name": s.sandbox.namespace, "enforce": "not managed (the ACK add-on owns it)"})
    return out


def exposure(s: Settings, recording) -> list[tuple[str, str]]:
    """(endpoint, who can reach it)."""
    c, sb = s.cluster, s.sandbox
    rows: list[tuple[str, str]] = []
    if c.mode == "existing":
        rows.append(("API server", f"existing cluster `{c.existing_cluster_id}`: its endpoints are not managed here"))
    elif c.public_api:
        rows.append(("API server", "**internet** (EIP on its CLB); restrict the 6443 listener's ACL by hand "
                                   "(docs/cloud.md): pulumi_alicloud has no argument for it"))
    else:
        rows.append(("API server", "VPC only (no EIP): run Pulumi and kubectl from inside the VPC"))
    if recording.by_type(ALB):
        acl = ", ".join(sb.api_allowed_cidrs) if sb.api_allowed_cidrs else "no ACL"
        where = alb_reach(recording)
        rows.append(("E2B API (sandbox.domain)", f"{where}; HTTPS:443 only, `{sb.tls_policy}`; sources: {acl}; "
                                                 "one static admin key"))
    if sb.enabled:
        rows.append(("MCP (sandbox manager)", f"ClusterIP `{sb.service_name}.{sb.namespace}`: in-cluster only"))
    if s.tracking.enabled:
        rows.append(("MLflow", f"ClusterIP `mlflow.{s.job.namespace}`: Ray pods of namespaces labelled "
                               "`verl-ack/tracking-client` only (NetworkPolicy); kubectl port-forward for people"))
    rows.append(("Ray dashboard / job API / GCS / client", f"ClusterIP head Service in `{ray_namespace(s)}`: the "
                                                           "job's Ray pods, its submitter and the KubeRay operator "
                                                           "only (NetworkPolicy), with KubeRay's token "
                                                           "(authOptions.mode token); kubectl port-forward and the "
                                                           "`ray_auth_env` output for people"))
    return rows


def sandbox_isolation(s: Settings, recording) -> list[tuple[str, str]]:
    sb = s.sandbox
    if not sb.enabled:
        return [("sandboxes", "sandbox.enabled is false: no model-written code runs")]
    if sb.run_as_user is not None:
        user = f"uid {sb.run_as_user}, runAsNonRoot: meets the restricted Pod Security Standard"
    else:
        user = (f"root (the code-interpreter image's user), capabilities only {', '.join(ROOT_SANDBOX_CAPABILITIES)}: "
                "restricted except runAsNonRoot (set sandbox.run_as_user with a non-root image)")
    rows = [
        ("user", user),
        ("always", "no privilege escalation, seccomp RuntimeDefault, no service account token, no Service env vars"),
        ("runtime", f"RuntimeClass `{sb.runtime_class}`" if sb.runtime_class else "the node's default (runC, shared "
                                                                                   "host kernel)"),
        ("nodes", (f"dedicated pool: {sb.dedicated_pool.nodes} x {sb.dedicated_pool.instance_types}, tainted "
                   f"verl-ack/sandbox" + (f", runtime {sb.dedicated_pool.runtime_name}"
                                          if sb.dedicated_pool.runtime_name else ""))
         if sb.dedicated_pool else "the system pool (shared with the controllers, MLflow and the data jobs)"),
        ("disk", f"ephemeral-storage {sb.ephemeral_storage} per sandbox, envd emptyDir sizeLimit "
                 f"{sb.envd_volume_size}: a sandbox that writes more is evicted alone"),
        ("egress", "DNS and the internet except cluster/VPC/private ranges and 100.100.100.200"
                   if sb.allow_internet else "DNS only"),
        ("ingress", "the sandbox manager only"),
        ("NetworkPolicy enforcement", "Terway NetworkPolicy on at cluster creation" if s.cluster.mode == "new" else
         "existing cluster: only if kube-system/eni-config has disable_network_policy: \"false\" (docs/cloud.md)"),
    ]
    if not recording.by_type(SANDBOX_SET):
        rows.append(("SandboxSet", "**not in the recorded graph**"))
    return rows


def cluster_controls(s: Settings) -> list[tuple[str, str]]:
    c = s.cluster
    if c.mode == "existing":
        return [("audit log / Secret encryption", "existing cluster: not managed here")]
    return [
        ("audit log", f"on (SLS project {c.audit_log_project or 'ACK default'})" if c.audit_log else "**off**"),
        ("Secret encryption (KMS)", f"KMS key `{c.secrets_kms_key_id}`" if c.secrets_kms_key_id else
         "etcd default (no KMS key: cluster.secrets_kms_key_id)"),
        ("RRSA", "on: pods get RAM roles through OIDC, no AccessKeys in the cluster"
                 if s.storage.auth == "rrsa" else "**storage.auth access_key**: an AccessKey Secret in the job namespace"),
    ]


def bucket_controls(s: Settings, recording) -> list[tuple[str, str]]:
    st = s.storage
    if st.mode == "existing":
        return [("bucket", f"existing `{st.bucket_name}`: its policy, ACL and logging are not managed here")]
    policy = []
    if recording.by_type(BUCKET_POLICY):
        policy = [p for p, on in (("HTTPS only", st.require_https), ("object data only from the VPC", st.vpc_only))
                  if on]
    return [
        ("access", "private ACL, Block Public Access"),
        ("bucket policy", ", ".join(policy) or "none"),
        ("access logs", f"`{st.access_log_prefix}` (expire after {st.access_log_expire_days} days)"
                        if recording.by_type(BUCKET_LOGGING) else "off"),
    ]


def rbac(recording) -> list[dict]:
    out = []
    for r in [*recording.by_type(CLUSTER_ROLE), *recording.by_type(ROLE)]:
        meta = r.inputs.get("metadata") or {}
        scope = f"namespace {meta.get('namespace')}" if meta.get("namespace") else "**cluster-wide**"
        rules = [f"{','.join(rule.get('verbs', []))} {','.join(rule.get('resources', []))}"
                 + (f" ({','.join(rule['resourceNames'])})" if rule.get("resourceNames") else "")
                 for rule in r.inputs.get("rules") or []]
        out.append({"name": meta.get("name"), "scope": scope, "rules": rules})
    return out


def _table(head: tuple[str, str], rows: list[tuple[str, str]]) -> list[str]:
    return [f"| {head[0]} | {head[1]} |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows]]


def security_section(s: Settings, recording) -> Section:
    """plan.md/plan.json section of the security posture (see the module docstring)."""
    exposed = exposure(s, recording)
    isolation = sandbox_isolation(s, recording)
    controls = cluster_controls(s)
    bucket = bucket_controls(s, recording)
    policies = network_policies(recording)
    spaces = namespaces(s, recording)
    ram = [{"role": r.role_name, "subject": r.subject, "read": list(r.read), "write": list(r.write)}
           for r in role_specs(s)]
    k8s_roles = rbac(recording)

    md = _table(("endpoint", "reachable from"), exposed)
    md += ["", *_table(("sandboxes (model-written code)", ""), isolation)]
    md += ["", *_table(("cluster", ""), controls)]
    md += ["", *_table(("bucket", ""), bucket)]
    md += ["", "| namespace | Pod Security Standard enforced |", "|---|---|"]
    md += [f"| {n['name']} | {n['enforce']} |" for n in spaces]
    ray_caps = ("root with IPC_LOCK and SYS_RESOURCE on the host network (RDMA; NetworkPolicies do not select "
                "host-network pods, so the Ray ports are open on the node addresses inside the VPC)"
                if ray_pods_use_rdma(s) else "no capabilities")
    md += ["", f"Ray pods: {ray_caps}"
               ", seccomp RuntimeDefault, no service account token (RRSA mounts its own); job namespace enforces "
               f"{job_namespace_pod_security(s)}"
               + (f", the Ray pods' own namespace `{ray_namespace(s)}` {ray_namespace_pod_security(s)}"
                  if ray_namespace(s) != s.job.namespace else "")
               + f", sandbox namespace {sandbox_namespace_pod_security(s)} "
               f"(where this program owns it); {'all' if ray_namespace(s) != s.job.namespace else 'both'} warn and "
               "audit below restricted."]
    md += ["", "| NetworkPolicy | selects | ingress from | egress to |", "|---|---|---|---|"]
    md += [f"| `{p['namespace']}/{p['name']}` | {_labels(p['selects'])} | "
           f"{'<br>'.join(p['ingress']) if p['ingress'] is not None else 'not restricted'} | "
           f"{'<br>'.join(p['egress']) if p['egress'] is not None else 'not restricted'} |" for p in policies]
    if ram:
        md += ["", "| RAM role (RRSA) | trusted service account | read | write |", "|---|---|---|---|"]
        md += [f"| {r['role']} | `{r['subject']}` | {', '.join(r['read'])} | {', '.join(r['write'])} |" for r in ram]
    if k8s_roles:
        md += ["", "| Kubernetes role | scope | rules |", "|---|---|---|"]
        md += [f"| `{r['name']}` | {r['scope']} | {'<br>'.join(r['rules'])} |" for r in k8s_roles]
    data: dict[str, Any] = {
        "exposure": dict(exposed), "sandbox_isolation": dict(isolation), "cluster": dict(controls),
        "bucket": dict(bucket), "namespaces": spaces, "network_policies": policies, "rrsa_roles": ram,
        "kubernetes_roles": k8s_roles, "ray_pods_rdma": ray_pods_use_rdma(s),
    }
    return Section("security", "Security posture", "\n".join(md), data)
