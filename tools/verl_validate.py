#!/usr/bin/env python3
"""Compose a stack's verl config and run verl's own validate_config on it, where torch and Ray are installed.

    python tools/verl_validate.py --stack dev
    python tools/verl_validate.py --config-file examples/stacks/Pulumi.dev-ppo.yaml

plan.py composes every stack's config against the installed verl tree in Hydra's struct mode; verl's
validate_config and its config dataclasses (the critic's CriticConfig included) import torch and Ray, which the
program's requirements leave out. Run this in an environment with verl's own dependencies (the training image, or
`pip install verl==0.9.1` with its dependencies): it prints what ran and exits 1 when verl refuses the config.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.config import SettingsError, stack_file  # noqa: E402
from components.model import load_stack, resolve_layout  # noqa: E402
from components.workloads.training import verl_compose  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--stack")
    src.add_argument("--config-file", type=Path)
    args = ap.parse_args(argv)
    try:
        s = load_stack(stack_file(args.stack) if args.stack else args.config_file)
    except SettingsError as err:
        for p in err.problems:
            print(f"  - {p}", file=sys.stderr)
        return 2
    result = verl_compose.validate(s, resolve_layout(s))
    print(result.summary())
    for field, message in result.errors:
        print(f"  - {field}: {message}", file=sys.stderr)
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
