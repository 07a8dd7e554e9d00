"""Run inside a checkout of an older commit by offline/base_ref.py (never imported):

    python offline/base_dump.py TREE STACK_FILE STACK OUT

renders STACK_FILE with TREE's own program and offline engine (TREE's `offline.plan`; nothing of the program
that started it) and writes OUT/recording.json (every registration, the stack outputs and the raw state a day-2
replay starts from; secrets stay wrapped, as offline/engine.py keeps them) and OUT/plan/ (TREE's own plan of the
file, whose figures the review compares). Exits 2 with the problems when TREE's settings refuse the file.
"""

import dataclasses
import json
import os
import sys
from pathlib import Path

if __name__ == "__main__":  # the tree's modules, not the ones beside this file
    sys.path[0] = sys.argv[1]
    os.chdir(sys.argv[1])

from components.config import SettingsError, raw_settings  # noqa: E402
from offline import plan  # noqa: E402


def main(stack_file: str, stack: str, out: str) -> int:
    try:
        recording = plan.record_stack(Path(stack_file), stack)
        plan.build_plan(Path(stack_file), stack, Path(out) / "plan")
    except SettingsError as err:
        print(f"{len(err.problems)} problem(s) in {stack_file} at this commit:", file=sys.stderr)
        for p in err.problems:
            print(f"  - {p}", file=sys.stderr)
        return 2
    data = {
        "resources": [dataclasses.asdict(r) for r in recording.resources],
        "outputs": recording.outputs,
        "secret_outputs": recording.secret_outputs,
        "raw": {urn: {"id": s.id, "inputs": s.inputs, "outputs": s.outputs,
                      "init_errors": list(getattr(s, "init_errors", ()))} for urn, s in recording.raw.items()},
        "settings": json.loads(json.dumps(raw_settings(Path(stack_file)), default=str)),
    }
    (Path(out) / "recording.json").write_text(json.dumps(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[2:5]))
