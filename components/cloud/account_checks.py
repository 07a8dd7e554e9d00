"""Account checks at preview time: before anything is created, read the account through the provider's data
sources and refuse a stack that cannot succeed, naming the field and the fix.

Each check is an invoke (a read; `pulumi preview` runs invokes) made with the explicit provider of the stack's
region. Checked: every zone exists in the region and is sold; an ECS GPU pool's zone sells one of its instance
types; the sandbox's DNS zone is hosted in Alibaba Cloud DNS; the ACR Enterprise instance exists (and serves the
registry host named); ACK's service roles are authorised; an existing bucket is this account's; where the
bucket exists before the stack, a `model.source: oss` prefix holds a model (config.json and weights) and
training.resume_from holds a checkpoint, and a rerun under names that hold checkpoints keeps the create-only
hyperparameters their first run recorded (verl_config.create_only_hyperparameters).

Lingjun machines have no data source in pulumi-alicloud 4.0.0 (eflo has only get_subnets and get_vpds), so a stack
that owns a Lingjun pool READS them as resources instead (`eflo.NodeGroup.get`, `eflo.Node.get`; check_lingjun):
`pulumi preview` performs reads too, and a read of an id the account lacks fails the preview ("resource '<id>' does
not exist", at the read named after its setting: gpu_pool.lingjun.node_ids[i], or
gpu_pool.lingjun.eflo_cluster_id:eflo_node_group_id for the group). What the
reads return is then checked: each node in the named cluster and node group, in gpu_pool.zone, and the node group in
gpu_pool.zone. Left to the provider's own errors at `up` and listed in docs/uncertain-facts.md: image digests in ACR
and whether another account holds a new bucket's name.

Placeholders (components/config/placeholders.py) are refused first, in a real preview only. The offline engine
(offline/engine.py) runs the same program under Pulumi's mocks and sets VERL_ACK_OFFLINE_PLAN=1; both together
mark an offline plan, so a stray variable in a real run cannot switch the refusal off. The invokes run offline
too, answered by offline/fakes.py.
"""

from __future__ import annotations

import os
import re

import pulumi
import pulumi_alicloud as alicloud
from pulumi.runtime import mocks as pmocks
from pulumi.runtime import settings as psettings

from components.cloud.guards import destroying
from components.config import PROJECT, Problem, Settings, SettingsError
from components.config.placeholders import placeholders
from components.wiring import checkpoint_key_prefix
from components.workloads.training.runs import RUN_RECORD_DIR, create_only_hyperparameters

# The reads are named after the settings that hold their ids: a read of an id the account lacks fails the preview
# with the engine's own "resource '<id>' does not exist" on that read's row (pulumi/pulumi pkg/resource/deploy/step.go
# ReadStep.Apply), before any check of this program runs, so the row's name is what tells the user which field.
NODE_GROUP_READ = "gpu_pool.lingjun.eflo_cluster_id:eflo_node_group_id"
NODE_READ = "gpu_pool.lingjun.node_ids[{}]"

OFFLINE_PLAN_ENV = "VERL_ACK_OFFLINE_PLAN"
# ACK's quick-authorisation roles a managed cluster, its network (Terway) and storage (CSI) add-ons assume
# (https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/ack-default-roles;
# docs/facts.md "Account checks"), and the one an auto-scaling node pool needs
# (terraform-provider-alicloud@ace5bcf website/docs/r/cs_kubernetes_node_pool.html.markdown:23).
ACK_ROLES = ("AliyunCSDefaultRole", "AliyunCSManagedKubernetesRole", "AliyunCSManagedNetworkRole",
             "AliyunCSManagedCsiRole")
AUTOSCALER_ROLE = "AliyunCSManagedAutoScalerRole"
ACK_ROLES_CONSOLE = "https://ram.console.aliyun.com/ (or the ACK console's first-use authorisation prompt)"


def offline_plan() -> bool:
    """Whether this run is the offline plan (the mock engine), not a real `pulumi preview` / `up`."""
    return os.environ.get(OFFLINE_PLAN_ENV) == "1" and isinstance(psettings.get_monitor(), pmocks.MockMonitor)


def refuse_placeholders(s: Settings) -> None:
    """A real preview refuses every placeholder value; the offline plan lists them (plan.md checklist)."""
    if offline_plan():
        return
    found = placeholders(s)
    if found:
        raise SettingsError([Problem(field=p.field, message=f"{p.value!r} is the shipped placeholder, not a value of "
                                     f"your account; replace it in stacks/Pulumi.{pulumi.get_stack()}.yaml. Where "
                                     f"the real value is: {p.where}") for p in found])


