"""teardown.py: pick the latest complete verl checkpoint, keep a verified copy under a lock, and only then destroy."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

import keeper.copy as keeper_copy  # keep() heads through the copy module
import teardown
from keeper.checkpoints import TRACKER, StepChoice, checkpoint_gaps, choose_step, step_of
from pipeline.oss_client import ObjectStat
from teardown import (
    NoCheckpoints,
    TeardownError,
    check_no_overlap,
    keep,
    make_plan,
)
from tests.fakeoss import FakeOss

EXP = "checkpoints/gsm8k-tool-agent/qwen-grpo/"


def complete_step(step: int, world: int = 2, tag: bytes = b"") -> dict[str, bytes]:
    """The files verl 0.9.1 writes for one FSDP step with save_contents model, optimizer, extra, hf_model."""
    d = f"global_step_{step}/"
    files = {d + "data.pt": b"dataloader" + tag,
             d + "actor/fsdp_config.json": b'{"FSDP_version": 2, "world_size": %d}' % world,
             d + "actor/huggingface/config.json": b'{"architectures": ["Qwen2ForCausalLM"]}',
             d + "actor/huggingface/model.safetensors": bytes(range(256)) * 40 + tag}
    for r in range(world):
        files[d + f"actor/model_world_size_{world}_rank_{r}.pt"] = b"m%d" % r * 300 + tag
        files[d + f"actor/optim_world_size_{world}_rank_{r}.pt"] = b"o%d" % r * 200 + tag
        files[d + f"actor/extra_state_world_size_{world}_rank_{r}.pt"] = b"e%d" % r + tag
    return files


STEP_1 = complete_step(1, tag=b"-1")
STEP_2 = {
    # ossfs, through which pods write checkpoints, can leave empty directory objects; they are copied too.
    "global_step_2/": b"",
    "global_step_2/actor/": b"",
    **complete_step(2),
}
KEPT_EXP = "kept/gsm8k-tool-agent/qwen-grpo/"
KEPT_STEP_2 = KEPT_EXP + "global_step_2/"
KEPT_TRACKER = KEPT_EXP + "latest_checkpointed_iteration.txt"
LOCK = "kept/gsm8k-tool-agent/qwen-grpo.teardown-lock/"
ENV = {"OSS_ACCESS_KEY_ID": "test-id", "OSS_ACCESS_KEY_SECRET": "test-secret"}
# The protected (kept) bucket stays; a fresh kubeconfig comes from running the program.
DESTROY = ["pulumi", "destroy", "--stack", "dev", "--yes", "--exclude-protected", "--run-program"]


def settings(**storage):
    return SimpleNamespace(
        region="cn-hangzhou",
        storage=SimpleNamespace(**{
            "bucket_name": "ckpt", "checkpoints_prefix": "checkpoints/", "kept_prefix": "kept/", "mode": "new",
            "keep_on_destroy": True, "versioning": True, "abort_multipart_days": 3, "noncurrent_expire_days": 30,
            "scratch_prefix": "scratch/", "scratch_expire_days": 7, "access_logging": True,
            "access_log_prefix": "access-logs/", "access_log_expire_days": 90, **storage}),
        training=SimpleNamespace(project_name="gsm8k-tool-agent", experiment_name="qwen-grpo"),
    )


def seed(server: FakeOss, files: dict[str, bytes], tracker: bytes | None = b"2") -> None:
    for rel, data in files.items():
        server.put("ckpt", EXP + rel, data)
    if tracker is not None:
        server.put("ckpt", EXP + "latest_checkpointed_iteration.txt", tracker)


@pytest.fixture
def fake_oss():
    with FakeOss() as server:
        seed(server, {**STEP_1, **STEP_2})
        # A sibling experiment whose name extends this one's must not be mixed in.
        server.put("ckpt", "checkpoints/gsm8k-tool-agent/qwen-grpo-v2/global_step_9/data.pt", b"other")
        yield server


@pytest.fixture
def bare_oss():
    with FakeOss() as server:
        yield server


class Run:
    """Runs the CLI against the fake OSS, recording output and any destroy call."""

    def __init__(self, fake: FakeOss, stack_settings=None, on_destroy=None, state=None):
        self.fake = fake
        self.settings = stack_settings or settings()
        self.on_destroy = on_destroy
        self.state = state or {}  # what `pulumi stack export` would print
        self.lines: list[str] = []
        self.destroyed: list[list[str]] = []
        self.pulumi: list[list[str]] = []  # other pulumi commands (state unprotect), in order

    def __call__(self, *args: str) -> int:
        def destroy(command):
            self.destroyed.append(command)
            if self.on_destroy:
                self.on_destroy()
            return 0

        return teardown.main(["--stack", "dev", "--endpoint", self.fake.endpoint, *args],
                             load_stack=lambda name: self.settings, destroy=destroy, env=dict(ENV),
                             pulumi=lambda c: self.pulumi.append(c) or 0, state=lambda stack: self.state,
                             bill=lambda *a: [], log=self.lines.append, err=self.lines.append)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def stats(files: dict[str, bytes], prefix: str = EXP) -> list[ObjectStat]:
    return [ObjectStat(key=prefix + rel, size=len(data), crc64=None) for rel, data in files.items()]


def refused_without_side_effects(run: Run, fake: FakeOss) -> None:
    assert run.destroyed == []
    assert fake.keys("ckpt", "kept/") == [] and fake.keys("archive") == []
    assert fake.requests(op="CopyObject") == [] and fake.requests(op="UploadPartCopy") == []
    assert fake.requests(op="PutObject") == [r for r in fake.requests(op="PutObject") if r.key.startswith(LOCK)]
    assert "Traceback" not in run.output


# ------------------------------------------------------------------------------------------ choosing the step
def test_step_numbers_come_from_global_step_directories_only():
    assert step_of(EXP + "global_step_12/actor/x.pt", EXP) == 12
    assert step_of(EXP + "latest_checkpointed_iteration.txt", EXP) is None
    assert step_of(EXP + "global_step_12", EXP) is None  # a file, not a directory
    assert step_of("checkpoints/other/global_step_3/x", EXP) is None


def test_the_tracker_confirms_the_largest_step():
    assert choose_step([1, 2, 2], "2\n") == StepChoice(2)
    assert choose_step([9, 10], b"10") == StepChoice(10)  # numeric, not lexical


def test_without_a_tracker_no_step_is_confirmed_so_none_is_kept():
    # verl writes the tracker only after a save finished; before, it kept the largest step and wrote its own tracker.
    with pytest.raises(TeardownError, match="no step is confirmed complete") as info:
        choose_step([9, 10, 2], None)
    assert not isinstance(info.value, NoCheckpoints)  # so --allow-no-checkpoint cannot destroy it either


def test_a_step_newer_than_the_tracker_is_an_unfinished_save_and_is_not_kept():
    choice = choose_step([1, 2, 3], "2")
    assert choice.step == 2
    assert "global_step_3/ is newer" in choice.notes[0]


@pytest.mark.parametrize("raw", [b"two", b"", b"2.0", b"-2", b"1_0", "\u0662".encode(), b"\xff\xfe2", b"9" * 40])
def test_a_malformed_tracker_is_refused_with_a_clear_message(raw):
    with pytest.raises(TeardownError, match="is malformed: it holds .* not a step number"):
        choose_step([1, 2], raw)


def test_a_tracker_naming_a_missing_step_or_no_checkpoint_at_all():
    with pytest.raises(TeardownError, match="global_step_5/ does not exist"):
        choose_step([1, 2], "5")
    with pytest.raises(TeardownError, match="global_step_2/ does not exist") as info:
        choose_step([], "2")  # the tracker claims a save whose folder is gone: not "nothing to lose"
    assert not isinstance(info.value, NoCheckpoints)
    with pytest.raises(NoCheckpoints):
        choose_step([], None)


def test_a_complete_fsdp_step_has_no_gaps():
    assert checkpoint_gaps(stats(STEP_2), EXP + "global_step_2/") == []
    # The optimizer and extra state are optional as a whole (save_contents), and the HF weights too.
    lean = {k: v for k, v in STEP_2.items() if "optim_" not in k and "extra_state_" not in k
            and not k.endswith("model.safetensors")}
    assert checkpoint_gaps(stats(lean), EXP + "global_step_2/") == []


@pytest.mark.parametrize("change, gap", [
    (lambda f: f.pop("global_step_2/data.pt"), "data.pt is missing"),
    (lambda f: f.update({"global_step_2/data.pt": b""}), "data.pt is missing or empty"),
    (lambda f: f.pop("global_step_2/actor/model_world_size_2_rank_1.pt"), "model_world_size_2: rank(s) [1] missing"),
    (lambda f: f.pop("global_step_2/actor/optim_world_size_2_rank_0.pt"), "optim_world_size_2: rank(s) [0] missing"),
    (lambda f: f.update({"global_step_2/actor/model_world_size_2_rank_0.pt": b""}), "rank_0.pt is empty"),
    (lambda f: f.pop("global_step_2/actor/fsdp_config.json"), "actor/fsdp_config.json is missing"),
    (lambda f: f.pop("global_step_2/actor/huggingface/config.json"), "huggingface/config.json is missing"),
    (lambda f: f.update({"global_step_2/actor/model_world_size_4_rank_0.pt": b"x"}), "mixes shards of world sizes"),
    (lambda f: f.update({"global_step_2/actor/huggingface/model-00002-of-00003.safetensors": b"w"}),
     "safetensors part(s) [1, 3] of 3 missing"),
    (lambda f: f.update({"global_step_2/critic/data_hint": b"x"}), "critic/fsdp_config.json is missing"),
])
def test_a_step_missing_any_file_verl_writes_is_incomplete(change, gap):
    files = dict(STEP_2)
    change(files)
    gaps = checkpoint_gaps(stats(files), EXP + "global_step_2/")
    assert any(gap in g for g in gaps), gaps


def test_an_empty_step_folder_is_not_a_checkpoint():
    gaps = checkpoint_gaps(stats({"global_step_3/": b"", "global_step_3/actor/": b""}), EXP + "global_step_3/")
    assert any("data.pt" in g for g in gaps) and any("actor/ is missing or empty" in g for g in gaps)


def test_a_kept_prefix_overlapping_the_checkpoints_is_refused_in_the_same_bucket_only():
    with pytest.raises(ValueError, match="overlaps"):
        check_no_overlap("ckpt", EXP, "ckpt", EXP + "global_step_2/")
    with pytest.raises(ValueError, match="overlaps"):
        check_no_overlap("ckpt", EXP, "ckpt", "checkpoints/")
    check_no_overlap("ckpt", EXP, "ckpt", KEPT_EXP)
    check_no_overlap("ckpt", EXP, "archive", EXP)


# ------------------------------------------------------------------------------------------ the CLI
def test_the_latest_step_with_its_hf_export_is_copied_verified_and_then_the_stack_destroyed(fake_oss):
    run = Run(fake_oss)
    assert run("--destroy") == 0
    kept = fake_oss.keys("ckpt", "kept/")
    assert kept == sorted([KEPT_STEP_2 + rel.removeprefix("global_step_2/") for rel in STEP_2] + [KEPT_TRACKER])
    for rel, data in STEP_2.items():
        assert fake_oss.get("ckpt", KEPT_STEP_2 + rel.removeprefix("global_step_2/")) == data
    assert fake_oss.get("ckpt", KEPT_TRACKER) == b"2"
    assert f"kept oss://ckpt/{KEPT_STEP_2}actor/huggingface/model.safetensors" in run.output
    # Where the loadable model is, said once, in the form a next run's model.path takes.
    assert f"from_pretrained loads it): oss://ckpt/{KEPT_STEP_2}actor/huggingface/" in run.output
    assert f"{len(STEP_2)} objects verified by size and CRC64" in run.output
    assert run.destroyed == [DESTROY]
    # Copies are server-side: no checkpoint body travels through the tool.
    assert all(r.key.endswith(TRACKER) or r.key.startswith(LOCK) for r in fake_oss.requests(op="GetObject"))


def test_without_destroy_the_pulumi_command_is_printed_not_run(fake_oss):
    run = Run(fake_oss)
    assert run() == 0
    assert run.destroyed == []
    assert "to destroy the stack, run: pulumi destroy --stack dev --yes" in run.output


def test_a_dry_run_lists_the_plan_and_changes_nothing(fake_oss):
    run = Run(fake_oss)
    assert run("--dry-run") == 0
    assert fake_oss.keys("ckpt", "kept/") == []
    assert {r.op for r in fake_oss.requests()} <= {"ListObjectsV2", "GetObject", "GetBucketLifecycle"}
    for rel in STEP_2:
        assert EXP + rel in run.output
    assert f"copy {len(STEP_2)} objects" in run.output
    assert "global_step_1" not in run.output
    assert run.destroyed == []


def test_a_corrupted_copy_fails_loudly_and_nothing_is_deleted_or_destroyed(fake_oss):
    fake_oss.corrupt_copies("huggingface/model.safetensors")
    run = Run(fake_oss)
    assert run("--destroy") == 1
    assert run.destroyed == []
    # The only delete the tool ever sends is of its own lock claim.
    assert all(r.key.startswith(LOCK) for r in fake_oss.requests(method="DELETE"))
    assert f"oss://ckpt/{KEPT_STEP_2}actor/huggingface/model.safetensors: CRC64" in run.output
    assert "nothing was deleted or destroyed" in run.output
    # Without a verified copy the kept folder must not claim a resumable step.
    assert fake_oss.get("ckpt", KEPT_TRACKER) is None
    for rel, data in STEP_2.items():
        assert fake_oss.get("ckpt", EXP + rel) == data


def test_one_failed_copy_is_counted_once_not_again_when_its_verification_fails(fake_oss):
    fake_oss.fail_next(10, status=403, op="CopyObject", key="actor/fsdp_config.json")
    run = Run(fake_oss)
    assert run("--destroy") == 1
    error_at = next(i for i, line in enumerate(run.lines) if line.startswith("error:"))
    assert run.lines[error_at].startswith(f"error: 1 of {len(STEP_2) + 1} objects")
    problems = run.lines[error_at + 1:]
    assert len(problems) == 1 and "fsdp_config.json: copy failed" in problems[0]
    assert run.destroyed == []


def test_a_second_run_does_not_copy_objects_already_kept(fake_oss):
    assert Run(fake_oss)() == 0
    fake_oss.clear_log()
    run = Run(fake_oss)
    assert run() == 0
    assert fake_oss.requests(op="CopyObject") == []
    assert fake_oss.requests(op="PutObject") == [r for r in fake_oss.requests(op="PutObject") if r.key.startswith(LOCK)]
    assert f"0 copied, {len(STEP_2)} already kept" in run.output


def test_a_different_object_already_kept_is_never_overwritten_and_nothing_is_copied(fake_oss):
    fake_oss.put("ckpt", KEPT_STEP_2 + "data.pt", b"someone else's dataloader")
    run = Run(fake_oss)
    assert run("--destroy") == 1
    assert fake_oss.get("ckpt", KEPT_STEP_2 + "data.pt") == b"someone else's dataloader"
    assert fake_oss.requests(op="CopyObject") == []
    assert f"oss://ckpt/{KEPT_STEP_2}data.pt already exists and differs" in run.output
    assert run.destroyed == []


def test_a_kept_tracker_naming_another_step_is_not_overwritten(fake_oss):
    fake_oss.put("ckpt", KEPT_TRACKER, b"5")
    run = Run(fake_oss)
    assert run("--destroy") == 1
    assert fake_oss.get("ckpt", KEPT_TRACKER) == b"5"
    assert "already names step '5'" in run.output
    assert fake_oss.requests(op="CopyObject") == [] and run.destroyed == []


def test_a_copy_racing_a_writer_of_the_same_key_does_not_overwrite_it(fake_oss):
    # The pre-check found nothing; the copy itself still carries x-oss-forbid-overwrite.
    client = fake_oss.client()
    plan = make_plan(client, bucket="ckpt", checkpoints_prefix="checkpoints/", project="gsm8k-tool-agent",
                     experiment="qwen-grpo", dest_bucket="ckpt", kept_root="kept/")
    real_head = keeper_copy.head
    raced = KEPT_STEP_2 + "data.pt"

    def head_then_race(c, bucket, key):
        stat = real_head(c, bucket, key)
        if key == raced and stat is None and fake_oss.get("ckpt", raced) is None:
            fake_oss.put("ckpt", raced, b"written meanwhile")
        return stat

    keeper_copy.head = head_then_race
    try:
        result = keep(client, plan, log=lambda _: None)
    finally:
        keeper_copy.head = real_head
    assert not result.ok
    assert fake_oss.get("ckpt", raced) == b"written meanwhile"
    assert any("FileAlreadyExists" in p for p in result.problems.values())


def test_keep_bucket_copies_into_another_bucket_under_the_same_layout(fake_oss):
    run = Run(fake_oss)
    assert run("--keep-bucket", "archive") == 0
    assert len(fake_oss.keys("archive", KEPT_STEP_2)) == len(STEP_2)
    assert fake_oss.keys("ckpt", "kept/") == []


def test_keep_prefix_replaces_the_kept_root(fake_oss):
    run = Run(fake_oss)
    assert run("--keep-prefix", "archive/2025") == 0
    assert len(fake_oss.keys("ckpt", "archive/2025/gsm8k-tool-agent/qwen-grpo/global_step_2/")) == len(STEP_2)


def test_no_checkpoint_at_all_exits_1_without_destroying(bare_oss):
    run = Run(bare_oss)
    assert run("--destroy") == 1
    assert run.destroyed == []
    assert "nothing to keep" in run.output


def test_no_checkpoint_at_all_may_destroy_when_explicitly_allowed_so_idle_stacks_stop_billing(bare_oss):
    run = Run(bare_oss)
    assert run("--destroy", "--allow-no-checkpoint") == 0
    assert run.destroyed == [DESTROY]
    assert bare_oss.keys("ckpt") == []  # the lock claim is gone too


@pytest.mark.parametrize("files, tracker, message", [
    # No tracker: before, the largest step was kept (even partial) and a tracker of teardown's own was written.
    (complete_step(1), None, "no step is confirmed complete"),
    ({**complete_step(1), "global_step_2/actor/model_world_size_2_rank_0.pt": b"m"}, None,
     "no step is confirmed complete"),
    # Before, an empty step folder named by the tracker was "kept" as 0 bytes.
    ({"global_step_3/": b"", "global_step_3/actor/": b""}, b"3", "global_step_3/ is not a complete verl checkpoint"),
    ({k: v for k, v in complete_step(3).items() if "rank_1" not in k}, b"3", "rank(s) [1] missing"),
    # A max_actor_ckpt_to_keep rotation removed actor/ of the tracked step while the next save runs.
    ({"global_step_3/data.pt": b"d", **complete_step(4, tag=b"x")}, b"3", "actor/ is missing or empty"),
    (complete_step(1), b"one", "is malformed"),
    (complete_step(1), b"\xff\xfe", "is malformed"),
    (complete_step(1), b"7", "global_step_7/ does not exist"),
])
def test_anything_but_a_complete_tracked_step_is_refused_even_when_empty_runs_may_be_destroyed(
        bare_oss, files, tracker, message):
    seed(bare_oss, files, tracker)
    run = Run(bare_oss)
    assert run("--destroy", "--allow-no-checkpoint") == 1
    assert message in run.output and "refusing to destroy" in run.output
    refused_without_side_effects(run, bare_oss)
    assert bare_oss.keys("ckpt", LOCK) == []


def test_keeping_inside_a_bucket_that_destroy_deletes_is_refused(fake_oss):
    run = Run(fake_oss, settings(keep_on_destroy=False))
    assert run("--destroy") == 2
    assert run.destroyed == []
    assert "--keep-bucket" in run.output
    assert Run(fake_oss, settings(keep_on_destroy=False))("--keep-bucket", "archive") == 0


def test_a_kept_prefix_under_the_buckets_expiry_rule_is_refused_before_any_request(fake_oss):
    # storage.scratch_prefix expires after scratch_expire_days (components/cloud/storage.py lifecycle_rules).
    run = Run(fake_oss)
    assert run("--destroy", "--keep-prefix", "scratch/keep") == 2
    assert "rule 'expire-scratch' expires oss://ckpt/scratch/ after 7 days" in run.output
    assert fake_oss.requests() == [] and run.destroyed == []


def test_a_kept_folder_under_a_live_expiry_rule_of_the_destination_bucket_is_refused(fake_oss):
    fake_oss.set_lifecycle("archive", [{"id": "expire-all", "prefix": "", "days": 30}])
    run = Run(fake_oss)
    assert run("--destroy", "--keep-bucket", "archive") == 1
    assert "rule 'expire-all' expires oss://archive/ after 30 days" in run.output
    refused_without_side_effects(run, fake_oss)
    # A rule elsewhere in the bucket, or a disabled one, does not matter.
    fake_oss.set_lifecycle("archive", [{"id": "tmp", "prefix": "tmp/", "days": 1},
                                       {"id": "off", "prefix": "", "days": 1, "status": "Disabled"}])
    assert Run(fake_oss)("--keep-bucket", "archive") == 0


def test_unreadable_lifecycle_rules_of_the_destination_refuse(fake_oss):
    fake_oss.fail_next(1, status=403, op="GetBucketLifecycle")
    run = Run(fake_oss)
    assert run("--destroy") == 1
    assert "oss:GetBucketLifecycle" in run.output
    refused_without_side_effects(run, fake_oss)


def test_dry_run_and_destroy_together_are_rejected(fake_oss):
    with pytest.raises(SystemExit) as exit_info:
        Run(fake_oss)("--dry-run", "--destroy")
    assert exit_info.value.code == 2


def test_the_cli_reads_bucket_and_prefixes_from_a_real_stack_file():
    loaded = teardown.default_load_stack("dev")
    exp = teardown.experiment_prefix(loaded.storage.checkpoints_prefix, loaded.training.project_name,
                                     loaded.training.experiment_name)
    with FakeOss() as server:
        for rel, data in complete_step(1).items():
            server.put(loaded.storage.bucket_name, exp + rel, data)
        server.put(loaded.storage.bucket_name, exp + TRACKER, b"1")
        lines = []
        code = teardown.main(["--stack", "dev", "--endpoint", server.endpoint, "--dry-run"], env=dict(ENV),
                             log=lines.append, err=lines.append)
    assert code == 0, lines
    assert f"experiment: oss://{loaded.storage.bucket_name}/{exp}" in lines
    assert f"  {exp}global_step_1/data.pt -> {loaded.storage.kept_prefix}" in "\n".join(lines)


# ------------------------------------------------------------------------------------------ the lock
def test_a_second_run_while_the_first_is_destroying_is_refused_and_touches_nothing(fake_oss):
    second = Run(fake_oss)
    codes = []

    def start_the_second_run():
        assert len(fake_oss.keys("ckpt", LOCK)) == 1  # the first run holds its claim through `pulumi destroy`
        fake_oss.clear_log()
        codes.append(second("--destroy"))

    first = Run(fake_oss, on_destroy=start_the_second_run)
    assert first("--destroy") == 0
    assert codes == [1]
    assert second.destroyed == [] and first.destroyed == [DESTROY]
    assert "another teardown holds" in second.output and "stack 'dev'" in second.output
    assert "--break-lock" in second.output
    assert fake_oss.requests(op="CopyObject") == []
    assert fake_oss.keys("ckpt", LOCK) == []  # both claims are gone


def test_of_runs_started_together_at_most_one_copies_and_destroys(fake_oss):
    runs = [Run(fake_oss) for _ in range(4)]
    codes = [None] * len(runs)
    start = threading.Barrier(len(runs))

    def go(i):
        start.wait()
        codes[i] = runs[i]("--destroy")

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(runs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert set(codes) <= {0, 1} and codes.count(0) <= 1
    assert sum(len(r.destroyed) for r in runs) == codes.count(0)
    for run, code in zip(runs, codes, strict=True):
        if code == 1:
            assert "another teardown holds" in run.output
    assert fake_oss.keys("ckpt", LOCK) == []


def test_a_stale_lock_blocks_until_broken_by_its_run_id(fake_oss):
    stale = LOCK + "20260101T000000Z-deadbeef0001.json"
    fake_oss.put("ckpt", stale, b'{"run_id": "deadbeef0001", "stack": "dev", "host": "ci-runner-7", "pid": 42, '
                                b'"started": "2026-01-01T00:00:00+00:00"}')
    run = Run(fake_oss)
    assert run("--destroy") == 1
    assert "run deadbeef0001 of stack 'dev' on ci-runner-7" in run.output
    assert "--break-lock deadbeef0001" in run.output
    assert fake_oss.keys("ckpt", LOCK) == [stale]
    wrong = Run(fake_oss)
    assert wrong("--destroy", "--break-lock", "cafe") == 2
    assert "no lock claim of run cafe" in wrong.output and wrong.destroyed == []
    broken = Run(fake_oss)
    assert broken("--destroy", "--break-lock", "deadbeef0001") == 0
    assert broken.destroyed == [DESTROY]
    assert fake_oss.keys("ckpt", LOCK) == []


def test_the_lock_is_released_when_the_copy_fails(fake_oss):
    fake_oss.corrupt_copies("data.pt")
    assert Run(fake_oss)("--destroy") == 1
    assert fake_oss.keys("ckpt", LOCK) == []
    later = Run(fake_oss)  # not blocked by a leftover claim; stopped by the damaged copy it must not overwrite
    assert later("--destroy") == 1
    assert "already exists and differs" in later.output and "another teardown" not in later.output


def test_an_oss_error_while_taking_the_lock_is_one_line_and_nothing_is_destroyed(fake_oss):
    fake_oss.fail_next(1, status=403, op="PutObject", key=LOCK)
    run = Run(fake_oss)
    assert run("--destroy") == 1
    assert "error: cannot take the teardown lock" in run.output
    refused_without_side_effects(run, fake_oss)


# ------------------------------------------------------------------------------------------ copy internals
def plan_for(fake: FakeOss, dest_bucket: str):
    client = fake.client()
    return client, make_plan(client, bucket="ckpt", checkpoints_prefix="checkpoints/", project="gsm8k-tool-agent",
                             experiment="qwen-grpo", dest_bucket=dest_bucket, kept_root="kept/")


def test_large_objects_are_copied_in_parts_and_still_verified(fake_oss):
    client, plan = plan_for(fake_oss, "archive")
    result = keep(client, plan, copy_threshold=1024, log=lambda _: None)
    assert result.ok, result.problems
    assert fake_oss.requests(op="UploadPartCopy")  # the 10 KiB safetensors went through multipart copy
    assert fake_oss.get("archive", KEPT_STEP_2 + "actor/huggingface/model.safetensors") == \
        STEP_2["global_step_2/actor/huggingface/model.safetensors"]


def test_a_corrupted_part_copy_is_caught(fake_oss):
    fake_oss.corrupt_copies("model.safetensors")
    client, plan = plan_for(fake_oss, "archive")
    result = keep(client, plan, copy_threshold=1024, log=lambda _: None)
    assert not result.ok
    assert any("model.safetensors" in p for p in result.problems.values())


def test_a_transient_copy_failure_is_retried(fake_oss):
    fake_oss.fail_next(1, status=503, op="CopyObject")
    client, plan = plan_for(fake_oss, "ckpt")
    result = keep(client, plan, log=lambda _: None)
    assert result.ok, result.problems
    assert [r.status for r in fake_oss.requests(op="CopyObject")].count(503) == 1


def test_a_step_with_more_objects_than_one_listing_page_is_planned_whole(fake_oss):
    for i in range(250):  # ListObjectsV2 returns 100 keys per page by default
        fake_oss.put("ckpt", f"{EXP}global_step_2/actor/huggingface/tokenizer_part_{i:03d}.json", b"s")
    client, plan = plan_for(fake_oss, "ckpt")
    assert len(plan.items) == 250 + len(STEP_2)
    listed = len(fake_oss.keys("ckpt", EXP))
    assert len(fake_oss.requests(op="ListObjectsV2")) == -(-listed // 100)


def test_an_oss_error_while_listing_is_one_clear_line_and_nothing_is_destroyed(fake_oss):
    fake_oss.fail_next(1, status=403, op="ListObjectsV2", prefix=EXP)
    run = Run(fake_oss)
    assert run("--destroy") == 1
    assert run.destroyed == []
    assert "error: cannot list oss://ckpt/checkpoints/" in run.output and "nothing copied or destroyed" in run.output
    assert "Traceback" not in run.output


def test_an_oss_error_while_copying_is_one_clear_line_and_nothing_is_destroyed(fake_oss):
    fake_oss.fail_next(1, status=403, method="HEAD")
    run = Run(fake_oss)
    assert run("--destroy") == 1
    assert run.destroyed == []
    assert "failed" in run.output and "nothing deleted or destroyed" in run.output
    assert "Traceback" not in run.output
