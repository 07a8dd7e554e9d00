"""No program declares one Kubernetes object twice.

pulumi-kubernetes fails the create of an object that already exists in the cluster ("The resource already exists in
the cluster", pulumi/pulumi-kubernetes@94977969 provider/pkg/await/await.go Creation; only a provider with
upsertExistingObjects would adopt it, and this program sets none), so two resources of one program that render the
same (apiVersion group, kind, namespace, name) leave the second one, and everything that depends on it, uncreated;
and deleting either deletes the other's object. Checked over everything every stack renders, and over a sweep of
the largest size the settings allow.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from offline.engine import Recording
from tests.conftest import STACKS, record

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def object_key(inputs: dict, type_: str) -> tuple[str, str, str, str]:
    """The identity the API server gives an object: (group, kind, namespace, name); a Helm release is named by its
    release name in its namespace (Helm's release Secret)."""
    if type_ == HELM_RELEASE:
        return ("helm.sh", "Release", inputs.get("namespace") or "", inputs.get("name") or "")
    meta = inputs.get("metadata") or {}
    api = inputs.get("apiVersion") or ""
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    return (group, inputs.get("kind") or "", meta.get("namespace") or "", meta.get("name") or "")


def declared_objects(rec: Recording) -> dict[tuple, list[str]]:
    """Every object the program creates, with the logical names that declare it. Reads (`.get`) create nothing;
    a `...Patch` resource patches an object another owner created, with its own field manager (server-side apply)."""
    out: dict[tuple, list[str]] = defaultdict(list)
    for r in rec.resources:
        if not r.is_kubernetes or r.options.get("read") or r.type.endswith("Patch"):
            continue
        out[object_key(r.inputs, r.type)].append(r.name)
    return out


def duplicates(rec: Recording) -> dict[tuple, list[str]]:
    return {k: names for k, names in declared_objects(rec).items() if len(names) > 1}


# The largest sweep the settings allow (training.sweep: at most 16 variants): 4 learning rates x 4 KL coefficients.
SWEEP_16 = {"training": {"sweep": {"lr": [1.0e-6, 2.0e-6, 3.0e-6, 4.0e-6],
                                   "kl_loss_coef": [0.001, 0.003, 0.01, 0.03]}}}


@pytest.mark.parametrize("stack", STACKS)
def test_no_stack_declares_one_kubernetes_object_twice(stack):
    rec = record(stack)
    assert declared_objects(rec), "the stack renders Kubernetes objects"
    assert duplicates(rec) == {}


def test_a_sweep_of_sixteen_variants_declares_every_object_once_and_each_variant_has_its_own_gate():
    rec = record("dev-sweep", SWEEP_16)
    rayjobs = rec.by_type("kubernetes:ray.io/v1:RayJob")
    assert len(rayjobs) == 16
    assert duplicates(rec) == {}
    # every variant's gate runs as a ServiceAccount its own binding names (none left bound to another's)
    accounts = {object_key(r.inputs, r.type) for r in rec.by_type("kubernetes:core/v1:ServiceAccount")}
    for job in rec.by_type("kubernetes:batch/v1:Job"):
        pod = job.inputs["spec"]["template"]["spec"]
        assert ("", "ServiceAccount", job.inputs["metadata"]["namespace"], pod["serviceAccountName"]) in accounts
    gates = [r for r in rec.by_type("kubernetes:batch/v1:Job") if r.name.endswith("-gate")]
    assert len(gates) == 16


def test_a_kind_is_never_declared_both_with_and_without_a_namespace():
    # the identity above compares namespaces as written: a namespaced object without one lands in the provider's
    # default namespace, so one program mixing both forms of a kind could hide a duplicate from it
    for stack in STACKS:
        forms: dict[tuple, set[bool]] = defaultdict(set)
        for group, kind, namespace, _ in declared_objects(record(stack)):
            forms[(group, kind)].add(bool(namespace))
        assert {k: v for k, v in forms.items() if len(v) > 1} == {}, stack