def check_platform_organization(s: Settings) -> None:
    """An experiment's platform_stack must be a stack of this organization: plan.py renders the platform from
    this repository's stacks/ folder, which holds this organization's stacks."""
    if s.platform_stack is None:
        return
    org = s.platform_stack.split("/")[0]
    mine = pulumi.get_organization()
    if mine and org != mine:
        raise SettingsError([Problem(field="platform_stack", message=f"names the organization {org!r} but this stack "
                                     f"runs in {mine!r}; write {mine}/{PROJECT}/{s.platform_stack.split('/')[2]} "
                                     "(the platform is deployed from this repository's stacks/)")])


def account_problems(s: Settings, provider: pulumi.ProviderResource) -> list[Problem]:
    """What the account says against the settings; one invoke per question, all read-only."""
    opts = pulumi.InvokeOptions(provider=provider)
    problems: list[Problem] = []
    sold = set(alicloud.get_zones(opts=opts).ids or [])
    for i, zone in enumerate(s.zones):
        if zone not in sold:
            problems.append(Problem(field=f"zones[{i}]", message=f"{zone} is not a zone the account can use in "
                                    f"{s.region} (the region's zones: {', '.join(sorted(sold)) or 'none'}); pick one "
                                    "of them"))
    ecs = s.gpu_pool.ecs
    if s.gpu_pool.kind == "ecs" and ecs is not None and s.owns_gpu_pool():
        selling = [t for t in ecs.instance_types if s.gpu_pool.zone in set(alicloud.get_zones(
            available_instance_type=t, available_resource_creation="Instance", opts=opts).ids or [])]
        if not selling:
            problems.append(Problem(field="gpu_pool.ecs.instance_types", message=f"none of {ecs.instance_types} is "
                                    f"sold in gpu_pool.zone {s.gpu_pool.zone} now (alicloud.get_zones); pick a zone "
                                    "that sells one (ECS console > instance types by zone) or add a type it sells"))
    if s.kind != "experiment" and s.sandbox.domain and s.sandbox.dns_zone:
        zone = s.sandbox.dns_zone
        hosted = alicloud.dns.get_alidns_domains(domain_name_regex=f"^{re.escape(zone)}$", opts=opts).names
        if zone not in set(hosted or []):
            problems.append(Problem(field="sandbox.dns_zone", message=f"{zone} is not a domain of this account's "
                                    "Alibaba Cloud DNS, so its record for sandbox.domain cannot be created: add the "
                                    "domain in the Alidns console (and point its NS records there) or use "
                                    "sandbox.manager: open-source, which needs no domain"))
    img = s.image
    if s.kind != "experiment" and img.source == "built" and img.registry == "enterprise" and img.enterprise_instance_id:
        found = alicloud.cs.get_registry_enterprise_instances(ids=[img.enterprise_instance_id], opts=opts).instances
        match = [i for i in found or [] if i.id == img.enterprise_instance_id]
        if not match:
            problems.append(Problem(field="image.enterprise_instance_id", message=f"{img.enterprise_instance_id} is "
                                    f"not an ACR Enterprise Edition instance of this account in {s.region}; copy the "
                                    "id from the ACR console > Instances"))
        elif img.registry_host and img.registry_host not in set(match[0].vpc_endpoints or []) | set(
                match[0].public_endpoints or []):
            problems.append(Problem(field="image.registry_host", message=f"{img.registry_host} is not a domain of "
                                    f"instance {img.enterprise_instance_id} (its VPC domains: "
                                    f"{', '.join(match[0].vpc_endpoints or []) or 'none'}); use its VPC domain"))
    # ECS GPU pools are always auto-scaled (components/cloud/nodepools.py ecs_scaling_config).
    needed = [*(ACK_ROLES if s.kind != "experiment" and s.cluster.mode == "new" else ()),
              *((AUTOSCALER_ROLE,) if s.gpu_pool.kind == "ecs" and s.owns_gpu_pool() else ())]
    if needed:
        have = set(alicloud.ram.get_roles(name_regex="^AliyunCS", opts=opts).names or [])
        missing = [r for r in needed if r not in have]
        if missing:
            problems.append(Problem(field="cluster", message=f"ACK's service roles {', '.join(missing)} are not "
                                    "authorised in this account, so ACK cannot create the cluster: authorise them "
                                    f"once with the account owner ({ACK_ROLES_CONSOLE}; docs/real-cloud.md)"))
    bucket_missing = False
    if s.kind != "experiment" and s.storage.mode == "existing":
        name = s.storage.bucket_name
        if name not in set(alicloud.oss.get_buckets(name_regex=f"^{re.escape(name)}$", opts=opts).names or []):
            bucket_missing = True
            problems.append(Problem(field="storage.bucket_name", message=f"storage.mode is existing but {name} is not "
                                    "a bucket of this account; create it first or use storage.mode: new"))
    if not bucket_missing:
        problems += run_start_problems(s, opts)
    return problems


