"""Reading a stack file's YAML as the Pulumi CLI reads it, and refusing what a reader could take two ways.

The Pulumi CLI (pulumi/pulumi sdk/go/common/workspace/loaders.go LoadProjectStackBytes, encoding/marshal.go)
decodes a stack file with gopkg.in/yaml.v3, whose plain-scalar rules (resolve.go) are YAML 1.2's core schema
with a few YAML 1.1 remnants; PyYAML implements YAML 1.1. They disagree on exactly the forms a person types by
accident: `1:30` (1.1: the number 90, yaml.v3: text), `yes`/`on`/`off` (1.1: bools, yaml.v3: text), `1e3`
(1.1: text, yaml.v3: 1000.0), `0o17` (1.1: text, yaml.v3: 15). Here every plain scalar is resolved by
yaml.v3's rules, and the forms that read as a number nobody wrote on purpose (`017` octal, `0x18`, `0b11`,
`1_000`, a leading zero, an integer beyond 64 bits) or as a timestamp are refused with the fix, so the offline
plan, the tests and a real `pulumi preview` see the same values. yaml.v3 also refuses a mapping key given
twice (decode.go `mapping`: "mapping key already defined"), and so does this reader. Sources: docs/facts.md
"Stack files as the Pulumi CLI reads them".
"""

from __future__ import annotations

import math
import re

import yaml
from yaml.nodes import MappingNode, ScalarNode

_PLAIN_TAG = "tag:verl-ack,2026:plain"
_MERGE_TAG = "tag:yaml.org,2002:merge"
# yaml.v3 resolve.go resolveMap: the plain scalars it looks up by spelling.
_FIXED = {**dict.fromkeys(("true", "True", "TRUE"), True), **dict.fromkeys(("false", "False", "FALSE"), False),
          **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
          **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
          **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
          **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf)}
# yaml.v3 resolve.go yamlStyleFloat, applied after the integer parses fail.
_V3_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DECIMAL = re.compile(r"[-+]?(0|[1-9][0-9]*)")
# What Go's strconv.ParseInt(s, 0, 64) also takes once yaml.v3 has removed '_': 0x/0o/0b prefixes and a
# leading 0 (octal, a YAML 1.1 remnant kept "for compatibility" in yaml.v3).
_OTHER_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+)")
_TIMESTAMP_START = re.compile(r"[0-9]{4}-")
INT64 = (-(2**63), 2**63 - 1)


class YamlProblem(Exception):
    """A value the two readers take differently, or a duplicate key: the message names the fix; `line` is 1-based,
    `path` the dotted keys down to the value (`config.verl-ack:settings.job.env`), empty where unknown."""

    def __init__(self, line: int, message: str, path: str = ""):
        self.line = line
        self.message = message
        self.path = path
        super().__init__(f"line {line}: {message}")


def _line(node) -> int:
    return node.start_mark.line + 1


def resolve_plain(text: str, line: int = 0):
    """The value yaml.v3 gives an unquoted scalar, or YamlProblem where that value is not what a person meant."""
    if text in _FIXED:
        return _FIXED[text]
    if not text or text[0] not in "+-.0123456789":
        return text  # yaml.v3's resolve table: anything else is text (yes, on, off, y, n among them)
    if _TIMESTAMP_START.match(text) and re.fullmatch(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?", text):
        raise YamlProblem(line, f"{text} is unquoted, so YAML reads a timestamp (the Pulumi CLI and the offline "
                          f"reader convert it differently); quote it: \"{text}\"")
    plain = text.replace("_", "")
    if _DECIMAL.fullmatch(text):
        digits = text.lstrip("+-")
        if len(digits) > 19 or not INT64[0] <= int(text) <= INT64[1]:
            raise YamlProblem(line, f"the number {text[:24]}{'...' if len(text) > 24 else ''} does not fit in 64 "
                              "bits (the Pulumi CLI would read it as a float or as text); write a smaller number, or "
                              "quote it if you mean text")
        return int(text)
    if _OTHER_INT.fullmatch(plain) or (_DECIMAL.fullmatch(plain) and plain != text) or (
            re.fullmatch(r"[-+]?0[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?", plain)):
        raise YamlProblem(line, f"{text} is read as a number in a non-decimal or YAML 1.1 form (a leading 0 is "
                          "octal, 0x hex, 0b binary, '_' is dropped); write the plain decimal number, or quote it "
                          f"(\"{text}\") if you mean text")
    if _V3_FLOAT.fullmatch(plain):
        value = float(plain)
        # Go's ParseFloat fails on an overflow and yaml.v3 then keeps the text; refuse instead of guessing.
        if math.isinf(value):
            raise YamlProblem(line, f"the number {text[:24]} is too large for a float; write a smaller number")
        return value
    return text


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with yaml.v3's scalar resolution and its refusal of duplicate keys."""

    paths: dict[int, str] = {}

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode and implicit[0]:
            return _MERGE_TAG if value == "<<" else _PLAIN_TAG
        return super().resolve(kind, value, implicit)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, MappingNode):
            seen: dict[tuple, int] = {}
            for key, _ in node.value:
                if key.tag == _MERGE_TAG or not isinstance(key, ScalarNode):
                    continue
                ident = (key.value,)
                if ident in seen:
                    raise YamlProblem(_line(key), f"the key {key.value!r} is given twice (first on line "
                                      f"{seen[ident]}); the Pulumi CLI refuses the file: keep one",
                                      self.paths.get(id(node), ""))
                seen[ident] = _line(key)
        return super().construct_mapping(node, deep=deep)


def _construct_plain(loader: _Loader, node: ScalarNode):
    try:
        return resolve_plain(node.value, _line(node))
    except YamlProblem as err:
        raise YamlProblem(err.line, err.message, loader.paths.get(id(node), "")) from None


_Loader.add_constructor(_PLAIN_TAG, _construct_plain)


def _paths(root) -> dict[int, str]:
    """id(node) -> dotted key path, for naming the field of a problem (the first path wins under aliases)."""
    out: dict[int, str] = {}
    stack = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in out:
            continue
        out[id(node)] = path
        if isinstance(node, MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key, ScalarNode) else "?"
                stack.append((value, f"{path}.{name}" if path else name))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
    return out


def load(text: str):
    """The document in `text`; yaml.YAMLError for bad syntax, YamlProblem for what the readers would differ on."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        loader.paths = _paths(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
