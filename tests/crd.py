"""Offline validation against a CRD's openAPIV3Schema, translated as ../shared/tools/crdcheck.py does:
int-or-string becomes ["integer", "string"], and objects that list properties reject unknown fields unless
they preserve them. (No CEL rules or webhooks: those are checked by the tests of each component.)"""

from __future__ import annotations

import copy
import os
from functools import cache
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
RAYJOB_FILE = "ray.io_rayjobs.v1.7.0.yaml"
SANDBOXSET_FILE = "agents.kruise.io_sandboxsets.v0.3.0.yaml"
# Where the schemas are looked for, in order: ../shared/schemas beside the repository (verl-ack CI), else what
# `.ci/fetch-schemas` downloaded into .cache/schemas (checksum-verified copies of the upstream release files).
SCHEMA_DIRS: tuple[Path, ...] = (REPO.parent / "shared" / "schemas", REPO / ".cache" / "schemas")
# What the tests pass to crd_errors: the file names, resolved against SCHEMA_DIRS when a test runs, so a machine
# without the schemas still collects (and runs) every other test.
RAYJOB_CRD = RAYJOB_FILE
SANDBOXSET_CRD = SANDBOXSET_FILE


def schemas_dir() -> Path | None:
    for d in SCHEMA_DIRS:
        if (d / RAYJOB_FILE).is_file() and (d / SANDBOXSET_FILE).is_file():
            return d
    return None


def require_schemas() -> Path:
    """The folder holding both CRD schemas. Without them the calling test is SKIPPED (a laptop that cannot reach
    GitHub, where `.ci/fetch-schemas` could not download them), except in CI (CI=true), where it FAILS: CI must
    never pass without having checked the manifests against the CRDs."""
    found = schemas_dir()
    if found is not None:
        return found
    message = (f"CRD schemas {RAYJOB_FILE} and {SANDBOXSET_FILE} not found in {' or '.join(map(str, SCHEMA_DIRS))}; "
               "run `.ci/fetch-schemas` with access to raw.githubusercontent.com (make test does) or put "
               "../shared/schemas beside the repository")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message} (CI=true: the CRD-schema tests must run in CI)", pytrace=False)
    pytest.skip(f"{message}: CRD-schema test skipped")


def _to_jsonschema(node):
    if isinstance(node, dict):
        if node.get("x-kubernetes-int-or-string"):
            node.pop("anyOf", None)
            node["type"] = ["integer", "string"]
        preserves_unknown = node.get("x-kubernetes-preserve-unknown-fields")
        if node.get("type") == "object" and "properties" in node and not preserves_unknown:
            node.setdefault("additionalProperties", False)
        for key, child in list(node.items()):
            if key == "properties":
                for sub in child.values():
                    _to_jsonschema(sub)
            elif key in ("items", "additionalProperties") and isinstance(child, dict):
                _to_jsonschema(child)
    return node


@cache
def crd_validator(path: str, version: str) -> jsonschema.Draft7Validator:
    # libyaml's loader where PyYAML has it: the same safe loader, ~4x faster on KubeRay's 1.4 MB CRD.
    crd = yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(_to_jsonschema(copy.deepcopy(schema)))


def crd_errors(obj: dict, crd: str | Path, version: str) -> list[str]:
    """Schema errors of `obj` against a CRD: a file name of SCHEMA_DIRS (skipped or failed when absent, see
    require_schemas) or a path."""
    path = Path(crd) if Path(crd).is_absolute() else require_schemas() / crd
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in crd_validator(str(path), version).iter_errors(obj)]
