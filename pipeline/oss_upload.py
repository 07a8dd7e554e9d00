"""Upload a local directory to an OSS prefix, idempotently.

- An object is skipped when the bucket already holds the same key with the same size AND the same
  CRC-64/ECMA (x-oss-hash-crc64ecma). CRC64 rather than Content-MD5 or the ETag: OSS computes the
  CRC64 for every object however it was written (PutObject, multipart, CopyObject), while
  Content-MD5 is only kept for single PutObject uploads and a multipart ETag is not a digest of the
  content, so neither could confirm a multi-GiB model shard.
- Files at or above `multipart_threshold` go through the SDK's Uploader (multipart, `part_size`
  parts, 3 in parallel); smaller files are one PutObject.
- Transient failures (5xx, 408/429, timeouts, connection errors) are retried per request by the
  SDK's StandardRetryer configured in pipeline.oss_client; a multipart upload retries each part.
- The SDK checks the CRC64 the server reports after every PutObject/UploadPart and after
  CompleteMultipartUpload against what it sent (oss-v2 default), so a corrupted transfer fails.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import alibabacloud_oss_v2 as oss

from pipeline.oss_client import ObjectStat, crc64_of_file, head, normalize_prefix

MiB = 1024 * 1024
# Below 64 MiB one PutObject is cheaper than three multipart calls; parquet files stay below it,
# model shards (several GiB) go multipart in 16 MiB parts (a 5 GiB shard = 320 parts, far from
# OSS's 10,000-part limit).
DEFAULT_MULTIPART_THRESHOLD = 64 * MiB
DEFAULT_PART_SIZE = 16 * MiB


@dataclass(frozen=True)
class LocalFile:
    path: Path
    relpath: str  # POSIX separators: it becomes part of the object key
    size: int


@dataclass
class UploadSummary:
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    bytes_uploaded: int = 0
    bytes_skipped: int = 0

    def __str__(self) -> str:
        return (f"uploaded {len(self.uploaded)} objects ({self.bytes_uploaded} bytes), "
                f"skipped {len(self.skipped)} unchanged ({self.bytes_skipped} bytes)")


def local_files(root: str | os.PathLike, *, skip_hidden: bool = True) -> list[LocalFile]:
    """Regular files under `root`, sorted by relative path.

    Hidden paths are skipped by default: hub downloads leave bookkeeping there
    (huggingface_hub's `.cache/`, ModelScope's `.msc`/`._____temp`) that training must not see.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if skip_hidden and any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_file():
            out.append(LocalFile(path=path, relpath=rel.as_posix(), size=path.stat().st_size))
    return sorted(out, key=lambda f: f.relpath)


def object_key(prefix: str, relpath: str) -> str:
    return normalize_prefix(prefix) + relpath


def is_unchanged(remote: ObjectStat | None, size: int, crc64: Callable[[], str]) -> bool:
    """True when `remote` has this size and CRC64. `crc64` is only called when the sizes match,
    so a missing or differently sized object never costs a read of the local file."""
    if remote is None or remote.size != size or not remote.crc64:
        return False
    return remote.crc64 == crc64()


def check_sizes(multipart_threshold: int, part_size: int) -> None:
    if part_size < 100 * 1024:
        raise ValueError(f"part_size {part_size} is below OSS's 100 KiB minimum part size")
    if part_size > multipart_threshold:
        # The SDK's Uploader sends anything smaller than one part as a single PutObject, so a part
        # larger than the threshold would silently disable multipart between the two sizes.
        raise ValueError(f"part_size {part_size} must not exceed multipart_threshold {multipart_threshold}")


def put_file(client: oss.Client, bucket: str, key: str, path: Path, size: int, *,
             multipart_threshold: int, part_size: int) -> None:
    request = oss.PutObjectRequest(bucket=bucket, key=key)
    if size >= multipart_threshold:
        client.uploader(part_size=part_size).upload_file(request, filepath=str(path))
    else:
        client.put_object_from_file(request, str(path))


def upload_directory(
    client: oss.Client,
    bucket: str,
    local_dir: str | os.PathLike,
    prefix: str,
    *,
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
    part_size: int = DEFAULT_PART_SIZE,
    skip_hidden: bool = True,
    log: Callable[[str], None] = print,
) -> UploadSummary:
    """Upload every file under `local_dir` to `<prefix><relative path>`, skipping unchanged objects."""
    check_sizes(multipart_threshold, part_size)
    summary = UploadSummary()
    for f in local_files(local_dir, skip_hidden=skip_hidden):
        key = object_key(prefix, f.relpath)
        if is_unchanged(head(client, bucket, key), f.size, lambda f=f: crc64_of_file(f.path)):
            summary.skipped.append(key)
            summary.bytes_skipped += f.size
            log(f"skip   oss://{bucket}/{key} (same size and CRC64)")
            continue
        put_file(client, bucket, key, f.path, f.size, multipart_threshold=multipart_threshold, part_size=part_size)
        summary.uploaded.append(key)
        summary.bytes_uploaded += f.size
        log(f"upload oss://{bucket}/{key} ({f.size} bytes)")
    log(str(summary))
    return summary
