"""The copy half of teardown.py: which objects of the chosen step to copy, the server-side copies, their
verification by size and CRC64, and verl's tracker written last (teardown.py's docstring, steps 3 and 4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import alibabacloud_oss_v2 as oss

from keeper.checkpoints import (
    COPY_THRESHOLD,
    TRACKER,
    StepChoice,
    TeardownError,
    _first_line,
    check_no_overlap,
    checkpoint_gaps,
    choose_step,
    experiment_prefix,
    kept_experiment_prefix,
    step_of,
    step_prefix,
)
from pipeline.oss_client import ObjectStat, crc64_of_bytes, head, is_not_found, list_objects


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
