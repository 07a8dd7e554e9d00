"""verl-ack: VeRL GRPO on Alibaba Cloud ACK. Settings, then the platform and/or the experiment, then exports.

`settings.kind` picks what this stack builds (docs/stacks.md): `single` both halves in one program, `platform`
the long-lived half (components/platform.py), `experiment` one training run on a platform it reads through a
StackReference (components/experiment.py).
"""

import pulumi

from components.cloud.cluster import kubectl_commands
from components.cloud.create_only import OUTPUT as CREATE_ONLY_OUTPUT
from components.cloud.guards import rebuild_guard
from components.cloud.ingress import sandbox_api_url
from components.config import PROJECT
from components.config.secrets import read_secrets
from components.experiment import build_experiment, platform_reference
from components.model import parse_settings
from components.model.layout import check_layout, resolve_layout
from components.platform import build_platform
from components.task_check import require_task
from components.wiring import oss_endpoint
from components.workloads.tracking import port_forward_commands

settings = parse_settings(pulumi.Config(PROJECT).require_object("settings"))
if rebuild_guard():  # not inside a teardown's destroy: a task that fails its CPU proof never reaches a GPU
    require_task(settings)
secrets = read_secrets(settings)
layout = resolve_layout(settings)
for finding in check_layout(settings):  # errors already refused the stack in parse_settings
    pulumi.log.warn(f"{finding.field}: {finding.message}")
for field, message in settings.warnings():  # unverified defaults, facts about the account (docs/facts.md)
    pulumi.log.warn(f"{field}: {message}")

tags = settings.cloud_tags(pulumi.get_stack())
platform = build_platform(settings, secrets, tags) if settings.kind != "experiment" else None
refs = platform.refs if platform else platform_reference(settings)
experiment = build_experiment(settings, layout, secrets, tags, refs, local=platform) \
    if settings.kind != "platform" else None

if experiment:
    pulumi.export("layout", layout.as_dict())
    pulumi.export("training_entrypoint", experiment.training.entrypoint)
if settings.kind == "platform":
    for key, value in refs.to_exports().items():  # what experiments read (components/wiring.py PlatformRefs)
        pulumi.export(key, value)
if platform:
    pulumi.export("cluster_id", platform.cluster.cluster_id)
    pulumi.export("bucket_name", platform.storage.refs.bucket_name)
    pulumi.export("oss_endpoint", platform.storage.refs.endpoint)
    pulumi.export("oss_public_endpoint", oss_endpoint(settings.region, internal=False))
    if platform.cluster.create_only is not None:  # a refused create-only change fails the preview here
        pulumi.export(CREATE_ONLY_OUTPUT, platform.cluster.create_only)
if experiment:
    pulumi.export("gpu_pool_id", experiment.gpu_pool_id)  # this stack's pool, or its platform's (gpu_pool.owner)
    if experiment.gpu_pool_owner is not None:  # fails the preview when the platform disagrees on gpu_pool.owner
        pulumi.export("gpu_pool_owner", experiment.gpu_pool_owner)
    if experiment.queue_team is not None:  # fails the preview when no team of the platform's queue holds the job
        pulumi.export("queue_team", experiment.queue_team)
    pulumi.export("training_image", experiment.image)
    if experiment.sweep:  # variant key -> RayJob name (components/sweep.py)
        pulumi.export("sweep_rayjobs", {key: job.rayjob_name for key, job in experiment.sweep.items()})
if platform and platform.ingress:
    pulumi.export("alb_dns_name", platform.ingress.dns_name)
    pulumi.export("sandbox_api_url", sandbox_api_url(settings))
# How to reach what this stack runs: a platform its cluster and services, an experiment its job.
EXPERIMENT_COMMANDS = {"kubectl_job", "ray_dashboard_port_forward", "ray_auth_env"}


def _owned(key: str) -> bool:
    return settings.kind == "single" or (key in EXPERIMENT_COMMANDS) == (settings.kind == "experiment")


for key, command in kubectl_commands(settings).items():
    if _owned(key):
        pulumi.export(key, command)
if platform and platform.sandboxes and settings.kind == "single":
    pulumi.export("mcp_url", refs.mcp_url)
if platform and platform.tracking and settings.kind == "single":
    pulumi.export("tracking_uri", refs.tracking_uri)
for key, command in port_forward_commands(settings).items():
    if _owned(key):
        pulumi.export(key, command)
