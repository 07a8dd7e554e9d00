#!/usr/bin/env python3
"""Measure how fast a Qwen2.5-3B-Instruct-sized bf16 safetensors checkpoint is read into CPU memory from a
memory-backed folder (tmpfs, as a Kubernetes emptyDir with `medium: Memory`), against the local disk.

    python3 tools/measure_model_read.py --out model_read.json
    python3 tools/measure_model_read.py --tiny --out tiny.json   # a small model, to check the script on a CPU

The latency model needs the time from "the weights are in the pod's emptyDir" to "the weights are in the
trainer's CPU memory". This script stands for that step on one host: it writes a checkpoint with random
weights (built offline from the public Qwen2.5-3B-Instruct config, nothing is downloaded), copies it into
tmpfs, then times three readers over the tmpfs copy: a raw sequential read, `safetensors.torch.load_file`,
and `AutoModelForCausalLM.from_pretrained`. The raw read and `load_file` are timed on the disk copy too,
after dropping the page cache when the kernel lets us, so the disk figure says whether it was cold.

safetensors maps files lazily, so a loader's time alone can be an mmap and no reading; every loaded tensor
has one element per 4 KiB page read back, and the figures count that touch.

The JSON is rewritten after every step, so a run stopped at a time limit still leaves what it measured.
Only the standard library, torch, safetensors and transformers are imported: it runs as one file on a bare
GPU box.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the device has no network; fail fast rather than retry
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import safetensors  # noqa: E402
import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, Qwen2Config  # noqa: E402

transformers.utils.logging.disable_progress_bar()  # progress bars would bury the timings in the device's log

SCHEMA = 1
CHUNK = 16 * 1024 * 1024  # raw reads go through one 16 MiB buffer: large enough that syscalls do not dominate
PAGE = 4096

# The public Qwen2.5-3B-Instruct config.json (huggingface.co/Qwen/Qwen2.5-3B-Instruct), shape and dtype only.
QWEN25_3B: dict[str, Any] = {
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "torch_dtype": "bfloat16",
}
# The same architecture at a size a laptop CPU writes in a second, to check the script end to end.
TINY: dict[str, Any] = {**QWEN25_3B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024,
                        "max_position_embeddings": 512}

NOTE = ("A tmpfs read on the device host, into that host's CPU memory, of a checkpoint with random weights and "
        "the shapes of Qwen2.5-3B-Instruct (bf16 safetensors). It is not an OSS read, not a network read and "
        "not a Kubernetes pod: tmpfs here stands for an emptyDir with medium: Memory, and the copy into it stands "
        "for staging from a local file, not for a download. The disk figures are the device's local disk as the "
        "guest sees it; where that disk is a virtual one, the host may cache it even after the guest's page cache "
        "is dropped, so 'cold' means cold in the guest only. MB is 10^6 bytes, Mbit is 10^6 bits.")


# --------------------------------------------------------------------------------------------- recording
class Record:
    """The result document, rewritten whole after each step so a killed run keeps what it measured."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"schema": SCHEMA, "complete": False, "note": NOTE, "steps_done": []}

    def set(self, key: str, value: Any) -> None:
        """Store one step's result and write the file at once."""
        self.data[key] = value
        self.data["steps_done"].append(key)
        self.save()

    def save(self) -> None:
        """Write through a temporary file so a reader never sees half a JSON."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=False) + "\n")
        os.replace(tmp, self.path)


def rate(nbytes: int, seconds: float) -> dict[str, float]:
    """One timing in the units the latency model reads: seconds, MB/s and Mbit/s (decimal)."""
    return {"seconds": round(seconds, 4), "MB_per_s": round(nbytes / seconds / 1e6, 1),
            "Mbit_per_s": round(nbytes * 8 / seconds / 1e6, 1)}


def summary(nbytes: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs as measured plus their median, so one slow outlier neither hides nor decides the figure."""
    return {"runs": runs, "median": rate(nbytes, statistics.median(r["seconds"] for r in runs))}


# --------------------------------------------------------------------------------------------- the machine
def _first_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out or None


