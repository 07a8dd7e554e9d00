"""The `config` string of a cs.KubernetesAddon, written exactly as the provider's Read stores it.

`alicloud_cs_kubernetes_addon` has no JSON diff suppression on `config`: its Read parses the config it was given,
merges in the remote values and stores Go's `json.Marshal` of the result (terraform-provider-alicloud@ace5bcf
alicloud/resource_alicloud_cs_kubernetes_addon.go:62-66 schema, :103-124 Read). A string that differs from that
by one space is a `~ config` diff on every preview after the first. `json.Marshal` of a map writes no whitespace,
sorts map keys, keeps non-ASCII as UTF-8 and HTML-escapes `<`, `>`, `&`, U+2028 and U+2029 as `\\u003c`, `\\u003e`,
`\\u0026`, `\\u2028`, `\\u2029` (Go encoding/json encode.go doc comment; docs/facts.md "Day 2").
"""

from __future__ import annotations

import json
from typing import Any

import pulumi

# Go's HTMLEscape set (encoding/json): these only ever occur inside JSON strings, so a plain replace is exact.
_GO_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
# Go unmarshals every JSON number into a float64 and writes an integral one without a fraction, but switches to
# exponent notation from 1e21 on, where Python writes the digits. No add-on config here needs such a number.
_GO_PLAIN_INTEGER_LIMIT = 10**21


def _check_numbers(value: Any, path: str = "config") -> None:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if abs(value) >= _GO_PLAIN_INTEGER_LIMIT:
            raise ValueError(f"{path}: {value} would be stored by Go in exponent notation; pass it as a string")
        return
    if isinstance(value, float):
        # Go's float formatting (strconv 'g'-like with its own exponent rules) differs from Python's repr for
        # fractions in corner cases; the add-on configs of this program hold booleans, strings and integers.
        raise ValueError(f"{path}: a non-integer number ({value!r}) in an add-on config; pass it as a string")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{path}: map key {k!r} is not a string")
            _check_numbers(v, f"{path}.{k}")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_numbers(v, f"{path}[{i}]")
        return
    raise ValueError(f"{path}: {type(value).__name__} is not a JSON value")


def go_json(value: Any) -> str:
    """`value` as Go's `json.Marshal` writes it: compact, keys sorted, UTF-8 kept, HTML characters escaped."""
    _check_numbers(value)
    out = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for char, escape in _GO_HTML_ESCAPES.items():
        out = out.replace(char, escape)
    return out


def addon_config(value: pulumi.Input[dict] | dict | None) -> pulumi.Input[str] | None:
    """The add-on `config` for a dict that may hold Outputs (a secret key): a plain string when it holds none,
    else an Output that stays secret when any part of it is."""
    if value is None:
        return None
    if not _holds_output(value):
        return go_json(value)
    return pulumi.Output.from_input(value).apply(go_json)


def _holds_output(value: Any) -> bool:
    if isinstance(value, pulumi.Output) or hasattr(value, "__await__"):
        return True
    if isinstance(value, dict):
        return any(_holds_output(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_output(v) for v in value)
    return False
