"""The add-on registry (components/config/addons.py) is the one declaration of the ACK add-ons: what every stack
installs, the docs tables and the schema's defaults all follow it, and no add-on name is written anywhere else."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from components.config import REPO_ROOT, addon_installed
from components.config.addons import ADDON_ROLES, ADDONS_BY_ROLE, CREATE_TIME_ADDON_ROLES
from components.config.docs import ADDON_DOCS, ADDONS_TABLE_START, SCHEMA_PATH, refresh_addon_doc
from components.model import parse_settings
from tests.conftest import STACKS, record, stack_settings

ADDON = "alicloud:cs/kubernetesAddon:KubernetesAddon"
CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
# Variants that flip each condition the shipped stacks leave the same way.
VARIANTS = {
    "kuberay from the add-on": ("dev", {"versions": {"kuberay_source": "addon"}}),
    "optional add-ons off": ("dev", {"versions": {"addons": {"monitoring": {"enabled": False},
                                                             "node_problem_detector": {"enabled": False}}}}),
    "no credential helper": ("dev-platform", {"image": {"credential_helper": False}}),
    "access keys instead of RRSA": ("dev", {"storage": {"auth": "access_key"}}),
}
CASES = {**{s: (s, {}) for s in STACKS}, **VARIANTS}


def _installed_names(stack: str, overrides: dict) -> set[str]:
    rec = record(stack, overrides)
    names = {r.inputs["name"] for r in rec.by_type(ADDON)}
    for cluster in rec.by_type(CLUSTER):
        names |= {a["name"] for a in cluster.inputs.get("addons") or [] if not a.get("disabled")}
    return names


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_stack_installs_exactly_the_add_ons_the_registry_says(case):
    stack, overrides = CASES[case]
    s = parse_settings(stack_settings(stack, overrides))
    expected = {s.versions.addons[a.role].name for a in ADDON_ROLES if addon_installed(s, a.role)
                and (a.installer != "cluster" or s.cluster.mode == "new")}
    # A new cluster is also created with the create-time add-ons (components/cloud/cluster.py).
    if s.kind != "experiment" and s.cluster.mode == "new":
        expected |= {s.versions.addons[r].name for r in CREATE_TIME_ADDON_ROLES}
    assert _installed_names(stack, overrides) == expected


def test_each_condition_of_the_registry_is_exercised_both_ways():
    """The parametrised cases above would miss a wrong condition that no case reaches: each role is installed by
    some stack that holds a cluster and left out by another (the CSI pair excepted: every cluster has it)."""
    seen: dict[str, set[bool]] = {a.role: set() for a in ADDON_ROLES}
    for stack, overrides in CASES.values():
        s = parse_settings(stack_settings(stack, overrides))
        for a in ADDON_ROLES:
            if s.kind != "experiment":
                seen[a.role].add(addon_installed(s, a.role))
    always = {"csi_plugin", "csi_provisioner"}
    assert {r for r, v in seen.items() if v != {True, False}} == always


@pytest.mark.parametrize("page", ADDON_DOCS, ids=lambda p: p.name)
def test_the_add_on_tables_of_the_docs_are_generated_from_the_registry(page: Path):
    text = page.read_text()
    assert ADDONS_TABLE_START in text, f"{page.name} lost its generated add-on table"
    assert refresh_addon_doc(text) == text, f"stale add-on table in {page.name}: run `make schema`"
    for a in ADDON_ROLES:
        assert f"| `{a.role}` | `{a.name}` |" in text


def test_the_schema_shows_the_add_ons_the_defaults_leave_off_as_off():
    schema = json.loads(SCHEMA_PATH.read_text())
    default = schema["$defs"]["VersionSettings"]["properties"]["addons"]["default"]
    assert set(default) == set(ADDONS_BY_ROLE)
    off = {role for role, entry in default.items() if entry.get("enabled") is False}
    # queue and logs are off by default and only a platform installs them; KubeRay defaults to the Helm chart;
    # the ALB controller follows a sandbox domain, which has no default.
    assert {"kube_queue", "logtail", "kuberay", "alb"} <= off
    assert not off & {"csi_plugin", "csi_provisioner", "monitoring", "node_problem_detector", "pod_identity"}


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


# The one string that equals an add-on name for another reason: the sandbox manager's pods carry their chart's
# app name (app.kubernetes.io/name), a label the network policies select, not the add-on's API name.
NOT_AN_ADDON_NAME = {("components/workloads/sandbox/manifests.py", "ack-sandbox-manager")}


def test_no_add_on_name_is_declared_outside_the_registry():
    names = {a.name for a in ADDON_ROLES} | {n for a in ADDON_ROLES for n, _ in a.lingjun_min_versions}
    found = []
    for path in sorted([*(REPO_ROOT / "components").rglob("*.py"), *(REPO_ROOT / "offline").rglob("*.py"),
                        REPO_ROOT / "plan.py", REPO_ROOT / "__main__.py"]):
        rel = str(path.relative_to(REPO_ROOT))
        if rel == "components/config/addons.py":
            continue
        found += [(rel, s) for s in _string_constants(path) & names if (rel, s) not in NOT_AN_ADDON_NAME]
    assert found == [], "add-on names belong in components/config/addons.py"
