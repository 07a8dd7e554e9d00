"""Reading and validating stack files: every problem reported with its field, rule and fix."""

from __future__ import annotations

import datetime
import difflib
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from components.config.project import CONFIG_NAMESPACES, PROJECT, SECRET_KEYS, SETTINGS_KEY, STACKS_DIR
from components.config.root import Settings
from components.config.rules import collecting
from components.config.yamlread import YamlProblem
from components.config.yamlread import load as load_yaml


# --------------------------------------------------------------------------------------------- loading
class Problem(BaseModel):
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class SettingsError(Exception):
    """All problems found in a stack's settings, each naming the field, the rule and a fix. `settings`: the model
    built despite them when only cross-field rules failed (later checks, the GPU layout's, can still run on it)."""

    def __init__(self, problems: list[Problem], settings: Settings | None = None):
        self.problems = problems
        self.settings = settings
        super().__init__("invalid verl-ack settings:\n" + "\n".join(f"  - {p}" for p in problems))


# What YAML turned an unquoted value into, for the messages of a type mismatch.
_YAML_TYPES = {bool: "a bool (true/false/yes/no/on/off)", int: "a number", float: "a number",
               datetime.date: "a date", datetime.datetime: "a timestamp", bytes: "!!binary data", set: "a !!set",
               type(None): "empty (null)", list: "a list", dict: "a mapping"}
# The fix for each kind of pydantic error that carries no rule-specific message of its own.
_REMEDIES = {
    "int_type": "write a whole number such as 8, without quotes or a decimal point",
    "float_type": "write a number such as 0.5",
    "bool_type": "write true or false",
    "list_type": "write a list, e.g. [a, b] or one '- item' line per entry",
    "dict_type": "write a mapping: one 'key: value' line per entry",
    "model_type": "write a mapping: one 'key: value' line per setting of this section",
    "finite_number": "write a finite number (.inf and .nan are not values here)",
    "missing": "add it (stacks/stack.schema.json describes every setting)",
    "literal_error": "use one of the listed values",
    "enum": "use one of the listed values",
    "greater_than": "raise the value", "greater_than_equal": "raise the value",
    "less_than": "lower the value", "less_than_equal": "lower the value",
    "too_short": "add entries", "too_long": "remove entries",
    "string_too_short": "give a longer value", "string_too_long": "shorten the value",
    "recursion_loop": "remove the YAML alias that refers to itself",
}


