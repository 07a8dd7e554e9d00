"""Every core Kubernetes object any stack renders validates against the Kubernetes schema of the
cluster's version (kubernetes-validate, strict: unknown fields are errors)."""

import kubernetes_validate

from components.model import load_stack
from tests.conftest import record

# Custom resources are checked against their CRDs elsewhere (RayJob: test_training_rayjob.py, SandboxSet:
# test_sandbox.py); AlbConfig's CRD ships with the ALB controller and is not available offline. Patch
# resources are partial objects by design. Helm releases are not objects.
NOT_CORE = ("ray.io/", "agents.kruise.io/", "alibabacloud.com/")


def core_objects(rec):
    for r in rec.resources:
        if not r.is_kubernetes or r.type.endswith("Patch") or "helm.sh" in r.type:
            continue
        obj = {k: v for k, v in r.inputs.items() if not k.startswith("__")}
        if obj.get("apiVersion", "").startswith(NOT_CORE):
            continue
        yield r, obj


def test_every_core_object_validates_strictly_for_the_clusters_kubernetes_version(stack_name):
    version = load_stack(stack_name).cluster.schema_version
    checked = 0
    for reg, obj in core_objects(record(stack_name)):
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            raise AssertionError(f"{reg.type} {reg.name}: {err}") from None
        checked += 1
    assert checked >= 20


def test_the_check_catches_an_unknown_field():
    rec = record("dev")
    reg, obj = next(core_objects(rec))
    bad = {**obj, "spec": {**obj.get("spec", {}), "surprise": 1}} if "spec" in obj else {**obj, "surprise": 1}
    try:
        kubernetes_validate.validate(bad, load_stack("dev").cluster.schema_version, strict=True)
    except kubernetes_validate.ValidationError:
        return
    raise AssertionError("strict validation accepted an unknown field")
