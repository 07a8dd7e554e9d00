"""Uploading a directory to OSS: keys, bytes, idempotency, retries, multipart, and credentials."""

from __future__ import annotations

import json
import os

import alibabacloud_oss_v2 as oss
import pytest

from pipeline import oss_client
from pipeline.oss_client import CredentialsMissing, credentials_provider_from_env, credentials_source
from pipeline.oss_upload import upload_directory
from tests.fakeoss import FakeOss, crc64

KiB = 1024
# Small sizes keep the tests fast; 100 KiB is OSS's minimum part size.
SMALL = {"multipart_threshold": 256 * KiB, "part_size": 100 * KiB}


@pytest.fixture
def fake_oss():
    with FakeOss() as server:
        yield server


def quiet(_: str) -> None:
    pass


def make_tree(root, files: dict[str, bytes]):
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def test_each_file_lands_under_the_prefix_with_its_exact_bytes(fake_oss, tmp_path):
    files = {"train.parquet": b"t" * 1000, "sub/dir/test.parquet": b"\x00\x01binary", "empty.txt": b""}
    summary = upload_directory(fake_oss.client(), "data", make_tree(tmp_path, files), "datasets/gsm8k", log=quiet,
                               **SMALL)
    assert fake_oss.keys("data") == ["datasets/gsm8k/empty.txt", "datasets/gsm8k/sub/dir/test.parquet",
                                     "datasets/gsm8k/train.parquet"]
    for rel, data in files.items():
        assert fake_oss.get("data", f"datasets/gsm8k/{rel}") == data
    assert summary.bytes_uploaded == sum(len(d) for d in files.values())
    assert str(summary) == f"uploaded 3 objects ({summary.bytes_uploaded} bytes), skipped 0 unchanged (0 bytes)"


def test_a_second_run_skips_unchanged_objects_without_sending_them(fake_oss, tmp_path):
    root = make_tree(tmp_path, {"a.bin": os.urandom(5000), "b.bin": os.urandom(300 * KiB)})
    upload_directory(fake_oss.client(), "data", root, "p/", log=quiet, **SMALL)
    fake_oss.clear_log()
    summary = upload_directory(fake_oss.client(), "data", root, "p/", log=quiet, **SMALL)
    assert summary.uploaded == []
    assert sorted(summary.skipped) == ["p/a.bin", "p/b.bin"]
    assert {r.op for r in fake_oss.requests()} == {"HeadObject"}


def test_a_file_with_the_same_size_but_other_content_is_uploaded_again(fake_oss, tmp_path):
    root = make_tree(tmp_path, {"a.bin": b"A" * 4096})
    upload_directory(fake_oss.client(), "data", root, "p/", log=quiet, **SMALL)
    (root / "a.bin").write_bytes(b"B" * 4096)
    summary = upload_directory(fake_oss.client(), "data", root, "p/", log=quiet, **SMALL)
    assert summary.uploaded == ["p/a.bin"]
    assert fake_oss.get("data", "p/a.bin") == b"B" * 4096


def test_an_object_without_a_crc64_is_not_trusted_and_is_uploaded_again(fake_oss, tmp_path):
    root = make_tree(tmp_path, {"a.bin": b"A" * 10})
    client = fake_oss.client()
    original_head = oss_client.head

    def head_without_crc(c, bucket, key):
        stat = original_head(c, bucket, key)
        return None if stat is None else oss_client.ObjectStat(key=stat.key, size=stat.size, crc64=None)

    upload_directory(client, "data", root, "p/", log=quiet, **SMALL)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("pipeline.oss_upload.head", head_without_crc)
        summary = upload_directory(client, "data", root, "p/", log=quiet, **SMALL)
    assert summary.uploaded == ["p/a.bin"]


def test_an_upload_is_retried_after_injected_server_errors(fake_oss, tmp_path):
    root = make_tree(tmp_path, {"a.bin": b"payload"})
    fake_oss.fail_next(2, status=503, op="PutObject")
    summary = upload_directory(fake_oss.client(max_attempts=3), "data", root, "p/", log=quiet, **SMALL)
    assert summary.uploaded == ["p/a.bin"]
    assert [r.status for r in fake_oss.requests(op="PutObject")] == [503, 503, 200]
    assert fake_oss.get("data", "p/a.bin") == b"payload"


