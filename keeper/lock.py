"""The teardown lock: one claim object per run next to the kept experiment folder, so two teardowns of the
same experiment cannot copy and destroy at once (OSS ignores forbid-overwrite on versioned buckets, so a single
conditional put would lock nothing). See teardown.py's docstring.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import alibabacloud_oss_v2 as oss

from keeper.checkpoints import LockHeld
from pipeline.oss_client import (
    list_objects,
)


# ------------------------------------------------------------------------------------------ lock
@dataclass(frozen=True)
class Claim:
    key: str
    run_id: str


def claim_key(prefix: str, started: datetime, run_id: str) -> str:
    return f"{prefix}{started:%Y%m%dT%H%M%SZ}-{run_id}.json"


def run_id_of(key: str) -> str:
    return key.rsplit("/", 1)[-1].removesuffix(".json").rsplit("-", 1)[-1]


class TeardownLock:
    """One claim object per run beside the kept experiment folder; a run proceeds only when its claim is the only
    one listed (see the module docstring)."""

    def __init__(self, client: oss.Client, bucket: str, prefix: str, *, stack: str, run_id: str | None = None,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.client, self.bucket, self.prefix, self.stack = client, bucket, prefix, stack
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.started = now()
        self.key = claim_key(prefix, self.started, self.run_id)
        self.held = False

    def _claims(self) -> list[Claim]:
        return [Claim(o.key, run_id_of(o.key)) for o in list_objects(self.client, self.bucket, self.prefix)]

    def _holder(self, claim: Claim) -> str:
        try:
            info = json.loads(self.client.get_object(oss.GetObjectRequest(bucket=self.bucket, key=claim.key))
                              .body.content)
            return (f"run {info['run_id']} of stack {info.get('stack')!r} on {info.get('host')} (pid {info.get('pid')}), "
                    f"started {info.get('started')}")
        except (oss.exceptions.BaseError, ValueError, KeyError, TypeError):
            return f"run {claim.run_id} (claim oss://{self.bucket}/{claim.key})"

    def break_claims(self, run_id: str) -> int:
        """Delete the claims of a run that is no longer running; how many there were."""
        stale = [c for c in self._claims() if c.run_id == run_id]
        for c in stale:
            self.client.delete_object(oss.DeleteObjectRequest(bucket=self.bucket, key=c.key))
        return len(stale)

    def acquire(self) -> None:
        body = json.dumps({"run_id": self.run_id, "stack": self.stack, "host": socket.gethostname(), "pid": os.getpid(),
                           "started": self.started.isoformat(timespec="seconds")}).encode()
        # The key is unique per run, so forbid-overwrite only guards against the impossible; the listing decides.
        self.client.put_object(oss.PutObjectRequest(bucket=self.bucket, key=self.key, body=body, forbid_overwrite=True))
        self.held = True
        others = [c for c in self._claims() if c.key != self.key]
        if others:
            self.release()
            holders = "; ".join(self._holder(c) for c in others)
            raise LockHeld(f"another teardown holds oss://{self.bucket}/{self.prefix}: {holders}. Wait for it; if it is "
                           f"no longer running, rerun with --break-lock {others[0].run_id}")

    def release(self) -> None:
        if self.held:
            self.client.delete_object(oss.DeleteObjectRequest(bucket=self.bucket, key=self.key))
            self.held = False
