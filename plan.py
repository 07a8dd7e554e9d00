#!/usr/bin/env python3
"""Offline plan: what a stack would create, without a Pulumi CLI or a cloud account.

    python plan.py --stack dev [--out out/dev]
    python plan.py --config-file path/to/Pulumi.x.yaml [--out DIR]
    python plan.py --stack dev --base-config-file OLD.yaml   # + the changes against OLD (offline/day2.py)
    python plan.py --stack dev --base-ref REF   # + the changes against the stack as the program at REF built it

Runs the real `__main__.py` under a recording mock engine (offline/engine.py) with the stack's settings and
writes `manifests/` (every Kubernetes object, one YAML file each, numbered in apply order), `plan.json`
(every resource with its inputs, parent, provider and dependencies; the layout; the training command; the
stack outputs) and `plan.md` (a readable summary). Secret config is replaced by placeholders and
rendered as `[secret]`; encrypted values in a stack file are never decrypted. Invalid settings exit with
status 2, list every problem with its field path, and write nothing.

The output folder is replaced whole, so plan.py writes only into a folder that does not exist, is empty, or holds
a previous plan (its marker file `.verl-ack-plan`); anything else (`--out stacks`, a git checkout, a home
folder) is refused with exit 2 before the program runs: it never deletes a file it did not write.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))

try:
    from components.config import SettingsError, stack_file
    from components.config.loading import StackFileNotFound, missing_stack_message, stack_name
    from offline import day2
    from offline.base_ref import BaseRefError
    from offline.engine import SECRET
    from offline.plan import OutFolderRefused, build_plan, change_review, change_review_at_ref, check_out_folder
except ImportError as _missing:  # run outside the project's virtualenv: say what to run, not a traceback
    from offline.venv_hint import exit_without_venv

    exit_without_venv(_missing, "plan.py")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--stack", help="stack name: reads stacks/Pulumi.<name>.yaml")
    src.add_argument("--config-file", type=Path, help="a stack file anywhere")
    ap.add_argument("--out", type=Path, help="output directory (default out/<stack>)")
    ap.add_argument("--base-config-file", type=Path, help="the stack file before the change (e.g. at the PR's merge "
                    "base): plan.json gets `changes`, plan.md starts with them")
    ap.add_argument("--base-ref", metavar="REF", help="a git commit (e.g. the PR's merge base): the base is the stack "
                    "as the program at REF built it from REF's copy of the stack file (or --base-config-file), so "
                    "code changes show too (offline/base_ref.py)")
    args = ap.parse_args(argv)
    # `--stack stacks/Pulumi.dev.yaml` is a path, not a name: take it as one (stack_file tells them apart).
    path = stack_file(args.stack) if args.stack else args.config_file
    stack = stack_name(path)
    if not path.is_file():
        print(f"error: {missing_stack_message(args.stack or path)}", file=sys.stderr)
        return 2
    out = args.out or REPO / "out" / stack
    try:
        check_out_folder(out)  # before the program runs: a refused folder costs no render
        changes = None
        if args.base_config_file and not args.base_config_file.exists():
            print(f"error: no base stack file {args.base_config_file}", file=sys.stderr)
            return 2
        if args.base_ref:
            changes = change_review_at_ref(args.base_ref, path, stack, args.base_config_file)
        elif args.base_config_file:
            changes = change_review(args.base_config_file, path, stack)
        plan = build_plan(path, stack, out, changes=changes)
    except day2.ChangeRefused as err:
        print(f"stack {stack}: {err}; nothing written", file=sys.stderr)
        return 2
    except SettingsError as err:
        print(f"stack {stack}: {len(err.problems)} problem(s) in {path}; nothing written:", file=sys.stderr)
        for p in err.problems:
            print(f"  - {p}", file=sys.stderr)
        return 2
    except (StackFileNotFound, OutFolderRefused, BaseRefError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the output folder cannot be written (permissions, a file in the way, a full disk)
        print(f"error: cannot write the plan to {out}: {err.strerror or err}; give a writable --out", file=sys.stderr)
        return 2
    n_k8s = len(plan["manifests"])
    print(f"stack {stack}: {len(plan['resources'])} resources, {n_k8s} Kubernetes manifests -> {out}")
    for w in plan["warnings"]:
        print(f"  warning: {w}")
    if changes is not None:
        print(f"  {len(plan['changes'])} change(s) against {changes.base_name.replace('`', '')}")
    print(f"  see {out / 'plan.md'}")
    assert SECRET  # placeholders render as "[secret]" (offline/engine.py)
    return 0


if __name__ == "__main__":
    sys.exit(main())
