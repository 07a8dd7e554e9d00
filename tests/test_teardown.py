"""teardown.py: pick the latest verl checkpoint, keep a verified copy, and only then destroy."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import teardown
from teardown import StepChoice, TeardownError, check_no_overlap, choose_step, keep, make_plan, step_of
from tests.fakeoss import FakeOss

EXP = "checkpoints/gsm8k-tool-agent/qwen-grpo/"
STEP_1 = {
    "global_step_1/actor/model_world_size_2_rank_0.pt": b"step1-rank0",
    "global_step_1/actor/huggingface/model.safetensors": b"step1-hf",
}
STEP_2 = {
    # ossfs, through which pods write checkpoints, can leave empty directory objects; they are copied too.
    "global_step_2/": b"",
    "global_step_2/actor/": b"",
    "global_step_2/actor/model_world_size_2_rank_0.pt": b"r0" * 300,
    "global_step_2/actor/model_world_size_2_rank_1.pt": b"r1" * 300,
    "global_step_2/actor/optim_world_size_2_rank_0.pt": b"o0" * 200,
    "global_step_2/actor/extra_state_world_size_2_rank_0.pt": b"e0",
    "global_step_2/actor/huggingface/config.json": b'{"architectures": ["Qwen2ForCausalLM"]}',
    "global_step_2/actor/huggingface/model.safetensors": bytes(range(256)) * 40,
    "global_step_2/data.pt": b"dataloader",
}
KEPT_STEP_2 = "kept/gsm8k-tool-agent/qwen-grpo/global_step_2/"
ENV = {"OSS_ACCESS_KEY_ID": "test-id", "OSS_ACCESS_KEY_SECRET": "test-secret"}
# The protected (kept) bucket stays; a fresh kubeconfig comes from running the program.
DESTROY = ["pulumi", "destroy", "--stack", "dev", "--yes", "--exclude-protected", "--run-program"]


def settings(**storage):
    return SimpleNamespace(
        region="cn-hangzhou",
        storage=SimpleNamespace(**{"bucket_name": "ckpt", "checkpoints_prefix": "checkpoints/", "kept_prefix": "kept/",
                                   "mode": "new", "keep_on_destroy": True, **storage}),
        training=SimpleNamespace(project_name="gsm8k-tool-agent", experiment_name="qwen-grpo"),
    )


@pytest.fixture
def fake_oss():
    with FakeOss() as server:
        for rel, data in {**STEP_1, **STEP_2, "latest_checkpointed_iteration.txt": b"2"}.items():
            server.put("ckpt", EXP + rel, data)
        # A sibling experiment whose name extends this one's must not be mixed in.
        server.put("ckpt", "checkpoints/gsm8k-tool-agent/qwen-grpo-v2/global_step_9/data.pt", b"other")
        yield server


class Run:
    """Runs the CLI against the fake OSS, recording output and any destroy call."""

    def __init__(self, fake: FakeOss, stack_settings=None):
        self.fake = fake
        self.settings = stack_settings or settings()
        self.lines: list[str] = []
        self.destroyed: list[list[str]] = []

    def __call__(self, *args: str) -> int:
        def destroy(command):
            self.destroyed.append(command)
            return 0

        return teardown.main(["--stack", "dev", "--endpoint", self.fake.endpoint, *args],
                             load_stack=lambda name: self.settings, destroy=destroy, env=dict(ENV),
                             log=self.lines.append, err=self.lines.append)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


# ------------------------------------------------------------------------------------------ choosing the step
def test_step_numbers_come_from_global_step_directories_only():
    assert step_of(EXP + "global_step_12/actor/x.pt", EXP) == 12
    assert step_of(EXP + "latest_checkpointed_iteration.txt", EXP) is None
    assert step_of(EXP + "global_step_12", EXP) is None  # a file, not a directory
    assert step_of("checkpoints/other/global_step_3/x", EXP) is None


def test_the_tracker_confirms_the_largest_step():
    assert choose_step([1, 2, 2], "2\n") == StepChoice(2)


def test_without_a_tracker_the_numerically_largest_step_is_kept_with_a_note():
    choice = choose_step([9, 10, 2], None)
    assert choice.step == 10
    assert "unconfirmed" in choice.notes[0]


def test_a_step_newer_than_the_tracker_is_an_unfinished_save_and_is_not_kept():
    choice = choose_step([1, 2, 3], "2")
    assert choice.step == 2
    assert "global_step_3/ is newer" in choice.notes[0]


def test_a_tracker_naming_a_missing_step_or_holding_garbage_is_refused():
    with pytest.raises(TeardownError, match="global_step_5/ does not exist"):
        choose_step([1, 2], "5")
    with pytest.raises(TeardownError, match="not a step number"):
        choose_step([1, 2], "two")
    with pytest.raises(TeardownError, match="no global_step_N directory"):
        choose_step([], "2")


def test_a_kept_prefix_overlapping_the_checkpoints_is_refused_in_the_same_bucket_only():
    with pytest.raises(ValueError, match="overlaps"):
        check_no_overlap("ckpt", EXP, "ckpt", EXP + "global_step_2/")
    with pytest.raises(ValueError, match="overlaps"):
        check_no_overlap("ckpt", EXP, "ckpt", "checkpoints/")
    check_no_overlap("ckpt", EXP, "ckpt", "kept/gsm8k-tool-agent/qwen-grpo/")
    check_no_overlap("ckpt", EXP, "archive", EXP)


# ------------------------------------------------------------------------------------------ the CLI
def test_the_latest_step_with_its_hf_export_is_copied_verified_and_then_the_stack_destroyed(fake_oss):
    run = Run(fake_oss)
    assert run("--destroy") == 0
    kept = fake_oss.keys("ckpt", "kept/")
    assert kept == sorted([KEPT_STEP_2 + rel.removeprefix("global_step_2/") for rel in STEP_2]
                          + ["kept/gsm8k-tool-agent/qwen-grpo/latest_checkpointed_iteration.txt"])
    for rel, data in STEP_2.items():
        assert fake_oss.get("ckpt", KEPT_STEP_2 + rel.removeprefix("global_step_2/")) == data
    assert fake_oss.get("ckpt", "kept/gsm8k-tool-agent/qwen-grpo/latest_checkpointed_iteration.txt") == b"2"
    assert f"kept oss://ckpt/{KEPT_STEP_2}actor/huggingface/model.safetensors" in run.output
    assert f"{len(STEP_2)} objects verified by size and CRC64" in run.output
    assert run.destroyed == [DESTROY]
    # Copies are server-side: no object body travels through the tool.
    assert fake_oss.requests(op="GetObject") == [r for r in fake_oss.requests(op="GetObject")
                                                 if r.key.endswith("latest_checkpointed_iteration.txt")]


def test_without_destroy_the_pulumi_command_is_printed_not_run(fake_oss):
    run = Run(fake_oss)
    assert run() == 0
    assert run.destroyed == []
    assert "to destroy the stack, run: pulumi destroy --stack dev --yes" in run.output


def test_a_dry_run_lists_the_plan_and_changes_nothing(fake_oss):
    run = Run(fake_oss)
    assert run("--dry-run") == 0
    assert fake_oss.keys("ckpt", "kept/") == []
    assert {r.op for r in fake_oss.requests()} <= {"ListObjectsV2", "GetObject"}
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
    assert fake_oss.requests(method="DELETE") == []
    assert f"oss://ckpt/{KEPT_STEP_2}actor/huggingface/model.safetensors: CRC64" in run.output
    assert "nothing was deleted or destroyed" in run.output
    # Without a verified copy the kept folder must not claim a resumable step.
    assert fake_oss.get("ckpt", "kept/gsm8k-tool-agent/qwen-grpo/latest_checkpointed_iteration.txt") is None
    # The source checkpoint is untouched.
    for rel, data in STEP_2.items():
        assert fake_oss.get("ckpt", EXP + rel) == data


def test_a_second_run_does_not_copy_objects_already_kept(fake_oss):
    assert Run(fake_oss)() == 0
    fake_oss.clear_log()
    run = Run(fake_oss)
    assert run() == 0
    assert fake_oss.requests(op="CopyObject") == []
    assert f"0 copied, {len(STEP_2)} already kept" in run.output


def test_keep_bucket_copies_into_another_bucket_under_the_same_layout(fake_oss):
    run = Run(fake_oss)
    assert run("--keep-bucket", "archive") == 0
    assert len(fake_oss.keys("archive", KEPT_STEP_2)) == len(STEP_2)
    assert fake_oss.keys("ckpt", "kept/") == []


def test_keep_prefix_replaces_the_kept_root(fake_oss):
    run = Run(fake_oss)
    assert run("--keep-prefix", "archive/2025") == 0
    assert len(fake_oss.keys("ckpt", "archive/2025/gsm8k-tool-agent/qwen-grpo/global_step_2/")) == len(STEP_2)


def test_no_checkpoint_at_all_exits_1_without_destroying():
    with FakeOss() as empty:
        run = Run(empty)
        assert run("--destroy") == 1
    assert run.destroyed == []
    assert "nothing to keep" in run.output


def test_no_checkpoint_at_all_may_destroy_when_explicitly_allowed_so_idle_stacks_stop_billing():
    with FakeOss() as empty:
        run = Run(empty)
        assert run("--destroy", "--allow-no-checkpoint") == 0
    assert run.destroyed == [DESTROY]


def test_an_inconsistent_checkpoint_is_never_destroyed_even_when_empty_runs_are_allowed(fake_oss):
    fake_oss.put("ckpt", "checkpoints/gsm8k-tool-agent/qwen-grpo/global_step_1/actor/model.pt", b"m")
    fake_oss.put("ckpt", "checkpoints/gsm8k-tool-agent/qwen-grpo/latest_checkpointed_iteration.txt", b"7")
    run = Run(fake_oss)
    assert run("--destroy", "--allow-no-checkpoint") == 1
    assert run.destroyed == []


def test_keeping_inside_a_bucket_that_destroy_deletes_is_refused(fake_oss):
    run = Run(fake_oss, settings(keep_on_destroy=False))
    assert run("--destroy") == 2
    assert run.destroyed == []
    assert "--keep-bucket" in run.output
    assert Run(fake_oss, settings(keep_on_destroy=False))("--keep-bucket", "archive") == 0


def test_dry_run_and_destroy_together_are_rejected(fake_oss):
    with pytest.raises(SystemExit) as exit_info:
        Run(fake_oss)("--dry-run", "--destroy")
    assert exit_info.value.code == 2


def test_the_cli_reads_bucket_and_prefixes_from_a_real_stack_file():
    loaded = teardown.default_load_stack("dev")
    exp = teardown.experiment_prefix(loaded.storage.checkpoints_prefix, loaded.training.project_name,
                                     loaded.training.experiment_name)
    with FakeOss() as server:
        server.put(loaded.storage.bucket_name, exp + "global_step_1/data.pt", b"x")
        lines = []
        code = teardown.main(["--stack", "dev", "--endpoint", server.endpoint, "--dry-run"], env=dict(ENV),
                             log=lines.append)
    assert code == 0
    assert f"experiment: oss://{loaded.storage.bucket_name}/{exp}" in lines
    assert f"  {exp}global_step_1/data.pt -> {loaded.storage.kept_prefix}" in "\n".join(lines)


# ------------------------------------------------------------------------------------------ copy internals
def test_large_objects_are_copied_in_parts_and_still_verified(fake_oss):
    client = fake_oss.client()
    plan = make_plan(client, bucket="ckpt", checkpoints_prefix="checkpoints/", project="gsm8k-tool-agent",
                     experiment="qwen-grpo", dest_bucket="archive", kept_root="kept/")
    result = keep(client, plan, copy_threshold=1024, log=lambda _: None)
    assert result.ok, result.problems
    assert fake_oss.requests(op="UploadPartCopy")  # the 10 KiB safetensors went through multipart copy
    assert fake_oss.get("archive", KEPT_STEP_2 + "actor/huggingface/model.safetensors") == \
        STEP_2["global_step_2/actor/huggingface/model.safetensors"]


def test_a_corrupted_part_copy_is_caught(fake_oss):
    fake_oss.corrupt_copies("model.safetensors")
    client = fake_oss.client()
    plan = make_plan(client, bucket="ckpt", checkpoints_prefix="checkpoints/", project="gsm8k-tool-agent",
                     experiment="qwen-grpo", dest_bucket="archive", kept_root="kept/")
    result = keep(client, plan, copy_threshold=1024, log=lambda _: None)
    assert not result.ok
    assert any("model.safetensors" in p for p in result.problems)


def test_a_transient_copy_failure_is_retried(fake_oss):
    fake_oss.fail_next(1, status=503, op="CopyObject")
    client = fake_oss.client()
    plan = make_plan(client, bucket="ckpt", checkpoints_prefix="checkpoints/", project="gsm8k-tool-agent",
                     experiment="qwen-grpo", dest_bucket="ckpt", kept_root="kept/")
    result = keep(client, plan, log=lambda _: None)
    assert result.ok, result.problems
    assert [r.status for r in fake_oss.requests(op="CopyObject")].count(503) == 1


def test_a_step_with_more_objects_than_one_listing_page_is_planned_whole(fake_oss):
    for i in range(250):  # ListObjectsV2 returns 100 keys per page by default
        fake_oss.put("ckpt", f"{EXP}global_step_2/actor/shard_{i:03d}.pt", b"s")
    client = fake_oss.client()
    plan = make_plan(client, bucket="ckpt", checkpoints_prefix="checkpoints/", project="gsm8k-tool-agent",
                     experiment="qwen-grpo", dest_bucket="ckpt", kept_root="kept/")
    assert len(plan.items) == 250 + len(STEP_2)
    assert len(fake_oss.requests(op="ListObjectsV2")) == 3


def test_an_oss_error_while_listing_is_one_clear_line_and_nothing_is_destroyed(fake_oss):
    fake_oss.fail_next(1, status=403, method="GET")
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
