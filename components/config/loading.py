"""Reading and validating stack files: every problem reported with its field, rule and fix."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from components.config.project import SETTINGS_KEY, STACKS_DIR
from components.config.root import Settings


# --------------------------------------------------------------------------------------------- loading
class Problem(BaseModel):
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class SettingsError(Exception):
    """All problems found in a stack's settings, each naming the field, the rule and a fix."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("invalid verl-ack settings:\n" + "\n".join(f"  - {p}" for p in problems))


def _pydantic_problems(err: ValidationError) -> list[Problem]:
    out = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "settings"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown setting (check the spelling against stacks/stack.schema.json)"
        out.append(Problem(field=loc, message=msg))
    return out


def validate_settings(raw: dict) -> Settings:
    """Validate raw settings field by field; raise SettingsError listing every problem.

    The GPU-layout rules need the model presets and run after this (`components.model.parse_settings`)."""
    try:
        return Settings.model_validate(raw)
    except ValidationError as err:
        raise SettingsError(_pydantic_problems(err)) from None


def stack_file(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    return STACKS_DIR / f"Pulumi.{name_or_path}.yaml"


def read_stack_config(name_or_path: str | Path) -> dict:
    """The `config:` map of a stack file (secure values stay encrypted dicts)."""
    path = stack_file(name_or_path)
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path}; stacks are stacks/Pulumi.<name>.yaml")
    doc = yaml.safe_load(path.read_text()) or {}
    return doc.get("config") or {}


def raw_settings(name_or_path: str | Path) -> dict:
    """The `verl-ack:settings` object of a stack file, unvalidated."""
    raw = read_stack_config(name_or_path).get(SETTINGS_KEY)
    if raw is None:
        raise SettingsError([Problem(field=SETTINGS_KEY, message="missing: the stack file needs this structured key")])
    return raw
