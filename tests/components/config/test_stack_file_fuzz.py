"""Fuzz: a stack file mutated as text (a value retyped, a line doubled, dropped or re-indented) is either valid
settings or a SettingsError whose every problem names a field or the file and says something; never another
exception. A few mutants also go through plan.py: exit 0 or 2, never a traceback."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plan
from components.config import STACKS_DIR, SettingsError, raw_settings
from components.config.yamlread import load, resolve_plain
from components.model import parse_settings

STACK_TEXTS = {name: (STACKS_DIR / f"Pulumi.{name}.yaml").read_text() for name in ("dev", "existing-ecs", "dev-platform")}
BOUNDED = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
# Values a person types by accident and the forms two YAML readers take differently.
TRICKY = ["1:30", "017", "0x18", "0o17", "0b11", "1_000", "08", "yes", "No", "on", "OFF", "y", "~", "null", "''",
          "9" * 5000, "-" + "9" * 30, ".inf", "-.inf", ".nan", "1e999", "1e3", "1.", ".5", "-0", "+7", "2024-01-01",
          "2024-01-01 10:00:00", "[]", "{}", "[1, [2, [3]]]", "!!binary aGk=", "!!set {a}", "!!str 017", "'017'",
          "\"\\u0000\"", "&a x", "*a", "|\n  multi", ">-", "{a: 1, a: 2}", "'unterminated", "\t1", "- x", "key: v",
          "sha256:" + "0" * 64, "ap-southeast-10a", "cn-hangzhouh", "hf_abcdefghijklmnopq", "verl-ack:settings"]


def _mutate(text: str, data) -> str:
    lines = text.splitlines()
    body = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    i = data.draw(st.sampled_from(body))
    line = lines[i]
    kind = data.draw(st.sampled_from(["value", "double", "drop", "indent", "key"]))
    if kind == "value" and ":" in line:
        key = line.split(":", 1)[0]
        lines[i] = f"{key}: {data.draw(st.sampled_from(TRICKY))}"
    elif kind == "double":
        lines.insert(i, line)
    elif kind == "drop":
        del lines[i]
    elif kind == "indent":
        lines[i] = " " * data.draw(st.integers(0, 8)) + line.lstrip()
    else:
        lines[i] = line.replace(line.strip().split(":", 1)[0], data.draw(st.sampled_from(TRICKY)), 1)
    return "\n".join(lines) + "\n"


def _check(problems) -> None:
    for p in problems:
        assert p.field and p.message, p


@BOUNDED
@given(stack=st.sampled_from(sorted(STACK_TEXTS)), data=st.data())
def test_a_mutated_stack_file_is_valid_settings_or_problems_never_an_exception(tmp_path_factory, stack, data):
    path = tmp_path_factory.mktemp("fuzz") / "Pulumi.fuzz.yaml"
    path.write_text(_mutate(STACK_TEXTS[stack], data))
    try:
        parse_settings(raw_settings(path))
    except SettingsError as err:
        _check(err.problems)


@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_plan_py_on_a_mutated_stack_file_exits_0_or_2_without_a_traceback(tmp_path_factory, capsys, data):
    work = tmp_path_factory.mktemp("fuzzplan")
    path = work / "Pulumi.fuzz.yaml"
    path.write_text(_mutate(STACK_TEXTS["dev"], data))
    assert plan.main(["--config-file", str(path), "--out", str(work / "out")]) in (0, 2)
    assert "Traceback" not in capsys.readouterr().err


@BOUNDED
@given(text=st.text(alphabet=st.sampled_from("0123456789+-._:eExXoObB abcyesnoONtrufalTRUFALS~"), max_size=40))
def test_every_plain_scalar_resolves_or_is_refused_with_a_message(text):
    try:
        resolve_plain(text)
    except Exception as err:  # noqa: BLE001 (the property: only YamlProblem)
        assert type(err).__name__ == "YamlProblem" and str(err), err


def test_the_reader_follows_the_pulumi_clis_yaml_where_yaml_1_1_differs():
    assert load("a: 1:30\nb: yes\nc: on\nd: 1e3\ne: y\nf: True\ng: ~\n") == {
        "a": "1:30", "b": "yes", "c": "on", "d": 1000.0, "e": "y", "f": True, "g": None}
