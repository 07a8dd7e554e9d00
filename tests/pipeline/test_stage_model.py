"""Model staging: marker naming, the skip decision, and a staged model against the fake OSS."""

from __future__ import annotations

import json

import pytest

from pipeline.stage_model import (
    ModelSpec,
    StageConflict,
    build_manifest,
    default_prefix,
    marker_key,
    skip_decision,
    spec_from_env,
    stage,
)
from tests.fakeoss import FakeOss, crc64

KiB = 1024
SMALL = {"multipart_threshold": 256 * KiB, "part_size": 100 * KiB}
QWEN = ModelSpec(source="huggingface", model_id="Qwen/Qwen2.5-3B-Instruct")
PREFIX = "models/Qwen2.5-3B-Instruct/"
MODEL_FILES = {
    "config.json": b'{"architectures": ["Qwen2ForCausalLM"]}',
    "model-00001-of-00002.safetensors": bytes(range(256)) * 1200,  # above the multipart threshold
    "model-00002-of-00002.safetensors": b"\x07" * 5000,
    "tokenizer.json": b"{}",
}


@pytest.fixture
def fake_oss():
    with FakeOss() as server:
        yield server


def quiet(_: str) -> None:
    pass


class FakeHub:
    """Stands in for snapshot_download: writes the files (and hub bookkeeping) and counts calls."""

    def __init__(self, files=MODEL_FILES):
        self.files = files
        self.calls = 0

    def __call__(self, spec, dest):
        self.calls += 1
        for rel, data in {**self.files, ".cache/huggingface/download/config.json.metadata": b"etag"}.items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(data)
        return dest


def manifest_for(spec=QWEN, files=MODEL_FILES):
    return build_manifest(spec, PREFIX, [{"key": k, "size": len(v), "crc64": crc64(v)} for k, v in files.items()])


def listing_for(files=MODEL_FILES):
    return {k: len(v) for k, v in files.items()}


def test_the_marker_sits_next_to_the_prefix_not_inside_it():
    assert marker_key("models/Qwen2.5-3B-Instruct/") == "models/Qwen2.5-3B-Instruct.complete"
    with pytest.raises(ValueError, match="must not be empty"):
        marker_key("/")


def test_the_default_prefix_is_named_after_the_repo():
    assert default_prefix("Qwen/Qwen2.5-3B-Instruct") == "models/Qwen2.5-3B-Instruct/"


def test_without_a_marker_the_model_is_staged():
    assert skip_decision(None, QWEN, listing_for()) == (False, "no marker: the model has not been staged completely yet")


def test_a_matching_marker_with_every_file_listed_skips_the_download():
    skip, reason = skip_decision(json.dumps(manifest_for()), QWEN, listing_for())
    assert skip
    assert "already staged (4 files)" in reason


def test_a_marker_whose_files_are_gone_or_resized_stages_again():
    listing = listing_for()
    del listing["tokenizer.json"]
    listing["config.json"] += 1
    skip, reason = skip_decision(json.dumps(manifest_for()), QWEN, listing)
    assert not skip
    assert "tokenizer.json is missing" in reason
    assert "config.json is" in reason


def test_a_marker_for_another_model_or_revision_stops_instead_of_mixing_files():
    other = manifest_for(spec=ModelSpec(source="huggingface", model_id="Qwen/Qwen2.5-7B-Instruct"))
    with pytest.raises(StageConflict, match="Qwen2.5-7B-Instruct@default"):
        skip_decision(json.dumps(other), QWEN, listing_for())
    pinned = ModelSpec(source="huggingface", model_id=QWEN.model_id, revision="aa8e725")
    with pytest.raises(StageConflict, match="use another OSS_PREFIX"):
        skip_decision(json.dumps(manifest_for()), pinned, listing_for())


def test_switching_hub_for_the_same_model_does_not_stage_again():
    from_modelscope = ModelSpec(source="modelscope", model_id=QWEN.model_id)
    assert skip_decision(json.dumps(manifest_for()), from_modelscope, listing_for())[0]


def test_a_garbled_marker_stages_again():
    assert skip_decision("not json", QWEN, listing_for())[0] is False


