"""Put a model's weights into the bucket once, so training pods read them from OSS instead of a hub.

Run in the model staging Job as `python -m pipeline.stage_model`.

The cache (pipeline/marker.py): the program names a content-addressed prefix per repo and revision
(`models/<name>/<key>/`, components/wiring.py model_path), so one bucket stages each model revision once.
Idempotency: after every file is uploaded, the job writes a marker object next to the prefix,
`<prefix without trailing slash>.complete` (e.g. `models/Qwen2.5-3B-Instruct/<key>.complete`), holding a
JSON manifest: model id, revision, source, and every object's key, size and CRC64 as OSS reports
them. The marker lives outside the prefix so the model directory training mounts holds only the
model's own files. A later run whose marker names the same model id and revision, and whose
objects are all still listed with the manifest's sizes, skips the download entirely. A marker for
a different model or revision stops the job instead of mixing two models' files under one prefix.
An interrupted run has no marker; the next run downloads again and the uploader skips the objects
that already match (same size and CRC64).

Environment:
  MODEL_SOURCE    huggingface (default) | modelscope.
  MODEL_ID        hub repo id, e.g. Qwen/Qwen2.5-3B-Instruct (required).
  MODEL_REVISION  optional branch, tag or commit; pin a commit for reproducible runs.
  OSS_BUCKET, OSS_REGION (required), OSS_ENDPOINT, OSS_INTERNAL_ENDPOINT: as in pipeline.gsm8k.
  OSS_PREFIX      destination prefix, default `models/<last part of MODEL_ID>/`.
  DOWNLOAD_DIR    local scratch directory, default /tmp/model (needs room for the whole model).
  HF_TOKEN        optional Hugging Face token (gated models need one).
  MODELSCOPE_TOKEN optional ModelScope token.
  Credentials: see pipeline/oss_client.py.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pipeline.marker import MANIFEST_FORMAT, manifest_problems, marker_key, read_state, write_marker
from pipeline.oss_client import CredentialsMissing, client_from_env, normalize_prefix, require
from pipeline.oss_upload import upload_directory

__all__ = ["MANIFEST_FORMAT", "ModelSpec", "StageConflict", "build_manifest", "default_prefix", "manifest_problems",
           "marker_key", "skip_decision", "spec_from_env", "stage"]

Source = Literal["huggingface", "modelscope"]
SOURCES: tuple[Source, ...] = ("huggingface", "modelscope")


@dataclass(frozen=True)
class ModelSpec:
    source: Source
    model_id: str
    revision: str | None = None

    @property
    def revision_label(self) -> str:
        # None means "the hub's default branch" (main on Hugging Face, master on ModelScope).
        return self.revision or "default"


class StageConflict(RuntimeError):
    """The prefix already holds a different model; staging would mix two models' files."""


def default_prefix(model_id: str) -> str:
    return f"models/{model_id.rstrip('/').split('/')[-1]}/"


def build_manifest(spec: ModelSpec, prefix: str, objects: list[dict]) -> dict:
    """`objects`: [{"key": <relative path>, "size": int, "crc64": str}] as read back from OSS."""
    files = sorted(objects, key=lambda o: o["key"])
    return {
        "format": MANIFEST_FORMAT,
        "model_id": spec.model_id,
        "revision": spec.revision_label,
        "source": spec.source,
        "prefix": prefix,
        "files": files,
        "total_bytes": sum(o["size"] for o in files),
    }


def skip_decision(marker_text: str | None, spec: ModelSpec, listing: Mapping[str, int]) -> tuple[bool, str]:
    """(skip, reason). Raises StageConflict when the marker belongs to another model or revision.

    The source hub is not compared: the same repo id on Hugging Face and ModelScope is the same
    model, and switching hubs must not re-upload several GiB.
    """
    if marker_text is None:
        return False, "no marker: the model has not been staged completely yet"
    try:
        manifest = json.loads(marker_text)
    except json.JSONDecodeError:
        return False, "the marker is not valid JSON; staging again"
    if manifest.get("model_id") != spec.model_id or manifest.get("revision") != spec.revision_label:
        raise StageConflict(
            f"the prefix already holds {manifest.get('model_id')}@{manifest.get('revision')}, not "
            f"{spec.model_id}@{spec.revision_label}; use another OSS_PREFIX or delete the prefix and its marker")
    problems = manifest_problems(manifest, listing)
    if problems:
        return False, "the marker exists but " + "; ".join(problems[:5]) + "; staging again"
    return True, f"{spec.model_id}@{spec.revision_label} is already staged ({len(manifest['files'])} files)"


def download_model(spec: ModelSpec, dest: Path, token: str | None) -> Path:
    """Download a snapshot with the hub's own client, imported here so only the staging Job needs it."""
    dest.mkdir(parents=True, exist_ok=True)
    if spec.source == "huggingface":
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=spec.model_id, revision=spec.revision, local_dir=dest, token=token))
    from modelscope import snapshot_download

    return Path(snapshot_download(model_id=spec.model_id, revision=spec.revision, local_dir=str(dest), token=token))


def stage(
    client,
    bucket: str,
    prefix: str,
    spec: ModelSpec,
    download: Callable[[ModelSpec, Path], Path],
    work_dir: Path,
    *,
    log: Callable[[str], None] = print,
    **upload_options,
) -> dict:
    """Stage `spec` under `prefix` unless already there; returns the manifest in the bucket."""
    prefix = normalize_prefix(prefix)
    marker_text, listing = read_state(client, bucket, prefix)
    skip, reason = skip_decision(marker_text, spec, listing)
    log(reason)
    if skip:
        return json.loads(marker_text)

    local = download(spec, work_dir)
    summary = upload_directory(client, bucket, local, prefix, log=log, **upload_options)
    identity = {"model_id": spec.model_id, "revision": spec.revision_label, "source": spec.source}
    # Written last: its presence means every file above is in the bucket.
    return write_marker(client, bucket, prefix, summary.uploaded + summary.skipped, identity, log=log)


def spec_from_env(env: Mapping[str, str]) -> ModelSpec:
    source = env.get("MODEL_SOURCE") or "huggingface"
    if source not in SOURCES:
        raise ValueError(f"MODEL_SOURCE={source!r} must be one of {', '.join(SOURCES)}")
    model_id = env.get("MODEL_ID", "")
    if not model_id or model_id.count("/") != 1:
        raise ValueError(f"MODEL_ID={model_id!r} must be a hub repo id like Qwen/Qwen2.5-3B-Instruct")
    return ModelSpec(source=source, model_id=model_id, revision=env.get("MODEL_REVISION") or None)


def main(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    try:
        spec = spec_from_env(env)
        bucket = require(env, "OSS_BUCKET")
        client = client_from_env(env)
    except (ValueError, KeyError, CredentialsMissing) as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    prefix = env.get("OSS_PREFIX") or default_prefix(spec.model_id)
    token = env.get("HF_TOKEN") if spec.source == "huggingface" else env.get("MODELSCOPE_TOKEN")
    work_dir = Path(env.get("DOWNLOAD_DIR") or "/tmp/model")
    try:
        stage(client, bucket, prefix, spec, lambda s, d: download_model(s, d, token or None), work_dir)
    except StageConflict as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
