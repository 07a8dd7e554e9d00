"""What every dataset Job does once it has its rows, and how it ends: one sequence for pipeline/gsm8k.py and
pipeline/task_dataset.py.

`stage_unless_complete` skips a prefix whose marker says it is staged already; `stage_rows` writes the splits and
subsets (every row checked first: pipeline/rows.py write_splits), uploads them and writes the completion marker last
(pipeline/marker.py). `job_main` reads the Job's environment, runs it and turns a refused setting or row into exit 2
with the reason, before anything is uploaded.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pipeline.marker import complete, read_state, write_marker
from pipeline.oss_client import CredentialsMissing, client_from_env
from pipeline.oss_upload import upload_directory
from pipeline.rows import RowError, write_splits


def stage_rows(rows: Mapping[str, list[dict]], output_dir: Path, subsets: Mapping[str, int], client, bucket: str,
               prefix: str, identity: dict, log: Callable[[str], None] = print):
    """Writes, uploads and marks the rows of every split; returns the upload summary."""
    files = write_splits(rows, output_dir, subsets)  # every row checked before the first write
    for path in files:
        log(f"wrote {path}")
    summary = upload_directory(client, bucket, output_dir, prefix, log=log)
    write_marker(client, bucket, prefix, summary.uploaded + summary.skipped, identity, log=log)
    return summary


def stage_unless_complete(config, client, identity: dict, rows_of: Callable[[], Mapping[str, list[dict]]],
                          log: Callable[[str], None] = print):
    """Stages the rows `rows_of` builds unless the prefix is complete (its marker, written last, names `identity`
    and its files are all listed); returns the upload summary, or None when nothing was staged. `config` carries
    dataset_name, bucket, prefix, output_dir and subsets."""
    marker_text, listing = read_state(client, config.bucket, config.prefix)
    done, reason = complete(marker_text, identity, listing)
    log(f"{config.dataset_name}: {reason}")
    if done:
        return None
    return stage_rows(rows_of(), config.output_dir, config.subsets, client, config.bucket, config.prefix, identity,
                      log=log)


def job_main(env: Mapping[str, str] | None, config_from_env: Callable[[Mapping[str, str]], Any],
             run: Callable[[Any, Any], Any]) -> int:
    """A dataset Job's exit status: 2 with the reason for a refused setting or row (nothing uploaded), else 0."""
    env = os.environ if env is None else env
    try:
        config = config_from_env(env)
        client = client_from_env(env)
    except (ValueError, KeyError, CredentialsMissing) as err:
        print(f"error: {err.args[0] if err.args else err}", file=sys.stderr)
        return 2
    try:
        run(config, client)
    except (RowError, ValueError) as err:  # nothing was uploaded: the rows are checked before the first write
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
