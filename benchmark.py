#!/usr/bin/env python3
"""Benchmark the offline plan: what importing the SDKs costs, how long the dev stack's plan takes, and how
plan time and resource count grow with the GPU layout (1 to 64 nodes) and the sandbox pool (3 to 1024); and the
modelled time to the first step of the dev-platform + dev-grpo pair against its targets.

    python benchmark.py [--json out/bench.json] [--repeat 3]

Times are medians of `--repeat` runs on this machine (printed with the table); the resource counts are the
figures to compare across machines. tests/test_scaling.py asserts the counts, never the times.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))

try:
    from components.config import PROJECT, SETTINGS_KEY, STACKS_DIR, read_stack_config
    from components.model import parse_settings
    from offline.engine import run_program
    from offline.plan import build_plan, stack_config
except ImportError as _missing:  # run outside the project's virtualenv: say what to run, not a traceback
    from offline.venv_hint import exit_without_venv

    exit_without_venv(_missing, "benchmark.py")

SDK_MODULES = ["pulumi", "pulumi_alicloud", "pulumi_kubernetes"]
GPU_NODES = [1, 4, 16, 64]
SANDBOX_POOLS = [3, 32, 256, 1024]
GPU_STACK = "multinode"  # Ray worker groups: the layout that could grow per node
SANDBOX_STACK = "dev"


def merge(base: dict, overrides: dict) -> dict:
    """Deep-merge `overrides` into a copy of `base` (nested dicts merge, everything else replaces)."""
    out = copy.deepcopy(base)
    for k, v in overrides.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def gpu_overrides(nodes: int, gpus_per_node: int = 8, rollout_n: int = 8, micro: int = 4) -> dict:
    """Settings for `nodes` GPU nodes that keep verl's batch rules valid: with N GPUs, train_batch_size
    B = max(64, N) and mini batch B/2 make B*n a multiple of N (rule 1) and give every GPU a mini batch of
    4*B/N samples, a multiple of the 7B preset's micro batch of 4 (rule 5)."""
    world = nodes * gpus_per_node
    batch = max(64, world)
    mini = batch // 2
    assert (batch * rollout_n) % world == 0 and (mini * rollout_n // world) % micro == 0
    return {"gpu_pool": {"nodes": nodes}, "training": {"train_batch_size": batch, "ppo_mini_batch_size": mini}}


def sandbox_overrides(pool: int) -> dict:
    """A warm pool of `pool` sandboxes (SandboxSet replicas between pool_min and pool_cap)."""
    return {"sandbox": {"pool_cap": pool, "pool_min": pool}}


def run_stack(stack: str, overrides: dict | None = None):
    """Run __main__.py for a stack plus overrides under the recording engine; return the recording."""
    config, secret_keys, _ = stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    raw = merge(read_stack_config(stack)[SETTINGS_KEY], overrides or {})
    parse_settings(raw)  # invalid overrides fail here with the settings error
    config[SETTINGS_KEY] = json.dumps(raw)
    return run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack)


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def import_seconds(module: str, repeat: int) -> float:
    """Median wall time of a fresh interpreter that imports `module` (or nothing, for module='')."""
    code = f"import {module}" if module else "pass"
    return timed(lambda: subprocess.run([sys.executable, "-c", code], check=True), repeat)[0]


def program_sdk_modules() -> list[str]:
    """The SDK modules a plan run actually loaded in this process. pulumi_alicloud and pulumi_kubernetes
    register every subpackage lazily (importlib LazyLoader) and execute one only when the program touches
    it, so `import pulumi_alicloud` alone is not what the program pays."""
    return sorted(name for name, mod in list(sys.modules.items())
                  if name.startswith(("pulumi_alicloud.", "pulumi_kubernetes.")) and type(mod) is types.ModuleType)


def load_modules_code(modules: list[str]) -> str:
    """Python code that imports `modules` and forces lazily-registered ones to execute."""
    return f"import importlib\nfor m in {modules!r}:\n    getattr(importlib.import_module(m), '__file__', None)\n"


