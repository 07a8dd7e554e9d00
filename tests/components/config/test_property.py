"""Property: whatever a stack file holds, the settings either validate or come back as problems with a field path.

Each example takes a valid stack, replaces one value (a leaf, a section, or a setting the stack leaves at its
default) with a hostile one of a random type, and checks that `parse_settings` accepts it or raises SettingsError
whose every problem names a field and says something, never any other exception. A few refused ones go through
`plan.py` as stack files: exit status 2 and nothing written.
"""

from __future__ import annotations

import copy
import math
import typing
from pathlib import Path

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import plan
from components.config import SETTINGS_KEY, STACKS_DIR, Settings, SettingsError, read_stack_config
from components.model import parse_settings

STACK_NAMES = ("dev", "multinode", "existing-ecs")
STACKS = {name: read_stack_config(name)[SETTINGS_KEY] for name in STACK_NAMES}
# Bounded, deterministic and without a local example database: the same examples in CI and on a laptop.
BOUNDED = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _paths(raw, prefix=()):
    """Every place of a stack's settings: sections, lists and leaves."""
    yield prefix
    if isinstance(raw, dict):
        for key, value in raw.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(raw, list):
        for i, value in enumerate(raw):
            yield from _paths(value, (*prefix, i))


def _model_paths(model: type[BaseModel], prefix=()):
    """Every setting of the model, including those the stacks leave at their defaults."""
    for name, field in model.model_fields.items():
        yield (*prefix, name)
        for arg in typing.get_args(field.annotation) or (field.annotation,):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                yield from _model_paths(arg, (*prefix, name))


PATHS = sorted({p for raw in STACKS.values() for p in _paths(raw) if p} | set(_model_paths(Settings)), key=repr)

SHELL = "$`;|&<>()'\"\\ \n*?[]{}~#!"
NON_ASCII_DIGITS = "\u0660\u0661\u06f1\u0966\uff11\u00b2\u2460"
scalars = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**400, 0, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0]),
    st.text(alphabet=st.sampled_from("ab1.-" + SHELL), max_size=12),
    st.text(alphabet=st.sampled_from("123." + NON_ASCII_DIGITS), min_size=1, max_size=8),
    st.sampled_from(["3.17.2$(id)", "`id`", "123", "true", "null", "1e5", "nan", "", " ", "\x00", "\ud800"]),
    st.text(max_size=20),
    st.none(),
    st.booleans(),
    st.dates(),
    st.datetimes(),
    st.binary(max_size=8),
    st.frozensets(st.integers(0, 3), max_size=3).map(set),
)
bad_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.one_of(st.text(max_size=6), st.integers(0, 9)), inner, max_size=3)),
    max_leaves=6)


def _mutate(raw: dict, path: tuple, value) -> dict:
    raw = copy.deepcopy(raw)
    node = raw
    for key, nxt in zip(path[:-1], path[1:], strict=True):
        if isinstance(node, list):
            node.extend([None] * (key + 1 - len(node)))
        child = node[key] if isinstance(node, list) else node.get(key)
        want = list if isinstance(nxt, int) else dict  # the chosen stack may lack the list another stack has
        if not isinstance(child, want):
            child = want()
            node[key] = child
        node = child
    if isinstance(node, list):
        node.extend([None] * (path[-1] + 1 - len(node)))
    node[path[-1]] = value
    return raw


mutations = st.tuples(st.sampled_from(STACK_NAMES), st.sampled_from(PATHS), bad_values).map(
    lambda t: _mutate(STACKS[t[0]], t[1], t[2]))


def _outcome(raw) -> SettingsError | None:
    try:
        parse_settings(raw)
    except SettingsError as err:
        return err
    return None


@BOUNDED
@given(mutations)
def test_a_stack_with_any_hostile_value_validates_or_lists_problems_with_field_paths(raw):
    err = _outcome(raw)
    if err is not None:
        assert err.problems
        for p in err.problems:
            assert p.field.strip() and p.message.strip(), p


@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
@given(mutations)
def test_plan_refuses_a_stack_file_with_a_hostile_value_exit_2_and_writes_nothing(tmp_path_factory, raw):
    assume(_outcome(raw) is not None)
    work = tmp_path_factory.mktemp("plan")
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    doc["config"][SETTINGS_KEY] = raw
    stack_file = Path(work) / "Pulumi.hostile.yaml"
    stack_file.write_text(yaml.safe_dump(doc, allow_unicode=False), encoding="utf-8")
    out = Path(work) / "out"
    assert plan.main(["--config-file", str(stack_file), "--out", str(out)]) == 2
    assert not out.exists()

