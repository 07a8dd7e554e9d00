"""Every stack file in stacks/ validates, the editor schema is current, and no secret sits in plaintext."""

import json

import jsonschema
import yaml

from components.config import PROJECT, SECRET_KEYS, STACKS_DIR
from components.config.docs import SCHEMA_PATH, SETTINGS_DOC, refresh_settings_doc, render_schema
from components.model import load_stack


def test_every_stack_file_validates_with_the_settings_model_and_layout_rules(stack_name):
    s = load_stack(stack_name)
    assert s.name


def test_every_stack_file_validates_against_the_generated_json_schema(stack_name):
    schema = json.loads(SCHEMA_PATH.read_text())
    doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack_name}.yaml").read_text())
    jsonschema.validate(doc, schema)


def test_generated_schema_is_up_to_date_run_python_m_components_config_to_refresh():
    assert SCHEMA_PATH.read_text() == render_schema(), "stale: run `python -m components.config`"


def test_stack_files_point_editors_at_the_schema(stack_name):
    first = (STACKS_DIR / f"Pulumi.{stack_name}.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./stack.schema.json"


def test_secret_keys_in_stack_files_are_only_ever_encrypted(stack_name):
    config = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack_name}.yaml").read_text())["config"]
    for key in SECRET_KEYS:
        value = config.get(f"{PROJECT}:{key}")
        assert value is None or (isinstance(value, dict) and set(value) == {"secure"}), key


def test_schema_rejects_a_plaintext_secret():
    schema = json.loads(SCHEMA_PATH.read_text())
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    doc["config"][f"{PROJECT}:sandboxApiKey"] = "plaintext-key"
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError:
        return
    raise AssertionError("a plaintext secret passed the stack schema")


def test_every_setting_has_a_description():
    schema = json.loads(SCHEMA_PATH.read_text())
    missing = []
    for name, d in schema["$defs"].items():
        for prop, spec in d.get("properties", {}).items():
            if "description" not in spec:
                missing.append(f"{name}.{prop}")
    root = schema["properties"]["config"]["properties"][f"{PROJECT}:settings"]["properties"]
    missing += [p for p, spec in root.items() if "description" not in spec]
    assert missing == []


def test_settings_doc_tables_are_current_run_make_schema_to_refresh():
    from components.model.presets import render_presets_table

    text = SETTINGS_DOC.read_text()
    assert refresh_settings_doc(text, render_presets_table()) == text, "stale docs/settings.md tables: run `make schema`"
