"""The CRD schemas the conformance tests need: found beside the repository or in .cache; when neither has them
(a machine that cannot reach GitHub), the schema tests skip with a message saying how to get them, except in CI
(CI=true), where they fail."""

from __future__ import annotations

import pytest

from tests import crd


@pytest.fixture
def no_schemas(tmp_path, monkeypatch):
    monkeypatch.setattr(crd, "SCHEMA_DIRS", (tmp_path / "shared" / "schemas", tmp_path / ".cache" / "schemas"))


def test_without_the_schemas_a_schema_test_skips_and_says_how_to_get_them(no_schemas, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"\.ci/fetch-schemas.*CRD-schema test skipped"):
        crd.crd_errors({}, crd.RAYJOB_CRD, "v1")


@pytest.mark.parametrize("value", ["true", "TRUE"])
def test_in_ci_missing_schemas_fail_instead_of_skipping(no_schemas, monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match=r"CI=true: the CRD-schema tests must run in CI"):
        crd.crd_errors({}, crd.SANDBOXSET_CRD, "v1alpha1")


def test_the_first_folder_holding_both_schemas_is_used(tmp_path, monkeypatch):
    shared, cache = tmp_path / "shared", tmp_path / "cache"
    for d, files in ((shared, [crd.RAYJOB_FILE]), (cache, [crd.RAYJOB_FILE, crd.SANDBOXSET_FILE])):
        d.mkdir()
        for f in files:
            (d / f).write_text("{}")
    monkeypatch.setattr(crd, "SCHEMA_DIRS", (shared, cache))
    assert crd.require_schemas() == cache, "a folder with only one of the two files does not count"