def test_an_upload_fails_loudly_when_errors_outlast_the_retries(fake_oss, tmp_path):
    root = make_tree(tmp_path, {"a.bin": b"payload"})
    fake_oss.fail_next(3, status=503, op="PutObject")
    with pytest.raises(oss.exceptions.OperationError):
        upload_directory(fake_oss.client(max_attempts=3), "data", root, "p/", log=quiet, **SMALL)
    assert fake_oss.keys("data") == []


def test_files_at_the_threshold_go_multipart_and_smaller_ones_in_one_put(fake_oss, tmp_path):
    big = os.urandom(SMALL["multipart_threshold"])
    root = make_tree(tmp_path, {"big.bin": big, "small.bin": os.urandom(SMALL["multipart_threshold"] - 1)})
    upload_directory(fake_oss.client(), "data", root, "m/", log=quiet, **SMALL)
    ops = [(r.op, r.key) for r in fake_oss.requests() if r.op != "HeadObject"]
    assert ops == [("InitiateMultipartUpload", "m/big.bin")] + [("UploadPart", "m/big.bin")] * 3 + [
        ("CompleteMultipartUpload", "m/big.bin"), ("PutObject", "m/small.bin")]
    # Parts go up in parallel, so compare them as a multiset.
    assert sorted(r.bytes for r in fake_oss.requests(op="UploadPart")) == [56 * KiB, 100 * KiB, 100 * KiB]
    assert fake_oss.get("data", "m/big.bin") == big


def test_a_failed_part_is_retried_inside_the_multipart_upload(fake_oss, tmp_path):
    big = os.urandom(300 * KiB)
    root = make_tree(tmp_path, {"big.bin": big})
    fake_oss.fail_next(1, status=500, op="UploadPart")
    upload_directory(fake_oss.client(), "data", root, "m/", log=quiet, **SMALL)
    assert [r.status for r in fake_oss.requests(op="UploadPart")].count(500) == 1
    assert fake_oss.get("data", "m/big.bin") == big


def test_hidden_hub_bookkeeping_is_not_uploaded(fake_oss, tmp_path):
    root = make_tree(tmp_path, {"config.json": b"{}", ".cache/huggingface/download/x.lock": b"", ".msc": b"x",
                                "sub/.hidden": b"x"})
    upload_directory(fake_oss.client(), "data", root, "m/", log=quiet, **SMALL)
    assert fake_oss.keys("data") == ["m/config.json"]


def test_a_part_size_above_the_threshold_is_refused(tmp_path):
    with pytest.raises(ValueError, match="must not exceed multipart_threshold"):
        upload_directory(None, "data", tmp_path, "p/", multipart_threshold=100 * KiB, part_size=200 * KiB)


def test_the_local_crc64_matches_what_oss_reports(tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 17)  # spans several read blocks
    (tmp_path / "f").write_bytes(data)
    assert oss_client.crc64_of_file(tmp_path / "f") == crc64(data) == oss_client.crc64_of_bytes(data)


# ------------------------------------------------------------------------------------------ credentials
RRSA = {"ALIBABA_CLOUD_ROLE_ARN": "acs:ram::123:role/verl", "ALIBABA_CLOUD_OIDC_PROVIDER_ARN": "acs:ram::123:oidc/ack",
        "ALIBABA_CLOUD_OIDC_TOKEN_FILE": "/var/run/secrets/ack.alibabacloud.com/rrsa-tokens/token"}


def test_rrsa_wins_over_access_keys_when_the_webhook_injected_its_variables():
    env = {**RRSA, "OSS_ACCESS_KEY_ID": "id", "OSS_ACCESS_KEY_SECRET": "secret"}
    assert credentials_source(env) == "rrsa"


