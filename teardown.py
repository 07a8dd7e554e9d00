"""Keep the latest checkpoint of a stack's experiment, verify the copy, then destroy the stack.

    python teardown.py --stack NAME [--dry-run | --destroy [--allow-no-checkpoint]] [--keep-prefix P | --keep-bucket B]
                       [--endpoint URL]

verl writes checkpoints to `<checkpoints_prefix><project>/<experiment>/global_step_<N>/` (the
Hugging Face export under `actor/huggingface/`) and, once a step's save has finished,
`latest_checkpointed_iteration.txt` holding N. This tool:

1. lists the experiment's objects and picks the latest complete step: the tracker file's N when
   present (a larger global_step directory without a tracker update is a save that did not finish),
   otherwise the largest N;
2. server-side copies every object of that step to `<kept root><project>/<experiment>/global_step_<N>/`
   (kept root: settings.storage.kept_prefix, or --keep-prefix; --keep-bucket copies into another
   bucket under the same layout), skipping objects already kept with the same size and CRC64, and
   writes a tracker file next to it so the kept folder is itself a resumable verl checkpoint root;
3. verifies every copy by size and CRC64 against its source;
4. only then runs `pulumi destroy --stack NAME --yes --exclude-protected --run-program` (with --destroy) or prints
   that command (the protected bucket stays; the program runs to fetch a fresh kubeconfig).

--dry-run lists what would be copied and changes nothing. A copy that fails or does not verify
makes the tool exit 1 without destroying anything; it never deletes objects.

Credentials: OSS_ACCESS_KEY_ID/OSS_ACCESS_KEY_SECRET, ALIBABA_CLOUD_ACCESS_KEY_ID/
ALIBABA_CLOUD_ACCESS_KEY_SECRET, or the Pulumi provider's ALICLOUD_ACCESS_KEY/ALICLOUD_SECRET_KEY (see
pipeline/oss_client.py). Exit codes: 0 done, 1 nothing safe to keep, a copy failed or OSS could not be
read, 2 bad arguments or settings; with --destroy, pulumi's own exit code.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import alibabacloud_oss_v2 as oss

from pipeline.oss_client import (
    CredentialsMissing,
    ObjectStat,
    crc64_of_bytes,
    credentials_provider_from_env,
    get_text,
    head,
    list_objects,
    make_client,
    normalize_prefix,
)

TRACKER = "latest_checkpointed_iteration.txt"
_STEP_DIR = re.compile(r"global_step_(\d+)/")

# Above 200 MiB (the SDK's default threshold) the SDK's Copier uses OSS shallow copy where it
# applies (same bucket, no server-side encryption) and multipart copy (UploadPartCopy) otherwise,
# so checkpoint shards too large for one CopyObject still copy.
COPY_THRESHOLD = 200 * 1024 * 1024


class TeardownError(RuntimeError):
    """Nothing safe to keep, or the copy did not verify: do not destroy."""


# ------------------------------------------------------------------------------------------ layout
def experiment_prefix(checkpoints_prefix: str, project: str, experiment: str) -> str:
    return f"{normalize_prefix(checkpoints_prefix)}{project}/{experiment}/"


def step_of(key: str, exp_prefix: str) -> int | None:
    """N for `<exp_prefix>global_step_N/...`, None for anything else (the tracker, stray files)."""
    if not key.startswith(exp_prefix):
        return None
    m = _STEP_DIR.match(key[len(exp_prefix):])
    return int(m.group(1)) if m else None


def step_prefix(exp_prefix: str, step: int) -> str:
    return f"{exp_prefix}global_step_{step}/"


def kept_experiment_prefix(kept_root: str, project: str, experiment: str) -> str:
    return f"{normalize_prefix(kept_root)}{project}/{experiment}/"


@dataclass(frozen=True)
class StepChoice:
    step: int
    notes: tuple[str, ...] = ()


def choose_step(steps: Sequence[int], tracker_text: str | None) -> StepChoice:
    """The step to keep, from the global_step_N directories present and the tracker file's text."""
    present = sorted(set(steps))
    if not present:
        raise NoCheckpoints("no global_step_N directory found")
    newest = present[-1]
    if tracker_text is None:
        return StepChoice(newest, (f"no {TRACKER}: keeping the largest step, {newest}, unconfirmed by verl",))
    text = tracker_text.strip()
    if not text.isdigit():
        raise TeardownError(f"{TRACKER} holds {text[:40]!r}, not a step number")
    tracked = int(text)
    if tracked not in present:
        raise TeardownError(f"{TRACKER} says step {tracked}, but global_step_{tracked}/ does not exist "
                            f"(steps present: {', '.join(map(str, present))})")
    if tracked < newest:
        # verl updates the tracker only after a save finished, so the newer directory is a partial save.
        note = (f"global_step_{newest}/ is newer than {TRACKER} ({tracked}); "
                "it looks like an unfinished save and is not kept")
        return StepChoice(tracked, (note,))
    return StepChoice(tracked)


