"""teardown.py's last steps before `pulumi destroy` (keeper/destroy.py): a bucket the destroy deletes is emptied of
incomplete multipart uploads, and the rebuild guard on the cluster, VPC and vSwitches is lifted (issue 19 items 8
and 10). The OSS side runs against tests/fakeoss.py."""

from __future__ import annotations

import pytest

from components.cloud import guards
from components.cloud.guards import DESTROY_ENV, GUARDED_TYPES, rebuild_guard
from keeper import destroy
from keeper.destroy import abort_incomplete_uploads, destroy_env, guarded_urns
from tests.conftest import SINGLE_STACKS, record
from tests.fakeoss import FakeOss, Upload
from tests.test_teardown import DESTROY, STEP_2, Run, seed, settings

CLUSTER_URN = "urn:pulumi:dev::verl-ack::verl-ack:cluster:Cluster$alicloud:cs/managedKubernetes:ManagedKubernetes::ack-cluster"
VPC_URN = "urn:pulumi:dev::verl-ack::verl-ack:network:Network$alicloud:vpc/network:Network::net-vpc"
BUCKET_URN = "urn:pulumi:dev::verl-ack::verl-ack:storage:Storage$alicloud:oss/bucket:Bucket::storage-bucket"
STATE = {"deployment": {"resources": [
    {"urn": CLUSTER_URN, "type": GUARDED_TYPES[0], "protect": True},
    {"urn": VPC_URN, "type": GUARDED_TYPES[1], "protect": True},
    {"urn": BUCKET_URN, "type": "alicloud:oss/bucket:Bucket", "protect": True},
]}}


@pytest.fixture
def fake_oss():
    with FakeOss() as server:
        seed(server, STEP_2)
        yield server


def interrupted_uploads(fake: FakeOss, bucket: str, n: int) -> None:
    for i in range(n):
        fake.uploads[f"{bucket}-upload-{i:04d}"] = Upload(bucket=bucket, key=f"checkpoints/x/global_step_3/shard_{i}.pt",
                                                 parts={1: b"part"})


def test_every_incomplete_upload_is_aborted_across_pages_and_other_buckets_are_untouched(fake_oss):
    interrupted_uploads(fake_oss, "ckpt", 1005)  # more than one ListMultipartUploads page (1000)
    interrupted_uploads(fake_oss, "elsewhere", 1)
    assert abort_incomplete_uploads(fake_oss.client(), "ckpt", log=lambda _: None) == 1005
    assert [u.bucket for u in fake_oss.uploads.values()] == ["elsewhere"]
    assert len(fake_oss.requests(op="ListMultipartUploads")) == 2


def test_a_destroy_that_deletes_the_bucket_aborts_its_incomplete_uploads_first(fake_oss):
    interrupted_uploads(fake_oss, "ckpt", 3)
    run = Run(fake_oss, settings(keep_on_destroy=False))
    assert run("--destroy", "--keep-bucket", "archive") == 0
    assert fake_oss.uploads == {}, "DeleteBucket would fail with BucketNotEmpty while parts exist"
    assert run.destroyed == [DESTROY]
    assert "aborted 3 incomplete multipart upload(s)" in run.output


def test_a_kept_bucket_keeps_its_uploads_because_destroy_does_not_delete_it(fake_oss):
    interrupted_uploads(fake_oss, "ckpt", 2)
    assert Run(fake_oss)("--destroy") == 0
    assert len(fake_oss.uploads) == 2 and fake_oss.requests(op="AbortMultipartUpload") == []


def test_teardown_unprotects_exactly_the_guarded_resources_before_the_destroy_and_leaves_the_bucket_protected(
        fake_oss):
    order: list[str] = []
    run = Run(fake_oss, state=STATE, on_destroy=lambda: order.append("destroy"))
    assert run("--destroy") == 0
    assert run.pulumi == [["pulumi", "state", "unprotect", "--stack", "dev", "--yes", CLUSTER_URN, VPC_URN]]
    assert run.destroyed == [DESTROY], "--exclude-protected still keeps the protected bucket"


def test_a_failed_unprotect_destroys_nothing(fake_oss):
    run = Run(fake_oss, state=STATE)
    run_pulumi = teardown_main_with_failing_unprotect(run)
    assert run_pulumi("--destroy") == 3
    assert run.destroyed == []
    assert "could not unprotect" in run.output


def teardown_main_with_failing_unprotect(run: Run):
    import teardown
    from tests.test_teardown import ENV

    def call(*args: str) -> int:
        return teardown.main(["--stack", "dev", "--endpoint", run.fake.endpoint, *args],
                             load_stack=lambda name: run.settings, destroy=lambda c: run.destroyed.append(c) or 0,
                             pulumi=lambda c: 3, state=lambda s: STATE, env=dict(ENV),
                             log=run.lines.append, err=run.lines.append)
    return call


@pytest.mark.parametrize("stack", SINGLE_STACKS)
def test_the_cluster_vpc_and_vswitches_a_stack_creates_are_protected_and_teardown_knows_their_types(stack):
    rec = record(stack)
    guarded = {r.type for r in rec.resources if r.options.get("protect") and not r.type.startswith("alicloud:oss/")}
    assert guarded <= set(GUARDED_TYPES)
    for r in rec.resources:
        if r.type in GUARDED_TYPES and not r.options.get("read"):
            assert r.options["protect"] is True, f"{r.urn}: a ForceNew change would rebuild the platform"
    assert guarded_urns({"deployment": {"resources": [{"urn": r.urn, "type": r.type, "protect": True}
                                                      for r in rec.resources]}}) == \
        [r.urn for r in rec.resources if r.type in GUARDED_TYPES]


def test_the_destroy_teardown_runs_leaves_the_guard_off_in_the_program(monkeypatch):
    assert rebuild_guard() is True
    monkeypatch.setenv(DESTROY_ENV, "1")
    assert rebuild_guard() is False
    assert destroy_env({"PATH": "/bin"}) == {"PATH": "/bin", DESTROY_ENV: "1"}


def test_teardown_and_the_program_agree_on_the_guarded_types_and_the_destroy_switch():
    assert (destroy.GUARDED_TYPES, destroy.DESTROY_ENV) == (guards.GUARDED_TYPES, guards.DESTROY_ENV)
