"""What teardown.py does right before `pulumi destroy`, so the destroy finishes and leaves nothing billing.

1. **Incomplete multipart uploads.** With `storage.keep_on_destroy: false` the bucket's `force_destroy` deletes
   object versions and delete markers only, then retries DeleteBucket, which OSS refuses (BucketNotEmpty) while
   any upload still has parts (terraform-provider-alicloud@ace5bcf alicloud/resource_alicloud_oss_bucket.go
   :1738-1777). A checkpoint upload interrupted within `storage.abort_multipart_days` leaves such parts, and the
   destroy would loop to its timeout. Every one is aborted first (ListMultipartUploads + AbortMultipartUpload).
2. **The rebuild guard.** The cluster, VPC and vSwitches are protected (components/cloud/guards.py); a plain
   `destroy --exclude-protected` would keep them, and everything they need, billing. Their protect bit is cleared
   in the state (`pulumi state unprotect`, per URN, read from `pulumi stack export`) and the destroy runs with
   `VERL_ACK_DESTROY=1`, so the program it runs does not set the bit again. The bucket's own protection
   (`storage.keep_on_destroy`) is left alone.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

import alibabacloud_oss_v2 as oss

REPO = Path(__file__).resolve().parent.parent
# The program's own names for the guard (components/cloud/guards.py; keeper imports nothing of the program, so a
# test keeps the two equal).
DESTROY_ENV = "VERL_ACK_DESTROY"
GUARDED_TYPES = (
    "alicloud:cs/managedKubernetes:ManagedKubernetes",
    "alicloud:vpc/network:Network",
    "alicloud:vpc/switch:Switch",
)


def abort_incomplete_uploads(client: oss.Client, bucket: str, log: Callable[[str], None] = print) -> int:
    """Abort every incomplete multipart upload in `bucket` (all pages); return how many were aborted."""
    aborted = 0
    key_marker, upload_id_marker = None, None
    while True:
        page = client.list_multipart_uploads(oss.ListMultipartUploadsRequest(
            bucket=bucket, key_marker=key_marker, upload_id_marker=upload_id_marker, max_uploads=1000))
        for upload in page.uploads or []:
            client.abort_multipart_upload(oss.AbortMultipartUploadRequest(
                bucket=bucket, key=upload.key, upload_id=upload.upload_id))
            log(f"aborted the incomplete upload of oss://{bucket}/{upload.key} ({upload.upload_id})")
            aborted += 1
        if not page.is_truncated:
            return aborted
        key_marker, upload_id_marker = page.next_key_marker, page.next_upload_id_marker


def guarded_urns(deployment: dict, types: Iterable[str] = GUARDED_TYPES) -> list[str]:
    """URNs of the protected resources of the guarded types in a `pulumi stack export` document."""
    wanted = set(types)
    resources = (deployment.get("deployment") or {}).get("resources") or []
    return [r["urn"] for r in resources if r.get("protect") and r.get("type") in wanted]


def unprotect_command(stack: str, urns: list[str]) -> list[str]:
    return ["pulumi", "state", "unprotect", "--stack", stack, "--yes", *urns]


def export_state(stack: str) -> dict:
    """The stack's state (`pulumi stack export`); an empty one for a stack never deployed."""
    out = subprocess.run(["pulumi", "stack", "export", "--stack", stack], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out) if out.strip() else {}


def destroy_env(env: dict[str, str]) -> dict[str, str]:
    return {**env, DESTROY_ENV: "1"}


def destroy_command(stack: str) -> list[str]:
    # --exclude-protected: the bucket is protected while storage.keep_on_destroy (the default), so a plain
    # destroy would stop at it; this destroys everything else and keeps the data.
    # --run-program: the Kubernetes provider's kubeconfig in the state is a temporary credential that may have
    # expired since `up` (cluster.kubeconfig_ttl_minutes); running the program fetches a fresh one.
    return ["pulumi", "destroy", "--stack", stack, "--yes", "--exclude-protected", "--run-program"]


def run_destroy(command: list[str]) -> int:
    # VERL_ACK_DESTROY=1: the program run inside the destroy leaves the rebuild guard off.
    return subprocess.run(command, cwd=REPO, check=False, env=destroy_env(dict(os.environ))).returncode


def prepare_destroy(args, settings, client: oss.Client, log: Callable[[str], None], pulumi: Callable[[list[str]], int],
                    state: Callable[[str], dict]) -> int:
    """The two steps above, for a teardown run about to destroy; 0 = go on, else the failed command's exit code."""
    if settings.storage.mode == "new" and not settings.storage.keep_on_destroy:
        n = abort_incomplete_uploads(client, settings.storage.bucket_name, log)
        log(f"aborted {n} incomplete multipart upload(s) in oss://{settings.storage.bucket_name}")
    if urns := guarded_urns(state(args.stack)):
        log(f"unprotecting {len(urns)} guarded resource(s) for the destroy: " + ", ".join(urns))
        return pulumi(unprotect_command(args.stack, urns))
    return 0
