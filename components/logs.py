"""Ray logs that outlive the job: every Ray pod's log files in a Log Service logstore the platform's collection owns.

Ray writes the driver's, the workers' (vLLM's included) and its own logs to /tmp/ray/session_*/logs in each pod
(Ray docs, "Configuring Logging"); they are gone when KubeRay deletes the Ray cluster. With `logs.enabled`:

- the platform installs the logtail-ds add-on (Logtail DaemonSet + alibaba-log-controller) and one AliyunLogConfig
  that collects files under /tmp/ray from every container that carries the env var RAY_LOGS_ENV, into
  `logs.logstore` (created by the controller with `lifeCycle: logs.retention_days`) of `logs.project` (default: the
  add-on's k8s-log-<cluster id>);
- an experiment only marks its Ray containers with that variable (its RayJob and variants, `mark_ray_containers`);
  it creates nothing of the collection, so destroying it deletes no log. Logtail tags each entry with the pod's
  namespace and name: an experiment is its Ray namespace (`job.namespace`; `<job.namespace>-ray` with RDMA,
  wiring.ray_namespace), a run its RayJob name (pods are <rayjob>-...).

Why /tmp/ray and not /tmp/ray/session_latest/logs: session_latest is a symlink, and Logtail does not follow
symlinks inside containers; session_<timestamp>/logs is two levels below /tmp/ray (maxDepth 2). The finished Ray
cluster stays `job.ttl_seconds_after_finished` seconds, so Logtail reads the last lines before the pods go.
Sources: docs/facts.md "Shared platform".
"""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from components.cloud.addon_config import go_json
from components.cloud.addons import AddonsArgs, retain_addon
from components.config import Settings
from components.wiring import ray_namespace
from components.workloads.training.rayjob import pod_groups

LOG_CONFIG_API_VERSION = "log.alibabacloud.com/v1alpha1"
LOG_CONFIG_NAME = "verl-ray-logs"  # also the Logtail configName, which must equal metadata.name
LOG_CONFIG_NAMESPACE = "kube-system"
RAY_TMP = "/tmp/ray"
RAY_LOG_DEPTH = 2  # /tmp/ray/session_<timestamp>/logs/<file>
# Logtail's container filter (dockerIncludeEnv): only containers with this variable are collected.
RAY_LOGS_ENV = "VERL_ACK_RAY_LOGS"


def aliyun_log_config_manifest(s: Settings) -> dict:
    """The platform's one collection config of Ray log files (AliyunLogConfig, inputType file)."""
    spec: dict[str, Any] = {
        "logstore": s.logs.logstore,
        "lifeCycle": s.logs.retention_days,
        "logtailConfig": {
            "inputType": "file",
            "configName": LOG_CONFIG_NAME,
            "inputDetail": {
                "logType": "common_reg_log",
                "logPath": RAY_TMP,
                "filePattern": "*",
                "maxDepth": RAY_LOG_DEPTH,
                "dockerFile": True,
                "dockerIncludeEnv": {RAY_LOGS_ENV: ""},
            },
        },
    }
    if s.logs.project:
        spec = {"project": s.logs.project, **spec}
    return {"apiVersion": LOG_CONFIG_API_VERSION, "kind": "AliyunLogConfig",
            "metadata": {"name": LOG_CONFIG_NAME, "namespace": LOG_CONFIG_NAMESPACE,
                         "labels": {"app.kubernetes.io/part-of": "verl-ack"}},
            "spec": spec}


def logtail_addon_config(s: Settings) -> dict | None:
    """logtail-ds config: the project to use when the stack names one (SDK cs ManagedKubernetes addons doc: with
    IngressDashboardEnabled and sls_project_name, logtail-ds uses that project)."""
    if not s.logs.project:
        return None
    return {"IngressDashboardEnabled": "true", "sls_project_name": s.logs.project}


def mark_ray_containers(manifest: dict) -> dict:
    """The RayJob with every Ray container marked for the platform's log collection."""
    out = copy.deepcopy(manifest)
    for _, group in pod_groups(out["spec"]):
        for c in group["template"]["spec"]["containers"]:
            env = c.setdefault("env", [])
            if not any(e["name"] == RAY_LOGS_ENV for e in env):
                env.append({"name": RAY_LOGS_ENV, "value": "1"})
    return out


def log_location(s: Settings, run: str | None = None) -> dict[str, str]:
    """Where this stack's Ray logs are, and the query that finds one run (plan.md, docs/review-and-teardown.md)."""
    project = s.logs.project or "k8s-log-<cluster_id>"
    out = {"project": project, "logstore": s.logs.logstore, "retention_days": str(s.logs.retention_days),
           "region": s.region}
    if s.kind != "platform":
        out["query"] = (f"__tag__:_namespace_: {ray_namespace(s)} and __tag__:_pod_name_: {run or s.job.name}*")
    return out


# The same inputs as the cluster's other add-ons (settings, cluster id, both providers, the nodes they need).
LogCollectionArgs = AddonsArgs


class LogCollection(pulumi.ComponentResource):
    """The platform's log collection: the logtail-ds add-on and the AliyunLogConfig of Ray log files."""

    def __init__(self, name: str, args: LogCollectionArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:logs:LogCollection", name, None, opts)
        s = args.settings
        addon = s.versions.addons["logtail"]
        config = logtail_addon_config(s)
        self.addon = alicloud.cs.KubernetesAddon(
            f"{name}-logtail", cluster_id=args.cluster_id, name=addon.name, version=addon.version,
            # Go json.Marshal's form, what the provider's Read stores (components/cloud/addon_config.py)
            config=go_json(config) if config else None,
            # A new cluster with audit_log may already run logtail-ds; keep it when this stack goes.
            # Its DaemonSet and controller need the system pool's nodes, or the install reports failed.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.nodes_ready,
                                        retain_on_delete=True if retain_addon(s, "logtail") else None))
        m = aliyun_log_config_manifest(s)
        self.config = k8s.apiextensions.CustomResource(
            f"{name}-ray-logs", api_version=m["apiVersion"], kind=m["kind"], metadata=m["metadata"], spec=m["spec"],
            # The AliyunLogConfig CRD and its controller come with the add-on.
            opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[self.addon]))
        self.register_outputs({"logstore": s.logs.logstore})
