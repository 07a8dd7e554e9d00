"""The task's CPU proof, run by the plan and by `pulumi preview` in a subprocess of its own (components/task_check.py):
the job's reward on examples, the researcher's tools loaded as verl loads them.

    python -I verl_ack_task_check.py SPEC.json      # prints one JSON result line

The folder holding this file is laid out as the job's ConfigMap is (verl_ack_reward.py, the task's reward file as
verl_ack_task_reward.py, the sandbox reward, the tools), so what runs here is what the Ray pods import. verl's
package `__init__` files import torch and Ray; the scorers (verl.utils.reward_score), the tool schemas and BaseTool
do not, so `verl` and its subpackages are bound to the installed folders without running those `__init__` files.

The spec: {"checks": [{"name", "data_source", "solution_str", "ground_truth", "extra_info", "score"}], "reward_kwargs":
{...}, "reward_file": bool, "function": name, "tools": [{"module", "class"}], "functions_module": name or null,
"data_sources": [...], "datasets": [{"field", "path", "location"}], "rows_only": bool}. A sandbox reward runs its
harness here against a local stand-in of `run_code_once` (a subprocess of this one, with the harness's own per-test
limits).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import math
import subprocess
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERL_PACKAGES = ("verl", "verl.utils", "verl.tools")
TOLERANCE = 1e-6
ANSWER_TOOL = "calc_gsm8k_reward"  # the answer tool's name (components/workloads/training/config_names.py GSM8K_TOOL)


def bind_verl() -> str | None:
    """Binds verl's packages to the installed folders without running their __init__; the missing package's name
    when verl is not installed."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return "verl"
    root = Path(list(spec.submodule_search_locations)[0])
    for name in VERL_PACKAGES:
        module = types.ModuleType(name)
        module.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
        sys.modules[name] = module
    # BaseTool's module decorates its methods with rollout tracing, whose module imports Ray (utils/ray_utils.py) at
    # import time; the decorator only wraps calls (it traces a rollout when one is being traced), so the check, which
    # imports and builds a tool and never runs a rollout, binds it to a pass-through.
    trace = types.ModuleType("verl.utils.rollout_trace")
    trace.rollout_trace_op = lambda fn: fn
    sys.modules["verl.utils.rollout_trace"] = trace
    return None


def local_run_code(code: str, config: dict) -> str:
    """A stand-in of the sandbox manager's run_code_once: runs the program here and returns its stdout."""
    run = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                         timeout=float(config.get("timeout_seconds", 60)) + 5)
    return run.stdout


def missing_module(err: BaseException) -> str | None:
    return getattr(err, "name", None) if isinstance(err, ModuleNotFoundError) else None


def check_reward(spec: dict, out: dict) -> None:
    import verl_ack_reward as reward

    task_reward = spec["reward_kwargs"].get("task_reward")
    if task_reward:  # the ConfigMap's mount path in the pods; this folder here
        task_reward["path"] = str(HERE / Path(task_reward["path"]).name)

    if spec.get("sandbox"):
        import verl_ack_sandbox_reward as sandbox

        sandbox.run_in_sandbox = local_run_code
    if spec.get("reward_file"):
        fn = reward.load_task_reward(str(HERE / "verl_ack_task_reward.py"), spec["function"])
        params = inspect.signature(fn).parameters
        try:
            inspect.signature(fn).bind("src", "text", "truth", {}, **spec["reward_kwargs"]["task_reward"]["kwargs"])
        except TypeError as err:
            out["problems"].append(["task.reward.function", f"{spec['function']}{inspect.signature(fn)} cannot be "
                                    f"called as verl calls it (data_source, solution_str, ground_truth, extra_info, "
                                    f"**kwargs): {err}"])
            return
        out["signature"] = f"{spec['function']}({', '.join(params)})"
    for source in spec.get("data_sources") or []:
        try:
            from verl.utils.reward_score import default_compute_score

            default_compute_score(source, "", "0")
        except NotImplementedError:
            out["problems"].append(["task.reward.builtin", f"verl's default_compute_score has no scorer for "
                                    f"data_source {source!r} (the rows of your dataset); give a reward file"])
        except Exception:  # noqa: BLE001 (a scorer that exists may still dislike an empty answer)
            pass
    for check in spec["checks"]:
        try:
            result = reward.compute_score(check["data_source"], check["solution_str"], check["ground_truth"],
                                          dict(check["extra_info"]), **spec["reward_kwargs"])
            score = result["score"] - result["tool_reward"]
        except Exception as err:  # noqa: BLE001 (each failure is reported by name)
            name = missing_module(err)
            why = (f"imports {name}, which is not installed here" if name else f"raised {type(err).__name__}: {err}")
            out["problems"].append([check["field"], f"{check['name']}: the reward {why}"])
            continue
        ok = isinstance(score, float) and math.isfinite(score) and abs(score - check["score"]) <= TOLERANCE
        out["checks"].append({"name": check["name"], "score": score, "want": check["score"], "ok": ok})
        if not ok:
            out["problems"].append([check["field"], f"{check['name']}: the reward returned {score!r}, the check "
                                    f"expects {check['score']!r}"])