def test_staging_uploads_the_model_files_then_writes_the_manifest_marker_last(fake_oss, tmp_path):
    hub = FakeHub()
    manifest = stage(fake_oss.client(), "data", PREFIX, QWEN, hub, tmp_path, log=quiet, **SMALL)
    assert fake_oss.keys("data") == sorted([PREFIX + k for k in MODEL_FILES] + ["models/Qwen2.5-3B-Instruct.complete"])
    for rel, data in MODEL_FILES.items():
        assert fake_oss.get("data", PREFIX + rel) == data
    writes = [r.key for r in fake_oss.requests() if r.op in ("PutObject", "CompleteMultipartUpload")]
    assert writes[-1] == "models/Qwen2.5-3B-Instruct.complete"
    stored = json.loads(fake_oss.get("data", "models/Qwen2.5-3B-Instruct.complete"))
    assert stored == manifest == manifest_for()
    assert stored["files"][1] == {"key": "model-00001-of-00002.safetensors", "size": 307200,
                                  "crc64": crc64(MODEL_FILES["model-00001-of-00002.safetensors"])}


def test_a_staged_model_is_not_downloaded_again(fake_oss, tmp_path):
    hub = FakeHub()
    stage(fake_oss.client(), "data", PREFIX, QWEN, hub, tmp_path / "a", log=quiet, **SMALL)
    fake_oss.clear_log()
    stage(fake_oss.client(), "data", PREFIX, QWEN, hub, tmp_path / "b", log=quiet, **SMALL)
    assert hub.calls == 1
    assert {r.op for r in fake_oss.requests()} == {"GetObject", "ListObjectsV2"}


def test_an_interrupted_staging_resumes_and_skips_what_already_arrived(fake_oss, tmp_path):
    first = "model-00001-of-00002.safetensors"
    fake_oss.put("data", PREFIX + first, MODEL_FILES[first])  # uploaded before the job died, no marker yet
    stage(fake_oss.client(), "data", PREFIX, QWEN, FakeHub(), tmp_path, log=quiet, **SMALL)
    assert PREFIX + first not in [r.key for r in fake_oss.requests() if r.op in ("PutObject", "UploadPart")]
    assert fake_oss.get("data", "models/Qwen2.5-3B-Instruct.complete") is not None


def test_the_job_settings_come_from_the_environment_and_are_validated():
    assert spec_from_env({"MODEL_ID": "Qwen/Qwen2.5-3B-Instruct"}) == QWEN
    assert spec_from_env({"MODEL_ID": "Qwen/Qwen2.5-3B-Instruct", "MODEL_SOURCE": "modelscope",
                          "MODEL_REVISION": "master"}).revision == "master"
    with pytest.raises(ValueError, match="MODEL_SOURCE"):
        spec_from_env({"MODEL_ID": "Qwen/Qwen2.5-3B-Instruct", "MODEL_SOURCE": "s3"})
    with pytest.raises(ValueError, match="hub repo id"):
        spec_from_env({"MODEL_ID": "Qwen2.5-3B-Instruct"})


def test_main_exits_2_on_a_bad_environment(capsys):
    from pipeline.stage_model import main

    assert main({"MODEL_ID": "Qwen2.5-3B-Instruct", "OSS_BUCKET": "data", "OSS_REGION": "ap-southeast-1"}) == 2
    assert "hub repo id" in capsys.readouterr().err


def test_main_stops_with_1_when_the_prefix_holds_another_model(fake_oss, tmp_path, capsys):
    from pipeline.stage_model import main

    other = manifest_for(spec=ModelSpec(source="huggingface", model_id="Qwen/Qwen2.5-7B-Instruct"))
    fake_oss.put("data", "models/Qwen2.5-3B-Instruct.complete", json.dumps(other).encode())
    env = {"MODEL_ID": QWEN.model_id, "OSS_BUCKET": "data", "OSS_REGION": "ap-southeast-1",
           "OSS_ENDPOINT": fake_oss.endpoint, "OSS_ACCESS_KEY_ID": "id", "OSS_ACCESS_KEY_SECRET": "secret",
           "DOWNLOAD_DIR": str(tmp_path)}
    assert main(env) == 1
    assert "Qwen2.5-7B-Instruct@default" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing was downloaded
