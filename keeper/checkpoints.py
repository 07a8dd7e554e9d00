"""verl checkpoints in OSS: which step is complete (verl 0.9.1's save layout), where a kept copy goes, and
which bucket lifecycle rules would expire it. Pure rules plus the few OSS reads they need; teardown.py acts on them.

See teardown.py's docstring for what "complete" means and where that comes from in verl's code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import alibabacloud_oss_v2 as oss

from pipeline.oss_client import (
    ObjectStat,
    is_not_found,
    normalize_prefix,
)

TRACKER = "latest_checkpointed_iteration.txt"
_STEP_DIR = re.compile(r"global_step_(\d+)/")
# verl writes str(global_steps) and reads it back with int(); anything but digits is not verl's file.
_TRACKER_TEXT = re.compile(rb"\s*([0-9]{1,18})\s*")
_SHARD = re.compile(r"(?P<kind>model|optim|extra_state)_world_size_(?P<world>\d+)_rank_(?P<rank>\d+)\.pt")
_HF_SHARD = re.compile(r"model-(?P<n>\d+)-of-(?P<total>\d+)\.safetensors")
ROLE_DIRS = ("actor", "critic")  # str(Role.Actor), str(Role.Critic) in verl/trainer/ppo/utils.py
LOCK_SUFFIX = ".teardown-lock/"

# Above 200 MiB (the SDK's default threshold) the SDK's Copier uses OSS shallow copy where it
# applies (same bucket, no server-side encryption) and multipart copy (UploadPartCopy) otherwise,
# so checkpoint shards too large for one CopyObject still copy.
COPY_THRESHOLD = 200 * 1024 * 1024


class TeardownError(RuntimeError):
    """Nothing safe to keep, or the copy did not verify: do not destroy."""


class NoCheckpoints(TeardownError):
    """The experiment never wrote a checkpoint (no step folder, no tracker): nothing can be lost by destroying."""


class LockHeld(TeardownError):
    """Another teardown run holds the lock on the kept experiment folder."""


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


def lock_prefix(dest_exp_prefix: str) -> str:
    """Beside the kept experiment folder, not in it, so the kept folder stays a clean verl checkpoint root."""
    return dest_exp_prefix.rstrip("/") + LOCK_SUFFIX


# ------------------------------------------------------------------------------------------ the step
def parse_tracker(raw: bytes) -> int:
    m = _TRACKER_TEXT.fullmatch(raw)
    if not m:
        raise TeardownError(f"{TRACKER} is malformed: it holds {raw[:40]!r}, not a step number "
                            "(verl writes the step as plain decimal digits)")
    return int(m.group(1))


@dataclass(frozen=True)
class StepChoice:
    step: int
    notes: tuple[str, ...] = ()


def choose_step(steps: Sequence[int], tracker: bytes | str | None) -> StepChoice:
    """The step verl's tracker confirms, given the global_step_N folders present and the tracker's content."""
    present = sorted(set(steps))
    if tracker is None:
        if not present:
            raise NoCheckpoints("no global_step_N directory and no tracker: the experiment never saved")
        raise TeardownError(
            f"global_step_N folders exist ({', '.join(map(str, present))}) but {TRACKER} does not: verl writes it "
            "only after a save finished, so no step is confirmed complete (verl itself would not resume from any)")
    tracked = parse_tracker(tracker.encode() if isinstance(tracker, str) else tracker)
    if tracked not in present:
        raise TeardownError(f"{TRACKER} says step {tracked}, but global_step_{tracked}/ does not exist "
                            f"(steps present: {', '.join(map(str, present)) or 'none'})")
    newest = present[-1]
    if tracked < newest:
        # verl updates the tracker only after a save finished, so the newer folder is a partial save.
        note = (f"global_step_{newest}/ is newer than {TRACKER} ({tracked}); "
                "it looks like an unfinished save and is not kept")
        return StepChoice(tracked, (note,))
    return StepChoice(tracked)


def _role_gaps(role: str, files: Mapping[str, int]) -> list[str]:
    """What a role folder (`actor/`, `critic/`) lacks; `files` maps paths below it to sizes."""
    if not files:
        return [f"{role}/ is missing or empty"]
    gaps = [f"{role}/{name} is missing or empty" for name in ("fsdp_config.json", "huggingface/config.json")
            if files.get(name, 0) <= 0]
    shards: dict[str, dict[int, set[int]]] = {}
    for name, size in files.items():
        if m := _SHARD.fullmatch(name):
            shards.setdefault(m["kind"], {}).setdefault(int(m["world"]), set()).add(int(m["rank"]))
            if size <= 0:
                gaps.append(f"{role}/{name} is empty")
    worlds = sorted({w for by_world in shards.values() for w in by_world})
    if len(worlds) > 1:
        gaps.append(f"{role}/ mixes shards of world sizes {worlds}")
    if "model" not in shards:
        gaps.append(f"{role}/ has no model_world_size_W_rank_R.pt shard")
    for kind, by_world in sorted(shards.items()):
        for world, ranks in sorted(by_world.items()):
            if missing := sorted(set(range(world)) - ranks):
                gaps.append(f"{role}/{kind}_world_size_{world}: rank(s) {missing} missing")
            if stray := sorted(ranks - set(range(world))):
                gaps.append(f"{role}/{kind}_world_size_{world}: rank(s) {stray} outside the world size")
    hf_parts: dict[int, set[int]] = {}
    for name, size in files.items():
        base = name.removeprefix("huggingface/")
        if base != name and base.endswith(".safetensors"):
            if size <= 0:
                gaps.append(f"{role}/{name} is empty")
            if m := _HF_SHARD.fullmatch(base):
                hf_parts.setdefault(int(m["total"]), set()).add(int(m["n"]))
    for total, parts in sorted(hf_parts.items()):
        if missing := sorted(set(range(1, total + 1)) - parts):
            gaps.append(f"{role}/huggingface/: safetensors part(s) {missing} of {total} missing")
        if files.get("huggingface/model.safetensors.index.json", 0) <= 0:
            gaps.append(f"{role}/huggingface/model.safetensors.index.json is missing or empty")
    return gaps


def checkpoint_gaps(objects: Iterable[ObjectStat], src_step_prefix: str) -> list[str]:
    """Why the step folder is not a complete verl 0.9.1 checkpoint (see the module docstring); [] when it is."""
    files = {o.key[len(src_step_prefix):]: o.size for o in objects
             if o.key.startswith(src_step_prefix) and not o.key.endswith("/")}  # "dir/" objects are ossfs's folders
    gaps = [] if files.get("data.pt", 0) > 0 else [
        "data.pt is missing or empty (the trainer writes it after every worker's shards, so the save did not finish)"]
    roles = {"actor"} | {r for r in ROLE_DIRS if any(p.startswith(r + "/") for p in files)}
    for role in sorted(roles):
        gaps += _role_gaps(role, {p[len(role) + 1:]: s for p, s in files.items() if p.startswith(role + "/")})
    return gaps


def check_no_overlap(src_bucket: str, exp_prefix: str, dest_bucket: str, dest_prefix: str) -> None:
    if src_bucket != dest_bucket:
        return
    if dest_prefix.startswith(exp_prefix) or exp_prefix.startswith(dest_prefix):
        raise ValueError(f"the kept prefix {dest_prefix!r} overlaps the checkpoints being kept ({exp_prefix!r}); "
                         "choose a kept prefix outside the checkpoints prefix")


# ------------------------------------------------------------------------------------------ lifecycle
@dataclass(frozen=True)
class ExpiryRule:
    rule_id: str
    prefix: str
    after: str  # "7 days", "objects created before 2026-01-01"


def expiry_rules_from_settings(rules: Iterable[Mapping]) -> list[ExpiryRule]:
    """Rules in components/cloud/storage.py `lifecycle_rules` form that delete current objects."""
    return [ExpiryRule(r.get("id") or "?", r.get("prefix") or "", f"{r['expirations'][0].get('days')} days")
            for r in rules if r.get("enabled", True) and r.get("expirations")]


def expiry_rules_from_oss(config: oss.models.LifecycleConfiguration | None) -> list[ExpiryRule]:
    """Enabled rules of a bucket's live lifecycle configuration that delete current objects. Filters (Not, tags,
    sizes) are not interpreted: a rule whose prefix overlaps counts, which can only refuse too much."""
    out = []
    for rule in (config.rules if config is not None else None) or []:
        exp = rule.expiration
        if (rule.status or "").lower() != "enabled" or exp is None:
            continue
        if exp.days is not None:
            out.append(ExpiryRule(rule.id or "?", rule.prefix or "", f"{exp.days} days"))
        elif exp.created_before_date is not None:
            out.append(ExpiryRule(rule.id or "?", rule.prefix or "", f"objects created before {exp.created_before_date}"))
    return out


def rules_covering(rules: Iterable[ExpiryRule], prefix: str) -> list[ExpiryRule]:
    # Either way round: a rule on a sub-prefix of the kept folder deletes part of the kept step.
    return [r for r in rules if prefix.startswith(r.prefix) or r.prefix.startswith(prefix)]


def describe_rules(bucket: str, prefix: str, rules: Sequence[ExpiryRule]) -> str:
    named = "; ".join(f"rule {r.rule_id!r} expires oss://{bucket}/{r.prefix} after {r.after}" for r in rules)
    return f"the kept folder oss://{bucket}/{prefix} is under a lifecycle expiry rule ({named}), so OSS would delete the kept copy"


def live_expiry_rules(client: oss.Client, bucket: str) -> list[ExpiryRule]:
    try:
        result = client.get_bucket_lifecycle(oss.GetBucketLifecycleRequest(bucket=bucket))
    except oss.exceptions.OperationError as err:
        if is_not_found(err):  # NoSuchLifecycle: the bucket has no rules
            return []
        raise TeardownError(
            f"cannot read the lifecycle rules of oss://{bucket} ({_first_line(err)}); teardown must know that no "
            "expiry rule covers the kept copy: grant oss:GetBucketLifecycle on it") from None
    return expiry_rules_from_oss(result.lifecycle_configuration)


def _first_line(err: Exception) -> str:
    """One line naming the OSS error code when there is one (the SDK wraps it in Copy/Operation errors)."""
    inner: Exception | None = err
    for _ in range(5):
        if isinstance(inner, oss.exceptions.ServiceError):
            return f"{inner.code} (HTTP {inner.status_code}): {(inner.message or '')[:200]}"
        unwrap = getattr(inner, "unwrap", None)
        inner = unwrap() if callable(unwrap) else None
    return f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:300]}"