def check_no_overlap(src_bucket: str, exp_prefix: str, dest_bucket: str, dest_prefix: str) -> None:
    if src_bucket != dest_bucket:
        return
    if dest_prefix.startswith(exp_prefix) or exp_prefix.startswith(dest_prefix):
        raise ValueError(f"the kept prefix {dest_prefix!r} overlaps the checkpoints being kept ({exp_prefix!r}); "
                         "choose a kept prefix outside the checkpoints prefix")


# ------------------------------------------------------------------------------------------ plan
@dataclass(frozen=True)
class CopyItem:
    source: ObjectStat
    dest_key: str


@dataclass(frozen=True)
class Plan:
    bucket: str
    exp_prefix: str
    step: StepChoice
    items: tuple[CopyItem, ...]
    dest_bucket: str
    dest_exp_prefix: str

    @property
    def total_bytes(self) -> int:
        return sum(i.source.size for i in self.items)

    @property
    def tracker_key(self) -> str:
        return self.dest_exp_prefix + TRACKER


def plan_copies(objects: Sequence[ObjectStat], src_step_prefix: str, dest_step_prefix: str) -> tuple[CopyItem, ...]:
    return tuple(CopyItem(source=o, dest_key=dest_step_prefix + o.key[len(src_step_prefix):])
                 for o in objects if o.key.startswith(src_step_prefix))


def make_plan(client: oss.Client, *, bucket: str, checkpoints_prefix: str, project: str, experiment: str,
              dest_bucket: str, kept_root: str) -> Plan:
    exp = experiment_prefix(checkpoints_prefix, project, experiment)
    dest_exp = kept_experiment_prefix(kept_root, project, experiment)
    check_no_overlap(bucket, exp, dest_bucket, dest_exp)
    objects = list_objects(client, bucket, exp)
    steps = [s for s in (step_of(o.key, exp) for o in objects) if s is not None]
    try:
        choice = choose_step(steps, get_text(client, bucket, exp + TRACKER))
    except TeardownError as err:
        raise type(err)(f"oss://{bucket}/{exp}: {err}") from None
    src_step = step_prefix(exp, choice.step)
    items = plan_copies(objects, src_step, step_prefix(dest_exp, choice.step))
    return Plan(bucket=bucket, exp_prefix=exp, step=choice, items=items, dest_bucket=dest_bucket,
                dest_exp_prefix=dest_exp)


# ------------------------------------------------------------------------------------------ copy + verify
def verify(source: ObjectStat, dest: ObjectStat | None) -> str | None:
    """None when `dest` is a faithful copy of `source`, else the reason it is not."""
    if dest is None:
        return "the copy does not exist"
    if source.crc64 is None:
        return "the source has no CRC64, so the copy cannot be verified"
    if dest.size != source.size:
        return f"size {dest.size} != source {source.size}"
    if dest.crc64 != source.crc64:
        return f"CRC64 {dest.crc64} != source {source.crc64}"
    return None