# A Hugging Face model directory: its config and at least one weights file (safetensors, or PyTorch's .bin).
WEIGHT_SUFFIXES = (".safetensors", ".bin")


def model_prefix_problems(keys: list[str], path: str) -> list[str]:
    """What a `model.source: oss` prefix lacks to be loaded as a Hugging Face model (empty when it has it)."""
    here = [k[len(path):] for k in keys if k.startswith(path)]
    missing = []
    if "config.json" not in here:
        missing.append("config.json")
    if not any(k.endswith(WEIGHT_SUFFIXES) and "/" not in k for k in here):
        missing.append("weights (*.safetensors or *.bin)")
    return missing


def bucket_before_stack(s: Settings) -> bool:
    """Whether the stack's bucket exists before this preview, so its objects can be listed: an experiment's is its
    platform's, and `storage.mode: existing` names one."""
    return s.kind == "experiment" or s.storage.mode == "existing"


def run_start_problems(s: Settings, opts: pulumi.InvokeOptions) -> list[Problem]:
    """Where the run starts, read from the bucket (alicloud.oss.get_bucket_objects, a ListObjects read): the model of
    `model.source: oss` is a loadable model directory, training.resume_from holds a checkpoint, and a rerun under
    names that hold checkpoints keeps the create-only hyperparameters its first run recorded (rerun_problems)."""
    if not bucket_before_stack(s):
        return []
    out: list[Problem] = []
    bucket = s.storage.bucket_name
    if s.model.source == "oss" and s.model.path is not None:
        keys = [o.key for o in alicloud.oss.get_bucket_objects(bucket_name=bucket, key_prefix=s.model.path,
                                                              opts=opts).objects or []]
        missing = model_prefix_problems(keys, s.model.path)
        if missing:
            out.append(Problem(field="model.path", message=f"oss://{bucket}/{s.model.path} holds no {' and no '.join(missing)} "
                               f"({len(keys)} object(s) under it): it is not a Hugging Face model directory; upload "
                               "the model there (config.json, *.safetensors, tokenizer files) or fix model.path"))
    resume = s.training.resume_from
    if resume is not None:
        found = alicloud.oss.get_bucket_objects(bucket_name=bucket, key_prefix=f"{resume}actor/", opts=opts).objects
        if not found:
            out.append(Problem(field="training.resume_from", message=f"oss://{bucket}/{resume} holds no actor "
                               "checkpoint (no object under actor/): name a global_step_N/ folder a run completed "
                               "(teardown.py lists them) or remove training.resume_from"))
    return out + rerun_problems(s, opts)


# verl's tracker file beside a run's global_step_N folders (verl/utils/checkpoint/checkpoint_manager.py): present
# once a checkpoint is complete, which a rerun with resume_mode auto continues from.
CHECKPOINT_TRACKER = "latest_checkpointed_iteration.txt"


def changed_hyperparameters(recorded_keys: list[str], record_prefix: str, current: dict[str, str]) -> dict:
    """{setting: (recorded, current)} for each create-only hyperparameter the run's record holds with another
    value. The record is one object per value, `<record_prefix><setting>=<value>`."""
    recorded = dict(k[len(record_prefix):].split("=", 1) for k in recorded_keys
                    if k.startswith(record_prefix) and "=" in k[len(record_prefix):])
    return {name: (recorded[name], value) for name, value in current.items()
            if name in recorded and recorded[name] != value}


def rerun_problems(s: Settings, opts: pulumi.InvokeOptions) -> list[Problem]:
    """A rerun with the same project and experiment names continues the newest checkpoint under them (resume_mode
    auto); one whose create-only hyperparameters differ from the record the first run left there is refused, naming
    each (the checkpoint would mix two experiments)."""
    if s.training.sweep is not None:
        return []  # each variant has its own folder and record
    prefix = checkpoint_key_prefix(s)
    bucket = s.storage.bucket_name
    tracker = prefix + CHECKPOINT_TRACKER
    listed = alicloud.oss.get_bucket_objects(bucket_name=bucket, key_prefix=tracker, opts=opts).objects or []
    if tracker not in {o.key for o in listed}:
        return []  # no checkpoint under these names: the run starts fresh
    record = f"{prefix}{RUN_RECORD_DIR}/"
    keys = [o.key for o in alicloud.oss.get_bucket_objects(bucket_name=bucket, key_prefix=record, opts=opts).objects
            or []]
    changed = changed_hyperparameters(keys, record, create_only_hyperparameters(s))
    return [Problem(field=name, message=f"{name} is {new} but oss://{bucket}/{prefix} holds checkpoints of a run with "
                    f"{old}, which this run would continue (resume_mode auto): give the run a new "
                    "training.experiment_name (with training.resume_from: <that folder>global_step_N/ to start from "
                    f"its weights), or set {name} back") for name, (old, new) in sorted(changed.items())]


