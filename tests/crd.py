"""Offline validation against a CRD's openAPIV3Schema, translated as ../shared/tools/crdcheck.py does:
int-or-string becomes ["integer", "string"], and objects that list properties reject unknown fields unless
they preserve them. (No CEL rules or webhooks: those are checked by the tests of each component.)"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

import jsonschema
import yaml

REPO = Path(__file__).resolve().parent.parent
RAYJOB_FILE = "ray.io_rayjobs.v1.7.0.yaml"
SANDBOXSET_FILE = "agents.kruise.io_sandboxsets.v0.3.0.yaml"


def _schemas_dir() -> Path:
    """../shared/schemas beside the repository (verl-ack CI), else what `.ci/fetch-schemas` downloaded into
    .cache/schemas (checksum-verified copies of the upstream release files)."""
    for d in (REPO.parent / "shared" / "schemas", REPO / ".cache" / "schemas"):
        if (d / RAYJOB_FILE).is_file() and (d / SANDBOXSET_FILE).is_file():
            return d
    raise FileNotFoundError("the CRD schemas are missing: run `.ci/fetch-schemas` (make test does) or put "
                            "../shared/schemas beside the repository")


SCHEMAS = _schemas_dir()
RAYJOB_CRD = SCHEMAS / RAYJOB_FILE
SANDBOXSET_CRD = SCHEMAS / SANDBOXSET_FILE


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
    crd = yaml.safe_load(Path(path).read_text())
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(_to_jsonschema(copy.deepcopy(schema)))


def crd_errors(obj: dict, crd: Path, version: str) -> list[str]:
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in crd_validator(str(crd), version).iter_errors(obj)]
