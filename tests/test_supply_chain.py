"""What the cluster runs does not float: Pod Security Admission checks pods against the Pod Security Standards of
the cluster's own Kubernetes minor (not `latest`, which changes the rules under running pods at an upgrade), and
the data Jobs install only the packages of a committed hash lock."""

from __future__ import annotations

import pytest

from components.wiring import pod_security_version
from tests.components.cloud.test_common import settings_of
from tests.conftest import STACKS, record

PSA_PREFIX = "pod-security.kubernetes.io/"
NAMESPACE_TYPES = ("kubernetes:core/v1:Namespace", "kubernetes:core/v1:NamespacePatch")


def _psa_labels(rec) -> dict[str, dict[str, str]]:
    out = {}
    for r in rec.resources:
        if r.type in NAMESPACE_TYPES:
            labels = (r.inputs.get("metadata") or {}).get("labels") or {}
            out[r.name] = {k: v for k, v in labels.items() if k.startswith(PSA_PREFIX)}
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_namespace_pins_pod_security_to_the_clusters_minor(stack):
    s = settings_of(stack)
    minor = ".".join((s.cluster.kubernetes_version or s.cluster.schema_version).split(".")[:2])
    found = _psa_labels(record(stack))
    assert any(found.values()), f"{stack}: no namespace with Pod Security labels"
    for name, labels in found.items():
        versions = {k: v for k, v in labels.items() if k.endswith("-version")}
        modes = {k for k in labels if not k.endswith("-version")}
        assert {f"{m}-version" for m in modes} <= set(versions), f"{stack} {name}: a mode without its version: {labels}"
        assert set(versions.values()) <= {f"v{minor}"}, f"{stack} {name}: {versions} (want v{minor}, never latest)"


def test_the_pod_security_version_follows_the_clusters_kubernetes_version():
    assert pod_security_version(settings_of("dev", {"cluster": {"kubernetes_version": "1.33.3-aliyun.1"}})) == "v1.33"
    assert pod_security_version(settings_of("dev", {"cluster": {"kubernetes_version": None,
                                                                "schema_version": "1.32"}})) == "v1.32"
    rec = record("dev", {"cluster": {"kubernetes_version": "1.33.3-aliyun.1"}})
    labels = _psa_labels(rec)
    assert labels and all(v == "v1.33" for ls in labels.values() for k, v in ls.items() if k.endswith("-version"))
