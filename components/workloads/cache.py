"""The staging cache, checked before a data Job runs: a prefix that is already complete gets no Job.

Both staging Jobs fill content-addressed prefixes (components/wiring.py: `model_path` keyed by hub, repo and
revision; `dataset_files` by dataset, config, subsets and the converting code) and write a completion marker LAST
(`completion_marker`, pipeline/marker.py). An experiment stack stages into its platform's bucket, which exists before
its `pulumi up`, so the program lists the marker key (the bridged `alicloud_oss_bucket_objects` data source, a
read: terraform-provider-alicloud@ace5bcf alicloud/data_source_alicloud_oss_bucket_objects.go ListObjects with the key
as prefix) and leaves the Job out when the marker is there: the RayJob waits for no staging and the model revision
was staged once for the platform. A single stack creates its bucket in the same `up`, so there is nothing to list
before it: its Jobs always run and skip their own download when the marker is there (pipeline/stage_model.py).

A task on the researcher's own files (task.dataset.train/val) has no dataset Job and so no dataset cache entry: the
files are addressed by their own content (wiring.own_file_key). `staged_inputs` lists what is staged by a Job.

The program never deletes a cache entry; teardown.py deletes nothing under the models or datasets prefixes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import pulumi
import pulumi_alicloud as alicloud

from components.cloud.guards import destroying
from components.config import Settings
from components.wiring import completion_marker, dataset_files, model_path

Staged = Literal["model", "dataset"]
STAGED: tuple[Staged, ...] = ("model", "dataset")


def dataset_job_needed(s: Settings) -> bool:
    """Whether a dataset Job converts the task's rows: a preset (gsm8k, math, code) does; own files do not."""
    return s.task.dataset.preset_name is not None


def staged_inputs(s: Settings) -> tuple[Staged, ...]:
    """What a staging Job fills for this stack: the model always, the dataset only for a preset task."""
    return tuple(what for what in STAGED if what != "dataset" or dataset_job_needed(s))


def staged_prefix(s: Settings, what: Staged) -> str:
    return model_path(s) if what == "model" else dataset_files(s).prefix


def checked_before_job(s: Settings) -> bool:
    """Whether the bucket exists before this stack's `up`, so the marker can be listed at preview: an experiment's
    bucket is its platform's."""
    return s.kind == "experiment"


@dataclass(frozen=True)
class CacheEntry:
    what: Staged
    prefix: str
    marker: str
    complete: Optional[bool]  # None: not checked before the Job (the Job checks itself)

    @property
    def needs_job(self) -> bool:
        return self.complete is not True


def marker_listed(keys: list[str], marker: str) -> bool:
    """The listing of `marker` as a prefix holds the marker object itself (not merely a longer key)."""
    return marker in keys


def cache_entries(s: Settings, provider: Optional[pulumi.ProviderResource]) -> dict[Staged, CacheEntry]:
    """Each staged input's prefix, marker and, where the bucket already exists, whether the marker is there."""
    out = {}
    for what in staged_inputs(s):
        prefix = staged_prefix(s, what)
        if what == "model" and s.model.source == "oss":
            # The user's own model in the bucket: nothing to stage (the preview checked the prefix holds a model
            # where it can: components/cloud/account_checks.py model_prefix_problems).
            out[what] = CacheEntry(what, prefix, prefix, True)
            continue
        marker = completion_marker(prefix)
        done = None
        # Not listed under a destroy (guards.destroying): what the bucket holds now changes nothing that is deleted.
        if checked_before_job(s) and provider is not None and not destroying():
            found = alicloud.oss.get_bucket_objects(bucket_name=s.storage.bucket_name, key_prefix=marker,
                                                    opts=pulumi.InvokeOptions(provider=provider))
            done = marker_listed([o.key for o in found.objects or []], marker)
        out[what] = CacheEntry(what, prefix, marker, done)
    return out
