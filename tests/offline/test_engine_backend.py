"""The offline engine answers a StackReference only under a name the backend would accept (pulumi/pulumi
pkg/backend/diy/store.go; offline/engine.py backend_stack_name)."""

from __future__ import annotations

import pytest

from offline.engine import backend_stack_name


def test_the_offline_engine_reads_stack_reference_names_as_each_backend_layout_does():
    full = "organization/verl-ack/dev-platform"
    for name in ("dev-platform", "organization/dev-platform", full):
        assert backend_stack_name(name, "project", "verl-ack") == full
    assert backend_stack_name("dev-platform", "legacy", "verl-ack") == full
    with pytest.raises(RuntimeError, match="invalid character '/' at position 12"):
        backend_stack_name(full, "legacy", "verl-ack")
    with pytest.raises(RuntimeError, match="organization name must be 'organization'"):
        backend_stack_name("acme/verl-ack/dev-platform", "project", "verl-ack")
    assert backend_stack_name("acme/verl-ack/dev-platform", "cloud", "verl-ack") == "acme/verl-ack/dev-platform"
