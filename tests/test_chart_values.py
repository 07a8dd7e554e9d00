"""Every Helm release the program declares sends only keys its chart's values.yaml defines, for the charts whose
values are kept under tests/data/charts/; a release of a chart we have no values file for is named here, so a
new chart does not go unchecked by accident."""

from __future__ import annotations

import pytest

from tests.charts import chart_values, unknown_keys
from tests.conftest import record

RELEASE = "kubernetes:helm.sh/v3:Release"
# Stacks plus overrides that, together, declare every Helm release the program can create: the KubeRay chart
# (default kuberay_source) and the open-source sandbox controller chart (existing-ecs: sandbox.manager open-source).
VARIANTS = [("dev", None), ("existing-ecs", None), ("multinode", None)]
NO_VALUES_FILE: set[str] = set()


def releases():
    for stack, overrides in VARIANTS:
        for reg in record(stack, overrides).by_type(RELEASE):
            yield stack, reg


def test_the_variants_cover_every_chart_the_program_installs():
    charts = {reg.inputs["chart"] for _, reg in releases()}
    assert charts == {"kuberay-operator", "agents-sandbox-controller"}, charts


@pytest.mark.parametrize("stack,overrides", VARIANTS)
def test_helm_values_use_only_keys_the_chart_defines(stack, overrides):
    known = chart_values()
    for reg in record(stack, overrides).by_type(RELEASE):
        chart, version = reg.inputs["chart"], reg.inputs["version"]
        if chart in NO_VALUES_FILE:
            continue
        assert (chart, version) in known, (
            f"{reg.urn}: no values file for chart {chart} {version} in tests/data/charts/; save the chart's "
            "values.yaml there verbatim (first line: its source and `(chart NAME VERSION`)")
        assert unknown_keys(reg.inputs.get("values") or {}, known[(chart, version)]) == [], reg.urn


def test_the_key_check_finds_a_misspelt_or_misplaced_key():
    defaults = {"nodeSelector": {}, "image": {"repository": "x", "tag": "y"}, "replicas": 1}
    assert unknown_keys({"nodeSelector": {"a/b": "c"}, "image": {"tag": "z"}}, defaults) == []
    assert unknown_keys({"nodeselector": {}, "image": {"tags": "z"}}, defaults) == ["nodeselector", "image.tags"]
