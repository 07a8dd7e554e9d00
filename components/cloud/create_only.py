"""Create-only settings of a new cluster: a change must never look like it worked.

ACK reads some cluster inputs only in CreateCluster: `slb_internet_enabled` (cluster.public_api) is in neither the
provider's Update nor its Read (terraform-provider-alicloud@ace5bcf resource_alicloud_cs_managed_kubernetes.go :687
Create only; the Update's HasChanges list :1124-1125), and `pod_vswitch_ids` "only works for Create" (pulumi_alicloud
4.0.0 cs/managed_kubernetes.py). A change shows as a normal `~` update that applies and does nothing (the API
server stays public), or replaces vSwitches the cluster's nodes and Terway ENIs still sit on (their delete retries
on DependencyViolation until it times out: resource_alicloud_vswitch.go :380-388).

So the program exports `create_only` (these settings' values as last deployed) and reads it back through a
StackReference to the stack itself. A fresh stack has no outputs yet (the engine's GetStackOutputs returns an
empty map for a stack without a deployment: docs/facts.md "Day 2"), so the first `up` records them. Any later
preview in which one of them differs fails, naming the setting, why, and the manual step, unless the stack file
lists it in `cluster.allow_create_only_changes` (after the manual step, or accepting that nothing changes).

Outputs are not enough: the Python SDK registers them when the program finishes, so a first `up` that created the
cluster and then failed (at the Lingjun attach, say) leaves resources in the state and no outputs to compare with.
The guard that holds then is the engine's own, from the previous state: the cluster's create-only inputs are listed
in its `replace_on_changes` (`guarded_cluster_inputs`), so a change to one is a replacement, and the cluster is
protected (components/cloud/guards.py), so `pulumi up` fails ("unable to replace resource ... marked for
protection") instead of applying an update that does nothing. The vSwitches behind `zones` and the CIDRs are
ForceNew and protected themselves. A setting listed in `cluster.allow_create_only_changes` leaves its input out, so
the allowed change is the plain update again. `tracking.backend_disk` alone has no such backstop: the owned disk is
not protected (teardown deletes it with the stack), so after a failed first `up` a switch of it passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

import pulumi

from components.cloud.guards import destroying
from components.cloud.network import creates_network
from components.config import Settings
from components.config.cloud import CreateOnlySetting
from components.wiring import stack_reference_name

OUTPUT = "create_only"  # the stack output holding the values as last deployed

# setting path -> (why a change does not apply, the manual step)
RULES: dict[str, tuple[str, str]] = {
    "cluster.public_api": (
        "ACK reads slb_internet_enabled only when it creates the cluster; the update would report success and "
        "the API server's public endpoint would stay as it is",
        "bind or unbind the API server's EIP in the ACK console (the cluster's basic information; "
        "docs/uncertain-facts.md), then list the setting in cluster.allow_create_only_changes for one `pulumi up`"),
    "zones": (
        "the vSwitches' zone_id and the cluster's Terway pod_vswitch_ids are create-only: new vSwitches would "
        "replace ones the nodes and Terway ENIs still use, and their delete fails (DependencyViolation)",
        "build a new platform stack in the new zones and move the experiments to it (docs/review-and-teardown.md "
        "\"Rebuilding on purpose\")"),
    "cluster.network.node_cidrs": (
        "a vSwitch's cidr_block is ForceNew: the node vSwitches would be replaced under the running nodes",
        "add the new vSwitch by hand in the VPC console and a node pool on it, or rebuild (docs/review-and-"
        "teardown.md \"Rebuilding on purpose\")"),
    "cluster.network.pod_cidrs": (
        "a vSwitch's cidr_block is ForceNew and the cluster's Terway pod_vswitch_ids are create-only: the pod "
        "vSwitches would be replaced while Terway ENIs sit on them",
        "add pod vSwitches to Terway's eni-config in kube-system by hand, or rebuild (docs/review-and-"
        "teardown.md \"Rebuilding on purpose\")"),
    "cluster.network.pod_vswitch_ids": (
        "the cluster's Terway pod_vswitch_ids are sent only at creation: the update would do nothing",
        "add the vSwitches to Terway's eni-config in kube-system by hand, then list the setting in "
        "cluster.allow_create_only_changes for one `pulumi up`"),
    "tracking.backend_disk": (
        "switching between the owned and the dynamically provisioned MLflow backend disk replaces the disk: the run "
        "history in its sqlite file would start empty (the artifacts in OSS stay)",
        "copy /mlflow/backend (the sqlite file) off the MLflow pod first, then list the setting in "
        "cluster.allow_create_only_changes for one `pulumi up` and copy the file back"),
}
# The cluster input each create-only setting reaches, where it reaches one (pulumi property names, as
# replace_on_changes takes them): slb_internet_enabled is sent only by Create (resource_alicloud_cs_managed_kubernetes.go
# :687-689), pod_vswitch_ids "only works for Create" (offline/changes.py CREATE_ONLY has the sources); new zones and pod
# CIDRs make new pod vSwitches, so new pod_vswitch_ids.
CLUSTER_INPUTS: dict[str, str] = {
    "cluster.public_api": "slbInternetEnabled",
    "zones": "podVswitchIds",
    "cluster.network.pod_cidrs": "podVswitchIds",
    "cluster.network.pod_vswitch_ids": "podVswitchIds",
}
CREATE_ONLY_SETTINGS: tuple[str, ...] = get_args(CreateOnlySetting)
assert set(RULES) == set(CREATE_ONLY_SETTINGS), "a create-only setting needs a rule, and a rule its setting"


def create_only_values(s: Settings) -> dict[str, Any]:
    """The values of the create-only settings of this stack's new cluster (empty when it creates none)."""
    if s.cluster.mode != "new":
        return {}
    net = s.cluster.network
    out: dict[str, Any] = {"cluster.public_api": s.cluster.public_api, "zones": list(s.zones)}
    if creates_network(s):
        out["cluster.network.node_cidrs"] = list(net.node_cidrs)
        out["cluster.network.pod_cidrs"] = list(net.pod_cidrs)
    else:
        out["cluster.network.pod_vswitch_ids"] = list(net.pod_vswitch_ids)
    if s.tracking.enabled and s.kind != "experiment":
        out["tracking.backend_disk"] = s.tracking.backend_disk
    return out


