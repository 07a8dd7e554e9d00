"""What the cluster runs does not float: Pod Security Admission checks pods against the Pod Security Standards of
the cluster's own Kubernetes minor (not `latest`, which changes the rules under running pods at an upgrade), and
the data Jobs install only the packages of a committed hash lock."""

from __future__ import annotations

import re

import pytest

from components.config import PIPELINE_IMPORTS, SettingsError
from components.config.image import VersionSettings
from components.wiring import pod_security_version
from tests.components.cloud.test_common import settings_of
from tests.conftest import REPO, STACKS, record
from tools.pipeline_locks import lock_inputs

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


# ------------------------------------------------------------------------------------------- data Jobs' hash locks
LOCKS = REPO / "pipeline" / "locks"
_BLOCK = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)((?:\s*\\\n\s+--hash=sha256:[0-9a-f]{64})+)", re.MULTILINE)


@pytest.mark.parametrize("job", sorted(PIPELINE_IMPORTS))
def test_each_data_job_lock_is_generated_from_the_default_pins_and_hashes_every_package(job):
    assert (LOCKS / f"{job}.in").read_text() == lock_inputs()[job], "run `make lock` (tools/pipeline_locks.py)"
    text = (LOCKS / f"{job}.lock").read_text()
    assert "--generate-hashes" in text and f" {job}.in\n" in text.split("\n\n")[0]
    pins = {name.lower(): version for name, version, _ in _BLOCK.findall(text)}
    requirements = re.findall(r"^[A-Za-z0-9_.-]+==", text, re.MULTILINE)
    assert len(requirements) == len(pins), f"{job}.lock: a requirement without --hash"
    defaults = VersionSettings().pipeline_packages
    assert {n: pins.get(n) for n in PIPELINE_IMPORTS[job]} == {n: defaults[n] for n in PIPELINE_IMPORTS[job]}


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_job_that_pip_installs_installs_only_a_hash_lock(stack):
    rec = record(stack)
    installs = []
    for r in rec.by_type("kubernetes:batch/v1:Job"):
        for c in r.inputs["spec"]["template"]["spec"].get("containers", []):
            for line in " ".join(c.get("command", []) + c.get("args", [])).splitlines():
                if "pip install" in line:
                    installs.append((r.name, line))
    for name, line in installs:
        assert "--require-hashes" in line and "--no-deps" in line and re.search(r" -r \S+\.lock\b", line), (name, line)
        assert "==" not in line, (name, line)


def test_a_stack_that_moves_a_locked_pin_is_refused_naming_the_setting_and_the_fix():
    with pytest.raises(SettingsError) as info:
        settings_of("dev", {"versions": {"pipeline_packages": {**VersionSettings().pipeline_packages,
                                                               "datasets": "5.1.0"}}})
    [problem] = [str(p) for p in info.value.problems]
    assert problem.startswith("versions.pipeline_packages")
    assert "pipeline/locks/dataset.lock" in problem and "make lock" in problem
