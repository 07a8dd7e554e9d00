"""What `make` prints while it works."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO


def test_make_test_shows_progress_per_test_file():
    make = (REPO / "Makefile").read_text()
    opts = re.search(r"^TEST_PROGRESS = (.*)$", make, flags=re.M).group(1).split()
    assert "$(PY) -m pytest $(TEST_PROGRESS)" in make
    run = subprocess.run([sys.executable, "-m", "pytest", *opts, "-p", "no:cacheprovider",
                          "tests/test_review.py::test_long_values_are_shortened_around_the_difference"],
                         cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:]
    # On workers (pytest-xdist) the controller prints the file's line when its last test reports (tests/conftest.py).
    assert re.search(r"^tests/test_review\.py: 1 tests \[100%\]$", run.stdout, flags=re.M), run.stdout[-2000:]