def test_half_an_rrsa_setup_is_an_error_naming_what_is_missing():
    env = {"ALIBABA_CLOUD_ROLE_ARN": RRSA["ALIBABA_CLOUD_ROLE_ARN"], "OSS_ACCESS_KEY_ID": "id",
           "OSS_ACCESS_KEY_SECRET": "secret"}
    with pytest.raises(CredentialsMissing, match="ALIBABA_CLOUD_OIDC_PROVIDER_ARN, ALIBABA_CLOUD_OIDC_TOKEN_FILE"):
        credentials_source(env)


def test_oss_access_keys_then_alibaba_cloud_access_keys_are_the_fallbacks():
    assert credentials_source({"OSS_ACCESS_KEY_ID": "i", "OSS_ACCESS_KEY_SECRET": "s"}) == "oss_access_key"
    assert credentials_source({"ALIBABA_CLOUD_ACCESS_KEY_ID": "i", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "s"}) == \
        "alibaba_cloud_access_key"
    # the names `pulumi up` reads, so teardown works in the same shell
    assert credentials_source({"ALICLOUD_ACCESS_KEY": "i", "ALICLOUD_SECRET_KEY": "s"}) == "alicloud_provider_key"
    creds = credentials_provider_from_env({"ALICLOUD_ACCESS_KEY": "i", "ALICLOUD_SECRET_KEY": "s"},
                                          "cn-hangzhou").get_credentials()
    assert (creds.access_key_id, creds.access_key_secret) == ("i", "s")
    creds = credentials_provider_from_env(
        {"OSS_ACCESS_KEY_ID": "i", "OSS_ACCESS_KEY_SECRET": "s", "OSS_SESSION_TOKEN": "t"}, "cn-hangzhou"
    ).get_credentials()
    assert (creds.access_key_id, creds.access_key_secret, creds.security_token) == ("i", "s", "t")


def test_missing_credentials_name_the_variables_and_never_a_secret_value():
    with pytest.raises(CredentialsMissing) as err:
        credentials_source({"OSS_ACCESS_KEY_SECRET": "very-secret-value"})
    assert "OSS_ACCESS_KEY_ID" in str(err.value)
    assert "very-secret-value" not in str(err.value)


def test_sts_credentials_from_an_rrsa_provider_are_handed_to_the_sdk():
    class StsCredentials:
        def get_access_key_id(self):
            return "STS.id"

        def get_access_key_secret(self):
            return "sts-secret"

        def get_security_token(self):
            return "sts-token"

    class Provider:
        calls = 0

        def get_credentials(self):
            Provider.calls += 1
            return StsCredentials()

    provider = oss_client.adapt_credentials_provider(Provider())
    creds = provider.get_credentials()
    assert (creds.access_key_id, creds.access_key_secret, creds.security_token) == ("STS.id", "sts-secret",
                                                                                    "sts-token")
    provider.get_credentials()
    assert Provider.calls == 2  # asked every time: the wrapped provider owns caching and refresh


def test_the_rrsa_provider_assumes_the_role_with_the_projected_token(tmp_path, monkeypatch):
    pytest.importorskip("alibabacloud_credentials")
    from Tea.core import TeaCore

    token_file = tmp_path / "token"
    token_file.write_text("projected-oidc-token")
    env = {**RRSA, "ALIBABA_CLOUD_OIDC_TOKEN_FILE": str(token_file)}
    sent = []

    class Response:
        status_code = 200
        body = json.dumps({"Credentials": {"AccessKeyId": "STS.from-oidc", "AccessKeySecret": "s",
                                           "SecurityToken": "t", "Expiration": "2099-01-01T00:00:00Z"}}).encode()

    def fake_do_action(request, runtime):
        sent.append(request)
        return Response()

    monkeypatch.setattr(TeaCore, "do_action", staticmethod(fake_do_action))
    creds = credentials_provider_from_env(env, "ap-southeast-1").get_credentials()
    assert creds.access_key_id == "STS.from-oidc"
    assert sent[0].query["Action"] == "AssumeRoleWithOIDC"
    assert sent[0].query["OIDCToken"] == "projected-oidc-token"
    assert sent[0].query["RoleArn"] == RRSA["ALIBABA_CLOUD_ROLE_ARN"]
    assert sent[0].headers["host"] == "sts.ap-southeast-1.aliyuncs.com"
