"""The training image (image/): pins equal the settings the job uses, the Dockerfile installs them the way it
says, the tag is a stable content hash of image/, and the build-time environment check catches what it should."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
IMAGE = REPO / "image"
if str(IMAGE) not in sys.path:
    sys.path.insert(0, str(IMAGE))  # check_env.py imports its neighbour as `tag`, as it does inside the image

import check_env  # noqa: E402

from components.config import ImageSettings, VersionSettings  # noqa: E402
from image import tag  # noqa: E402

DOCKERFILE = (IMAGE / "Dockerfile").read_text()
VERSIONS = VersionSettings()


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(m[1].upper(), m[2].strip()) for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", joined, re.MULTILINE)]


# ============================================================================================== pins
def test_the_base_image_is_an_arg_whose_default_is_the_settings_default_pinned_by_digest():
    args = tag.dockerfile_args()
    assert args["BASE_IMAGE"] == VERSIONS.verl_image_ref() == f"{VERSIONS.verl_image}@{VERSIONS.verl_image_digest}", (
        f"image/Dockerfile builds on {args['BASE_IMAGE']} but components/config/image.py VersionSettings defaults to "
        f"{VERSIONS.verl_image_ref()} (verl_image@verl_image_digest); they must name the same image (docs/image.md)")
    assert re.fullmatch(r"verlai/verl:vllm024\.dev2@sha256:[0-9a-f]{64}", args["BASE_IMAGE"])
    froms = [a for i, a in instructions(DOCKERFILE) if i == "FROM"]
    assert froms == ["${BASE_IMAGE}"]


def test_the_base_image_comes_from_verls_docker_hub_repository():
    assert tag.dockerfile_args()["BASE_IMAGE"].startswith("verlai/verl:")


@pytest.mark.parametrize("name", ["verl", "transformers", "mlflow", "fastmcp", "mcp"])
def test_verl_mlflow_and_fastmcp_are_pinned_exactly_to_the_settings_versions(name):
    pins = tag.pins()
    assert pins[name] == getattr(VERSIONS, name), (
        f"image/ pins {name}=={pins[name]} but VersionSettings.{name} defaults to {getattr(VERSIONS, name)}")


def test_every_requirement_line_is_an_exact_pin():
    for name in tag.PIN_FILES:
        for line in (IMAGE / name).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!-]+", line), f"{name}: {line!r} is not name==version"


def test_the_verl_version_label_argument_matches_the_pin():
    assert tag.dockerfile_args()["VERL_VERSION"] == tag.pins()["verl"]
    assert '= "${VERL_VERSION}"' in DOCKERFILE, "the build must check the installed verl against the label"


def test_transformers_is_pinned_inside_the_range_verl_requires():
    from importlib import metadata

    from packaging.requirements import Requirement

    verl_requires = [Requirement(r) for r in metadata.requires("verl") or []]
    transformers = next(r for r in verl_requires if r.name == "transformers" and not r.marker)
    assert metadata.version("verl") == tag.pins()["verl"], "the test venv's verl differs from the image's"
    assert transformers.specifier.contains(tag.pins()["transformers"])


# ============================================================================================== Dockerfile
def test_verl_is_installed_without_dependencies_and_the_rest_constrained_to_the_base():
    runs = [a for i, a in instructions(DOCKERFILE) if i == "RUN"]
    assert any("pip install --no-deps -r requirements-nodeps.txt" in r for r in runs)
    assert any("pip list --format=freeze > base-constraints.txt" in r and
               "pip install -c base-constraints.txt -r requirements.txt" in r for r in runs)
    assert any("check_env.py requirements-nodeps.txt requirements.txt" in r for r in runs)
    assert (IMAGE / "requirements-nodeps.txt").read_text().count("verl==") == 1


def test_every_copied_file_exists_in_the_build_context():
    copies = [a.split() for i, a in instructions(DOCKERFILE) if i == "COPY"]
    assert copies
    for *sources, _dest in copies:
        for src in sources:
            assert (IMAGE / src).is_file(), f"COPY {src}: not in image/"


def test_labels_carry_the_verl_version_the_revision_and_the_source():
    labels = " ".join(a for i, a in instructions(DOCKERFILE) if i == "LABEL")
    assert 'org.opencontainers.image.version="${VERL_VERSION}"' in labels
    assert 'org.opencontainers.image.revision="${VCS_REF}"' in labels
    assert 'org.opencontainers.image.source="${SOURCE_URL}"' in labels
    assert 'org.opencontainers.image.base.name="${BASE_IMAGE}"' in labels


def test_the_image_runs_as_a_numeric_non_root_user():
    users = [a for i, a in instructions(DOCKERFILE) if i == "USER"]
    assert users and users[-1].split(":")[0].isdigit() and users[-1].split(":")[0] != "0"


def test_caches_stay_out_of_the_build_context():
    assert "__pycache__/" in (IMAGE / ".dockerignore").read_text()


# ============================================================================================== content hash
@pytest.fixture
def sources(tmp_path: Path) -> Path:
    root = tmp_path / "image"
    shutil.copytree(IMAGE, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def test_the_hash_is_stable_and_independent_of_where_image_lives(sources):
    assert tag.content_hash(sources) == tag.content_hash(sources) == tag.content_hash(IMAGE)


def test_the_hash_changes_when_a_file_changes_is_added_or_renamed(sources):
    before = tag.content_hash(sources)
    (sources / "requirements.txt").write_text((sources / "requirements.txt").read_text() + "\n")
    changed = tag.content_hash(sources)
    assert changed != before
    (sources / "extra.txt").write_text("x")
    added = tag.content_hash(sources)
    assert added != changed
    (sources / "extra.txt").rename(sources / "other.txt")
    assert tag.content_hash(sources) != added


def test_the_hash_ignores_python_caches(sources):
    before = tag.content_hash(sources)
    (sources / "__pycache__").mkdir(exist_ok=True)
    (sources / "__pycache__" / "tag.cpython-311.pyc").write_bytes(b"\x00")
    (sources / "stray.pyc").write_bytes(b"\x00")
    assert tag.content_hash(sources) == before


def test_the_hash_sees_the_executable_bit(sources):
    before = tag.content_hash(sources)
    (sources / "tag.py").chmod(0o755)
    assert tag.content_hash(sources) != before


def test_the_hash_does_not_depend_on_file_creation_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root, order in ((a, ["x", "y/z", "y/a"]), (b, ["y/a", "y/z", "x"])):
        for rel in order:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(rel)
    assert tag.content_hash(a) == tag.content_hash(b)


def test_file_boundaries_are_part_of_the_hash(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "f").write_text("ab")
    (a / "g").write_text("")
    (b / "f").write_text("a")
    (b / "g").write_text("b")
    assert tag.content_hash(a) != tag.content_hash(b)


def test_the_image_tag_is_a_valid_docker_tag():
    assert re.fullmatch(r"[0-9a-f]{16}", tag.image_tag())
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", f"verl-{tag.pins()['verl']}")


def test_the_workflow_outputs_name_the_hash_tag_the_verl_tag_and_the_cache(capsys):
    assert tag.main(["github-output", "--repository", "reg.example.com/ns/verl-ack-train"]) == 0
    out = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    h = tag.image_tag()
    assert out["hash"] == h and out["verl"] == tag.pins()["verl"]
    assert out["tags"].split(",") == [f"reg.example.com/ns/verl-ack-train:{h}",
                                      f"reg.example.com/ns/verl-ack-train:verl-{out['verl']}"]
    assert out["cache"] == "reg.example.com/ns/verl-ack-train:buildcache"


# ============================================================================================== check_env
PINS = {"verl": "0.9.1"}
REQUIRES = {"verl": ["numpy>=2.0.0", "ray[default]>=2.41.0", 'pytest; extra == "test"',
                     'pywin32; sys_platform == "win32"']}


def test_an_environment_with_the_pins_and_their_requirements_passes():
    assert check_env.problems(PINS, {"verl": "0.9.1", "numpy": "2.2.0", "ray": "2.52.1"}, REQUIRES) == []


def test_a_missing_or_too_old_requirement_fails_the_build():
    found = check_env.problems(PINS, {"verl": "0.9.1", "numpy": "1.26.4"}, REQUIRES)
    assert found == ["verl requires numpy>=2.0.0, but numpy 1.26.4 is installed",
                     "verl requires ray[default]>=2.41.0, which is not installed"]


def test_a_pin_that_did_not_install_as_pinned_fails_the_build():
    assert check_env.problems(PINS, {"verl": "0.9.0", "numpy": "2.2.0", "ray": "2.52.1"}, REQUIRES) == [
        "verl: pinned 0.9.1 but 0.9.0 is installed"]
    assert check_env.problems(PINS, {}, REQUIRES) == ["verl: pinned 0.9.1 but not installed"]


def test_names_are_compared_after_pep_503_normalisation():
    pins = {"hydra-core": "1.3.2"}
    installed = {tag.normalize(k): v for k, v in {"hydra_core": "1.3.2", "OmegaConf": "2.3.0"}.items()}
    assert check_env.problems(pins, installed, {"hydra-core": ["omegaconf<2.4,>=2.2"]}) == []



def test_the_version_python_imports_is_checked_not_a_shadowed_copy_later_on_sys_path(tmp_path):
    from importlib import metadata

    def site(name: str, version: str) -> Path:
        info = tmp_path / name / f"blinker-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: blinker\nVersion: {version}\n")
        return tmp_path / name

    # pip's copy first on sys.path, the base image's older one behind it
    paths = [str(site("usr-local", "1.9.0")), str(site("usr-lib", "1.4"))]
    installed = check_env.installed_versions(metadata.distributions(path=paths))
    assert installed == {"blinker": "1.9.0"}
    assert check_env.problems({"blinker": "1.9.0"}, installed, {}) == []

def test_the_workflow_pushes_to_the_repository_the_program_pulls_from_by_default():
    import yaml

    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "image.yml").read_text())
    meta = next(s for s in workflow["jobs"]["build"]["steps"] if s.get("id") == "meta")
    defaults = ImageSettings()
    assert meta["env"]["REPOSITORY"] == ("${{ vars.ACR_REGISTRY }}/"
                                         f"${{{{ vars.ACR_NAMESPACE || '{defaults.namespace}' }}}}/"
                                         f"${{{{ vars.ACR_REPOSITORY || '{defaults.repository}' }}}}")
