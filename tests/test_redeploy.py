"""A second `up` after a teardown creates nothing that already exists. teardown.py lifts the rebuild guard (cluster, VPC,
vSwitches) and destroys with `--exclude-protected` (keeper/destroy.py): what survives is what stays protected (still
in the state), what is retained (`retain_on_delete`: gone from the state, alive in the cloud) and what a Patch
resource patched (its delete only relinquishes its fields: pulumi-kubernetes provider/pkg/ssa/actions.go Relinquish),
unless it lived in a cluster the stack owned, which goes with it. The next `up` creates every resource not in the
state; a Create of an object that survived fails with "already exists" unless its type's Create adopts it."""

from __future__ import annotations

import copy

import pytest

from components.cloud.guards import GUARDED_TYPES
from offline.engine import Recording, Registration
from tests.conftest import STACKS, record

CLUSTER_TYPE = "alicloud:cs/managedKubernetes:ManagedKubernetes"
# Creates that adopt what exists: a Kubernetes Patch resource is a server-side apply (pulumi-kubernetes@94977969
# provider/pkg/await/await.go :190, kinds.IsPatchResource); an ACK add-on's Create updates an installed add-on
# (terraform-provider-alicloud@81c43b6 alicloud/resource_alicloud_cs_kubernetes_addon.go :140-164).
# A bucket object's Create is OSS PutObject, which by default overwrites an object of the same name (OSS error page
# 0026-00000002: "By default, PutObject and CopyObject overwrite an existing object if the names match"): a task file a
# teardown kept (components/workloads/task_files.py, content-addressed) is written again with the same bytes.
ADOPTING_TYPES = ("alicloud:cs/kubernetesAddon:KubernetesAddon", "alicloud:oss/bucketObject:BucketObject")


def adopts(r: Registration) -> bool:
    return r.type in ADOPTING_TYPES or (r.type.startswith("kubernetes:") and r.type.endswith("Patch"))


def identity(r: Registration) -> tuple:
    """What names the object in the cloud or the cluster (a Patch resource names the object it patches)."""
    if r.type.startswith("kubernetes:") and isinstance(r.inputs.get("metadata"), dict):
        meta = r.inputs["metadata"]
        return ("kubernetes", r.inputs.get("apiVersion"), r.inputs.get("kind"), meta.get("namespace", ""),
                meta.get("name"))
    if r.type.startswith("kubernetes:"):  # a Helm release: its name in its namespace
        return ("helm", r.inputs.get("namespace", ""), r.inputs.get("name"))
    return (r.type, r.inputs.get("clusterId", ""), r.inputs.get("name") or r.inputs.get("bucket") or r.name)


def after_teardown(rec: Recording) -> tuple[set[str], set[tuple]]:
    """(URNs still in the state, identities of the objects that still exist) after teardown.py's destroy."""
    owned_cluster = any(r.type == CLUSTER_TYPE and not r.options.get("read") for r in rec.resources)
    # teardown.py lifts the rebuild guard (GUARDED_TYPES) before the destroy: only the rest of what is protected stays.
    kept = [r for r in rec.resources if r.custom and r.options.get("protect") and r.type not in GUARDED_TYPES]
    in_state = {r.urn for r in kept}
    alive = set()
    for r in rec.resources:
        if not r.custom or r.options.get("read") or r.type.startswith("pulumi:"):
            continue
        in_cluster = r.type.startswith("kubernetes:") or r.type in ADOPTING_TYPES
        if in_cluster and owned_cluster:
            continue  # deleted with the cluster
        if r.options.get("retain_on_delete") or r.urn in in_state or adopts(r):
            alive.add(identity(r))
    return in_state, alive


def colliding_creates(rec: Recording) -> list[str]:
    in_state, alive = after_teardown(rec)
    return [f"{r.urn} ({identity(r)})" for r in rec.resources
            if r.custom and not r.options.get("read") and not r.type.startswith("pulumi:") and r.urn not in in_state
            and identity(r) in alive and not adopts(r)]


@pytest.mark.parametrize("stack", STACKS)
def test_no_stack_keeps_a_namespace_by_retain_on_delete(stack):
    kept = [r.urn for r in record(stack).by_type("kubernetes:core/v1:Namespace") if r.options.get("retain_on_delete")]
    assert kept == [], "a retained Namespace makes the next `up` on that cluster fail; use a NamespacePatch"


@pytest.mark.parametrize("stack", STACKS)
def test_a_second_up_after_a_teardown_creates_nothing_that_already_exists(stack):
    rec = record(stack)  # the second `up` renders what the first did: same stack file, same program
    assert colliding_creates(rec) == []


def test_the_model_catches_a_retained_namespace_on_an_existing_cluster():
    # A copy: the recording is shared by every test of this process (tests/render_cache.py), which must not see the
    # Namespace this test makes of the patch.
    rec = copy.deepcopy(record("existing-ecs"))
    [patch] = [r for r in rec.resources if r.name == "addons-kuberay-namespace"]
    assert patch.type == "kubernetes:core/v1:NamespacePatch" and len(patch.options["aliases"]) == 1, patch.urn
    patch.type, patch.options["retain_on_delete"] = "kubernetes:core/v1:Namespace", True  # as it was
    assert [c for c in colliding_creates(rec) if "kuberay-system" in c], "the old Namespace collides"
