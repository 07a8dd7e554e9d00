"""The model prefetch: the staged weights are copied from the OSS models volume into a memory-backed directory of
each Ray pod while Ray starts, so verl reads them from memory instead of OSS.

    python3 /etc/verl-ack/config/verl_ack_model_prefetch.py copy --source=DIR --dest=DIR --max-gib=N  # sidecar
    python3 -m verl_ack_model_prefetch wait --source=DIR --dest=DIR --nodes=N -- COMMAND...  # before verl

Why. verl reads the weights during its init, after Ray has started and the job was submitted; read from the OSS
volume then, the read is on the path to the first step (docs/latency.md). The pods start minutes before verl does,
so a copy started with them overlaps Ray's start and the submission, and verl's own read is then a memory read.

`copy` (the `model-prefetch` container of every Ray pod) reads the staging Job's completion marker beside the
source prefix (`<prefix>.complete`: every file's key and size, pipeline/marker.py), refuses a model larger than the
copy's budget (`--max-gib`) or its directory can hold, copies each listed file into `<dest>.partial/`, checks its
size, renames the directory to `<dest>` and writes `<dest>.complete` LAST. On any error it writes `<dest>.failed`
with the reason instead. The copy runs in a child process, the OOM killer's first choice; the container's PID 1 only
watches it and writes `<dest>.failed` however the child ended (an OOM kill too) when the copy is not complete, then
waits for SIGTERM, so the pod stays Ready (a container that exits makes the pod not Ready, never restarted in the
SidecarMode head, and KubeRay waits for Ready pods). A restarted container finds `<dest>.complete` and copies
nothing, and cleans its own half state: a half-copy is removed, a copy renamed before its marker was written is
kept when every file has its listed size (its marker is written then), else removed and copied again.

`wait` (the first program of the Ray job, before the fabric preflight and verl) waits until every Ray node's copy is
complete or failed: on one node it reads its own pod's directory; on several it runs one zero-CPU Ray task pinned
to each node. When every node has its copy it execs COMMAND as it is (verl's `actor_rollout_ref.model.path` names
the copy); when any node's copy failed, did not finish within `--timeout-seconds` or could not be checked (Ray
unreachable), it rewrites that one override
to the source on the OSS volume, says why, and execs it: the prefetch can make the job faster, never fail it. All
nodes read the same path either way.

Shipped in the job's ConfigMap; standard library only (plus Ray for `wait` on several nodes, the image's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Optional

MODEL_PATH_OVERRIDE = "actor_rollout_ref.model.path="
CHUNK_BYTES = 16 << 20
POLL_SECONDS = 2.0


def marker_of(prefix: str) -> str:
    """`/models/m/k/` -> `/models/m/k.complete` (the staging Job's marker, pipeline/marker.py marker_key)."""
    stripped = prefix.rstrip("/")
    if not stripped:
        raise ValueError("the prefix must not be empty (the marker sits next to it)")
    return stripped + ".complete"


def failed_of(dest: str) -> str:
    return dest.rstrip("/") + ".failed"


def _write_atomic(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def staged_files(source: str) -> list[dict]:
    """The files the staging Job's marker lists (relative key and size). A missing or empty marker means the
    model was never staged completely: nothing to copy from."""
    marker = marker_of(source)
    try:
        with open(marker, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise RuntimeError(f"no staging marker {marker}: the model staging Job has not completed") from None
    except json.JSONDecodeError as err:
        raise RuntimeError(f"the staging marker {marker} is not valid JSON ({err})") from None
    files = manifest.get("files") or []
    if not files:
        raise RuntimeError(f"the staging marker {marker} lists no files")
    for f in files:
        key = str(f.get("key", ""))
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise RuntimeError(f"the staging marker {marker} lists an unsafe key {key!r}")
    return [{"key": str(f["key"]), "size": int(f["size"])} for f in files]


def listed_files(source: str) -> list[dict]:
    """`--list-source`: the files under a model directory the user put in the bucket (model.source: oss), which no
    staging Job marked; its config.json must be there."""
    if not os.path.isfile(os.path.join(source, "config.json")):
        raise RuntimeError(f"{source} holds no config.json: not a Hugging Face model directory (model.path)")
    files = []
    for root, _dirs, names in os.walk(source):
        for name in sorted(names):
            path = os.path.join(root, name)
            files.append({"key": os.path.relpath(path, source), "size": os.path.getsize(path)})
    return sorted(files, key=lambda f: f["key"])


def local_state(dest: str, files: Optional[list[dict]] = None) -> tuple[str, str]:
    """("complete" | "failed" | "pending", detail) of one pod's copy."""
    try:
        with open(marker_of(dest), encoding="utf-8") as f:
            done = json.load(f)
    except FileNotFoundError:
        done = None
    except json.JSONDecodeError:
        return "pending", "the copy's marker is being written"
    if done is not None:
        want = files if files is not None else done.get("files") or []
        problems = []
        for f in want:
            path = os.path.join(dest, f["key"])
            size = os.path.getsize(path) if os.path.isfile(path) else None
            if size != f["size"]:
                problems.append(f"{f['key']} is {'missing' if size is None else f'{size} bytes'}, not {f['size']}")
        if problems:
            return "failed", "the copy no longer matches its marker: " + "; ".join(problems[:3])
        return "complete", f"{len(want)} files, {sum(f['size'] for f in want)} bytes"
    try:
        with open(failed_of(dest), encoding="utf-8") as f:
            return "failed", f.read().strip()
    except FileNotFoundError:
        return "pending", "copying"


def copy_model(source: str, dest: str, max_bytes: Optional[int] = None, log: Callable[[str], None] = print,
               list_source: bool = False) -> dict:
    """Copy the staged model at `source` into `dest` (see the module docstring). Returns the copy's marker.
    `max_bytes`: the copy's budget, checked before anything is copied (the pages count against this container's
    memory limit, and a tmpfs without a size shows the node's memory as free)."""
    dest = dest.rstrip("/")
    files = listed_files(source) if list_source else staged_files(source)
    state, detail = local_state(dest, files)
    if state == "complete":
        log(f"model-prefetch: {dest} is complete already ({detail})")
        with open(marker_of(dest), encoding="utf-8") as f:
            return json.load(f)
    total = sum(f["size"] for f in files)
    parent = os.path.dirname(dest) or "."
    os.makedirs(parent, exist_ok=True)
    partial = dest + ".partial"
    # This program's own half state from a killed run (the directory is the pod's, and only this program writes
    # it): a stale failure, a half-copy, a marker's temporary file, and a copy renamed before its marker was
    # written, which is kept when every listed file is there at its size (the rename follows the last size check).
    with contextlib.suppress(FileNotFoundError):
        os.remove(failed_of(dest))
    shutil.rmtree(partial, ignore_errors=True)
    for name in os.listdir(parent):
        if name.startswith(os.path.basename(marker_of(dest)) + ".tmp"):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(parent, name))
    if os.path.isdir(dest):
        if _sizes_match(dest, files):
            marker = {"source": source, "files": files, "total_bytes": total, "seconds": 0.0, "resumed": True}
            _write_atomic(marker_of(dest), json.dumps(marker, indent=1))
            log(f"model-prefetch: {dest} was copied before a restart; its marker is written now")
            return marker
        shutil.rmtree(dest)
    room = shutil.disk_usage(parent).free if max_bytes is None else min(max_bytes, shutil.disk_usage(parent).free)
    if total > room:
        raise RuntimeError(f"the staged model is {total / 2**30:.2f} GiB, the copy's directory holds "
                           f"{room / 2**30:.2f} GiB: raise job.model_prefetch_gib or turn job.model_prefetch off")
    started = time.monotonic()
    for f in files:
        src, out = os.path.join(source, f["key"]), os.path.join(partial, f["key"])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(src, "rb") as r, open(out, "wb") as w:
            shutil.copyfileobj(r, w, CHUNK_BYTES)
        size = os.path.getsize(out)
        if size != f["size"]:
            raise RuntimeError(f"{src} read {size} bytes, the staging marker says {f['size']}")
    os.replace(partial, dest)
    seconds = time.monotonic() - started
    marker = {"source": source, "files": files, "total_bytes": total, "seconds": round(seconds, 3)}
    _write_atomic(marker_of(dest), json.dumps(marker, indent=1))
    log(f"model-prefetch: copied {len(files)} files, {total / 2**30:.2f} GiB, from {source} to {dest} in "
        f"{seconds:.1f} s ({total * 8 / 1e6 / max(seconds, 1e-9):.0f} Mbit/s)")
    return marker


def _sizes_match(dest: str, files: list[dict]) -> bool:
    return all(os.path.isfile(os.path.join(dest, f["key"]))
               and os.path.getsize(os.path.join(dest, f["key"])) == f["size"] for f in files)


def report_failed(dest: str, source: str, reason: str) -> None:
    """`<dest>.failed` with the reason, so `wait` falls back at once. Never raises: if even this cannot be written
    (the directory is full or gone), `wait` falls back at its timeout instead."""
    print(f"model-prefetch: FAILED: {reason}; verl will read {source}", file=sys.stderr, flush=True)
    try:
        _write_atomic(failed_of(dest), reason + "\n")
    except BaseException as err:  # noqa: BLE001 (the copier's container must stay up whatever happens)
        print(f"model-prefetch: could not write {failed_of(dest)} ({type(err).__name__}: {err}); the wait step "
              "falls back at its timeout", file=sys.stderr, flush=True)


def copy_child(args: argparse.Namespace) -> int:
    """The copy itself (`copy --child`): any error is reported as `<dest>.failed`."""
    try:
        copy_model(args.source, args.dest, None if args.max_gib is None else int(args.max_gib * 2**30),
                   list_source=args.list_source)
        return 0
    except Exception as err:  # noqa: BLE001 (any failure is reported to `wait`, which falls back to the source)
        report_failed(args.dest, args.source, f"{type(err).__name__}: {err}")
        return 1


def child_words(args: argparse.Namespace) -> list[str]:
    words = [sys.executable, os.path.abspath(__file__), "copy", f"--source={args.source}", f"--dest={args.dest}",
             "--child"]
    return (words + ([f"--max-gib={args.max_gib}"] if args.max_gib is not None else [])
            + (["--list-source"] if args.list_source else []))


def supervise_copy(args: argparse.Namespace, words: Optional[list[str]] = None) -> None:
    """Run the copy in a child process and report however it ends. The container's PID 1 stays this small parent:
    in SidecarMode the head pod never restarts a container (restartPolicy Never), and a copier container that
    exits (an OOM kill included) leaves the head pod not Ready, so the Ray cluster never becomes Ready and the
    pre-running deadline ends the job. The child is made the OOM killer's first choice (oom_score_adj 1000, which
    any process may raise), so a copy over the container's memory kills the child, not the container."""
    child = subprocess.Popen(words or child_words(args))
    try:
        with open(f"/proc/{child.pid}/oom_score_adj", "w", encoding="utf-8") as f:
            f.write("1000")
    except OSError:
        pass  # not Linux, or /proc read-only: the copy still runs; only the OOM choice is left to the kernel

    def stop(*_: Any) -> None:
        with contextlib.suppress(OSError):
            child.terminate()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    returncode = child.wait()
    if local_state(args.dest)[0] == "pending":
        how = (f"signal {-returncode}" + (" (SIGKILL: an OOM kill?)" if returncode == -signal.SIGKILL else "")
               if returncode < 0 else f"exit code {returncode}")
        report_failed(args.dest, args.source, f"the copier process ended by {how} before the copy was complete")


def run_copy(args: argparse.Namespace) -> int:
    # PID 1 of its container: a signal without a handler would be ignored, and a pod deleted during the copy or
    # after it would wait out its grace period. Set first, so SIGTERM ends the copier at any point.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.child:
        return copy_child(args)
    try:
        supervise_copy(args)
    except Exception as err:  # noqa: BLE001 (the child could not even start: report it and stay up)
        report_failed(args.dest, args.source, f"{type(err).__name__}: {err}")
    if args.exit:
        return 0
    while True:
        signal.pause()


def wait_local(dest: str, timeout_seconds: float) -> tuple[str, str]:
    """Poll one pod's copy until it is complete or failed, or the timeout passes ("failed" then)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        state, detail = local_state(dest)
        if state != "pending":
            return state, detail
        if time.monotonic() >= deadline:
            return "failed", f"the copy did not finish within {timeout_seconds:g} s"
        time.sleep(POLL_SECONDS)


def wait_ray(dest: str, nodes: int, timeout_seconds: float) -> dict[str, tuple[str, str]]:
    """Every Ray node's copy state, by node IP: one zero-CPU task pinned to each alive node (soft=False), once the
    job's `nodes` Ray nodes have joined."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto")
    try:
        deadline = time.monotonic() + timeout_seconds
        alive = [n for n in ray.nodes() if n.get("Alive")]
        while len(alive) < nodes and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            alive = [n for n in ray.nodes() if n.get("Alive")]
        if len(alive) < nodes:
            return {"ray": ("failed", f"{len(alive)} of {nodes} Ray nodes joined within {timeout_seconds:g} s")}
        task = ray.remote(num_cpus=0)(wait_local)
        refs = {n["NodeManagerAddress"]: task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)).remote(
                dest, max(deadline - time.monotonic(), 1.0)) for n in alive}
        return {ip: tuple(ray.get(ref)) for ip, ref in refs.items()}  # type: ignore[misc]
    finally:
        ray.shutdown()


