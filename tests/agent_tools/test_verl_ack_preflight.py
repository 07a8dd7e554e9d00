"""The fabric preflight: its verdicts from nvidia-smi output and bandwidth figures (pure), and the real thing on
CPU: gloo all-reduce between several local processes through the CLI, which then runs the next command or not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_tools import verl_ack_preflight as pf

REPO = Path(__file__).resolve().parents[2]
# nvidia-smi --query-gpu=<pf.SMI_FIELDS> --format=csv,noheader,nounits on a healthy H200 (the device the lead uses)
# and on a sick one.
HEALTHY = "0, GPU-443e086d-7979-1e6b-9813-f18e2474a6e6, NVIDIA H200, 143771, 0, No, No, [N/A]\n"
SICK = ("0, GPU-aaaa, NVIDIA H200, 143771, 3, No, No, [N/A]\n"
        "1, GPU-bbbb, NVIDIA H200, 143771, 0, Yes, No, [N/A]\n"
        "2, GPU-cccc, NVIDIA H200, 143771, [N/A], No, Yes, [N/A]\n")


def test_nvidia_smi_lines_parse_with_unsupported_fields_as_unknown():
    (gpu,) = pf.parse_nvidia_smi(HEALTHY)
    assert (gpu.index, gpu.name, gpu.memory_mib, gpu.ecc_uncorrected_volatile) == (0, "NVIDIA H200", 143771, 0)
    assert gpu.remapped_rows_pending is False and gpu.retired_pages_pending is None
    with pytest.raises(ValueError, match="expected 8"):
        pf.parse_nvidia_smi("0, GPU-x, H200\n")


def test_a_healthy_gpu_passes_and_each_fault_is_named_with_its_gpu():
    (gpu,) = pf.parse_nvidia_smi(HEALTHY)
    assert pf.gpu_problems(gpu, min_memory_gib=139) == []
    assert "has 140.4 GiB, expected at least 141" in pf.gpu_problems(gpu, min_memory_gib=141)[0]
    ecc, pending, failed = (pf.gpu_problems(g, 0) for g in pf.parse_nvidia_smi(SICK))
    assert ecc == ["GPU 0 has 3 uncorrected ECC errors since boot"]
    assert "GPU 1 has a pending row remap" in pending[0]
    assert "GPU 2 failed a row remap" in failed[0]


def test_bus_bandwidth_follows_nccl_tests_all_reduce_formula():
    algbw, busbw = pf.bus_bandwidth_gbps(1_000_000_000, 0.01, world=16)
    assert algbw == pytest.approx(100.0) and busbw == pytest.approx(100.0 * 2 * 15 / 16)
    assert pf.bus_bandwidth_gbps(10**9, 1.0, world=1)[1] == 0.0  # one rank moves nothing over a link


def _ranks(hosts: dict[str, int]) -> list[dict]:
    out, r = [], 0
    for host, n in hosts.items():
        for _ in range(n):
            out.append({"rank": r, "host": host, "problems": []})
            r += 1
    return out


def _bench(busbw: float, world: int) -> dict:
    return {"world": world, "busbw_gbps": busbw}


def test_the_verdict_names_a_missing_node_and_a_node_short_of_gpus():
    v = pf.judge(_ranks({"gpu-a": 8, "gpu-b": 7}), _bench(300, 15), {}, pf.Expect(nodes=2, gpus_per_node=8))
    assert not v.ok and v.problems == ["node gpu-b: 7 GPU(s), expected 8"]
    v = pf.judge(_ranks({"gpu-a": 8}), _bench(300, 8), {}, pf.Expect(nodes=2, gpus_per_node=8))
    assert v.problems == ["1 node(s) took part (gpu-a), expected 2"]


def test_a_slow_fabric_names_the_slow_node_or_else_the_links_between_nodes():
    ranks = _ranks({"gpu-a": 8, "gpu-b": 8})
    expect = pf.Expect(min_busbw_gbps=50)
    assert pf.judge(ranks, _bench(120, 16), {}, expect).ok
    slow_node = pf.judge(ranks, _bench(3, 16), {"gpu-a": _bench(400, 8), "gpu-b": _bench(9, 8)}, expect)
    assert "below training.preflight.min_busbw_gbps 50" in slow_node.problems[0]
    assert "inside the node(s) gpu-b (9.0 GB/s)" in slow_node.problems[0] and "gpu-a (" not in slow_node.problems[0]
    links = pf.judge(ranks, _bench(3, 16), {"gpu-a": _bench(400, 8), "gpu-b": _bench(410, 8)}, expect)
    assert "links between nodes are slow" in links.problems[0] and "NET/Socket" in links.problems[0]


def test_a_rank_with_a_sick_gpu_fails_the_run_naming_node_and_rank():
    ranks = _ranks({"gpu-a": 2})
    ranks[1]["problems"] = ["GPU 1 has 3 uncorrected ECC errors since boot"]
    v = pf.judge(ranks, _bench(300, 2), {}, pf.Expect())
    assert v.problems == ["node gpu-a rank 1: GPU 1 has 3 uncorrected ECC errors since boot"]


def test_a_collective_that_never_completed_fails():
    assert not pf.judge([], None, {}, pf.Expect()).ok


def test_everything_after_a_double_dash_is_the_command_to_run_next():
    args, then = pf.parse_args(["--ray", "--min-busbw-gbps", "20", "--", "python3", "-m", "verl.trainer.main_ppo",
                                "--config-name=x", "trainer.nnodes=2"])
    assert args.ray and args.min_busbw_gbps == 20
    assert then == ["python3", "-m", "verl.trainer.main_ppo", "--config-name=x", "trainer.nnodes=2"]


def _cli(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "preflight.json"
    run = subprocess.run([sys.executable, "-m", "agent_tools.verl_ack_preflight", "--backend", "gloo", "--nprocs", "3",
                          "--size-mib", "1", "--iters", "3", "--warmup", "1", "--json", str(out), *flags],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    return run, json.loads(out.read_text())


def test_gloo_all_reduce_across_three_processes_passes_then_runs_the_next_command(tmp_path):
    pytest.importorskip("torch")
    run, result = _cli(tmp_path, "--min-busbw-gbps", "0.000001", "--nodes", "1", "--",
                       sys.executable, "-c", "print('verl starts')")
    assert run.returncode == 0, run.stderr[-2000:]
    assert result["ok"] and result["bench"]["world"] == 3 and len(result["ranks"]) == 3
    assert result["bench"]["busbw_gbps"] == pytest.approx(result["bench"]["algbw_gbps"] * 4 / 3)
    assert "verl_ack_preflight: {" in run.stdout  # the result is in the job's log
    assert run.stdout.rstrip().endswith("verl starts")


def test_a_fabric_below_the_threshold_fails_and_never_starts_verl(tmp_path):
    pytest.importorskip("torch")
    run, result = _cli(tmp_path, "--min-busbw-gbps", "1000000", "--", sys.executable, "-c", "print('verl starts')")
    assert run.returncode == 1 and "verl starts" not in run.stdout
    assert not result["ok"] and "below training.preflight.min_busbw_gbps 1e+06" in result["problems"][0]
    assert "FAILED: all-reduce bus bandwidth" in run.stderr


class _FakeMlflow:
    """Records the MLflow client calls the preflight makes (mlflow is not installed in CI)."""

    def __init__(self, fail: bool = False):
        self.calls: list[tuple] = []
        self.fail = fail

    def __getattr__(self, name):
        def call(*args, **kwargs):
            if self.fail:
                raise ConnectionError("tracking server down")
            self.calls.append((name, args, kwargs))
            return self
        return call

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


RESULT = {"ok": False, "backend": "nccl", "expect": {"min_busbw_gbps": 20.0},
          "bench": {"world": 16, "bytes": 1 << 28, "busbw_gbps": 3.2, "algbw_gbps": 1.7, "seconds": 0.15},
          "intra_node": {"gpu-b": {"busbw_gbps": 9.0}}, "problems": ["slow"]}


def test_the_result_reaches_mlflow_as_its_own_run_when_a_tracking_server_is_set(monkeypatch):
    fake = _FakeMlflow()
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    pf.to_mlflow(RESULT, "gsm8k-tool-agent", "run-preflight")
    names = [c[0] for c in fake.calls]
    assert ("set_experiment", ("gsm8k-tool-agent",), {}) in fake.calls
    assert ("start_run", (), {"run_name": "run-preflight"}) in fake.calls
    assert ("set_tag", ("verl_ack.preflight_ok", "false"), {}) in fake.calls
    (metrics,) = [c[1][0] for c in fake.calls if c[0] == "log_metrics"]
    assert metrics["busbw_gbps"] == 3.2
    assert ("log_metric", ("intra_node_busbw_gbps/gpu-b", 9.0), {}) in fake.calls
    assert "log_text" in names


def test_no_tracking_server_no_mlflow_and_a_failing_one_never_fails_the_check(monkeypatch, capsys):
    fake = _FakeMlflow()
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    pf.to_mlflow(RESULT, "e", "r")
    assert fake.calls == []
    monkeypatch.setitem(sys.modules, "mlflow", _FakeMlflow(fail=True))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    pf.to_mlflow(RESULT, "e", "r")
    assert "MLflow logging failed" in capsys.readouterr().err
