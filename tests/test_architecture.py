"""The shape of the house: which package may import which, no import cycle, no hub module, one list of secrets.

The directions (docs/architecture.md):
- components/config is a leaf: it imports nothing else of the repo;
- components/model is pure (no Pulumi) and imports only components/config;
- components/ never imports offline/ (reports, estimates, the engine), pipeline/ (in-cluster code) or the tools;
- pipeline/ and agent_tools/ run in pods and import nothing of the repo but themselves;
- keeper/ (what teardown.py keeps) uses only pipeline's OSS client;
- imports inside functions do not hide cycles: within components/ and offline/ every import of the repo is at
  module level, so the graph below is the whole graph.
"""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from components.config import PROJECT, SECRET_KEYS
from components.config.secrets import Secrets, field_name

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("components", "offline", "pipeline", "agent_tools", "keeper")
TOP_LEVEL = ("__main__", "plan", "teardown", "benchmark")
REPO_ROOTS = set(PACKAGES) | set(TOP_LEVEL) | {"tests", "tools", "image", "policy"}
MAX_LINES = 500
SIZE_REASON = "Longer than 500 lines because"


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out = {name: REPO / f"{name}.py" for name in TOP_LEVEL}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            out[_module_name(path)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module imported, at module level?) for every import of the repo in a file."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from pkg import sub` imports the submodule when one exists
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for name in names:
            if name.split(".")[0] in REPO_ROOTS:
                found.append((name, id(node) in top))
    return found


GRAPH = {mod: sorted({m for m, _ in _imports(path) if m in MODULES and m != mod}) for mod, path in MODULES.items()}


def _under(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def test_config_is_a_leaf_package():
    bad = [(m, i) for m, deps in GRAPH.items() if _under(m, "components.config") and m != "components.config.__main__"
           for i in deps if not _under(i, "components.config")]
    assert bad == [], "components/config must import nothing else of the repo"


def test_the_model_is_pure_and_depends_on_config_only():
    bad = [(m, i) for m, deps in GRAPH.items() if _under(m, "components.model")
           for i in deps if not (_under(i, "components.model") or _under(i, "components.config"))]
    assert bad == []
    for mod, path in MODULES.items():
        if _under(mod, "components.model"):
            tree = ast.parse(path.read_text())
            imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            assert not imported & {"pulumi", "pulumi_alicloud", "pulumi_kubernetes"}, mod


def test_components_never_import_the_offline_tools_or_in_cluster_code():
    bad = [(m, i) for m, deps in GRAPH.items() if _under(m, "components")
           for i in deps if not _under(i, "components")]
    assert bad == []


@pytest.mark.parametrize("pkg", ["pipeline", "agent_tools"])
def test_in_pod_code_imports_only_itself(pkg):
    bad = [(m, i) for m, deps in GRAPH.items() if _under(m, pkg) for i in deps if not _under(i, pkg)]
    assert bad == []
    assert not any(_under(i, pkg) for m, deps in GRAPH.items() if _under(m, "components") for i in deps)


def test_the_checkpoint_keeper_uses_only_the_oss_client():
    bad = [(m, i) for m, deps in GRAPH.items() if _under(m, "keeper")
           for i in deps if not (_under(i, "keeper") or _under(i, "pipeline"))]
    assert bad == []


def test_no_repo_import_hides_inside_a_function_in_components_or_offline():
    hidden = [(mod, name) for mod, path in MODULES.items() if _under(mod, "components") or _under(mod, "offline")
              if mod != "components.config.__main__"
              for name, top in _imports(path) if not top]
    assert hidden == [], "move the import to the top of the module (an import inside a function hides a cycle)"


def test_there_is_no_import_cycle():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in GRAPH.get(m, []):
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                # A package's __init__ importing its own submodules is not a cycle of the design.
                if not all(_under(x, cycle[0]) or _under(cycle[0], x) for x in cycle):
                    pytest.fail("import cycle: " + " -> ".join(cycle))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def _reached(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        for n in GRAPH.get(m, []):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def test_no_module_imports_the_package_whose_init_imports_it():
    """The cycle test lets a package's __init__ import its own submodules; a submodule that the __init__ reaches and
    that imports its package back (`from components.config import x` inside components/config: Python runs the
    package's __init__ first) then sees half an __init__. Import the module itself."""
    back = []
    for pkg, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        for m in sorted(x for x in _reached(pkg) if _under(x, pkg) and x != pkg):
            tree = ast.parse(MODULES[m].read_text())
            if any(isinstance(n, ast.ImportFrom) and n.level == 0 and n.module == pkg for n in tree.body):
                back.append(f"{m}: from {pkg} import ...")
    assert back == []


def test_no_package_imports_a_command():
    """The top-level scripts (plan.py, teardown.py, benchmark.py, __main__.py) are command lines over the packages:
    a package importing one runs the house from its roof (the plan's build lives in offline/plan.py)."""
    up = [f"{m} -> {n}" for m, deps in GRAPH.items() if any(_under(m, p) for p in PACKAGES)
          for n in deps if n in TOP_LEVEL]
    assert up == []


def test_every_components_args_dataclass_is_keyword_only():
    """A component's `*Args` built by position swaps two values of one type silently when a field moves."""
    import dataclasses
    import importlib

    positional = []
    for mod in sorted(m for m in MODULES if _under(m, "components") and not m.endswith("__main__")):
        for name, obj in vars(importlib.import_module(mod)).items():
            if name.endswith("Args") and dataclasses.is_dataclass(obj) and obj.__module__ == mod:
                positional += [f"{mod}.{name}.{f.name}" for f in dataclasses.fields(obj) if not f.kw_only]
    assert positional == []


def test_no_hub_module_without_a_written_reason():
    big = []
    tools = {f"tools.{p.stem}": p for p in (REPO / "tools").glob("*.py")}
    pack = {f"policy.{p.stem}": p for p in (REPO / "policy").rglob("*.py")}
    for mod, path in {**MODULES, **tools, **pack}.items():
        lines = path.read_text().count("\n")
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > MAX_LINES and SIZE_REASON not in doc:
            big.append(f"{mod}: {lines} lines")
    assert big == [], f"split the module, or say at its top why not ('{SIZE_REASON} ...')"


def test_the_secret_keys_are_declared_once_and_pulumi_yaml_agrees():
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    declared = {k.removeprefix(f"{PROJECT}:"): v for k, v in project["config"].items()}
    assert set(declared) == set(SECRET_KEYS), "Pulumi.yaml config keys != components/config/project.py SECRET_KEYS"
    for key, spec in declared.items():
        assert spec == {"type": "string", "default": "", "description": SECRET_KEYS[key]}, key
    assert [f.name for f in fields(Secrets)] == [field_name(k) for k in SECRET_KEYS]


def test_readme_stays_short_and_wrapped():
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= 10 * 1024, "README.md over 10 KB: move reference material into docs/"
    assert [ln for ln in readme.splitlines() if len(ln) > 120] == []
