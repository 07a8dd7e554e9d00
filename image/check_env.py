"""Build-time check of the training image: fail `docker build`, not a GPU job.

    python3 check_env.py requirements-nodeps.txt requirements.txt

For every `name==version` pin in the given files: the distribution is installed at exactly that version, and
each of its own requirements (Requires-Dist, for the image's Python and platform, extras excluded) is installed
in a version the requirement accepts. verl is installed with --no-deps on top of an image built for an older
verl, so this is where a missing or too-old dependency shows up. Runs inside the image; needs `packaging`,
which the base image has (a verl and transformers dependency).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version
from tag import normalize, parse_pins  # tag.py is copied next to this file (image/Dockerfile)


def problems(pins: Mapping[str, str], installed: Mapping[str, str],
             requires: Mapping[str, Iterable[str]]) -> list[str]:
    """What is wrong with an environment, given normalised name -> installed version and each pinned
    distribution's Requires-Dist lines. Empty when the pins and everything they need are in place."""
    found = []
    for name, version in sorted(pins.items()):
        have = installed.get(name)
        if have is None:
            found.append(f"{name}: pinned {version} but not installed")
            continue
        if have != version:
            found.append(f"{name}: pinned {version} but {have} is installed")
        for line in requires.get(name, ()):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                found.append(f"{name}: cannot parse its requirement {line!r}")
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an optional extra, or another platform's requirement
            dep = installed.get(normalize(req.name))
            if dep is None:
                found.append(f"{name} requires {req}, which is not installed")
                continue
            try:
                ok = req.specifier.contains(Version(dep), prereleases=True)
            except InvalidVersion:
                ok = False
            if not ok:
                found.append(f"{name} requires {req}, but {req.name} {dep} is installed")
    return found


def installed_versions(dists: Iterable[metadata.Distribution]) -> dict[str, str]:
    """Normalised name -> version of the distribution Python imports. `metadata.distributions()` walks
    sys.path in order and yields a shadowed copy (e.g. an apt-installed one under /usr/lib/python3/dist-packages
    behind pip's /usr/local/lib/...) after the one that wins, so the first occurrence is kept, as
    `metadata.version()` and `import` do."""
    found: dict[str, str] = {}
    for d in dists:
        found.setdefault(normalize(d.metadata["Name"]), d.version)
    return found


def main(argv: list[str]) -> int:
    pins = parse_pins(Path(p).read_text() for p in argv)
    installed = installed_versions(metadata.distributions())
    requires = {}
    for name in pins:
        try:
            requires[name] = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            requires[name] = []
    found = problems(pins, installed, requires)
    for line in found:
        print(f"check_env: {line}", file=sys.stderr)
    if found:
        print("check_env: fix the pins in image/ (or pick a base image that carries these versions); "
              "do not drop the check", file=sys.stderr)
        return 1
    print(f"check_env: {', '.join(f'{n}=={v}' for n, v in sorted(pins.items()))} and their requirements are satisfied")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