def with_source(command: list[str], dest: str, source: str) -> list[str]:
    """COMMAND with verl's model path moved from the copy back to the OSS volume."""
    out, hits = [], 0
    for w in command:
        if w.startswith(MODEL_PATH_OVERRIDE) and w[len(MODEL_PATH_OVERRIDE):].rstrip("/") == dest.rstrip("/"):
            w, hits = MODEL_PATH_OVERRIDE + source, hits + 1
        out.append(w)
    if hits != 1:
        raise SystemExit(f"model-prefetch: the command names the copy {dest} in {hits} {MODEL_PATH_OVERRIDE} "
                         "overrides, not 1: the program renders exactly one")
    return out


def decide(states: dict[str, tuple[str, str]], command: list[str], dest: str, source: str,
           log: Callable[[str], None] = print) -> list[str]:
    """The command to exec: as given when every node's copy is complete, else reading the source."""
    bad = {node: detail for node, (state, detail) in states.items() if state != "complete"}
    if not bad:
        log(f"model-prefetch: the copy is complete on {len(states)} node(s); verl reads {dest}")
        return command
    for node, detail in sorted(bad.items()):
        log(f"model-prefetch: WARNING: node {node}: {detail}")
    log(f"model-prefetch: WARNING: verl reads the weights from {source} (OSS) instead: slower, same weights")
    return with_source(command, dest, source)


