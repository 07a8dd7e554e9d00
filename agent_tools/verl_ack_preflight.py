"""Fabric preflight: check every GPU and the collective fabric before verl starts, and fail fast naming the node.

    # in the RayJob entrypoint (multi-node stacks): one Ray actor per GPU of the Ray cluster, then verl
    python3 -m verl_ack_preflight --ray --min-busbw-gbps 20 ... -- python3 -m verl.trainer.main_ppo ...
    # standalone on a GPU machine: one process per local GPU (world size = GPUs present)
    python -m agent_tools.verl_ack_preflight --backend nccl --json preflight.json
    # on CPU (CI): gloo between local processes
    python -m agent_tools.verl_ack_preflight --backend gloo --nprocs 4 --size-mib 1 --json preflight.json

Per rank (one per GPU): the GPU's own state from `nvidia-smi` (memory, uncorrected ECC errors, pending or failed
row remaps / retired pages: the visible consequence of the Xid 48/63/64/94/95 events that the kernel log holds and a
container cannot read), then an all-reduce over every rank (NCCL: over NVLink inside a node and over RDMA between
Lingjun nodes, whatever NCCL picks) timed after warm-up. Bus bandwidth as nccl-tests defines it for all-reduce
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): algbw = bytes / time of the slowest
rank, busbw = algbw * 2(n-1)/n, so it compares with the link speed whatever the world size. When the busbw is
below the threshold the same all-reduce runs within each node, which names the node whose own GPUs are slow, or
else the links between the nodes.

The result (JSON, one object) goes to stdout (the job's logs), to `--json`, and, when MLFLOW_TRACKING_URI is set and
mlflow importable, to an MLflow run of its own. Exit status 1 when a check fails (the RayJob then fails before verl
claims the GPUs), 0 otherwise, after which `-- COMMAND...` replaces this process (os.execvp).

Ships to the Ray pods in the job's ConfigMap (components/workloads/training/verl_config.py) next to the tools;
imports nothing of the repository (torch, and ray / mlflow where used).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

# nvidia-smi --query-gpu fields (nvidia-smi --help-query-gpu); "[N/A]" where a GPU does not support one.
SMI_FIELDS = ("index", "uuid", "name", "memory.total", "ecc.errors.uncorrected.volatile.total",
              "remapped_rows.pending", "remapped_rows.failure", "retired_pages.pending")
GIB_MIB = 1024
RESULT_VERSION = 1


# --------------------------------------------------------------------------------------------- pure pieces
@dataclass(frozen=True)
class GpuState:
    index: int
    uuid: str
    name: str
    memory_mib: int
    ecc_uncorrected_volatile: Optional[int]
    remapped_rows_pending: Optional[bool]
    remapped_rows_failure: Optional[bool]
    retired_pages_pending: Optional[bool]


def _value(text: str) -> Optional[str]:
    text = text.strip()
    return None if not text or text.startswith("[") or text in ("N/A", "Not Supported") else text


def _flag(text: str) -> Optional[bool]:
    v = _value(text)
    return None if v is None else v.lower() in ("yes", "1", "true")


def parse_nvidia_smi(text: str) -> list[GpuState]:
    """`nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits` -> one GpuState per line."""
    out = []
    for row in csv.reader(io.StringIO(text)):
        if not row or not row[0].strip():
            continue
        if len(row) != len(SMI_FIELDS):
            raise ValueError(f"nvidia-smi gave {len(row)} fields, expected {len(SMI_FIELDS)}: {row}")
        ecc = _value(row[4])
        out.append(GpuState(index=int(row[0]), uuid=row[1].strip(), name=row[2].strip(), memory_mib=int(float(row[3])),
                            ecc_uncorrected_volatile=int(ecc) if ecc is not None else None,
                            remapped_rows_pending=_flag(row[5]), remapped_rows_failure=_flag(row[6]),
                            retired_pages_pending=_flag(row[7])))
    return out


def gpu_problems(gpu: GpuState, min_memory_gib: float) -> list[str]:
    """What is wrong with one GPU (empty when healthy)."""
    found = []
    if gpu.memory_mib < min_memory_gib * GIB_MIB:
        found.append(f"GPU {gpu.index} ({gpu.name}) has {gpu.memory_mib / GIB_MIB:.1f} GiB, expected at least "
                     f"{min_memory_gib:g} GiB (gpu_pool.gpu_memory_gib)")
    if gpu.ecc_uncorrected_volatile:
        found.append(f"GPU {gpu.index} has {gpu.ecc_uncorrected_volatile} uncorrected ECC errors since boot")
    if gpu.remapped_rows_failure:
        found.append(f"GPU {gpu.index} failed a row remap (replace or reset the GPU)")
    if gpu.remapped_rows_pending or gpu.retired_pages_pending:
        found.append(f"GPU {gpu.index} has a pending row remap / page retirement (reset the GPU)")
    return found


def bus_bandwidth_gbps(nbytes: int, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes) of an all-reduce of `nbytes` per rank taking `seconds` (nccl-tests)."""
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * 2 * (world - 1) / world


