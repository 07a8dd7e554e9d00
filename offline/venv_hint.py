"""What to run when an entry point starts outside the project's virtualenv (standard library only, so it loads
where the pinned packages do not)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def venv_message(missing: ImportError, script: str, argv: list[str] | None = None) -> str:
    module = getattr(missing, "name", None) or str(missing)
    args = " ".join(sys.argv[1:] if argv is None else argv)
    venv_python = REPO / ".venv" / "bin" / "python"
    run = f".venv/bin/python {script}{' ' + args if args else ''}"
    if venv_python.exists():
        how = f"the project's virtualenv has them: run `{run}`"
    else:
        how = f"run `make setup` once (it creates .venv with the pinned requirements), then `{run}`"
    return (f"error: {script} needs the pinned Python packages (requirements.txt) and this Python "
            f"({sys.executable}) lacks {module!r}; {how}")


def exit_without_venv(missing: ImportError, script: str) -> None:
    """Print what to run and exit 2 (bad environment, as bad arguments), instead of an import traceback."""
    print(venv_message(missing, script), file=sys.stderr)
    raise SystemExit(2)