def run_wait(args: argparse.Namespace, command: list[str]) -> None:
    try:
        if args.nodes > 1:
            states = wait_ray(args.dest, args.nodes, args.timeout_seconds)
        else:
            states = {"local": wait_local(args.dest, args.timeout_seconds)}
    except Exception as err:  # noqa: BLE001 (Ray or a node's read failed: the copy cannot be trusted, OSS can)
        states = {"wait": ("failed", f"the copies could not be checked ({type(err).__name__}: {err})")}
    final = decide(states, command, args.dest, args.source, log=lambda m: print(m, flush=True))
    sys.stdout.flush()
    os.execvp(final[0], final)


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="verl_ack_model_prefetch", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("copy", help="copy the staged model into this pod's directory, then wait for SIGTERM")
    w = sub.add_parser("wait", help="wait for every node's copy, then exec COMMAND (after --)")
    for q in (c, w):
        q.add_argument("--source", required=True, help="the staged model on the OSS volume")
        q.add_argument("--dest", required=True, help="the copy in the pod's memory-backed directory")
    c.add_argument("--max-gib", type=float, help="the copy's budget (job.model_prefetch_gib); a larger model is not "
                   "copied")
    c.add_argument("--exit", action="store_true", help="exit after the copy (tests) instead of waiting for SIGTERM")
    c.add_argument("--child", action="store_true", help="the copy process the container's PID 1 supervises")
    c.add_argument("--list-source", action="store_true", help="copy every file under --source (a model the user "
                   "put in the bucket, model.source: oss) instead of the staging marker's list")
    w.add_argument("--nodes", type=int, default=1, help="Ray nodes of the job (more than 1: Ray tasks per node)")
    w.add_argument("--timeout-seconds", type=float, default=1800, help="then read the source instead")
    args = p.parse_args(argv)
    if args.action == "wait" and not command:
        p.error("wait needs the command to exec after --")
    return args, command


def main(argv: Optional[list[str]] = None) -> Any:
    args, command = parse(sys.argv[1:] if argv is None else argv)
    if args.action == "copy":
        return run_copy(args)
    return run_wait(args, command)


if __name__ == "__main__":
    sys.exit(main())