@dataclass
class Expect:
    nodes: Optional[int] = None  # Ray nodes / hosts the run must span
    gpus_per_node: Optional[int] = None
    min_memory_gib: float = 0.0
    min_busbw_gbps: float = 0.0


@dataclass
class Verdict:
    ok: bool
    problems: list[str] = field(default_factory=list)


def judge(ranks: list[dict], bench: Optional[dict], intra: dict[str, dict], expect: Expect) -> Verdict:
    """The preflight's verdict from every rank's report, the all-reduce over all ranks and, when that was slow, the
    all-reduce inside each node. Each problem names the node (host) and the rank or GPU."""
    problems: list[str] = []
    hosts: dict[str, list[dict]] = {}
    for r in ranks:
        hosts.setdefault(r["host"], []).append(r)
        problems += [f"node {r['host']} rank {r['rank']}: {p}" for p in r.get("problems", [])]
    if expect.nodes is not None and len(hosts) != expect.nodes:
        problems.append(f"{len(hosts)} node(s) took part ({', '.join(sorted(hosts))}), expected {expect.nodes}")
    if expect.gpus_per_node is not None:
        for host, rs in sorted(hosts.items()):
            if len(rs) != expect.gpus_per_node:
                problems.append(f"node {host}: {len(rs)} GPU(s), expected {expect.gpus_per_node}")
    if bench is None:
        problems.append("the all-reduce did not complete")
    elif bench["world"] > 1 and bench["busbw_gbps"] < expect.min_busbw_gbps:
        msg = (f"all-reduce bus bandwidth {bench['busbw_gbps']:.1f} GB/s over {bench['world']} ranks is below "
               f"training.preflight.min_busbw_gbps {expect.min_busbw_gbps:g}")
        slow = sorted(h for h, b in intra.items() if b["world"] > 1 and b["busbw_gbps"] < expect.min_busbw_gbps)
        if slow:
            msg += "; inside the node(s) " + ", ".join(f"{h} ({intra[h]['busbw_gbps']:.1f} GB/s)" for h in slow)
        elif len(hosts) > 1:
            msg += ("; every node is fast on its own, so the links between nodes are slow (check `ibv_devinfo`, the "
                    "RDMA device plugin's rdma/hca, NCCL_IB_HCA / NCCL_SOCKET_IFNAME in job.env, and NCCL_DEBUG=INFO "
                    "for 'NET/Socket' instead of 'NET/IB')")
        problems.append(msg)
    return Verdict(ok=not problems, problems=problems)


# --------------------------------------------------------------------------------------------- one rank
def local_gpu_state(device_index: Optional[int]) -> tuple[Optional[GpuState], list[str]]:
    """This rank's GPU from nvidia-smi (by the UUID torch sees when CUDA_VISIBLE_DEVICES remaps indices)."""
    try:
        text = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as err:
        return None, [f"nvidia-smi failed: {err}"]
    gpus = parse_nvidia_smi(text)
    import torch

    uuid = ""
    try:
        uuid = str(torch.cuda.get_device_properties(device_index or 0).uuid)
    except Exception:  # noqa: BLE001 (older torch has no uuid: fall back to the index below)
        pass
    mine = [g for g in gpus if uuid and g.uuid.removeprefix("GPU-") == uuid.removeprefix("GPU-")]
    if not mine:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        wanted = int(visible.split(",")[device_index or 0]) if visible and visible.split(",")[0].isdigit() \
            else (device_index or 0)
        mine = [g for g in gpus if g.index == wanted]
    return (mine[0], []) if mine else (None, [f"nvidia-smi lists no GPU matching device {device_index}"])


def _allreduce(torch: Any, dist: Any, device: Any, nbytes: int, iters: int, warmup: int, group: Any = None,
               world: int = 1) -> dict:
    tensor = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        dist.all_reduce(tensor, group=group)
    sync()
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    sync()
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)  # the collective is as fast as its slowest rank
    seconds = float(elapsed.item())
    algbw, busbw = bus_bandwidth_gbps(tensor.numel() * 4, seconds, world)
    return {"world": world, "bytes": tensor.numel() * 4, "seconds": seconds, "algbw_gbps": algbw, "busbw_gbps": busbw}


