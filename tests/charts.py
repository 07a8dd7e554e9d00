"""Upstream Helm chart values kept verbatim under tests/data/charts/ (the first line of each file names its source
and the chart: `(chart NAME VERSION`), and the check that values the program sends use keys the chart has.

A key the chart does not define is silently ignored by Helm (or by an ACK add-on built on the chart), so a typo
or a renamed key would deploy a default instead of what the stack asked for."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import yaml

CHARTS_DIR = Path(__file__).resolve().parent / "data" / "charts"
_HEADER = re.compile(r"^# source: .*\(chart (?P<name>[a-z0-9-]+) (?P<version>[0-9][0-9A-Za-z.-]*)[,;]")


@cache
def chart_values() -> dict[tuple[str, str], dict]:
    """(chart name, version) -> its default values, for every file of tests/data/charts/."""
    out = {}
    for path in sorted(CHARTS_DIR.glob("*.values.yaml")):
        text = path.read_text()
        header = _HEADER.match(text.splitlines()[0])
        assert header, f"{path.name}: the first line must name its source and `(chart NAME VERSION`"
        out[(header["name"], header["version"])] = yaml.safe_load(text) or {}
    return out


def unknown_keys(sent: dict, defaults: dict, prefix: str = "") -> list[str]:
    """Dotted paths of `sent` that the chart's values do not define. Below a key whose default is not a non-empty
    mapping (nodeSelector: {}, tolerations: [], a scalar) the chart takes any content, so the walk stops there."""
    missing = []
    for key, value in sent.items():
        path = f"{prefix}{key}"
        if key not in defaults:
            missing.append(path)
        elif isinstance(value, dict) and isinstance(defaults[key], dict) and defaults[key]:
            missing += unknown_keys(value, defaults[key], path + ".")
    return missing


def dotted_paths(values: dict, prefix: str = "") -> list[str]:
    """Every leaf of a nested mapping as a dotted path."""
    out = []
    for key, value in values.items():
        if isinstance(value, dict) and value:
            out += dotted_paths(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out
