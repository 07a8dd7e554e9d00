"""Tag and pins of the training image, shared by the image workflow, the program and the tests.

    python image/tag.py hash                                   # content hash of image/ (the image tag)
    python image/tag.py pins                                   # {"verl": "0.9.1", ...} as JSON
    python image/tag.py github-output --repository REG/NS/NAME # key=value lines for $GITHUB_OUTPUT

The tag is a hash of every file under image/ (paths in sorted order, contents, executable bit), so the same
sources always give the same tag and any change gives a new one: a stack that pins `<repo>:<tag>` runs exactly
the image built from those sources. Standard library only: the workflow runs it before any install.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

IMAGE_DIR = Path(__file__).resolve().parent
# Byproducts of running Python in image/ (importing this module writes __pycache__); never image inputs.
IGNORED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache"})
IGNORED_SUFFIXES = (".pyc", ".pyo")
# A 64-bit prefix of the SHA-256: plenty against collisions among one repository's images, short to read.
TAG_LENGTH = 16
PIN_FILES = ("requirements-nodeps.txt", "requirements.txt")
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(?P<version>[^\s;#]+)")
_ARG = re.compile(r"^\s*ARG\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:=(?P<default>\S*))?", re.MULTILINE)


def image_files(path: Path = IMAGE_DIR) -> list[Path]:
    """Files that make up the image sources, in a stable order (sorted POSIX relative paths)."""
    files = [p for p in path.rglob("*")
             if p.is_file() and not IGNORED_DIRS.intersection(p.relative_to(path).parts[:-1])
             and not p.name.endswith(IGNORED_SUFFIXES)]
    return sorted(files, key=lambda p: p.relative_to(path).as_posix())


def content_hash(path: Path = IMAGE_DIR) -> str:
    """SHA-256 (hex) over the relative path, executable bit and bytes of every image file."""
    digest = hashlib.sha256()
    for f in image_files(path):
        data = f.read_bytes()
        executable = bool(f.stat().st_mode & stat.S_IXUSR)
        # Length-prefixed fields, so no two different file sets can produce the same byte stream.
        for field in (f.relative_to(path).as_posix().encode(), b"x" if executable else b"-", data):
            digest.update(len(field).to_bytes(8, "big"))
            digest.update(field)
    return digest.hexdigest()


def image_tag(path: Path = IMAGE_DIR) -> str:
    return content_hash(path)[:TAG_LENGTH]


def normalize(name: str) -> str:
    """PEP 503 name normalisation: 'Fast_MCP' and 'fast-mcp' are the same distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(texts: Iterable[str]) -> dict[str, str]:
    """Exact pins (name==version) of pip requirement texts, by normalised distribution name."""
    found: dict[str, str] = {}
    for text in texts:
        for line in text.splitlines():
            if match := _PIN.match(line.strip()):
                found[normalize(match["name"])] = match["version"]
    return found


def pins(path: Path = IMAGE_DIR) -> dict[str, str]:
    """The image's pins: requirements-nodeps.txt (installed without dependencies) and requirements.txt."""
    return parse_pins((path / name).read_text() for name in PIN_FILES)


def dockerfile_args(path: Path = IMAGE_DIR) -> dict[str, str | None]:
    """ARG defaults of the Dockerfile (None for an ARG without a default); the first declaration wins."""
    args: dict[str, str | None] = {}
    for match in _ARG.finditer((path / "Dockerfile").read_text()):
        default = match["default"]
        args.setdefault(match["name"], default.strip('"') if default is not None else None)
    return args


def image_refs(repository: str, path: Path = IMAGE_DIR) -> dict[str, str]:
    """The references the workflow pushes: content-hash tag (immutable), verl-version tag (moving), cache."""
    return {
        "image": f"{repository}:{image_tag(path)}",
        "verl_tag": f"{repository}:verl-{pins(path)['verl']}",
        "cache": f"{repository}:buildcache",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("hash", help="the image tag (content hash of image/)")
    sub.add_parser("pins", help="pinned distributions as JSON")
    out = sub.add_parser("github-output", help="key=value lines for $GITHUB_OUTPUT")
    out.add_argument("--repository", required=True, help="registry/namespace/name, without a tag")
    args = ap.parse_args(argv)
    if args.command == "hash":
        print(image_tag())
    elif args.command == "pins":
        print(json.dumps(pins(), sort_keys=True))
    else:
        refs = image_refs(args.repository)
        print(f"hash={image_tag()}")
        print(f"verl={pins()['verl']}")
        print(f"image={refs['image']}")
        print(f"tags={refs['image']},{refs['verl_tag']}")
        print(f"cache={refs['cache']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