def _gather_json(torch: Any, dist: Any, device: Any, obj: Any, world: int) -> list:
    """Every rank's JSON-able `obj`, in rank order (all_gather_object needs numpy, which a slim image may lack)."""
    data = torch.tensor(list(json.dumps(obj).encode()), dtype=torch.uint8, device=device)
    size = torch.tensor([data.numel()], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    longest = int(max(x.item() for x in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: data.numel()] = data
    out = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(out, padded)
    return [json.loads(bytes(t[: int(n.item())].tolist()).decode()) for t, n in zip(out, sizes, strict=True)]


def run_rank(rank: int, world: int, master: str, port: int, backend: str, nbytes: int, iters: int, warmup: int,
             min_memory_gib: float, min_busbw_gbps: float, timeout_s: float, gpu_index: Optional[int] = None) -> dict:
    """One rank: GPU state, then the all-reduce over all ranks (and within each node when that is slow). Rank 0
    returns the gathered reports; the others return their own."""
    import datetime

    import torch
    import torch.distributed as dist

    host = socket.gethostname()
    cuda = backend == "nccl"
    device = torch.device("cuda", gpu_index or 0) if cuda else torch.device("cpu")
    report: dict = {"rank": rank, "host": host, "problems": []}
    if cuda:
        torch.cuda.set_device(device)
        gpu, problems = local_gpu_state(gpu_index)
        report["gpu"] = asdict(gpu) if gpu else None
        report["problems"] = problems + (gpu_problems(gpu, min_memory_gib) if gpu else [])
    dist.init_process_group(backend, init_method=f"tcp://{master}:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    try:
        reports = _gather_json(torch, dist, device, report, world)
        bench = _allreduce(torch, dist, device, nbytes, iters, warmup, world=world)
        by_host: dict[str, list[int]] = {}
        for r in reports:
            by_host.setdefault(r["host"], []).append(r["rank"])
        intra: dict[str, dict] = {}
        if world > 1 and bench["busbw_gbps"] < min_busbw_gbps and len(by_host) > 1:
            for h, members in sorted(by_host.items()):  # every rank creates every group, in the same order
                group = dist.new_group(sorted(members))
                if rank in members:
                    intra[h] = _allreduce(torch, dist, device, nbytes, iters, warmup, group=group, world=len(members))
            intra = {h: b for d in _gather_json(torch, dist, device, intra, world) for h, b in d.items()}
        return {"ranks": reports, "bench": bench, "intra_node": intra} if rank == 0 else report
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------------------------- orchestration
def _spawned(rank: int, world: int, port: int, args: argparse.Namespace, queue: Any) -> None:
    gpu = rank if args.backend == "nccl" else None
    result = run_rank(rank, world, "127.0.0.1", port, args.backend, args.size_mib << 20, args.iters, args.warmup,
                      args.min_gpu_memory_gib, args.min_busbw_gbps, args.timeout_seconds, gpu_index=gpu)
    if rank == 0:
        queue.put(result)


def run_local(args: argparse.Namespace) -> dict:
    """One process per local GPU (nccl) or `--nprocs` processes (gloo), on this machine."""
    import torch
    import torch.multiprocessing as mp

    world = args.nprocs or (torch.cuda.device_count() if args.backend == "nccl" else 2)
    if world < 1:
        raise SystemExit("no GPU visible: use --backend gloo --nprocs N on CPU")
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_spawned, args=(world, free_port(), args, queue), nprocs=world, join=True,
                       start_method="spawn")
    return queue.get()


def run_ray(args: argparse.Namespace) -> dict:
    """One Ray actor per GPU of the running Ray cluster (the RayJob's), all ranks of one process group. With
    `--backend gloo` (a CPU Ray cluster: tests) `--nprocs` actors without GPUs."""
    import ray

    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto")
    try:
        nccl = args.backend == "nccl"
        world = int(ray.cluster_resources().get("GPU", 0)) if nccl else (args.nprocs or 2)
        if world < 1:
            raise RuntimeError("the Ray cluster has no GPU")

        @ray.remote(num_gpus=1 if nccl else 0, num_cpus=0)
        class Rank:
            def address(self) -> tuple[str, int]:
                return ray.util.get_node_ip_address(), free_port()

            def run(self, *a: Any) -> dict:
                # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU: device 0.
                return run_rank(*a, gpu_index=0 if nccl else None)

        actors = [Rank.remote() for _ in range(world)]
        master, port = ray.get(actors[0].address.remote(), timeout=args.timeout_seconds)
        refs = [a.run.remote(i, world, master, port, args.backend, args.size_mib << 20, args.iters, args.warmup,
                             args.min_gpu_memory_gib, args.min_busbw_gbps, args.timeout_seconds)
                for i, a in enumerate(actors)]
        _, pending = ray.wait(refs, num_returns=world, timeout=args.timeout_seconds * 2)
        if pending:
            late = [i for i, ref in enumerate(refs) if ref in pending]
            raise RuntimeError(f"ranks {late} did not finish within {args.timeout_seconds * 2:g} s (an NCCL hang: "
                               "run again with NCCL_DEBUG=INFO in job.env)")
        result = ray.get(refs[0])
        for a in actors:
            ray.kill(a)
        return result
    finally:
        ray.shutdown()


def to_mlflow(result: dict, experiment: Optional[str], run_name: Optional[str]) -> None:
    """Log the result as an MLflow run of its own when a tracking server is configured; never fails the check."""
    if not os.environ.get("MLFLOW_TRACKING_URI"):
        return
    try:
        import mlflow

        if experiment:
            mlflow.set_experiment(experiment)
        with mlflow.start_run(run_name=run_name or "preflight"):
            mlflow.set_tag("verl_ack.role", "preflight")
            mlflow.set_tag("verl_ack.preflight_ok", str(result["ok"]).lower())
            bench = result.get("bench") or {}
            mlflow.log_params({"world": bench.get("world"), "bytes": bench.get("bytes"), "backend": result["backend"],
                               "min_busbw_gbps": result["expect"]["min_busbw_gbps"]})
            mlflow.log_metrics({k: bench[k] for k in ("busbw_gbps", "algbw_gbps", "seconds") if k in bench})
            for host, b in (result.get("intra_node") or {}).items():
                mlflow.log_metric(f"intra_node_busbw_gbps/{host}", b["busbw_gbps"])
            mlflow.log_text(json.dumps(result, indent=2), "preflight.json")
    except Exception as err:  # noqa: BLE001 (the fabric result is in the logs either way)
        print(f"verl_ack_preflight: MLflow logging failed: {err!r}", file=sys.stderr)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    then: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, then = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="verl_ack_preflight", description=__doc__.split("\n\n")[0])
    p.add_argument("--ray", action="store_true", help="one Ray actor per GPU of the running Ray cluster")
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    p.add_argument("--nprocs", type=int, default=0, help="local processes (default: GPUs present; gloo: 2)")
    p.add_argument("--size-mib", type=int, default=256, help="all-reduce message per rank, MiB")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--nodes", type=int, default=None, help="nodes the run must span")
    p.add_argument("--gpus-per-node", type=int, default=None)
    p.add_argument("--min-gpu-memory-gib", type=float, default=0.0)
    p.add_argument("--min-busbw-gbps", type=float, default=0.0)
    p.add_argument("--timeout-seconds", type=float, default=300.0)
    p.add_argument("--json", default=None, help="write the result here")
    p.add_argument("--mlflow-experiment", default=None)
    p.add_argument("--mlflow-run", default=None)
    return p.parse_args(argv), then


def environment() -> dict:
    """Versions the figures depend on (torch, CUDA, NCCL), for the result file."""
    try:
        import torch

        nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
        return {"torch": torch.__version__, "cuda": torch.version.cuda,
                "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl}
    except Exception as err:  # noqa: BLE001
        return {"error": repr(err)}


def main(argv: Optional[list[str]] = None) -> int:
    args, then = parse_args(sys.argv[1:] if argv is None else argv)
    expect = Expect(args.nodes, args.gpus_per_node, args.min_gpu_memory_gib, args.min_busbw_gbps)
    started = time.time()
    error = None
    try:
        gathered = run_ray(args) if args.ray else run_local(args)
    except Exception as err:  # noqa: BLE001 (a failed or hung collective is a result: it fails the check below)
        gathered, error = {"ranks": [], "bench": None, "intra_node": {}}, f"{type(err).__name__}: {err}"
    verdict = judge(gathered["ranks"], gathered["bench"], gathered["intra_node"], expect)
    result = {"version": RESULT_VERSION, "ok": verdict.ok and error is None,
              "problems": verdict.problems + ([error] if error else []), "backend": args.backend,
              "expect": asdict(expect), "seconds": round(time.time() - started, 1), "environment": environment(),
              **gathered}
    text = json.dumps(result, sort_keys=True)
    print(f"verl_ack_preflight: {text}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    to_mlflow(result, args.mlflow_experiment, args.mlflow_run)
    for problem in result["problems"]:
        print(f"verl_ack_preflight: FAILED: {problem}", file=sys.stderr, flush=True)
    if not result["ok"]:
        return 1
    if then:
        os.execvp(then[0], then)
    return 0


if __name__ == "__main__":
    sys.exit(main())