def check_tools(spec: dict, out: dict) -> None:
    from verl.tools.schemas import OpenAIFunctionToolSchema

    try:
        from verl.tools.base_tool import BaseTool
    except Exception:  # noqa: BLE001 (its tracing helper may need packages the plan has not)
        BaseTool = None
    for tool in spec.get("tools") or []:
        field = tool["field"]
        module = importlib.import_module(tool["module"])
        cls = getattr(module, tool["class"], None)
        if not isinstance(cls, type):
            out["problems"].append([field, f"{tool['file']} has no class {tool['class']!r}"])
            continue
        if BaseTool is not None and not issubclass(cls, BaseTool):
            out["problems"].append([field, f"{tool['class']} is not a verl BaseTool subclass"])
            continue
        schema = None
        if tool.get("schema") is not None:
            try:
                schema = OpenAIFunctionToolSchema.model_validate(tool["schema"])
            except Exception as err:  # noqa: BLE001 (pydantic's error says which key)
                out["problems"].append([field, f"its schema is not an OpenAI function schema verl accepts: {err}"])
                continue
        # As verl's tool registry builds it in every agent-loop worker (tools/tool_registry.py
        # initialize_tools_from_config): cls(config=<the tool's config>, tool_schema=<the validated schema or None>).
        try:
            instance = cls(config={"type": "native", **(tool.get("config") or {})}, tool_schema=schema)
        except Exception as err:  # noqa: BLE001 (the researcher's constructor: its own error, named)
            out["problems"].append([field, f"{tool['class']}(config=..., tool_schema=...) raised "
                                    f"{type(err).__name__}: {err}"])
            continue
        name = getattr(instance, "name", None) or (schema.function.name if schema else tool["class"])
        out["tools"].append(str(name))
    name = spec.get("functions_module")
    if name:
        try:
            from verl.tools.function_tool import load_function_tools_from_path
        except ModuleNotFoundError as err:  # verl derives a function's schema with transformers' get_json_schema
            out["warnings"].append(["task.tools", f"{spec['functions_file']}: not checked here: verl builds a "
                                    f"@function_tool's schema with {err.name}, which is not installed where the plan "
                                    "runs; the job's image loads it at start (install it here to check it first)"])
            return

        tools = load_function_tools_from_path(str(HERE / f"{name}.py"))
        if not tools:
            out["problems"].append(["task.tools", f"{spec['functions_file']} defines no @function_tool function"])
        out["tools"] += [t.name for t in tools]


