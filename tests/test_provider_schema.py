"""Every alicloud input the program sets, for every stack and every variant, conforms to the Terraform schema of
the provider pulumi-alicloud bridges: no unknown attribute, every Required one present, enum and range
validators satisfied, ConflictsWith/ExactlyOneOf/AtLeastOneOf/RequiredWith respected, and blocks nested the way
the bridge expects (a MaxItems-1 block is one object, anything else a list).

The schema is tests/data/alicloud_provider_schema.json, extracted from the provider's Go source by
tools/provider_schema.py (its header says which commit and how to regenerate). A second test pins that file to
the pulumi-alicloud SDK installed here, so a provider upgrade that changes an input shows up as a failure rather
than a silently stale schema. Values the engine does not know at preview time (`[unknown]`) and secrets are
skipped; what the provider checks with its own Go code (CustomizeDiff, custom ValidateFuncs) is listed in the
file as "unparsed" and not checked here.
"""

from __future__ import annotations

import collections.abc
import importlib
import importlib.util
import json
import re
import typing
from pathlib import Path

import pytest

from offline.engine import SECRET, UNKNOWN, Recording

REPO = next(p for p in Path(__file__).resolve().parents if (p / "Pulumi.yaml").is_file())
STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))
SCHEMA_FILE = REPO / "tests" / "data" / "alicloud_provider_schema.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text())
RESOURCES: dict[str, dict] = SCHEMA["resources"]
REGENERATE = f"regenerate with: {SCHEMA['generated_by']}"

# Violations that are known, reported and not yet fixed: (case label, resource name, rule text) -> reason.
_CR_LEGACY = ("alicloud_cr_namespace/alicloud_cr_repo are deprecated since provider v1.276.0 and drive the legacy "
              "Container Registry API 2016-06-07; the v2 provider CHANGELOG calls alicloud_cr_repo non-functional "
              "(terraform-provider-alicloud@release/v2:CHANGELOG-v2.md, 2.0.0-beta1). Fix: "
              "components/cloud/registry.py, see docs/facts-provider.md")
KNOWN: dict[tuple[str, str, str], str] = {}  # none left: the personal ACR path no longer declares _CR_LEGACY's resources


