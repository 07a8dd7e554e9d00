"""Offline validation against a CRD's openAPIV3Schema, translated as ../shared/tools/crdcheck.py does:
int-or-string becomes ["integer", "string"], and objects that list properties reject unknown fields unless
they preserve them. (No CEL rules or webhooks: those are checked by the tests of each component.)"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

import jsonschema
import yaml

SCHEMAS = Path(__file__).resolve().parent.parent.parent / "shared" / "schemas"
RAYJOB_CRD = SCHEMAS / "ray.io_rayjobs.v1.7.0.yaml"
SANDBOXSET_CRD = SCHEMAS / "agents.kruise.io_sandboxsets.v0.3.0.yaml"


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
