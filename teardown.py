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

`--stack` takes a stack name or the path of a stack file named Pulumi.<stack>.yaml, as plan.py does. First of all
it prints what the teardown leaves billing (offline/report/teardown_bill.py: the same lines as plan.md's section
"After a teardown"; a platform's names its experiment stacks), before any OSS request, so a run that cannot reach
OSS still shows it and then says what it could not check.

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
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

try:
    import alibabacloud_oss_v2 as oss
except ImportError as _missing:  # run outside the project's virtualenv: say what to run, not a traceback
    from offline.venv_hint import exit_without_venv

    exit_without_venv(_missing, "teardown.py")

from keeper.checkpoints import (
    LockHeld,
    NoCheckpoints,
    TeardownError,
    _first_line,
    check_no_overlap,
    describe_rules,
    experiment_prefix,
    expiry_rules_from_settings,
    kept_experiment_prefix,
    live_expiry_rules,
    lock_prefix,
    rules_covering,
)
from keeper.copy import describe_plan, keep, make_plan
from keeper.destroy import destroy_command, export_state, prepare_destroy, run_destroy
from keeper.lock import TeardownLock
from pipeline.oss_client import (
    CredentialsMissing,
    credentials_provider_from_env,
    make_client,
    normalize_prefix,
)

# The CLI version the install hint names: the pulumi SDK pinned in requirements.txt (the workflows' PULUMI_VERSION).
_PIN = re.search(r"^pulumi==(\S+)$", (Path(__file__).resolve().parent / "requirements.txt").read_text(), re.MULTILINE)
PULUMI_VERSION = _PIN[1] if _PIN else "<the pulumi version in requirements.txt>"


# ------------------------------------------------------------------------------------------ plan
HF_EXPORT_DIR = "/actor/huggingface/"  # verl's hf_model save content inside a step (fsdp_checkpoint_manager.py)


def kept_hf_model(kept) -> str | None:
    """The kept step's loadable Hugging Face model prefix (its config and weights), None when the step holds only
    the config (training.save_contents without hf_model)."""
    keys = [stat.key for stat in kept]
    for key in keys:
        if HF_EXPORT_DIR in key and key.endswith((".safetensors", ".bin")):
            return key[:key.index(HF_EXPORT_DIR) + len(HF_EXPORT_DIR)]
    return None


def print_error(line: str) -> None:
    print(line, file=sys.stderr)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="teardown.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<name>.yaml) or the path of a stack file, "
                   "as plan.py takes it")
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
    # A path is read as plan.py reads it; `pulumi destroy --stack` gets the stack it configures (Pulumi.<name>.yaml).
    args.stack_file = args.stack
    if "/" in args.stack or args.stack.endswith((".yaml", ".yml")):
        name = args.stack.rsplit("/", 1)[-1]
        for suffix in (".yaml", ".yml"):
            if name.startswith("Pulumi.") and name.endswith(suffix) and len(name) > len("Pulumi.") + len(suffix):
                name = name[len("Pulumi."):-len(suffix)]
                break
        else:
            p.error(f"--stack {args.stack}: a stack file is named Pulumi.<stack>.yaml (the stack `pulumi destroy` "
                    "gets); rename it or give the stack's name")
        args.stack = name
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


def default_bill(stack_file: str, stack: str, settings) -> list[str]:
    """What the teardown leaves billing, as every plan.md says it (offline/report/teardown_bill.py): the stack's
    program run offline (no cloud, no OSS), so it is known before anything is read or destroyed."""
    from components.config.loading import stack_file as file_of
    from offline import plan as offline_plan
    from offline.report.teardown_bill import summary_lines, teardown_bill

    recording = offline_plan.record_stack(file_of(stack_file), stack)
    return summary_lines(teardown_bill(settings, recording, stack))


# What only OSS can tell, so a run that cannot read it says what it left unchecked.
NOT_CHECKED = ("not checked without OSS: which checkpoint step is complete and would be kept, the destination "
               "bucket's live lifecycle rules, and whether another teardown holds the lock")


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
    bill: Callable[[str, str, object], list[str]] = default_bill,
    env: dict[str, str] | None = None,
    log: Callable[[str], None] = print,
    err: Callable[[str], None] = print_error,
    which: Callable[[str], str | None] = shutil.which,
) -> int:
    args = parse_args(argv)
    env = dict(os.environ) if env is None else env
    # --destroy runs the pulumi CLI (export, unprotect, destroy): without it, say so before anything is copied
    # or locked, instead of a traceback after the checkpoint is kept. Only the real commands need it.
    real_cli = destroy is run_destroy or pulumi is run_destroy or state is export_state
    if args.destroy and not args.dry_run and real_cli and which("pulumi") is None:
        err(f"error: --destroy runs `pulumi destroy`, and no `pulumi` CLI is on PATH; install it (the version "
            f"matching requirements.txt: curl -fsSL https://get.pulumi.com | sh -s -- --version {PULUMI_VERSION}, "
            "then add ~/.pulumi/bin to PATH) and log in to the stack's backend, or leave out --destroy to keep the "
            "checkpoint only; nothing copied or destroyed")
        return 2
    try:
        settings = load_stack(args.stack_file)
    except StackError as error:
        err(f"error: {error}")
        return 2
    try:
        for line in bill(args.stack_file, args.stack, settings):
            log(line)
    except Exception as error:  # noqa: BLE001 - the summary informs; it never blocks keeping the checkpoint
        err(f"warning: could not work out what the teardown leaves billing ({_first_line(error)}); plan.md's "
            "section \"After a teardown\" has it")
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
        if isinstance(error, CredentialsMissing):
            err(NOT_CHECKED)
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
        err(NOT_CHECKED)
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
    if export := kept_hf_model(result.kept):
        log(f"Hugging Face model (config, tokenizer, weights; transformers from_pretrained loads it): "
            f"oss://{plan.dest_bucket}/{export}")
    if not last:
        return None
    if not args.destroy:
        log(f"to destroy the stack, run: {' '.join(command)}")
        return 0
    log(f"running: {' '.join(command)}")
    return destroy(command)


if __name__ == "__main__":
    sys.exit(main())