@dataclass
class KeepResult:
    kept: list[ObjectStat] = field(default_factory=list)  # verified copies
    copied: int = 0
    already_kept: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def keep(client: oss.Client, plan: Plan, *, copy_threshold: int = COPY_THRESHOLD,
         log: Callable[[str], None] = print) -> KeepResult:
    """Copy every planned object, then verify all of them. Never deletes anything."""
    result = KeepResult()
    copier = client.copier(multipart_copy_threshold=copy_threshold)
    sources: dict[str, ObjectStat | None] = {}
    for item in plan.items:
        # Listings carry no CRC64; HEAD the source for it.
        src = sources[item.source.key] = head(client, plan.bucket, item.source.key)
        if src is None:
            result.problems.append(f"{item.source.key}: the source disappeared while copying")
            continue
        if verify(src, head(client, plan.dest_bucket, item.dest_key)) is None:
            result.already_kept += 1
            log(f"already kept oss://{plan.dest_bucket}/{item.dest_key}")
            continue
        log(f"copying oss://{plan.bucket}/{item.source.key} ({src.size} bytes)")
        try:
            copier.copy(oss.CopyObjectRequest(bucket=plan.dest_bucket, key=item.dest_key,
                                              source_bucket=plan.bucket, source_key=item.source.key))
            result.copied += 1
        except oss.exceptions.BaseError as err:  # report every failed object, then refuse to destroy
            result.problems.append(f"{item.source.key}: copy failed: {err}")
    for item in plan.items:
        src = sources.get(item.source.key)
        if src is None:
            continue
        dest = head(client, plan.dest_bucket, item.dest_key)
        problem = verify(src, dest)
        if problem:
            result.problems.append(f"oss://{plan.dest_bucket}/{item.dest_key}: {problem}")
        else:
            result.kept.append(dest)
    if result.ok:
        write_tracker(client, plan, result)
    return result


def write_tracker(client: oss.Client, plan: Plan, result: KeepResult) -> None:
    # Same file verl writes, so `trainer.default_local_dir=<kept experiment dir>` resumes from it.
    body = str(plan.step.step).encode()
    client.put_object(oss.PutObjectRequest(bucket=plan.dest_bucket, key=plan.tracker_key, body=body))
    problem = verify(ObjectStat(key=plan.tracker_key, size=len(body), crc64=crc64_of_bytes(body)),
                     head(client, plan.dest_bucket, plan.tracker_key))
    if problem:
        result.problems.append(f"oss://{plan.dest_bucket}/{plan.tracker_key}: {problem}")


# ------------------------------------------------------------------------------------------ CLI
def destroy_command(stack: str) -> list[str]:
    # --exclude-protected: the bucket is protected while storage.keep_on_destroy (the default), so a plain
    # destroy would stop at it; this destroys everything else and keeps the data.
    # --run-program: the Kubernetes provider's kubeconfig in the state is a temporary credential that may have
    # expired since `up` (cluster.kubeconfig_ttl_minutes); running the program fetches a fresh one.
    return ["pulumi", "destroy", "--stack", stack, "--yes", "--exclude-protected", "--run-program"]


def run_destroy(command: list[str]) -> int:
    return subprocess.run(command, cwd=Path(__file__).resolve().parent, check=False).returncode


def describe_plan(plan: Plan) -> list[str]:
    lines = [f"experiment: oss://{plan.bucket}/{plan.exp_prefix}",
             f"latest step: {plan.step.step}"]
    lines += [f"note: {n}" for n in plan.step.notes]
    lines.append(f"copy {len(plan.items)} objects ({plan.total_bytes} bytes) to "
                 f"oss://{plan.dest_bucket}/{step_prefix(plan.dest_exp_prefix, plan.step.step)}")
    lines += [f"  {i.source.key} -> {i.dest_key} ({i.source.size} bytes)" for i in plan.items]
    lines.append(f"then write oss://{plan.dest_bucket}/{plan.tracker_key} = {plan.step.step}")
    return lines


def print_error(line: str) -> None:
    print(line, file=sys.stderr)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="teardown.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<name>.yaml)")
    p.add_argument("--dry-run", action="store_true", help="show what would be copied; change nothing")
    p.add_argument("--destroy", action="store_true", help="run `pulumi destroy` after a verified copy")
    keep_to = p.add_mutually_exclusive_group()
    keep_to.add_argument("--keep-prefix", help="kept root in the same bucket (default: storage.kept_prefix)")
    keep_to.add_argument("--keep-bucket", help="copy into this bucket instead, under storage.kept_prefix")
    p.add_argument("--endpoint", help="OSS endpoint override (default: the region's public endpoint)")
    p.add_argument("--allow-no-checkpoint", action="store_true",
                   help="with --destroy: destroy even when the experiment wrote no checkpoint at all (nothing to "
                        "lose; the scheduled TTL teardown uses this so an idle stack does not bill forever)")
    args = p.parse_args(argv)
    if args.dry_run and args.destroy:
        p.error("--dry-run and --destroy exclude each other")
    if args.keep_prefix is not None and not normalize_prefix(args.keep_prefix):
        p.error("--keep-prefix must not be empty")
    return args


class NoCheckpoints(TeardownError):
    """The experiment never wrote a checkpoint: nothing can be lost by destroying."""