def _proc_field(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.split(":")[0].strip() == key:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def filesystem(path: Path) -> dict[str, Any]:
    """The mount that holds `path` (longest matching mount point in /proc/mounts) and its free space: the
    figures mean nothing unless the 'tmpfs' folder really is tmpfs and the 'disk' one is not."""
    target = str(path.resolve())
    best = ("", "?", "?")
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            dev, mnt, fstype = line.split()[:3]
            mnt = mnt.replace("\\040", " ")
            if (target == mnt or target.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[0]):
                best = (mnt, fstype, dev)
    except OSError:
        pass
    st = os.statvfs(path)
    return {"path": str(path), "mount": best[0], "fstype": best[1], "device": best[2],
            "free_bytes": st.f_bavail * st.f_frsize, "size_bytes": st.f_blocks * st.f_frsize}


def machine() -> dict[str, Any]:
    """What the figures were taken on; the host name is left out on purpose."""
    mem_kib = _proc_field("/proc/meminfo", "MemTotal")
    return {
        "gpu": _first_line(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name"),
        "cpu_count": os.cpu_count(),
        "memory_total_bytes": int(mem_kib.split()[0]) * 1024 if mem_kib else None,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def drop_page_cache(files: list[Path]) -> dict[str, Any]:
    """Empty the page cache so a disk read comes from the disk: the kernel-wide drop needs root; without it,
    posix_fadvise(DONTNEED) on each file drops that file's clean pages for any user. Says which worked."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return {"dropped": True, "method": "drop_caches"}
    except OSError as e:
        drop_error = f"{type(e).__name__}: {e}"
    try:
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        return {"dropped": True, "method": "posix_fadvise_dontneed", "drop_caches_error": drop_error}
    except (OSError, AttributeError) as e:
        return {"dropped": False, "method": None, "drop_caches_error": drop_error,
                "fadvise_error": f"{type(e).__name__}: {e}"}


def cached_bytes() -> int | None:
    """The kernel's page-cache size, read around each drop so the JSON shows whether the drop took."""
    v = _proc_field("/proc/meminfo", "Cached")
    return int(v.split()[0]) * 1024 if v else None


# --------------------------------------------------------------------------------------------- the checkpoint
def build_checkpoint(dest: Path, shape: dict[str, Any], max_shard_size: str, seed: int) -> dict[str, Any]:
    """Write a Qwen2 checkpoint with random bf16 weights. The model is built on the meta device (no init
    pass over 3 B parameters), then given memory and filled with N(0, 0.02): on the GPU where there is one,
    since filling on a CPU would cost minutes of the run's time limit."""
    config = Qwen2Config(**shape)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    fill_on = "cuda" if torch.cuda.is_available() else "cpu"
    model.to_empty(device=fill_on)
    gen = torch.Generator(device=fill_on).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)  # RMSNorm weights are ones in a real checkpoint; keeps the model sane to load
            else:
                p.normal_(0.0, 0.02, generator=gen)
    model.tie_weights()
    model.to("cpu")
    params = sum(p.numel() for p in model.parameters())  # a tied weight is counted once
    if dest.exists():
        shutil.rmtree(dest)
    model.save_pretrained(dest, safe_serialization=True, max_shard_size=max_shard_size)
    del model
    gc.collect()
    return {"parameters": params, "filled_on": fill_on, "seed": seed, "max_shard_size": max_shard_size,
            "config": shape}


def checkpoint_files(folder: Path) -> list[Path]:
    """Every file of the checkpoint (shards, index, config), in a fixed order."""
    return sorted(p for p in folder.iterdir() if p.is_file())


def total_bytes(files: list[Path]) -> int:
    return sum(f.stat().st_size for f in files)


# --------------------------------------------------------------------------------------------- readers
def touch_pages(tensors: Iterable[torch.Tensor]) -> int:
    """Read one element of every 4 KiB page of each tensor, so pages a loader only mapped are read now.
    Returns how many tensors were touched."""
    n = 0
    for t in tensors:
        flat = t.detach().reshape(-1)
        step = max(1, PAGE // t.element_size())
        flat[::step].float().sum().item()
        n += 1
    return n


def raw_read(files: list[Path]) -> float:
    """Sequential read of every file through one 16 MiB buffer, discarded: the ceiling any loader can reach."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    start = time.perf_counter()
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.readinto(view):
                pass
    return time.perf_counter() - start


def safetensors_load(shards: list[Path]) -> dict[str, float]:
    """`safetensors.torch.load_file` of every shard to CPU, then every page touched."""
    start = time.perf_counter()
    loaded = [safetensors.torch.load_file(s, device="cpu") for s in shards]
    after_load = time.perf_counter()
    touch_pages(t for d in loaded for t in d.values())
    end = time.perf_counter()
    del loaded
    gc.collect()
    return {"load_s": after_load - start, "touch_s": end - after_load, "seconds": end - start}


def hf_from_pretrained(folder: Path) -> dict[str, float]:
    """`AutoModelForCausalLM.from_pretrained` to CPU in bf16, as a trainer loads it, then every page touched.
    `dtype` is transformers 5's name for `torch_dtype` (the old name still works, with a warning)."""
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
    after_load = time.perf_counter()
    touch_pages(model.parameters())
    end = time.perf_counter()
    del model
    gc.collect()
    return {"load_s": after_load - start, "touch_s": end - after_load, "seconds": end - start}


def timed_runs(nbytes: int, repeats: int, one: Callable[[], dict[str, float] | float],
               before: Callable[[], dict[str, Any]] | None = None, deadline: float | None = None) -> dict[str, Any]:
    """Run `one` `repeats` times (after `before`, e.g. a cache drop, each time) and keep every run. A run that
    would end past `deadline` (time.monotonic) is skipped and counted, so one slow disk cannot cost the rest."""
    runs: list[dict[str, Any]] = []
    skipped = 0
    for _ in range(repeats):
        if runs and deadline is not None and time.monotonic() + runs[-1]["seconds"] * 1.5 > deadline:
            skipped += 1
            continue
        pre = before() if before else {}
        result = one()
        detail = result if isinstance(result, dict) else {"seconds": result}
        run = {**rate(nbytes, detail["seconds"]), **{k: round(v, 4) for k, v in detail.items() if k != "seconds"}}
        if pre:
            run["cache"] = pre
        runs.append(run)
        print(f"  {run}", flush=True)
    return {**summary(nbytes, runs), "skipped_for_time": skipped}


# --------------------------------------------------------------------------------------------- main
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="the JSON file to write (rewritten after each step)")
    p.add_argument("--disk-dir", type=Path, default=Path("/var/tmp/measure_model_read"),
                   help="where the checkpoint is written on local disk (must not be tmpfs)")
    p.add_argument("--tmpfs-dir", type=Path, default=Path("/dev/shm/measure_model_read"),
                   help="where the checkpoint is copied in memory (must be tmpfs)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tiny", action="store_true", help="a tiny model of the same architecture, to test on a CPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="leave both copies in place (default: remove them)")
    p.add_argument("--time-budget-s", type=float, help="skip repeats that would end later than this after the "
                                                       "start (the device kills a command at its limit)")
    return p


def check_filesystems(rec: Record, disk_parent: Path, tmpfs_parent: Path, need: int) -> None:
    """Refuse to measure the wrong thing: the tmpfs folder must be tmpfs, the disk folder must not, and the
    tmpfs must hold the checkpoint."""
    disk_fs, tmpfs_fs = filesystem(disk_parent), filesystem(tmpfs_parent)
    rec.set("filesystems", {"disk": disk_fs, "tmpfs": tmpfs_fs})
    if tmpfs_fs["fstype"] != "tmpfs":
        sys.exit(f"--tmpfs-dir {tmpfs_parent} is on {tmpfs_fs['fstype']}, not tmpfs; pass a tmpfs folder")
    if disk_fs["fstype"] in ("tmpfs", "ramfs"):
        sys.exit(f"--disk-dir {disk_parent} is on {disk_fs['fstype']}; pass a folder on a real disk")
    if tmpfs_fs["free_bytes"] < need:
        sys.exit(f"{tmpfs_parent} has {tmpfs_fs['free_bytes']} bytes free, the checkpoint needs about {need}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    rec = Record(args.out)
    deadline = time.monotonic() + args.time_budget_s if args.time_budget_s else None
    shape = TINY if args.tiny else QWEN25_3B
    rec.set("model", {"name": "tiny Qwen2 (test)" if args.tiny else "Qwen2.5-3B-Instruct shapes, random weights",
                      "architecture": "Qwen2ForCausalLM", "dtype": "bfloat16"})
    rec.set("machine", machine())
    disk, shm = args.disk_dir / "checkpoint", args.tmpfs_dir / "checkpoint"
    for parent in (args.disk_dir, args.tmpfs_dir):
        parent.mkdir(parents=True, exist_ok=True)
    bf16_bytes = 2 * (3_086_000_000 if not args.tiny else 1_000_000)
    check_filesystems(rec, args.disk_dir, args.tmpfs_dir, int(bf16_bytes * 1.05))

    try:
        print("building and saving the checkpoint", flush=True)
        t0 = time.perf_counter()
        built = build_checkpoint(disk, shape, "100KB" if args.tiny else "4GB", args.seed)
        built["build_and_save_s"] = round(time.perf_counter() - t0, 2)
        files = checkpoint_files(disk)
        shards = [f for f in files if f.suffix == ".safetensors"]
        nbytes, shard_bytes = total_bytes(files), total_bytes(shards)
        rec.set("checkpoint", {**built, "total_bytes": nbytes, "file_count": len(files), "shard_count": len(shards),
                               "shard_bytes": shard_bytes,
                               "files": [{"name": f.name, "bytes": f.stat().st_size} for f in files]})

        # Staging: the copy into tmpfs, from a cold source where the cache can be dropped.
        print("copying into tmpfs", flush=True)
        if shm.exists():
            shutil.rmtree(shm)
        cache = {**drop_page_cache(files), "cached_bytes_after": cached_bytes()}
        t0 = time.perf_counter()
        shutil.copytree(disk, shm)
        os.sync()
        rec.set("copy_disk_to_tmpfs", {**rate(nbytes, time.perf_counter() - t0), "source_cache": cache,
                                       "includes": "shutil.copytree then os.sync"})
        shm_files = checkpoint_files(shm)
        shm_shards = [f for f in shm_files if f.suffix == ".safetensors"]

        def measure(key: str, nbytes: int, one: Callable[[], dict[str, float] | float],
                    before: Callable[[], dict[str, Any]] | None = None) -> None:
            print(key, flush=True)
            rec.set(key, timed_runs(nbytes, args.repeats, one, before=before, deadline=deadline))

        # The tmpfs copy: the figure the latency model needs. tmpfs pages are never dropped, so no cache step.
        measure("tmpfs_raw_read", nbytes, lambda: raw_read(shm_files))
        measure("tmpfs_safetensors_load", shard_bytes, lambda: safetensors_load(shm_shards))
        measure("tmpfs_from_pretrained", shard_bytes, lambda: hf_from_pretrained(shm))

        # The disk copy: cold (cache dropped before each run), then warm (from the page cache the last run left).
        def cold() -> dict[str, Any]:
            before = cached_bytes()
            return {**drop_page_cache(files), "cached_bytes_before": before, "cached_bytes_after": cached_bytes()}

        measure("disk_raw_read_cold", nbytes, lambda: raw_read(files), before=cold)
        measure("disk_raw_read_warm", nbytes, lambda: raw_read(files))
        measure("disk_safetensors_load_cold", shard_bytes, lambda: safetensors_load(shards), before=cold)
        measure("disk_safetensors_load_warm", shard_bytes, lambda: safetensors_load(shards))

        cold_runs = rec.data["disk_raw_read_cold"]["runs"] + rec.data["disk_safetensors_load_cold"]["runs"]
        rec.data["page_cache_dropped"] = all(r["cache"]["dropped"] for r in cold_runs)
        rec.data["page_cache_drop_methods"] = sorted({str(r["cache"]["method"]) for r in cold_runs})
        medians = {k: v["median"] for k, v in rec.data.items() if isinstance(v, dict) and "median" in v}
        rec.set("medians", medians | {"copy_disk_to_tmpfs": {k: rec.data["copy_disk_to_tmpfs"][k]
                                                             for k in ("seconds", "MB_per_s", "Mbit_per_s")}})
        rec.data["complete"] = True
        rec.save()
    finally:
        if not args.keep:
            shutil.rmtree(args.tmpfs_dir, ignore_errors=True)
            shutil.rmtree(args.disk_dir, ignore_errors=True)
    print(json.dumps(rec.data.get("medians"), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