def check_account(s: Settings, provider: pulumi.ProviderResource) -> None:
    """Refuse placeholders (real preview only), then what the account says cannot work; every problem at once.
    Under a destroy (guards.destroying) the account is not read: what it sells or hosts today must not stop the
    deletes (docs/teardown.md)."""
    refuse_placeholders(s)
    check_platform_organization(s)
    if destroying():
        return
    problems = account_problems(s, provider)
    if problems:
        raise SettingsError(problems)


def lingjun_problems(s: Settings, group: dict, nodes: list[dict]) -> list[str]:
    """What the reads of the node group ({cluster_id, node_group_id, az}) and of each of gpu_pool.lingjun.node_ids
    ({cluster_id, node_group_id, zone}) say against the settings. A zone the provider left empty is not compared."""
    lj = s.gpu_pool.lingjun
    assert lj is not None
    out = []
    if group.get("az") and group["az"] != s.gpu_pool.zone:
        out.append(f"gpu_pool.zone: node group {lj.eflo_node_group_id} is in zone {group['az']}, "
                   f"not {s.gpu_pool.zone}; "
                   f"set gpu_pool.zone: {group['az']} (and list it in `zones`) or name a node group of that zone")
    for i, (node_id, node) in enumerate(zip(lj.node_ids, nodes, strict=True)):
        field = f"gpu_pool.lingjun.node_ids[{i}]"
        if node.get("cluster_id") != lj.eflo_cluster_id:
            out.append(f"{field}: node {node_id} belongs to Lingjun cluster {node.get('cluster_id') or 'none'}, not "
                       f"gpu_pool.lingjun.eflo_cluster_id {lj.eflo_cluster_id}; name a node of that cluster "
                       "(Lingjun console > Nodes) or correct the cluster id")
        elif node.get("node_group_id") != lj.eflo_node_group_id:
            out.append(f"{field}: node {node_id} belongs to node group {node.get('node_group_id') or 'none'}, not "
                       f"gpu_pool.lingjun.eflo_node_group_id {lj.eflo_node_group_id}; name a node of that group "
                       "(Lingjun console > Node groups > nodes) or correct the node group id")
        if node.get("zone") and node["zone"] != s.gpu_pool.zone:
            out.append(f"{field}: node {node_id} is in zone {node['zone']}, not gpu_pool.zone {s.gpu_pool.zone}; "
                       "name a node of that zone or correct gpu_pool.zone")
    return out


def check_lingjun(s: Settings, opts: pulumi.ResourceOptions) -> pulumi.Output[list[str]] | None:
    """Read the Lingjun node group and nodes a stack's pool joins (`opts`: the pool's parent and explicit provider)
    and fail the program on what lingjun_problems finds (an exception in an outstanding Output, as the add-on floor
    check does). Reads register no managed resource: nothing is created or deleted. Skipped in an offline plan
    while a Lingjun id is a placeholder: a real preview has refused every placeholder before this runs; skipped under
    a destroy, where a released node must not stop the deletes (guards.destroying)."""
    lj = s.gpu_pool.lingjun
    if s.gpu_pool.kind != "lingjun" or lj is None or not s.owns_gpu_pool() or destroying():
        return None
    if any(p.field.startswith("gpu_pool.lingjun.") for p in placeholders(s)):
        return None
    group = alicloud.eflo.NodeGroup.get(NODE_GROUP_READ, f"{lj.eflo_cluster_id}:{lj.eflo_node_group_id}", opts=opts)
    nodes = [alicloud.eflo.Node.get(NODE_READ.format(i), node_id, opts=opts) for i, node_id in enumerate(lj.node_ids)]
    read = pulumi.Output.all(
        pulumi.Output.all(cluster_id=group.cluster_id, node_group_id=group.node_group_id, az=group.az),
        *(pulumi.Output.all(cluster_id=n.cluster_id, node_group_id=n.node_group_id, zone=n.zone) for n in nodes))

    def check(answers: list[dict]) -> list[str]:
        if problems := lingjun_problems(s, answers[0], answers[1:]):
            raise pulumi.RunError("\n".join(problems))
        return []

    return read.apply(check)