def _what(value: Any) -> str:
    for kind, text in _YAML_TYPES.items():
        if type(value) is kind:
            return text
    return f"a {type(value).__name__}"


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    """The settings model inside a field's type (Optional[X], dict[str, X], list[X], Annotated[X, ...])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _inner_model(arg)) is not None:
            return found
    return None


def _siblings(loc: tuple) -> list[str]:
    """The setting names allowed beside the last part of `loc` (a dict's keys are skipped on the way)."""
    model: type[BaseModel] | None = Settings
    for part in loc[:-1]:
        field = model.model_fields.get(part) if model is not None and isinstance(part, str) else None
        if field is not None:
            model = _inner_model(field.annotation)
    return list(model.model_fields) if model is not None else []


# A secret written as a setting: the secret keys by their config name and by their field name (sandbox_api_key).
_SECRET_NAMES = {name: key for key in SECRET_KEYS for name in (key, re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower())}


# verl's own names for what the settings model under other names (verl 0.9.1 keys, ../shared/research/verl-task-keys.md):
# a stack file that uses one is told where the program takes it, not "check the spelling". Each target is a real
# settings path (a test walks the model) or starts with "not supported" and says what to do instead.
VERL_CONCEPTS: dict[str, str] = {
    "custom_reward_function": "task.reward (file: your reward's file in the stacks folder, function: its name)",
    "reward_function": "task.reward (file: your reward's file in the stacks folder, function: its name)",
    "compute_score": "task.reward.function",
    "reward_kwargs": "task.reward.kwargs",
    "reward_fn_key": "task.dataset (rows carry data_source; verl's default key)",
    "train_files": "task.dataset.train", "val_files": "task.dataset.val",
    "train_file": "task.dataset.train", "val_file": "task.dataset.val",
    "data_source": "task.dataset (each row's data_source column) and task.reward.checks[].data_source",
    "tool_config_path": "task.tools (answer, code or your own {file, class})",
    "function_tool_path": "task.tools (your own {file} of @function_tool functions)",
    "tools_config": "task.tools", "agent_name": "task.tools ([] = single turn: verl's single_turn_agent)",
    "default_agent_loop": "task.tools ([] = single turn: verl's single_turn_agent)",
    "multi_turn": "task.tools and training.max_assistant_turns",
    "sandbox_fusion": "task.reward.sandbox (the platform's own sandboxes run the tests)",
    "reward_manager": "not supported: the job runs verl's naive reward manager with task.reward; say which manager "
                      "you need in an issue",
    "dataset_name": "task.dataset.preset", "hf_dataset": "task.dataset.preset",
}


def _unknown_setting(loc: tuple) -> str:
    name = str(loc[-1]) if loc else ""
    if tuple(loc) == ("dataset", "name"):
        return ("dataset.name moved: the dataset is task.dataset.preset (gsm8k, math, code) or your own parquet files "
                "(task.dataset.train and val); docs/task.md")
    where = VERL_CONCEPTS.get(name)
    if where:
        if where.startswith("not supported"):
            return f"`{name}` is a verl setting this program does not take ({where})"
        return f"`{name}` is a verl setting this program takes as `{where.split(' ')[0]}`" + (
            f" ({where.split(' ', 1)[1].strip('()')})" if " " in where else "") + "; docs/task.md"
    if name in _SECRET_NAMES:
        key = _SECRET_NAMES[name]
        return (f"a secret written in plaintext under {SETTINGS_KEY}: delete this line and run `pulumi config set "
                f"--secret {key} <value>`, which stores it encrypted, and rotate the value: it has been readable by "
                "anyone with the file")
    near = difflib.get_close_matches(name, _siblings(loc), n=1, cutoff=0.6)
    hint = f"; did you mean `{near[0]}`?" if near else ""
    return f"unknown setting{hint} (check the spelling against stacks/stack.schema.json)"


def _message(e: dict) -> str:
    kind, msg = e["type"], e["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return _unknown_setting(tuple(e["loc"]))
    if kind == "string_type":
        got = e.get("input")
        if isinstance(got, (bool, int, float, datetime.date)):
            return (f"expected text but YAML read {_what(got)} here; quote the value (e.g. \"{got}\") if you mean the "
                    "text")
        return f"expected text, got {_what(got)}; write a plain or quoted string"
    if kind in _REMEDIES:
        got = e.get("input")
        seen = f" (got {_what(got)})" if kind.endswith("_type") else ""
        return f"{msg}{seen}; {_REMEDIES[kind]}"
    return msg


def _pydantic_problems(err: ValidationError) -> list[Problem]:
    out = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "settings"
        out.append(Problem(field=loc, message=_message(e)))
    return out


def validate_settings(raw: dict) -> Settings:
    """Validate raw settings field by field; raise SettingsError listing every problem.

    The GPU-layout rules need the model presets and run after this (`components.model.parse_settings`)."""
    if not isinstance(raw, dict):
        raise SettingsError([Problem(field=SETTINGS_KEY, message=f"must be a mapping of settings, not {_what(raw)}; "
                                     "write `name: ...`, `region: ...` lines under it")])
    check_document(raw, SETTINGS_KEY)
    with collecting() as broken:  # every cross-field rule runs and reports, not only the first (config/rules.py)
        try:
            settings = Settings.model_validate(raw)
        except ValidationError as err:
            raise SettingsError(_pydantic_problems(err) + _rule_problems(broken)) from None
    if broken:
        raise SettingsError(_rule_problems(broken), settings)
    return settings


def _rule_problems(found: list[tuple[str, str]]) -> list[Problem]:
    seen: list[Problem] = []
    for field, message in found:
        p = Problem(field=field, message=message)
        if p not in seen:
            seen.append(p)
    return seen


class StackFileNotFound(FileNotFoundError):
    """No stack file by that name or path; the message says what to type instead."""


def stack_file(name_or_path: str | Path) -> Path:
    """The stack file of a stack name (stacks/Pulumi.<name>.yaml) or a path to one, as a user types either."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or len(p.parts) > 1:
        return p
    return STACKS_DIR / f"Pulumi.{name_or_path}.yaml"


def stack_name(path: Path) -> str:
    """`Pulumi.dev.yaml` -> `dev`: the stack a file configures (its stem for any other name)."""
    name = path.name
    for suffix in (".yaml", ".yml"):
        if name.startswith("Pulumi.") and name.endswith(suffix) and len(name) > len("Pulumi.") + len(suffix):
            return name[len("Pulumi."):-len(suffix)]
    return path.stem


def missing_stack_message(name_or_path: str | Path) -> str:
    path = stack_file(name_or_path)
    known = sorted(stack_name(p) for p in STACKS_DIR.glob("Pulumi.*.yaml"))
    near = difflib.get_close_matches(stack_name(path), known, n=1)
    hint = f"; did you mean `--stack {near[0]}`?" if near else ""
    return (f"no stack file {path}{hint} Give a stack name (one of: {', '.join(known)}) or the path of a stack "
            "file (stacks/Pulumi.<name>.yaml)")


# A stack file is a few hundred values; anything far larger is an alias bomb ("billion laughs") or a mistake.
MAX_VALUES = 100_000
MAX_DEPTH = 64


def check_document(doc: Any, where: str) -> None:
    """Refuse a YAML document whose aliases make it cyclic, too deep or too large once expanded: the settings
    model, json.dumps and Pulumi's config would recurse without end or expand every alias."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: Any, depth: int) -> int:
        if not isinstance(node, (dict, list)):
            return 1
        key = id(node)
        if key in open_:
            raise SettingsError([Problem(field=where, message="a YAML alias refers to a value that contains it (a "
                                         "cycle); replace the alias with the value it should have")])
        if key in sizes:
            return sizes[key]
        if depth > MAX_DEPTH:
            raise SettingsError([Problem(field=where, message=f"values nest deeper than {MAX_DEPTH} levels; a stack "
                                         "file needs a handful, so flatten it")])
        open_.add(key)
        children = list(node.items()) if isinstance(node, dict) else node
        total = 1
        for child in children:
            parts = child if isinstance(node, dict) else (child,)
            for part in parts:
                total += size(part, depth + 1)
                if total > MAX_VALUES:
                    raise SettingsError([Problem(field=where, message=f"expands to more than {MAX_VALUES} values "
                                                 "(YAML aliases repeated inside aliases?); write the values out once")])
        open_.discard(key)
        sizes[key] = total
        return total

    size(doc, 0)


def read_stack_config(name_or_path: str | Path) -> dict:
    """The `config:` map of a stack file (secure values stay encrypted dicts).

    Read as the Pulumi CLI reads it (components/config/yamlread.py): keys without a namespace are the project's,
    as the CLI namespaces them (workspace/loaders.go stackConfigNamespacedWithProject). A file that is not
    UTF-8, not YAML, not a mapping, cyclic or an alias bomb, holds a value the CLI would read differently, a
    duplicate key, an unknown `verl-ack:` key or a plaintext secret raises SettingsError naming the file (and
    line) and the fix; a missing file raises StackFileNotFound."""
    path = stack_file(name_or_path)
    if not path.is_file():
        raise StackFileNotFound(missing_stack_message(name_or_path))
    where = path.name

    def refuse(message: str, field: str = where) -> SettingsError:
        return SettingsError([Problem(field=field, message=message)])

    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise refuse(f"is not UTF-8 text (byte {err.start}); save the file as UTF-8") from None
    except OSError as err:
        raise refuse(f"cannot be read ({err.strerror or err}); give a readable stack file") from None
    try:
        doc = load_yaml(text)
    except YamlProblem as err:
        # Named as the settings model names its fields (job.env), the line to find it in the file after it.
        inside = err.path.removeprefix("config.").removeprefix(f"{SETTINGS_KEY}.")
        field = inside if err.path.startswith(f"config.{SETTINGS_KEY}.") else f"{where}: {err.path or 'document'}"
        raise refuse(f"{err.message} ({where} line {err.line})", field) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise refuse(f"is not valid YAML{at}: {getattr(err, 'problem', None) or err}; fix the syntax") from None
    except RecursionError:
        raise refuse(f"is not valid YAML: values nest deeper than {MAX_DEPTH} levels; flatten them") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise refuse(f"must be a YAML mapping with a `config:` key, not {_what(doc)}; start it with `config:`")
    config = doc.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise refuse(f"must be a mapping of config keys, not {_what(config)}; write `{SETTINGS_KEY}:` under it",
                     f"{where}: config")
    check_document(config, f"{where}: config")
    bad_keys = [k for k in config if not isinstance(k, str)]
    if bad_keys:
        raise refuse(f"has the non-text key(s) {bad_keys!r}; config keys look like {SETTINGS_KEY}", f"{where}: config")
    config = {k if ":" in k else f"{PROJECT}:{k}": v for k, v in config.items()}
    problems = config_key_problems(config)
    if problems:
        raise SettingsError([Problem(field=f"{where}: {p.field}", message=p.message) for p in problems])
    return config


# The keys of this project's namespace: the structured settings and the secret keys (Pulumi.yaml declares them).
PROJECT_KEYS = ("settings", *SECRET_KEYS)


def _is_encrypted(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


def config_key_problems(config: dict) -> list[Problem]:
    """Unknown keys of this project, plaintext secrets and config namespaces no package of the program reads."""
    problems = []
    for key, value in config.items():
        namespace, _, name = key.partition(":")
        if namespace == PROJECT:
            if name not in PROJECT_KEYS:
                near = difflib.get_close_matches(name, PROJECT_KEYS, n=1, cutoff=0.6)
                hint = f"did you mean {PROJECT}:{near[0]}? " if near else ""
                problems.append(Problem(field=key, message=f"unknown config key; {hint}this project reads "
                                        f"{SETTINGS_KEY} and the secret keys {', '.join(SECRET_KEYS)} (Pulumi.yaml)"))
            elif name in SECRET_KEYS and not _is_encrypted(value):
                problems.append(Problem(field=key, message="a secret written in plaintext: delete this line and run "
                                        f"`pulumi config set --secret {name} <value>`, which stores it encrypted "
                                        "(`secure: ...`)"))
            elif name == "settings" and _is_encrypted(value):
                problems.append(Problem(field=key, message="the settings are not a secret (the plan and the reviews "
                                        "read them); write them as plain YAML and keep secrets in the secret keys"))
        elif namespace not in CONFIG_NAMESPACES:
            near = difflib.get_close_matches(namespace, [PROJECT, *CONFIG_NAMESPACES], n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}:{name}? " if near else ""
            problems.append(Problem(field=key, message=f"no package of this program reads the namespace {namespace!r}; "
                                    f"{hint}config keys are {PROJECT}:<key> or one of the packages' "
                                    f"({', '.join(CONFIG_NAMESPACES)})"))
    return problems


def raw_settings(name_or_path: str | Path) -> dict:
    """The `verl-ack:settings` object of a stack file, unvalidated."""
    raw = read_stack_config(name_or_path).get(SETTINGS_KEY)
    if raw is None:
        raise SettingsError([Problem(field=SETTINGS_KEY, message="missing: the stack file needs this structured key "
                                     f"under `config:` (`{SETTINGS_KEY}:` followed by the settings, indented; "
                                     "stacks/Pulumi.dev.yaml is an example)")])
    return raw
