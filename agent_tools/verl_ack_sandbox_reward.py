"""The sandbox reward (`task.reward.sandbox`): the model's program and the row's unit tests run in the platform's
isolated sandboxes, never in a Ray pod.

verl's built-in scorer for code rows (codecontests, apps, codeforces, taco) falls back, without a sandbox_fusion URL,
to `prime_code`, which executes the model's program inside the reward worker's own process (verl 0.9.1
utils/reward_score/__init__.py, prime_code/testing_util.py): in a GPU Ray pod, beside the weights, the bucket mount
and the job's credentials. This reward sends one program per response to the sandbox manager's MCP tool
`run_code_once` (the same server and warm pool the code tool uses): a harness that runs the model's program once per
test case in a subprocess of the sandbox, with the case's stdin (or, for call-based rows, `fn_name` called with the
case's arguments) and a per-test time limit, and prints one result line. The score is the fraction of cases passed
(verl's `continuous=True`), 0 when the response holds no program.

Rows: `reward_model.ground_truth` is JSON `{"inputs": [...], "outputs": [...]}` with an optional `fn_name`
(Eurus-2-RL-Data's code rows, the APPS/TACO layout verl's prime_code reads).

Infrastructure failures (the manager unreachable, a sandbox that cannot be created) are not the model's: they stop
the job with the reason (verl_ack_reward.refuse) rather than score 0.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any, Callable, Optional

RESULT_MARK = "VERL_ACK_TESTS "
_FENCE = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.S)
DEFAULT_TEST_TIMEOUT = 6.0


def extract_program(text: str) -> Optional[str]:
    """The last fenced code block of the model's text (as verl's code scorers take it), or None."""
    blocks = _FENCE.findall(text or "")
    program = blocks[-1].strip() if blocks else ""
    return program or None


def test_cases(ground_truth: str) -> dict:
    """The row's tests: {"inputs": [...], "outputs": [...], optional "fn_name"}; ValueError when not that."""
    try:
        cases = json.loads(ground_truth)
    except (TypeError, json.JSONDecodeError) as err:
        raise ValueError(f"ground_truth is not JSON test cases ({err})") from None
    if not isinstance(cases, dict) or not isinstance(cases.get("inputs"), list) or not isinstance(
            cases.get("outputs"), list) or len(cases["inputs"]) != len(cases["outputs"]) or not cases["inputs"]:
        raise ValueError("ground_truth must hold equally long, non-empty `inputs` and `outputs` lists")
    if cases.get("fn_name") is not None and not isinstance(cases["fn_name"], str):
        raise ValueError("ground_truth fn_name must be a string")
    return cases


# The program run in the sandbox: stdlib only; the model's program and the cases travel as JSON literals.
_HARNESS = r'''
import json, subprocess, sys, tempfile, os
program = json.loads(%(program)s)
cases = json.loads(%(cases)s)
timeout = %(timeout)r
fn = cases.get("fn_name")
path = os.path.join(tempfile.mkdtemp(), "solution.py")
with open(path, "w") as f:
    f.write(program)
def same(out, expected):
    if isinstance(expected, list):
        expected = "\n".join(str(e) for e in expected)
    return str(out).split() == str(expected).split()
passed = 0
for given, expected in zip(cases["inputs"], cases["outputs"]):
    if fn:
        driver = ("import json, sys, runpy\n" "ns = runpy.run_path(%%r)\n" "args = json.loads(sys.stdin.read())\n"
                  "f = ns.get(%%r) or getattr(ns.get('Solution', type('S', (), {}))(), %%r, None)\n"
                  "print(json.dumps(f(*args)))\n") %% (path, fn, fn)
        cmd, stdin = [sys.executable, "-c", driver], json.dumps(given if isinstance(given, list) else [given])
    else:
        cmd, stdin = [sys.executable, path], given if isinstance(given, str) else "\n".join(map(str, given))
    try:
        run = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        continue
    if run.returncode != 0:
        continue
    if fn:
        try:
            want = expected[0] if isinstance(expected, list) and len(expected) == 1 else expected
            ok = json.loads(run.stdout.strip().splitlines()[-1]) == want
        except (ValueError, IndexError):
            ok = False
    else:
        ok = same(run.stdout, expected)
    passed += bool(ok)
print(%(mark)r + json.dumps({"passed": passed, "total": len(cases["inputs"])}))
'''