def guarded_cluster_inputs(s: Settings) -> list[str]:
    """The new cluster's create-only inputs that go into its `replace_on_changes`: each one unless a setting that
    reaches it is listed in cluster.allow_create_only_changes (the allowed change is then the update it always was)."""
    allowed = set(s.cluster.allow_create_only_changes)
    inputs = sorted(set(CLUSTER_INPUTS.values()))
    return [i for i in inputs if not any(CLUSTER_INPUTS[k] == i for k in allowed if k in CLUSTER_INPUTS)]


def refused_changes(previous: dict | None, current: dict[str, Any], allowed: Sequence[str]) -> list[str]:
    """One message per create-only setting whose value differs from the last deployed one and is not allowed."""
    if not previous:
        return []  # a fresh stack, or one deployed before this check existed: nothing to compare with yet
    out = []
    for path, value in current.items():
        if path in previous and previous[path] != value and path not in allowed:
            why, step = RULES[path]
            out.append(f"refused change: {path} {previous[path]!r} -> {value!r}: {why}. Manual step: {step}.")
    return out


def own_stack_name() -> str:
    """This stack, named as the backend takes a StackReference's name (wiring.stack_reference_name)."""
    return stack_reference_name(f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}")


def checked_create_only(s: Settings, opts: pulumi.ResourceOptions) -> pulumi.Output[dict] | None:
    """The `create_only` stack output: these settings' values, once the previous deployment's agree with them.
    Exported, so a refused change fails the preview (an exception in an exported Output fails the program)."""
    current = create_only_values(s)
    if not current or destroying():  # a destroy deletes whatever was deployed: no change to refuse, nothing read
        return None
    previous = pulumi.StackReference("own-outputs", stack_name=own_stack_name(), opts=opts).get_output(OUTPUT)

    def check(prev: Any) -> dict:
        if problems := refused_changes(prev if isinstance(prev, dict) else None, current,
                                       s.cluster.allow_create_only_changes):
            raise pulumi.RunError("\n".join(problems))
        return current

    return previous.apply(check)
