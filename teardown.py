"""Keep the latest complete checkpoint of a stack's experiment, verify the copy, then destroy the stack.

    python teardown.py --stack NAME [--dry-run | --destroy [--allow-no-checkpoint]] [--keep-prefix P | --keep-bucket B]
                       [--break-lock RUN_ID] [--endpoint URL]

What verl 0.9.1 writes (verl/trainer/ppo/ray_trainer.py `_save_checkpoint`, verl/utils/checkpoint/
fsdp_checkpoint_manager.py `save_checkpoint`), under `<checkpoints_prefix><project>/<experiment>/`:

    global_step_<N>/actor/model_world_size_<W>_rank_<r>.pt        every rank r < W ('model' in save_contents)
    global_step_<N>/actor/optim_world_size_<W>_rank_<r>.pt        every rank ('optimizer')
    global_step_<N>/actor/extra_state_world_size_<W>_rank_<r>.pt  every rank ('extra': lr scheduler + RNG)
    global_step_<N>/actor/fsdp_config.json                        rank 0, always
    global_step_<N>/actor/huggingface/config.json (+ tokenizer)   rank 0, always; the weights too with 'hf_model'
    global_step_<N>/data.pt                                       the trainer, after every worker's save returned
    latest_checkpointed_iteration.txt = N                         the trainer, last ("for atomic usage")

(a `critic/` folder alongside `actor/` when the run has a critic). The tracker file is verl's commit
marker: verl resumes only from the step it names (checkpoint_manager.find_latest_ckpt_path), and it is
skipped only with actor.checkpoint.async_save, which this program never sets. A step is **complete** here
when the tracker names it and its folder holds everything above: data.pt; per role folder fsdp_config.json,
huggingface/config.json and model shards of all W ranks; optimizer and extra shards of all W ranks or of
none; one W throughout; no empty shard; every `model-i-of-n.safetensors` of a sharded HF export plus its
index. Anything else is refused, never guessed: no tracker at all (no save ever finished), a tracker that
is not plain decimal digits or names a missing step, a folder missing files (a save, a copy or a
max_actor_ckpt_to_keep rotation in progress, or an empty folder that ossfs left).

This tool:
1. takes a lock (see below), lists the experiment and picks the complete step described above;
2. refuses a kept prefix that an expiry lifecycle rule covers: the rules the program gives a new bucket
   (components/cloud/storage.py lifecycle_rules, from settings.storage; exit 2 before any request) and
   the destination bucket's live rules (GetBucketLifecycle; exit 1);
3. server-side copies every object of that step to `<kept root><project>/<experiment>/global_step_<N>/`
   (kept root: settings.storage.kept_prefix, or --keep-prefix; --keep-bucket copies into another bucket
   under the same layout). An object already kept with the same size and CRC64 is skipped; a different
   object at a destination key (or a kept tracker naming another step) stops the run before anything is
   copied: a kept object is never overwritten (copies also send x-oss-forbid-overwrite);
4. verifies every copy by size and CRC64 against its source, then writes verl's tracker next to the kept
   step, so the kept folder is itself a resumable verl checkpoint root;
5. only then runs `pulumi destroy --stack NAME --yes --exclude-protected --run-program` (with --destroy)
   or prints that command (the protected bucket stays; the program runs to fetch a fresh kubeconfig), after
   keeper/destroy.py's two steps: abort incomplete multipart uploads in a bucket the destroy deletes, and lift
   the rebuild guard (`pulumi state unprotect`) of the cluster, VPC and vSwitches.

Lock. Two runs keeping into the same kept experiment folder must not interleave, and the copy phase runs
before Pulumi's own stack lock is taken. Each run writes a claim object
`<kept experiment folder>.teardown-lock/<UTC time>-<run id>.json` (run id, host, pid, stack, start time)
and then lists that folder: a run that sees any other claim deletes its own and exits 1, naming the
holder. Of two runs racing, at most one proceeds (possibly neither); this relies on OSS listing being
read-after-write consistent, not on `x-oss-forbid-overwrite`, which OSS ignores in a bucket with
versioning enabled or suspended (the program's default bucket is versioned). The claim is deleted when
the run ends, after `pulumi destroy`; a run killed outright leaves it behind, and `--break-lock RUN_ID`
(the id printed by the refusal) removes that claim first. Deleting its own claim is the only delete the
tool ever sends. `--dry-run` takes no lock and sends only reads.

Credentials: OSS_ACCESS_KEY_ID/OSS_ACCESS_KEY_SECRET, ALIBABA_CLOUD_ACCESS_KEY_ID/
ALIBABA_CLOUD_ACCESS_KEY_SECRET (+ ALIBABA_CLOUD_SECURITY_TOKEN, as the OIDC login in CI exports), or the
Pulumi provider's ALICLOUD_ACCESS_KEY/ALICLOUD_SECRET_KEY (see pipeline/oss_client.py). Exit codes: 0 done;
1 refused (nothing complete to keep, lifecycle, lock held, a copy failed or did not verify, OSS could not be
read); 2 bad arguments or settings; with --destroy, pulumi's own exit code.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

try:
    import alibabacloud_oss_v2 as oss
except ImportError as _missing:  # run outside the project's virtualenv: say what to run, not a traceback
    from offline.venv_hint import exit_without_venv

    exit_without_venv(_missing, "teardown.py")

from keeper.checkpoints import (  # noqa: F401 (re-exported: the tests and docs name teardown.X)
    _HF_SHARD,
    _SHARD,
    _STEP_DIR,
    _TRACKER_TEXT,
    COPY_THRESHOLD,
    LOCK_SUFFIX,
    ROLE_DIRS,
    TRACKER,
    ExpiryRule,
    LockHeld,
    NoCheckpoints,
    StepChoice,
    TeardownError,
    _first_line,
    _role_gaps,
    check_no_overlap,
    checkpoint_gaps,
    choose_step,
    describe_rules,
    experiment_prefix,
    expiry_rules_from_oss,
    expiry_rules_from_settings,
    kept_experiment_prefix,
    live_expiry_rules,
    lock_prefix,
    parse_tracker,
    rules_covering,
    step_of,
    step_prefix,
)
from keeper.destroy import destroy_command, export_state, prepare_destroy, run_destroy  # noqa: F401
from keeper.lock import (  # noqa: F401
    Claim,
    TeardownLock,
    claim_key,
    run_id_of,
)
from pipeline.oss_client import (
    CredentialsMissing,
    ObjectStat,
    crc64_of_bytes,
    credentials_provider_from_env,
    head,
    is_not_found,
    list_objects,
    make_client,
    normalize_prefix,
)


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


def read_object(client: oss.Client, bucket: str, key: str) -> bytes | None:
    try:
        return client.get_object(oss.GetObjectRequest(bucket=bucket, key=key)).body.content
    except oss.exceptions.OperationError as err:
        if is_not_found(err):
            return None
        raise


def make_plan(client: oss.Client, *, bucket: str, checkpoints_prefix: str, project: str, experiment: str,
              dest_bucket: str, kept_root: str) -> Plan:
    exp = experiment_prefix(checkpoints_prefix, project, experiment)
    dest_exp = kept_experiment_prefix(kept_root, project, experiment)
    check_no_overlap(bucket, exp, dest_bucket, dest_exp)
    objects = list_objects(client, bucket, exp)
    steps = [s for s in (step_of(o.key, exp) for o in objects) if s is not None]
    try:
        choice = choose_step(steps, read_object(client, bucket, exp + TRACKER))
        src_step = step_prefix(exp, choice.step)
        if gaps := checkpoint_gaps(objects, src_step):
            raise TeardownError(f"global_step_{choice.step}/ is not a complete verl checkpoint: " + "; ".join(gaps))
    except TeardownError as err:
        raise type(err)(f"oss://{bucket}/{exp}: {err}") from None
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
    # One entry per object (its source key, or the tracker's key): an object that fails to copy is not counted
    # again when its verification then fails.
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def fail(self, what: str, problem: str) -> None:
        self.problems.setdefault(what, problem)


def keep(client: oss.Client, plan: Plan, *, copy_threshold: int = COPY_THRESHOLD,
         log: Callable[[str], None] = print) -> KeepResult:
    """Check every destination, copy what is missing, verify everything, write the tracker. Never deletes or
    overwrites anything: a destination that exists and differs stops the run before the first copy."""
    result = KeepResult()
    sources: dict[str, ObjectStat] = {}
    missing: list[CopyItem] = []
    for item in plan.items:
        # Listings carry no CRC64; HEAD the source for it.
        src = head(client, plan.bucket, item.source.key)
        if src is None:
            result.fail(item.source.key, f"{item.source.key}: the source disappeared while copying")
            continue
        sources[item.source.key] = src
        dest = head(client, plan.dest_bucket, item.dest_key)
        if dest is None:
            missing.append(item)
        elif (difference := verify(src, dest)) is None:
            result.already_kept += 1
            log(f"already kept oss://{plan.dest_bucket}/{item.dest_key}")
        else:
            result.fail(item.source.key, f"oss://{plan.dest_bucket}/{item.dest_key} already exists and differs from "
                                         f"its source ({difference}); a kept object is never overwritten")
    tracker_body = str(plan.step.step).encode()
    kept_tracker = read_object(client, plan.dest_bucket, plan.tracker_key)
    if kept_tracker is not None and kept_tracker.strip() != tracker_body:
        result.fail(plan.tracker_key, f"oss://{plan.dest_bucket}/{plan.tracker_key} already names step "
                                      f"{kept_tracker[:40].decode(errors='replace').strip()!r}; it is not overwritten")
    if not result.ok:
        return result

    copier = client.copier(multipart_copy_threshold=copy_threshold)
    for item in missing:
        log(f"copying oss://{plan.bucket}/{item.source.key} ({sources[item.source.key].size} bytes)")
        try:
            copier.copy(oss.CopyObjectRequest(bucket=plan.dest_bucket, key=item.dest_key, source_bucket=plan.bucket,
                                              source_key=item.source.key, forbid_overwrite=True))
            result.copied += 1
        except oss.exceptions.BaseError as err:  # report every failed object, then refuse to destroy
            result.fail(item.source.key, f"{item.source.key}: copy failed ({_first_line(err)})")
    for item in plan.items:
        if item.source.key in result.problems:
            continue
        dest = head(client, plan.dest_bucket, item.dest_key)
        if problem := verify(sources[item.source.key], dest):
            result.fail(item.source.key, f"oss://{plan.dest_bucket}/{item.dest_key}: {problem}")
        else:
            result.kept.append(dest)
    if result.ok and kept_tracker is None:
        write_tracker(client, plan, tracker_body, result)
    return result


def write_tracker(client: oss.Client, plan: Plan, body: bytes, result: KeepResult) -> None:
    # Same file verl writes, so `trainer.default_local_dir=<kept experiment dir>` resumes from it.
    client.put_object(oss.PutObjectRequest(bucket=plan.dest_bucket, key=plan.tracker_key, body=body,
                                           forbid_overwrite=True))
    problem = verify(ObjectStat(key=plan.tracker_key, size=len(body), crc64=crc64_of_bytes(body)),
                     head(client, plan.dest_bucket, plan.tracker_key))
    if problem:
        result.fail(plan.tracker_key, f"oss://{plan.dest_bucket}/{plan.tracker_key}: {problem}")


# ------------------------------------------------------------------------------------------ CLI
def describe_plan(plan: Plan) -> list[str]:
    lines = [f"experiment: oss://{plan.bucket}/{plan.exp_prefix}",
             f"latest complete step: {plan.step.step} (named by {TRACKER}; every file verl writes is present)"]
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
    p.add_argument("--dry-run", action="store_true", help="show what would be copied; change nothing, take no lock")
    p.add_argument("--destroy", action="store_true", help="run `pulumi destroy` after a verified copy")
    keep_to = p.add_mutually_exclusive_group()
    keep_to.add_argument("--keep-prefix", help="kept root in the same bucket (default: storage.kept_prefix)")
    keep_to.add_argument("--keep-bucket", help="copy into this bucket instead, under storage.kept_prefix")
    p.add_argument("--endpoint", help="OSS endpoint override (default: the region's public endpoint)")
    p.add_argument("--allow-no-checkpoint", action="store_true",
                   help="with --destroy: destroy even when the experiment wrote no checkpoint at all (nothing to "
                        "lose; the scheduled TTL teardown uses this so an idle stack does not bill forever)")
    p.add_argument("--break-lock", metavar="RUN_ID",
                   help="first remove the lock claim of teardown run RUN_ID (named in the refusal), which must no "
                        "longer be running")
    args = p.parse_args(argv)
    if "/" in args.stack or args.stack.endswith((".yaml", ".yml")):
        # The name is also the one `pulumi destroy --stack` receives, so a file path cannot stand in for it.
        name = args.stack.rsplit("/", 1)[-1].removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
        p.error(f"--stack takes the stack's name, not a file: `--stack {name}` reads stacks/Pulumi.{name}.yaml")
    if args.dry_run and args.destroy:
        p.error("--dry-run and --destroy exclude each other")
    if args.dry_run and args.break_lock:
        p.error("--dry-run takes no lock, so --break-lock does not apply")
    if args.keep_prefix is not None and not normalize_prefix(args.keep_prefix):
        p.error("--keep-prefix must not be empty")
    return args


class StackError(RuntimeError):
    """The stack file is missing or invalid; the message names the problem."""


def default_load_stack(name: str):
    # Imported here so the copy logic and its tests do not depend on the Pulumi program's settings.
    try:
        import yaml

        from components.config import SettingsError
        from components.model import load_stack
    except ImportError as missing:
        from offline.venv_hint import venv_message

        raise StackError(venv_message(missing, "teardown.py").removeprefix("error: ")) from missing
    try:
        return load_stack(name)
    except SettingsError as err:
        raise StackError(f"stack {name}: {len(err.problems)} problem(s) in its stack file; nothing copied or "
                         "destroyed:\n" + "\n".join(f"  - {p}" for p in err.problems)) from err
    except (FileNotFoundError, yaml.YAMLError) as err:
        raise StackError(str(err)) from err


def default_lifecycle_rules(settings) -> list[dict]:
    # The very function that configures a new bucket, so the check cannot drift from the bucket.
    from components.cloud.storage import lifecycle_rules

    return lifecycle_rules(settings)


def main(
    argv: Sequence[str] | None = None,
    *,
    load_stack: Callable[[str], object] = default_load_stack,
    lifecycle_rules: Callable[[object], list[dict]] = default_lifecycle_rules,
    destroy: Callable[[list[str]], int] = run_destroy,
    pulumi: Callable[[list[str]], int] = run_destroy,
    state: Callable[[str], dict] = export_state,
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
    dest_exp = kept_experiment_prefix(kept_root, training.project_name, training.experiment_name)
    if dest_bucket == storage.bucket_name and storage.mode == "new" and not storage.keep_on_destroy:
        err("error: storage.keep_on_destroy is false, so `pulumi destroy` deletes the bucket and any copy kept "
            "in it; use --keep-bucket to keep the checkpoint in another bucket")
        return 2
    if dest_bucket == storage.bucket_name and storage.mode == "new":
        if covering := rules_covering(expiry_rules_from_settings(lifecycle_rules(settings)), dest_exp):
            err(f"error: {describe_rules(dest_bucket, dest_exp, covering)} (storage settings; "
                "components/cloud/storage.py lifecycle_rules). Use a --keep-prefix outside it.")
            return 2
    try:
        check_no_overlap(storage.bucket_name, experiment_prefix(storage.checkpoints_prefix, training.project_name,
                                                                training.experiment_name), dest_bucket, dest_exp)
        client = make_client(region=settings.region, endpoint=args.endpoint,
                             credentials_provider=credentials_provider_from_env(env, settings.region))
    except (ValueError, CredentialsMissing) as error:
        err(f"error: {error}")
        return 2

    lock = None if args.dry_run else TeardownLock(client, dest_bucket, lock_prefix(dest_exp), stack=args.stack)
    try:
        if lock is not None:
            try:
                if args.break_lock and not lock.break_claims(args.break_lock):
                    err(f"error: no lock claim of run {args.break_lock} under oss://{dest_bucket}/{lock.prefix}")
                    return 2
                lock.acquire()
            except LockHeld as error:
                err(f"error: {error}; nothing copied or destroyed")
                return 1
            except oss.exceptions.BaseError as error:
                err(f"error: cannot take the teardown lock under oss://{dest_bucket}/{lock.prefix} "
                    f"({_first_line(error)}); nothing copied or destroyed")
                return 1
            log(f"lock: oss://{dest_bucket}/{lock.key} (run {lock.run_id})")
        def guarded_destroy(command: list[str]) -> int:
            try:
                if (rc := prepare_destroy(args, settings, client, log, pulumi, state)) != 0:
                    err(f"error: could not unprotect the guarded resources (exit {rc}); nothing destroyed")
                    return rc
            except (oss.exceptions.BaseError, subprocess.CalledProcessError, ValueError) as error:
                err(f"error: preparing the destroy failed ({_first_line(error)}); nothing destroyed")
                return 1
            return destroy(command)

        return _keep_then_destroy(args, settings, client, dest_bucket, kept_root, log, err, guarded_destroy)
    finally:
        if lock is not None and lock.held:
            try:
                lock.release()
            except oss.exceptions.BaseError as error:
                err(f"warning: could not delete the lock claim oss://{dest_bucket}/{lock.key} ({_first_line(error)}); "
                    f"the next run needs --break-lock {lock.run_id}")


def _keep_then_destroy(args, settings, client: oss.Client, dest_bucket: str, kept_root: str,
                       log: Callable[[str], None], err: Callable[[str], None],
                       destroy: Callable[[list[str]], int]) -> int:
    """Keep the latest step of each experiment folder (one per sweep variant), then destroy once; a failure stops."""
    from components.sweep import checkpoint_folders  # lazily, like the settings loader: tests fake the settings
    folders = checkpoint_folders(settings)
    for i, folder in enumerate(folders):
        if (rc := _keep_one(args, settings, folder, client, dest_bucket, kept_root, log, err, destroy,
                            last=i == len(folders) - 1)) is not None:
            return rc
    return 0


def _keep_one(args, settings, experiment: str, client: oss.Client, dest_bucket: str, kept_root: str,
              log: Callable[[str], None], err: Callable[[str], None],
              destroy: Callable[[list[str]], int], *, last: bool) -> int | None:
    """Keep one experiment folder's latest step; None = kept, go on with the next folder."""
    storage, training = settings.storage, settings.training
    command = destroy_command(args.stack)
    try:
        plan = make_plan(client, bucket=storage.bucket_name, checkpoints_prefix=storage.checkpoints_prefix,
                         project=training.project_name, experiment=experiment,
                         dest_bucket=dest_bucket, kept_root=kept_root)
    except oss.exceptions.BaseError as error:
        # Network, credentials or a missing bucket: one line naming what was read, not an SDK traceback.
        err(f"error: cannot list oss://{storage.bucket_name}/{storage.checkpoints_prefix} "
            f"({_first_line(error)}); nothing copied or destroyed")
        return 1
    except NoCheckpoints as error:
        if args.destroy and args.allow_no_checkpoint:
            log(f"{error}: no checkpoint to keep; destroying as --allow-no-checkpoint asks")
            return destroy(command) if last else None
        err(f"error: {error}; nothing to keep. If that is expected, run `{' '.join(command)}` "
            "yourself or pass --allow-no-checkpoint with --destroy.")
        return 1
    except TeardownError as error:
        err(f"error: {error}; refusing to destroy until the checkpoints are sorted out.")
        return 1
    try:
        if covering := rules_covering(live_expiry_rules(client, dest_bucket), plan.dest_exp_prefix):
            raise TeardownError(describe_rules(dest_bucket, plan.dest_exp_prefix, covering))
    except TeardownError as error:
        err(f"error: {error}; choose another --keep-prefix or --keep-bucket. Nothing copied or destroyed.")
        return 1
    except oss.exceptions.BaseError as error:
        err(f"error: cannot read the lifecycle rules of oss://{dest_bucket} ({_first_line(error)}); "
            "nothing copied or destroyed")
        return 1
    for line in describe_plan(plan):
        log(line)
    if args.dry_run:
        if not last:
            return None
        log(f"dry run: nothing copied; afterwards this would run: {' '.join(command)}")
        return 0

    try:
        result = keep(client, plan, log=log)
    except oss.exceptions.BaseError as error:
        # A HEAD or the tracker write failed outright (per-object copy failures are collected by keep()).
        err(f"error: copying step {plan.step.step} to oss://{plan.dest_bucket}/ failed "
            f"({_first_line(error)}); nothing deleted or destroyed")
        return 1
    if not result.ok:
        err(f"error: {len(result.problems)} of {len(plan.items) + 1} objects (the step's {len(plan.items)} and the "
            "tracker) did not copy or verify; nothing was deleted or destroyed:")
        for problem in result.problems.values():
            err(f"  {problem}")
        return 1
    for stat in result.kept:
        log(f"kept oss://{plan.dest_bucket}/{stat.key} ({stat.size} bytes, crc64 {stat.crc64})")
    log(f"kept step {plan.step.step}: {len(result.kept)} objects verified by size and CRC64 "
        f"({result.copied} copied, {result.already_kept} already kept), tracker at "
        f"oss://{plan.dest_bucket}/{plan.tracker_key}")
    if not last:
        return None
    if not args.destroy:
        log(f"to destroy the stack, run: {' '.join(command)}")
        return 0
    log(f"running: {' '.join(command)}")
    return destroy(command)


if __name__ == "__main__":
    sys.exit(main())