class StackError(RuntimeError):
    """The stack file is missing or invalid; the message names the problem."""


def default_load_stack(name: str):
    # Imported here so the copy logic and its tests do not depend on the Pulumi program's settings.
    import yaml

    from components.config import SettingsError
    from components.model import load_stack

    try:
        return load_stack(name)
    except (SettingsError, FileNotFoundError, yaml.YAMLError) as err:
        raise StackError(str(err)) from err


def main(
    argv: Sequence[str] | None = None,
    *,
    load_stack: Callable[[str], object] = default_load_stack,
    destroy: Callable[[list[str]], int] = run_destroy,
    env: dict[str, str] | None = None,
    log: Callable[[str], None] = print,
    err: Callable[[str], None] = print_error,
) -> int:
    args = parse_args(argv)
    env = dict(os.environ) if env is None else env
    try:
        settings = load_stack(args.stack)
    except StackError as error:
        err(f"error: {error}")
        return 2
    storage, training = settings.storage, settings.training
    dest_bucket = args.keep_bucket or storage.bucket_name
    kept_root = args.keep_prefix or storage.kept_prefix
    if dest_bucket == storage.bucket_name and storage.mode == "new" and not storage.keep_on_destroy:
        err("error: storage.keep_on_destroy is false, so `pulumi destroy` deletes the bucket and any copy kept "
            "in it; use --keep-bucket to keep the checkpoint in another bucket")
        return 2
    try:
        client = make_client(region=settings.region, endpoint=args.endpoint,
                             credentials_provider=credentials_provider_from_env(env, settings.region))
        plan = make_plan(client, bucket=storage.bucket_name, checkpoints_prefix=storage.checkpoints_prefix,
                         project=training.project_name, experiment=training.experiment_name,
                         dest_bucket=dest_bucket, kept_root=kept_root)
    except (ValueError, CredentialsMissing) as error:
        err(f"error: {error}")
        return 2
    except oss.exceptions.BaseError as error:
        # Network, credentials or a missing bucket: one line naming what was read, not an SDK traceback.
        err(f"error: cannot list oss://{storage.bucket_name}/{storage.checkpoints_prefix} "
            f"({type(error).__name__}: {str(error).splitlines()[0][:300]}); nothing copied or destroyed")
        return 1
    except NoCheckpoints as error:
        if args.destroy and args.allow_no_checkpoint:
            log(f"{error}: no checkpoint to keep; destroying as --allow-no-checkpoint asks")
            return destroy(destroy_command(args.stack))
        err(f"error: {error}; nothing to keep. If that is expected, run `{' '.join(destroy_command(args.stack))}` "
            "yourself or pass --allow-no-checkpoint with --destroy.")
        return 1
    except TeardownError as error:
        err(f"error: {error}; refusing to destroy until the checkpoints are sorted out.")
        return 1
    for line in describe_plan(plan):
        log(line)
    if args.dry_run:
        log(f"dry run: nothing copied; afterwards this would run: {' '.join(destroy_command(args.stack))}")
        return 0

    try:
        result = keep(client, plan, log=log)
    except oss.exceptions.BaseError as error:
        # A HEAD or the tracker write failed outright (per-object copy failures are collected by keep()).
        err(f"error: copying step {plan.step.step} to oss://{plan.dest_bucket}/ failed "
            f"({type(error).__name__}: {str(error).splitlines()[0][:300]}); nothing deleted or destroyed")
        return 1
    if not result.ok:
        err(f"error: {len(result.problems)} of {len(plan.items)} objects did not copy or verify; nothing was "
            "deleted or destroyed:")
        for problem in result.problems:
            err(f"  {problem}")
        return 1
    for stat in result.kept:
        log(f"kept oss://{plan.dest_bucket}/{stat.key} ({stat.size} bytes, crc64 {stat.crc64})")
    log(f"kept step {plan.step.step}: {len(result.kept)} objects verified by size and CRC64 "
        f"({result.copied} copied, {result.already_kept} already kept), tracker at "
        f"oss://{plan.dest_bucket}/{plan.tracker_key}")
    command = destroy_command(args.stack)
    if not args.destroy:
        log(f"to destroy the stack, run: {' '.join(command)}")
        return 0
    log(f"running: {' '.join(command)}")
    return destroy(command)


if __name__ == "__main__":
    sys.exit(main())
