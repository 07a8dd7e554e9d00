"""The sandbox reward (agent_tools/verl_ack_sandbox_reward.py): the model's last code block runs against the row's
tests in one harness per response; stdin/stdout and call-based rows both score the fraction passed; an answer with no
program scores 0; a sandbox that cannot run the tests stops the job instead of scoring 0. The harness runs here in a
local stand-in of `run_code_once` (a subprocess), exactly the code the sandbox would run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from components.config import REPO_ROOT


@pytest.fixture
def sandbox(verl, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(REPO_ROOT / "agent_tools"))
    monkeypatch.setenv("VERL_ACK_REFUSAL_FILE", str(tmp_path / "refused.txt"))
    for name in ("verl_ack_sandbox_reward", "verl_ack_reward"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import verl_ack_sandbox_reward

    return verl_ack_sandbox_reward


def local_run(code: str, config: dict) -> str:
    return subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60).stdout


STDIN = json.dumps({"inputs": ["1 2\n", "40 2\n", "5 5\n"], "outputs": ["3\n", "42\n", "10\n"]})
CALL = json.dumps({"fn_name": "add", "inputs": [[1, 2], [40, 2]], "outputs": [[3], [42]]})


@pytest.mark.parametrize("text,truth,score", [
    ("```python\na, b = map(int, input().split())\nprint(a + b)\n```", STDIN, 1.0),
    ("```python\na, b = map(int, input().split())\nprint(a * b if a == 5 else a + b)\n```", STDIN, 2 / 3),
    ("First try:\n```python\nprint(0)\n```\nFixed:\n```python\nprint(sum(map(int, input().split())))\n```", STDIN,
     1.0),
    ("```python\ndef add(a, b):\n    return a + b\n```", CALL, 1.0),
    ("```python\nclass Solution:\n    def add(self, a, b):\n        return a - b\n```", CALL, 0.0),
    ("```python\nwhile True: pass\n```", json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]}), 0.0),
    ("The answer is 3.", STDIN, 0.0),
    ("", STDIN, 0.0),
])
def test_the_fraction_of_tests_the_models_program_passes(sandbox, text, truth, score):
    assert sandbox.sandbox_score(text, truth, {"test_timeout_seconds": 2}, runner=local_run) == pytest.approx(score)


def test_a_sandbox_that_cannot_run_the_tests_stops_the_job_rather_than_scoring_zero(sandbox, tmp_path):
    def down(code, config):
        raise ConnectionError("sandbox-manager.sandbox-system.svc: connection refused")

    with pytest.raises(Exception, match="the sandbox could not run the tests .*connection refused"):
        sandbox.sandbox_score("```python\nprint(3)\n```", STDIN, {}, runner=down)
    assert "connection refused" in (tmp_path / "refused.txt").read_text()


def test_a_row_without_test_cases_is_refused_naming_it(sandbox):
    with pytest.raises(Exception, match="a row.s ground_truth must hold equally long"):
        sandbox.sandbox_score("```python\nprint(3)\n```", "42", {}, runner=local_run)