def machine() -> dict:
    return {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "platform": platform.platform()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    result: dict = {"machine": machine(), "repeat": args.repeat}
    m = result["machine"]
    print(f"machine: {m['processor']}, {m['cpus']} CPUs, Python {m['python']}, {m['platform']}")

    baseline = import_seconds("", args.repeat)
    result["imports"] = {"python_startup_s": round(baseline, 3)}
    print(f"\n(a) import cost, fresh interpreter, median of {args.repeat} (python startup {baseline:.3f} s):")
    print("| module | wall s | minus startup s |\n|---|---|---|")
    for mod in SDK_MODULES:
        t = import_seconds(mod, args.repeat)
        result["imports"][mod] = {"wall_s": round(t, 3), "net_s": round(t - baseline, 3)}
        print(f"| {mod} | {t:.3f} | {t - baseline:.3f} |")

    with tempfile.TemporaryDirectory() as tmp:
        t, plan = timed(lambda: build_plan(STACKS_DIR / "Pulumi.dev.yaml", "dev", Path(tmp) / "dev"), args.repeat)
    used = program_sdk_modules()
    code = load_modules_code(["pulumi", *used])
    t_used = timed(lambda: subprocess.run([sys.executable, "-c", code], check=True), args.repeat)[0]
    packages = sorted(m for m in used if m.count(".") == 1 and hasattr(sys.modules[m], "__path__"))
    result["imports"]["program_sdk_modules"] = {"modules": len(used), "subpackages": packages,
                                                "wall_s": round(t_used, 3), "net_s": round(t_used - baseline, 3)}
    names = ", ".join(p.split(".", 1)[1] for p in packages)
    print(f"| pulumi + the {len(used)} SDK modules the dev plan loads ({names}) | {t_used:.3f} | "
          f"{t_used - baseline:.3f} |")
    result["dev_plan"] = {"wall_s": round(t, 3), "resources": len(plan["resources"]),
                          "manifests": len(plan["manifests"])}
    print(f"\n(b) offline plan of the dev stack (plan.build_plan, in process, SDKs already imported): "
          f"{t:.3f} s median, {len(plan['resources'])} resources, {len(plan['manifests'])} manifests")

    def scale(title: str, stack: str, values: list[int], overrides, label: str) -> list[dict]:
        print(f"\n{title} ({stack} stack, program run under the recording engine, median of {args.repeat}):")
        print(f"| {label} | resources | wall s |\n|---|---|---|")
        rows = []
        for v in values:
            t, rec = timed(lambda v=v: run_stack(stack, overrides(v)), args.repeat)
            rows.append({label: v, "resources": len(rec.resources), "wall_s": round(t, 3)})
            print(f"| {v} | {len(rec.resources)} | {t:.3f} |")
        return rows

    result["gpu_scaling"] = scale("(c) GPU nodes", GPU_STACK, GPU_NODES, gpu_overrides, "gpu_nodes")
    result["sandbox_scaling"] = scale("(c) sandbox pool", SANDBOX_STACK, SANDBOX_POOLS, sandbox_overrides,
                                      "sandbox_pool")
    result["split"] = split_figures_report()
    result["total_s"] = round(time.perf_counter() - started, 1)
    print(f"\nbenchmark took {result['total_s']} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def split_figures_report() -> dict:
    """(d) The modelled time to the first step of the dev-platform + dev-grpo pair, against its targets (ESTIMATE,
    docs/latency.md): a new platform + experiment, and an experiment on a warm platform."""
    with tempfile.TemporaryDirectory() as tmp:
        latency = build_plan(STACKS_DIR / "Pulumi.dev-grpo.yaml", "dev-grpo", Path(tmp) / "x")["sections"]["latency"]
    split = latency["split"]
    print("\n(d) modelled time to first step, dev-platform + dev-grpo (ESTIMATE, not a measurement):")
    print("| figure | minutes |\n|---|---|")
    for key in ("fresh_first_step_minutes", "chain_minutes", "gpu_avoidable_idle_minutes", "warm_first_step_minutes",
                "sequential_first_step_minutes"):
        print(f"| {key} | {split[key]:.1f} |")
    print(f"| repeat_first_step_minutes | {latency['staging']['repeat_first_step_minutes']:.1f} |")
    for target in latency["targets"]:  # the plan's own targets and verdicts (offline/report/latency/targets.py)
        print(f"| target: {target['target']} | {target['status']} |")
    return split


if __name__ == "__main__":
    sys.exit(main())