def check_datasets(spec: dict, out: dict) -> None:
    """Every row of the task's local files, by the dataset Job's own rule (pipeline/rows.py, copied beside this file:
    the pod's code is read here, never imported by the program)."""
    import rows

    for item in spec.get("datasets") or []:
        try:
            summary = rows.check_parquet(item["path"])
        except (rows.RowError, OSError) as err:
            out["problems"].append([item["field"], str(err).replace(item["path"], item["location"])])
            continue
        if spec.get("answer_tool"):  # the answer tool reads each tool row's ground truth from its tools_kwargs
            table, _ = rows.read_parquet_rows(item["path"])
            lacking = [i for i, r in enumerate(table) if r.get("agent_name") == "tool_agent" and (
                ((((r.get("extra_info") or {}).get("tools_kwargs") or {}).get(ANSWER_TOOL) or {})
                 .get("create_kwargs") or {}).get("ground_truth") is None)]
            if lacking:
                out["problems"].append([item["field"], f"{item['location']}: row {lacking[0]} (and {len(lacking) - 1} "
                                        f"more), column extra_info.tools_kwargs.{ANSWER_TOOL}.create_kwargs."
                                        "ground_truth: missing; the answer tool checks answers against it (task.tools "
                                        "lists answer)"])
        out["datasets"].append({"field": item["field"], "location": item["location"], "rows": summary.rows,
                                "data_sources": summary.data_sources, "agent_names": summary.agent_names,
                                "prompt_chars": summary.prompt_chars})


def check_hub_examples(spec: dict, out: dict) -> None:
    """A hub dataset's conversion function on the stack's raw examples: each row it returns is checked by the dataset
    Job's own rule and must carry the data_source the stack names."""
    import rows

    hub = spec.get("hub")
    if not hub:
        return
    field = "task.dataset.hub"
    path = HERE / hub["file"]
    try:
        module_spec = importlib.util.spec_from_file_location("verl_ack_task_script", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 (the researcher's script: its own error, named)
        name = missing_module(err)
        out["problems"].append([f"{field}.script", f"imports {name}, which is not installed here" if name else
                                f"failed to load: {type(err).__name__}: {err}"])
        return
    fn = getattr(module, hub["function"], None)
    if not callable(fn):
        out["problems"].append([f"{field}.function", f"{hub['script']} has no function {hub['function']!r}"])
        return
    kept = 0
    for i, example in enumerate(hub["examples"]):
        where = f"{field}.examples[{i}]"
        try:
            row = fn(dict(example), i, "train")
        except Exception as err:  # noqa: BLE001
            out["problems"].append([where, f"{hub['function']} raised {type(err).__name__}: {err}"])
            continue
        if row is None:
            continue  # dropped, as the Job drops it
        found = rows.row_problem(row)
        if found:
            out["problems"].append([where, f"the row {hub['function']} returns: column {found[0]}: {found[1]}"])
        elif row["data_source"] != hub["data_source"]:
            out["problems"].append([where, f"the row carries data_source {row['data_source']!r}; "
                                    f"task.dataset.hub.data_source says {hub['data_source']!r}"])
        else:
            kept += 1
    out["hub_rows"] = kept


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    sys.path.insert(0, str(HERE))
    out: dict = {"problems": [], "warnings": [], "checks": [], "tools": [], "datasets": [], "missing": None}
    check_datasets(spec, out)
    check_hub_examples(spec, out)
    missing = None if spec.get("rows_only") else bind_verl()
    if spec.get("rows_only"):
        pass
    elif missing:
        out["missing"] = missing
        out["problems"].append(["task.reward", "verl 0.9.1 is not installed here, so the task's reward cannot be "
                                "run on its examples: install it without its dependencies (`pip install --no-deps "
                                "-r requirements-verl.txt`, as `make setup` does)"])
    else:
        reward_field = "task.reward.file" if spec.get("reward_file") else "task.reward"
        for step, field in ((check_reward, reward_field), (check_tools, "task.tools")):
            try:
                step(spec, out)
            except Exception as err:  # noqa: BLE001 (the file's own import error, reported by field)
                name = missing_module(err)
                why = (f"imports {name}, which is not installed here: install it where the plan runs, or check "
                       "that the job's image has it" if name else f"failed to load: {type(err).__name__}: {err}")
                out["problems"].append([field, why])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