def harness(program: str, cases: dict, timeout: float = DEFAULT_TEST_TIMEOUT) -> str:
    return _HARNESS % {"program": repr(json.dumps(program)), "cases": repr(json.dumps(cases)),
                       "timeout": float(timeout), "mark": RESULT_MARK}


def parse_result(stdout: str) -> tuple[int, int]:
    """(passed, total) from the harness's result line; ValueError when it printed none."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(RESULT_MARK):
            data = json.loads(line[len(RESULT_MARK):])
            return int(data["passed"]), int(data["total"])
    raise ValueError(f"the sandbox printed no test result (stdout ends {stdout[-200:]!r})")


def _stdout_of(result: Any) -> str:
    """stdout of a run_code_once result (RunCodeResponse: logs.stdout, as structuredContent or JSON text)."""
    data = getattr(result, "structuredContent", None)
    if not isinstance(data, dict):
        text = "\n".join(getattr(p, "text", "") or "" for p in getattr(result, "content", None) or [])
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            return text
    return "".join((data.get("logs") or {}).get("stdout") or [])


# Calls one reward worker process makes at once (each holds a warm sandbox): the code tool's share of the pool.
_SLOTS: dict[int, threading.BoundedSemaphore] = {}


def run_in_sandbox(code: str, config: dict) -> str:
    """stdout of `code` run once in a fresh sandbox through the sandbox manager's MCP tool (config: the tool's
    mcp_servers_config_path, mcp_tool, timeout_seconds, max_concurrency)."""
    limit = int(config.get("max_concurrency", 8))
    with _SLOTS.setdefault(limit, threading.BoundedSemaphore(limit)):
        return _call_sandbox(code, config)


def _call_sandbox(code: str, config: dict) -> str:
    from fastmcp import Client  # the image's, as the code tool's

    with open(config["mcp_servers_config_path"], encoding="utf-8") as f:
        servers = json.load(f)
    timeout = float(config.get("timeout_seconds", 120)) + 30

    async def call() -> Any:
        async with Client(servers, timeout=timeout, init_timeout=30) as client:
            return await client.call_tool_mcp(config.get("mcp_tool", "run_code_once"),
                                              {"code": code, "language": "python"}, timeout=timeout)

    result = _run(call)
    if getattr(result, "isError", False):
        raise RuntimeError(_stdout_of(result) or "run_code_once failed")
    return _stdout_of(result)


def _run(factory: Callable[[], Any]) -> Any:
    """Runs a coroutine to completion from sync code, in a thread of its own when a loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    out: dict = {}

    def target() -> None:
        try:
            out["value"] = asyncio.run(factory())
        except BaseException as err:  # noqa: BLE001 (re-raised in the caller's thread)
            out["error"] = err

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def sandbox_score(text: str, ground_truth: str, config: dict,
                  runner: Optional[Callable[[str, dict], str]] = None) -> float:
    """Fraction of the row's tests the model's program passes, run in a sandbox (`runner`: the MCP call, or a
    local stand-in in the plan's check)."""
    from verl_ack_reward import refuse

    program = extract_program(text)
    if program is None:
        return 0.0
    try:
        cases = test_cases(ground_truth)
    except ValueError as err:
        raise refuse(f"task.reward.sandbox: a row's {err}") from None
    code = harness(program, cases, float(config.get("test_timeout_seconds", DEFAULT_TEST_TIMEOUT)))
    try:
        stdout = (runner or run_in_sandbox)(code, config)
        passed, total = parse_result(stdout)
    except Exception as err:  # noqa: BLE001 (any failure here is the infrastructure's, not the model's)
        raise refuse(f"task.reward.sandbox: the sandbox could not run the tests ({type(err).__name__}: {err})") from None
    return passed / total
