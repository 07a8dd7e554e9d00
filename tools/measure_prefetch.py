#!/usr/bin/env python3
"""Run the model prefetch program (agent_tools/verl_ack_model_prefetch.py) as the Ray pods run it, on a GPU host,
and time what the latency model charges for it.

    python3 tools/measure_prefetch.py --out prefetch.json          # on the GPU machine (the device)
    python3 tools/measure_prefetch.py --tiny --out tiny.json       # a small model, on a CPU

Steps, each written to the JSON as it ends (a run stopped at its time limit keeps what it measured):
1. a Qwen2.5-3B-Instruct-shaped bf16 checkpoint with random weights on the local disk (tools/measure_model_read.py
   builds it), with the staging Job's completion marker beside it (pipeline/marker.py: every file's key and size);
2. the copier, `verl_ack_model_prefetch.py copy`, from that disk (page cache dropped) into tmpfs (/dev/shm stands
   for the pod's `medium: Memory` emptyDir): the seconds until its marker appears, and whether SIGTERM then ends it;
3. the wait step, `python3 -m verl_ack_model_prefetch wait ... -- <loader>`, exec'ing a loader that builds the model
   with `from_pretrained` from the path it is given and moves it to the GPU: what verl does after the wait. Timed
   from the copy and, for comparison, from the disk with the page cache dropped;
4. the fallback: with the copy marked failed, the wait step hands the loader the source path instead.

The disk is the device's local disk, not OSS: the copy's own rate here is not the OSS read the latency model
assumes (`latency.oss_read_mbps`); the load from the copy is the step `latency.local_read_mbps` stands for.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PREFETCH = ROOT / "agent_tools" / "verl_ack_model_prefetch.py"
sys.path.insert(0, str(ROOT / "tools"))

NOTE = ("The copier and the wait step of agent_tools/verl_ack_model_prefetch.py run as processes on the device host, "
        "not in a pod: the source is a checkpoint on the local disk (page cache dropped), not the OSS volume, and "
        "/dev/shm (tmpfs) stands for the pod's memory-backed emptyDir. gpu_load_* time from_pretrained (bf16, CPU) "
        "plus .to('cuda') and a synchronize, in a fresh process each run, behind the wait step: the part of verl's "
        "start that reads the weights. MB is 10^6 bytes, Mbit is 10^6 bits.")


def loader(path: str) -> dict[str, Any]:
    """What verl does with the path once the wait step execs it: the weights into a model, the model onto a GPU."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()  # keep the job log to the timings
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    t1 = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    if device == "cuda":
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    return {"path": path, "device": device, "from_pretrained_s": round(t1 - t0, 4), "to_device_s": round(t2 - t1, 4),
            "seconds": round(t2 - t0, 4)}


def write_marker(prefix: Path) -> int:
    """The staging Job's marker beside the prefix: every file's relative key and size (pipeline/marker.py)."""
    files = [{"key": str(p.relative_to(prefix)), "size": p.stat().st_size}
             for p in sorted(prefix.rglob("*")) if p.is_file()]
    Path(f"{prefix}.complete").write_text(json.dumps({"format": 1, "files": files,
                                                      "total_bytes": sum(f["size"] for f in files)}))
    return sum(f["size"] for f in files)


def rate(nbytes: int, seconds: float) -> dict[str, float]:
    return {"seconds": round(seconds, 4), "MB_per_s": round(nbytes / 1e6 / seconds, 1),
            "Mbit_per_s": round(nbytes * 8 / 1e6 / seconds, 1)}


