"""The completion marker of a staged prefix: the cache rule the model and dataset staging Jobs share.

A staging Job fills a content-addressed prefix (the program names it from what decides its content: the model's
repo and revision, or the dataset, its subsets and the converting code) and writes one object LAST, beside the
prefix: `<prefix without trailing slash>.complete`, a JSON manifest of every object's key and size as OSS lists
them. Present and matching the listing = the prefix is complete and the Job skips its work; absent (an interrupted
run) or stale = the Job stages again. The program checks the same key before creating a Job
(components/workloads/cache.py); a complete prefix gets no Job at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import alibabacloud_oss_v2 as oss

from pipeline.oss_client import get_text, head, list_objects

MANIFEST_FORMAT = 1


def marker_key(prefix: str) -> str:
    """`models/Qwen2.5-3B-Instruct/k/` -> `models/Qwen2.5-3B-Instruct/k.complete`."""
    stripped = prefix.rstrip("/")
    if not stripped:
        raise ValueError("the staged prefix must not be empty (the marker sits next to it)")
    return stripped + ".complete"


def manifest_problems(manifest: dict, listing: Mapping[str, int]) -> list[str]:
    """Why the bucket no longer matches a manifest; `listing` maps relative key -> size."""
    problems = []
    for f in manifest.get("files", []):
        size = listing.get(f["key"])
        if size is None:
            problems.append(f"{f['key']} is missing")
        elif size != f["size"]:
            problems.append(f"{f['key']} is {size} bytes, the manifest says {f['size']}")
    if not manifest.get("files"):
        problems.append("the manifest lists no files")
    return problems


def read_state(client, bucket: str, prefix: str) -> tuple[str | None, dict[str, int]]:
    """(the marker's text or None, relative key -> size of every object under the prefix)."""
    text = get_text(client, bucket, marker_key(prefix))
    return text, {o.key[len(prefix):]: o.size for o in list_objects(client, bucket, prefix)}


def complete(marker_text: str | None, identity: Mapping[str, object], listing: Mapping[str, int]) -> tuple[bool, str]:
    """(complete, reason): the marker exists, names `identity` (every key equal) and still matches the listing."""
    if marker_text is None:
        return False, "no marker: not staged completely yet"
    try:
        manifest = json.loads(marker_text)
    except json.JSONDecodeError:
        return False, "the marker is not valid JSON; staging again"
    other = {k: manifest.get(k) for k in identity if manifest.get(k) != identity[k]}
    if other:
        return False, f"the marker names {other}, not {dict(identity)}; staging again"
    problems = manifest_problems(manifest, listing)
    if problems:
        return False, "the marker exists but " + "; ".join(problems[:5]) + "; staging again"
    return True, f"already staged ({len(manifest['files'])} files)"


def write_marker(client, bucket: str, prefix: str, keys: list[str], identity: Mapping[str, object],
                 log: Callable[[str], None] = print) -> dict:
    """Read back every uploaded object and write the manifest as the marker: the last write of a staging run."""
    files = []
    for key in sorted(keys):
        stat = head(client, bucket, key)
        files.append({"key": key[len(prefix):], "size": stat.size, "crc64": stat.crc64})
    manifest = {"format": MANIFEST_FORMAT, **identity, "prefix": prefix, "files": files,
                "total_bytes": sum(f["size"] for f in files)}
    marker = marker_key(prefix)
    client.put_object(oss.PutObjectRequest(bucket=bucket, key=marker, content_type="application/json",
                                           body=json.dumps(manifest, indent=1).encode()))
    log(f"wrote oss://{bucket}/{marker} ({len(files)} files, {manifest['total_bytes']} bytes)")
    return manifest
