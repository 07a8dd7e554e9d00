"""The typed hand-over between a platform and its experiments (components/wiring.py PlatformRefs) and the one
place an experiment's RayJob takes platform values instead of settings-derived ones."""

from __future__ import annotations

from components.model import parse_settings
from components.model.layout import resolve_layout
from components.wiring import PlatformRefs, gpu_scheduling
from components.workloads.training.rayjob import pod_wiring, rayjob_manifest, with_platform_values
from tests.conftest import stack_settings


def test_the_exports_are_exactly_the_fields_and_no_credential_crosses_the_reference():
    refs = PlatformRefs(**{k: f"v-{k}" for k in PlatformRefs.KEYS})
    assert list(refs.to_exports()) == list(PlatformRefs.KEYS)
    assert refs.to_exports()["bucket_name"] == "v-bucket_name"
    assert set(PlatformRefs.__dataclass_fields__) == set(PlatformRefs.KEYS)
    # An experiment fetches its own credential for cluster_id (components/cloud/cluster.py kubernetes_provider).
    assert "cluster_id" in PlatformRefs.KEYS
    assert not [k for k in PlatformRefs.KEYS if any(w in k for w in ("kubeconfig", "credential", "token", "key"))]


def test_with_platform_values_changes_only_the_image_and_the_mlflow_address():
    s = parse_settings(stack_settings("multinode"))
    manifest = rayjob_manifest(s, resolve_layout(s), gpu_scheduling(s),
                               pod_wiring(s, namespace=s.job.namespace, service_account="verl-train"))
    out = with_platform_values(manifest, image="IMG", tracking_uri="URI")
    groups = [out["spec"]["rayClusterSpec"]["headGroupSpec"], *out["spec"]["rayClusterSpec"]["workerGroupSpecs"]]
    for g in groups:
        for c in g["template"]["spec"]["containers"]:
            assert c["image"] == "IMG"
            if c["name"] != "model-prefetch":  # the copier talks to no tracking server
                assert {"name": "MLFLOW_TRACKING_URI", "value": "URI"} in c["env"]
    # Nothing else moved, and the input is untouched.
    assert with_platform_values(manifest) == manifest
    assert manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] != "IMG"