def run_copier(source: Path, dest: Path, max_gib: int, timeout: float) -> dict[str, Any]:
    """The sidecar's command, until its marker appears; then SIGTERM, as the pod's deletion sends it."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(PREFETCH), "copy", f"--source={source}", f"--dest={dest}",
                             f"--max-gib={max_gib}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marker = Path(f"{dest}.complete")
    while not marker.exists() and proc.poll() is None and time.perf_counter() - t0 < timeout:
        time.sleep(0.05)
    seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    out = proc.stdout.read() if proc.stdout else ""
    return {"marker_written": marker.exists(), "seconds_to_marker": round(seconds, 4),
            "exit_code_after_sigterm": code, "seconds_to_exit": round(time.perf_counter() - t1, 4), "log": out.strip()}


def run_wait(source: Path, dest: Path) -> dict[str, Any]:
    """The entrypoint's wait step with the loader as the command after its `--`."""
    env = {**os.environ, "PYTHONPATH": f"{PREFETCH.parent}:{os.environ.get('PYTHONPATH', '')}"}
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "verl_ack_model_prefetch", "wait", f"--source={source}",
                          f"--dest={dest}", "--nodes=1", "--timeout-seconds=60", "--", sys.executable, __file__,
                          "load", "trainer.nnodes=1", f"actor_rollout_ref.model.path={dest}"],
                         capture_output=True, text=True, env=env, timeout=600)
    lines = run.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if run.returncode == 0 and lines else {}
    return {**result, "wall_s": round(time.perf_counter() - t0, 4), "returncode": run.returncode,
            "wait_log": [ln for ln in lines if ln.startswith("model-prefetch:")], "stderr_tail": run.stderr[-800:]}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["load"]:  # the command the wait step execs
        path = next(w.split("=", 1)[1] for w in args if w.startswith("actor_rollout_ref.model.path="))
        print(json.dumps(loader(path)), flush=True)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--disk-dir", type=Path, default=Path("/var/tmp/measure_prefetch"))
    p.add_argument("--tmpfs-dir", type=Path, default=Path("/dev/shm/measure_prefetch"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args(args)
    import measure_model_read as mmr  # the checkpoint builder and the page-cache drop

    rec = mmr.Record(a.out)
    rec.data["note"] = NOTE
    rec.set("machine", mmr.machine())
    source = a.disk_dir / "models" / "M" / "key0"
    dest = a.tmpfs_dir / "M" / "key0"
    for d in (a.disk_dir, a.tmpfs_dir):
        subprocess.run(["rm", "-rf", str(d)], check=True)
    built = mmr.build_checkpoint(source, mmr.TINY if a.tiny else mmr.QWEN25_3B, "4GB", 0)
    nbytes = write_marker(source)
    files = [f for f in source.rglob("*") if f.is_file()]
    rec.set("checkpoint", {**built, "total_bytes": nbytes, "file_count": len(files)})

    rec.set("page_cache_before_copy", mmr.drop_page_cache(files))
    copier = run_copier(source, dest, max_gib=max(1, -(-nbytes // 2**30) + 1), timeout=600)
    copier["rate"] = rate(nbytes, copier["seconds_to_marker"])
    rec.set("copier", copier)

    loads = []
    for _ in range(a.repeats):
        loads.append(run_wait(source, dest))
        rec.set("gpu_load_from_copy", loads)
    # The fallback: a copy marked failed hands the loader the source, here the disk with its page cache dropped.
    Path(f"{a.tmpfs_dir}/failed.failed").write_text("RuntimeError: marked failed by the measurement\n")
    cold = []
    for _ in range(a.repeats):
        drop = mmr.drop_page_cache(files)
        cold.append({**run_wait(source, a.tmpfs_dir / "failed"), "page_cache": drop})
        rec.set("gpu_load_from_disk_cold_via_fallback", cold)
    ok = [x["seconds"] for x in loads if "seconds" in x]
    ok_cold = [x["seconds"] for x in cold if "seconds" in x]
    rec.set("medians", {
        "copier_disk_to_tmpfs": copier["rate"],
        **({"gpu_load_from_copy": rate(nbytes, statistics.median(ok))} if ok else {}),
        **({"gpu_load_from_disk_cold": rate(nbytes, statistics.median(ok_cold))} if ok_cold else {}),
    })
    rec.data["complete"] = True
    rec.save()
    for d in (a.disk_dir, a.tmpfs_dir):
        subprocess.run(["rm", "-rf", str(d)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
