"""The researcher's own dataset files (task.dataset.train/val in the stacks folder), uploaded to the bucket.

Each file goes to `wiring.own_file_key`: <datasets_prefix>own/<sha256[:12]>/<name>, addressed by its content, so a
changed file is a new object (and a new data.train_files, which replaces the job), the same file is one object per
bucket whatever stacks name it, and no Job runs. Like the staged datasets and models, the objects are kept when the
stack goes (`retain_on_delete`): another experiment on the platform may read the same key, and a stack must never
delete what another one reads (docs/task.md). oss:// files are read where they are.
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_alicloud as alicloud

from components.config import Settings
from components.config.task import is_oss, resolve_task_path
from components.wiring import own_file_key


def local_task_files(s: Settings) -> list[tuple[str, str]]:
    """(setting, location) of each local dataset file of the task."""
    d = s.task.dataset
    return [(f"task.dataset.{name}", loc) for name, loc in (("train", d.train), ("val", d.val))
            if loc and not is_oss(loc)]


class TaskFiles(pulumi.ComponentResource):
    """The task's local dataset files as bucket objects; `ready` lists them (the RayJob waits for them)."""

    def __init__(self, name: str, s: Settings, bucket: pulumi.Input[str], provider: pulumi.ProviderResource,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("verl-ack:data:TaskFiles", name, None, opts)
        self.ready: list[pulumi.Resource] = []
        for field, loc in local_task_files(s):
            self.ready.append(alicloud.oss.BucketObject(
                f"{name}-{field.rsplit('.', 1)[-1]}", bucket=bucket, key=own_file_key(s, loc),
                source=str(resolve_task_path(loc)), content_type="application/vnd.apache.parquet",
                # The key names the content; `source` is where this checkout keeps the file, which differs between
                # machines and must not make the next preview from another one an update.
                opts=pulumi.ResourceOptions(parent=self, provider=provider, retain_on_delete=True,
                                            ignore_changes=["source"])))
        self.register_outputs({"keys": [own_file_key(s, loc) for _, loc in local_task_files(s)]})
