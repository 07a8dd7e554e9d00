"""docs/preflight.md is generated from the recorded results, and says what each run measured."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import preflight_figures  # noqa: E402


def test_the_figures_page_is_what_the_recorded_results_give():
    assert preflight_figures.main(["--check"]) == 0, "run python tools/preflight_figures.py"


def test_every_recorded_run_met_its_expectation():
    for run in json.loads(preflight_figures.RESULTS.read_text())["runs"]:
        assert run["result"]["ok"] == (run["expected"] == "pass"), run["command"]


def test_a_multi_gpu_run_shows_its_bus_bandwidth_and_a_failed_one_its_reason():
    doc = json.loads(preflight_figures.RESULTS.read_text())
    run = copy.deepcopy(doc["runs"][0])
    run["result"]["bench"] = {"world": 16, "bytes": 256 << 20, "algbw_gbps": 100.0, "busbw_gbps": 187.5}
    run["result"]["ranks"] = [{"rank": i, "host": f"gpu-{i // 8}", "problems": []} for i in range(16)]
    failed = copy.deepcopy(run)
    failed["result"].update(ok=False, problems=["all-reduce bus bandwidth 3.0 GB/s over 16 ranks is below ..."])
    text = preflight_figures.render({"runs": [run, failed]})
    assert "| 16 (2) | 256 MiB | 100.0 | 187.5 |" in text
    assert "FAIL: all-reduce bus bandwidth 3.0 GB/s" in text
    single = preflight_figures.render({"runs": doc["runs"][:1]})
    assert "n/a (1 rank)" in single