def _variants() -> dict[str, tuple[str, dict]]:
    """The variant matrix of the offline-plan test, wherever the test tree keeps it."""
    for path in sorted((REPO / "tests").rglob("test_variants.py")):
        spec = importlib.util.spec_from_file_location("_provider_schema_variants", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.VARIANTS
    return {}


VARIANTS = _variants()
CASES = {f"stack {s}": (s, None) for s in STACKS} | {f"variant {v}": VARIANTS[v] for v in sorted(VARIANTS)}


def _recording(label: str) -> Recording:
    from tests.conftest import record  # the session cache the other plan tests share

    stack, overrides = CASES[label]
    return record(stack, overrides)


# ------------------------------------------------------------------------------------------- the checker

def _opaque(value) -> bool:
    return value == UNKNOWN or value == SECRET


def _present(value) -> bool:
    return value is not None and value != [] and value != {}


def _is_input(attr: dict) -> bool:
    return bool(attr.get("required") or attr.get("optional"))


def _by_pulumi(attrs: dict) -> dict[str, tuple[str, dict]]:
    return {a["pulumi"]: (n, a) for n, a in attrs.items() if n != "__unparsed__"}


def _resolve(root: dict, root_attrs: dict, path: str):
    """The input value at a Terraform path such as `scaling_config.0.min_size`, or None."""
    value, attrs = root, root_attrs
    parts = path.split(".")
    n = 0
    while n < len(parts):
        if not isinstance(value, dict) or attrs is None or parts[n] not in attrs:
            return None
        attr = attrs[parts[n]]
        value = value.get(attr["pulumi"])
        n += 1
        if n < len(parts) and parts[n].isdigit():
            if isinstance(value, list):
                value = value[int(parts[n])] if int(parts[n]) < len(value) else None
            elif int(parts[n]) != 0:
                return None  # a flattened MaxItems-1 block has only element 0
            n += 1
        attrs = attr.get("elem", {}).get("block")
    return value


def _validate(rule: dict, value) -> str | None:
    """Why `value` fails the provider's ValidateFunc `rule`, or None."""
    kind = rule["kind"]
    if kind == "enum":
        ok = value in rule["values"] or (rule["ignore_case"] and isinstance(value, str)
                                         and value.lower() in {v.lower() for v in rule["values"]})
        return None if ok else f"StringInSlice: {value!r} is not one of {rule['values']}"
    if kind == "int_enum":
        return None if value in rule["values"] else f"IntInSlice: {value!r} is not one of {rule['values']}"
    if kind in ("int_between", "float_between", "nullable_int_between"):
        if kind == "nullable_int_between":
            if value == "":
                return None
            try:
                value = int(value)
            except (TypeError, ValueError):
                return f"ValidateNullableIntBetween: {value!r} is neither empty nor an integer string"
        lo, hi = rule.get("min"), rule.get("max")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return f"{kind}: {value!r} is outside [{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        return None
    if kind == "len_between":
        n = len(str(value).encode())
        lo, hi = rule.get("min", 0), rule.get("max")
        if n < lo or (hi is not None and n > hi):
            return f"StringLenBetween: length {n} is outside [{lo}, {hi if hi is not None else 'inf'}]"
        return None
    if kind in ("regex", "not_regex"):
        found = re.search(rule["pattern"], str(value)) is not None
        if found != (kind == "regex"):
            return f"StringMatch `{rule['pattern']}`: {value!r} ({rule.get('message') or 'no match'})"
        return None
    if kind == "json":
        try:
            json.loads(value)
        except (TypeError, ValueError) as e:
            return f"StringIsJSON: {e}"
        return None
    if kind == "nullable_bool":
        return None if value in ("", "true", "false") else f"ValidateNullableBool: {value!r}"
    if kind in ("any", "all"):
        errors = [_validate(r, value) for r in rule["of"]]
        failed = [e for e in errors if e]
        if kind == "any" and len(failed) == len(errors) and errors:
            return "none of: " + "; ".join(failed)
        if kind == "all" and failed:
            return "; ".join(failed)
        return None
    return None  # "unparsed": the provider's own Go code decides; nothing to check offline


_SCALARS = {"string": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}


def _check_scalar(type_: str, value, where: str, out: list[str]) -> bool:
    ok = isinstance(value, _SCALARS[type_]) and not (type_ in ("int", "float") and isinstance(value, bool))
    if not ok:
        out.append(f"{where}: type: expected a {type_}, got {type(value).__name__} {value!r}")
    return ok


def _check_value(attr: dict, value, where: str, out: list[str], derived: bool = False,
                 root: tuple[dict, dict] | None = None) -> None:
    """`derived`: the value comes from another resource's outputs, which the offline engine fakes and a real
    preview does not know yet; its shape is checked, its validators are not."""
    if _opaque(value):
        return
    type_ = attr.get("type")
    if type_ in _SCALARS:
        if _check_scalar(type_, value, where, out) and "validate" in attr and not derived:
            why = _validate(attr["validate"], value)
            if why:
                out.append(f"{where}: {why}")
    elif type_ == "map":
        if not isinstance(value, dict):
            out.append(f"{where}: type: expected a map, got {type(value).__name__}")
    elif type_ in ("list", "set"):
        elem = attr.get("elem", {})
        if attr.get("max_items") == 1:
            # The bridge flattens a MaxItems-1 block into one object (a MaxItems-1 list of scalars into one scalar).
            if isinstance(value, list):
                shape = "an object" if "block" in elem else "a single value"
                out.append(f"{where}: list-vs-object: a MaxItems-1 {type_} is given as {shape}, not a list of "
                           f"{len(value)}")
                return
            items = [value]
        else:
            if not isinstance(value, list):
                out.append(f"{where}: list-vs-object: expected a list (the {type_} has no MaxItems 1), got "
                           f"{type(value).__name__}")
                return
            items = value
            if "max_items" in attr and len(items) > attr["max_items"]:
                out.append(f"{where}: MaxItems: {len(items)} items, at most {attr['max_items']}")
            if "min_items" in attr and len(items) < attr["min_items"]:
                out.append(f"{where}: MinItems: {len(items)} items, at least {attr['min_items']}")
        for i, item in enumerate(items):
            at = where if attr.get("max_items") == 1 else f"{where}[{i}]"
            if "block" in elem:
                if _opaque(item):
                    continue
                if not isinstance(item, dict):
                    out.append(f"{at}: type: expected an object, got {type(item).__name__}")
                    continue
                _check_block(item, elem["block"], at, out, root=root, derived=derived)
            elif elem.get("type") in _SCALARS and not _opaque(item):
                _check_value(elem, item, at, out, derived)


def _check_block(inputs: dict, attrs: dict, where: str, out: list[str], root: tuple[dict, dict] | None = None,
                 derived: bool | set[str] = False) -> None:
    """`derived`: True inside a value taken from other resources' outputs; at the top level, the set of input
    names that are."""
    root = root or (inputs, attrs)
    names = _by_pulumi(attrs)
    for key, value in sorted(inputs.items()):
        if key.startswith("__"):
            continue
        at = f"{where}.{key}" if where else key
        if key not in names:
            out.append(f"{at}: unknown attribute: the provider has no input with this name")
            continue
        tf_name, attr = names[key]
        if not _is_input(attr):
            out.append(f"{at}: computed-only: `{tf_name}` is set by the provider and cannot be configured")
            continue
        if attr.get("removed"):
            out.append(f"{at}: removed: {attr['removed']}")
        if attr.get("deprecated") and _present(value):
            out.append(f"{at}: deprecated: {attr['deprecated']}")
        if value is None:
            continue
        _check_value(attr, value, at, out, derived if isinstance(derived, bool) else key in derived, root)
        if not _present(value):
            continue
        for path in attr.get("conflicts_with", []):
            if _present(_resolve(*root, path)):
                out.append(f"{at}: ConflictsWith: `{tf_name}` cannot be set together with `{path}`")
        if attr.get("required_with"):
            missing = [p for p in attr["required_with"] if not _present(_resolve(*root, p))]
            if missing:
                out.append(f"{at}: RequiredWith: `{tf_name}` also needs {missing}")
    for tf_name, attr in attrs.items():
        if tf_name == "__unparsed__":
            continue
        if attr.get("required") and not _present(inputs.get(attr["pulumi"])):
            out.append(f"{where + '.' if where else ''}{attr['pulumi']}: Required: `{tf_name}` is required")


def _groups(attrs: dict, prefix: str = ""):
    """(rule, group, TF path of the block holding the rule) for every ExactlyOneOf/AtLeastOneOf, once per group."""
    seen = set()
    for tf_name, attr in attrs.items():
        if tf_name == "__unparsed__":
            continue
        for rule, key in (("ExactlyOneOf", "exactly_one_of"), ("AtLeastOneOf", "at_least_one_of")):
            group = tuple(sorted(attr.get(key, [])))
            if group and (rule, group) not in seen:
                seen.add((rule, group))
                yield rule, list(group), prefix
        block = attr.get("elem", {}).get("block")
        if block:
            yield from _groups(block, f"{prefix}{tf_name}.0.")


def _check_groups(inputs: dict, attrs: dict, out: list[str]) -> None:
    for rule, group, holder in _groups(attrs):
        if holder and not _present(_resolve(inputs, attrs, holder.rstrip(".").rsplit(".", 1)[0])):
            continue  # the block that carries the rule is not set
        set_ = [p for p in group if _present(_resolve(inputs, attrs, p))]
        if (rule == "ExactlyOneOf" and len(set_) != 1) or (rule == "AtLeastOneOf" and not set_):
            want = "exactly one" if rule == "ExactlyOneOf" else "at least one"
            out.append(f"{holder.rstrip('.') or '(resource)'}: {rule}: {want} of {group} must be set, "
                       f"got {set_ or 'none'}")


def violations(recording: Recording) -> list[tuple[str, str, str]]:
    """(resource name, type, message) for every input that breaks the provider schema."""
    found = []
    for r in recording.resources:
        if r.type not in RESOURCES or r.options.get("read"):
            continue
        out: list[str] = []
        if RESOURCES[r.type].get("deprecated"):
            out.append(f"(resource type): deprecated resource `{RESOURCES[r.type]['tf_name']}`: "
                       f"{RESOURCES[r.type]['deprecated']}")
        derived = {k for k, urns in r.property_dependencies.items() if urns}
        _check_block(r.inputs, RESOURCES[r.type]["attributes"], "", out, derived=derived)
        _check_groups(r.inputs, RESOURCES[r.type]["attributes"], out)
        found += [(r.name, r.type, msg) for msg in out]
    return found


# ---------------------------------------------------------------------------------------------- the tests

def test_the_schema_file_names_the_provider_commit_and_how_to_regenerate_it():
    assert SCHEMA["provider"] == "aliyun/terraform-provider-alicloud" and re.fullmatch(r"[0-9a-f]{40}", SCHEMA["commit"])
    assert SCHEMA["generated_by"].startswith("python tools/provider_schema.py")


@pytest.mark.parametrize("label", sorted(CASES))
def test_every_alicloud_resource_type_the_program_registers_has_its_provider_schema(label):
    types = {r.type for r in _recording(label).resources if r.type.startswith("alicloud:")
             or r.type == "pulumi:providers:alicloud"}
    missing = sorted(types - set(RESOURCES))
    assert not missing, (f"{label}: no provider schema for {missing}; add them to RESOURCES in "
                         f"tools/provider_schema.py and {REGENERATE}")


@pytest.mark.parametrize("label", sorted(CASES))
def test_every_alicloud_input_conforms_to_the_bridged_provider_schema(label):
    found = violations(_recording(label))
    expected = {k: why for k, why in KNOWN.items() if k[0] == label}
    seen = {k for k in expected for v in found if k[1] == v[0] and k[2] in v[2]}
    new = [v for v in found if not any(k[1] == v[0] and k[2] in v[2] for k in expected)]
    assert not new, f"{label}: {len(new)} input(s) the provider would reject or ignore:\n" + "\n".join(
        f"  {type_} {name!r}: {msg}" for name, type_, msg in new)
    stale = sorted(set(expected) - seen)
    assert not stale, f"{label}: fixed, remove from KNOWN: {stale}"
    if expected:
        pytest.xfail("; ".join(sorted({why for why in expected.values()})))


# -- the schema file against the SDK the program actually runs on

def _sdk_args(token: str):
    if token == "pulumi:providers:alicloud":
        return importlib.import_module("pulumi_alicloud").ProviderArgs
    mod, cls = token.split(":")[1].split("/")[0], token.split(":")[2]
    resource = getattr(importlib.import_module(f"pulumi_alicloud.{mod}"), cls)
    # In the resource's own module; where a nested type already has the name `XArgs` the SDK calls it `XInitArgs`.
    module = importlib.import_module(resource.__module__)
    return getattr(module, f"{cls}InitArgs", None) or getattr(module, f"{cls}Args")


def _sdk_shape(annotation, module) -> tuple[str, object]:
    """('list'|'map'|'object'|'scalar', nested Args class or None) of an SDK input annotation."""
    first = annotation
    while typing.get_origin(first) is typing.Union:
        first = typing.get_args(first)[0]
    origin = typing.get_origin(first)
    if origin is collections.abc.Sequence:
        kind, inner = "list", typing.get_args(first)[0]
        while typing.get_origin(inner) is typing.Union:
            inner = typing.get_args(inner)[0]
    elif origin is collections.abc.Mapping:
        return "map", None
    else:
        kind, inner = None, first
    if isinstance(inner, typing.ForwardRef):
        cls = getattr(module, inner.__forward_arg__, None)
        return kind or "object", cls
    return kind or "scalar", None


def _sdk_inputs(cls) -> dict[str, tuple[str, object]]:
    from pulumi._types import input_type_py_to_pulumi_names
    module = importlib.import_module(cls.__module__)
    out = {}
    for py, pulumi_name in input_type_py_to_pulumi_names(cls).items():
        prop = getattr(cls, py)
        out[pulumi_name] = _sdk_shape(prop.fget.__annotations__.get("return"), module)
    return out


def _tf_shape(attr: dict) -> str:
    type_ = attr.get("type")
    if type_ == "map":
        return "map"
    if type_ in ("list", "set"):
        if attr.get("max_items") == 1:
            return "object" if "block" in attr.get("elem", {}) else "scalar"
        return "list"
    return "scalar"


def _compare(attrs: dict, cls, where: str, out: list[str], nested: bool = False) -> None:
    """A nested type is shared by inputs and outputs in the bridged SDK, so it lists computed-only fields too."""
    sdk = _sdk_inputs(cls)
    tf = {a["pulumi"]: (n, a) for n, a in attrs.items() if n != "__unparsed__" and (nested or _is_input(a))}
    for name in sorted(set(sdk) - set(tf)):
        out.append(f"{where}.{name}: in pulumi-alicloud's SDK, not an input in the schema file")
    for name in sorted(set(tf) - set(sdk)):
        out.append(f"{where}.{name}: input `{tf[name][0]}` in the schema file, not in pulumi-alicloud's SDK")
    for name in sorted(set(sdk) & set(tf)):
        tf_name, attr = tf[name]
        kind, inner = sdk[name]
        if _tf_shape(attr) != kind:
            out.append(f"{where}.{name}: SDK takes a {kind}, the schema file says {_tf_shape(attr)}")
        block = attr.get("elem", {}).get("block")
        if block and inner is not None:
            _compare(block, inner, f"{where}.{name}", out, nested=True)


# pulumi-alicloud 4.0.0 bridges a provider newer than the newest source this schema could be read from (see
# docs/facts-provider.md); these inputs exist in the SDK only. Any other difference fails.
SDK_ONLY = {
    "alicloud:cas/serviceCertificate:ServiceCertificate.keyWo",
    "alicloud:cas/serviceCertificate:ServiceCertificate.keyWoVersion",
    "alicloud:cs/nodePool:NodePool.resourcePoolOptions",
}


def test_the_schema_file_matches_the_pulumi_alicloud_sdk_installed_here():
    """Same inputs, same nesting: the file describes the provider version this SDK bridges."""
    out: list[str] = []
    for token, res in sorted(RESOURCES.items()):
        _compare(res["attributes"], _sdk_args(token), token, out)
    out = [o for o in out if o.split(": ", 1)[0] not in SDK_ONLY]
    assert not out, f"the schema file and the installed SDK disagree ({REGENERATE}):\n  " + "\n  ".join(out)


# -- the checker itself: each rule it enforces, on inputs the program must never produce

def _errors(token: str, inputs: dict) -> list[str]:
    out: list[str] = []
    attrs = RESOURCES[token]["attributes"]
    _check_block(inputs, attrs, "", out, derived=set())
    _check_groups(inputs, attrs, out)
    return out


NODE_POOL = "alicloud:cs/nodePool:NodePool"
BROKEN = {
    "unknown attribute": ("alicloud:vpc/network:Network", {"cidrBlock": "10.0.0.0/8", "vpcNmae": "x"}),
    "Required: `cluster_id`": (NODE_POOL, {"nodePoolName": "p"}),
    "computed-only": ("alicloud:cs/kubernetesAddon:KubernetesAddon", {"clusterId": "c", "name": "a", "required": True}),
    "StringInSlice: 'Hot'": ("alicloud:oss/bucket:Bucket", {"storageClass": "Hot"}),
    "int_between: 500": (NODE_POOL, {"clusterId": "c", "nodePoolName": "p",
                                         "internetMaxBandwidthOut": 500}),
    "ConflictsWith: `desired_size` cannot be set together with `node_count`": (
        NODE_POOL, {"clusterId": "c", "nodePoolName": "p", "desiredSize": "1", "nodeCount": 1}),
    "ExactlyOneOf": (NODE_POOL, {"clusterId": "c"}),
    "list-vs-object: a MaxItems-1 list is given as an object": (
        NODE_POOL, {"clusterId": "c", "nodePoolName": "p", "efloNodeGroup": [{"groupId": "g"}]}),
    "list-vs-object: expected a list": (NODE_POOL, {"clusterId": "c", "nodePoolName": "p",
                                                    "labels": {"key": "a", "value": "b"}}),
    "labels[0].key: Required": (NODE_POOL, {"clusterId": "c", "nodePoolName": "p", "labels": [{"value": "b"}]}),
    "type: expected a int": ("alicloud:ram/role:Role", {"roleName": "r", "maxSessionDuration": "3600"}),
    "StringIsJSON": ("alicloud:ram/policy:Policy", {"policyName": "p", "policyDocument": "{not json"}),
}


@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_the_checker_reports_each_rule_it_enforces(rule):
    token, inputs = BROKEN[rule]
    errors = _errors(token, inputs)
    assert any(rule in e for e in errors), f"{rule!r} not reported for {inputs}; got {errors}"


def test_values_the_engine_does_not_know_yet_are_not_validated():
    assert _errors(NODE_POOL, {"clusterId": UNKNOWN, "nodePoolName": "p", "instanceChargeType": UNKNOWN}) == []
    out: list[str] = []
    _check_block({"cidrBlock": "10.0.0.0/8", "vpcId": "fake-1", "zoneId": "z", "vswitchName": "n"},
                 RESOURCES["alicloud:vpc/switch:Switch"]["attributes"], "", out, derived={"vpcId"})
    assert out == []


def test_a_nested_conflict_is_resolved_from_the_resource_root():
    errors = _errors(NODE_POOL, {"clusterId": "c", "nodePoolName": "p", "internetChargeType": "PayByTraffic",
                                 "scalingConfig": {"maxSize": 2, "minSize": 0, "isBondEip": True}})
    assert any("scalingConfig.isBondEip: ConflictsWith" in e and "internet_charge_type" in e for e in errors), errors
