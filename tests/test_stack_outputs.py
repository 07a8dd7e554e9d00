"""No stack output of any shipped stack holds a credential: outputs are read by everyone who can read the stack
(a StackReference, the PR preview's token, `pulumi stack output`), and a credential there outlives the run that
fetched it. Each stack's Kubernetes provider fetches its own short-lived credential instead
(components/cloud/cluster.py kubernetes_provider; docs/stacks.md)."""

from __future__ import annotations

import json
import re

import pytest

from offline.engine import SECRET
from tests.conftest import STACKS, record

# What a credential looks like in a value: a kubeconfig's user entries, a PEM private key, a bearer token.
CREDENTIAL_PATTERNS = [re.compile(p) for p in (
    r"client-key-data", r"client-certificate-data", r"-----BEGIN [A-Z ]*PRIVATE KEY-----", r"\btoken:\s*\S",
    r"kind:\s*Config\b", r"\busers:\s*\n?\s*-\s*name:",
)]
CREDENTIAL_NAMES = re.compile(r"^kubeconfig$|credential|password|secret|token|private_key|access_key", re.I)


def credential_findings(outputs: dict, secret_outputs: list[str]) -> list[str]:
    """Why these outputs hold a credential: a secret output (its value is hidden, so it is refused as such), a
    name that says so, or a value that looks like one."""
    found = [f"{k}: a secret output" for k in secret_outputs]
    for key, value in outputs.items():
        text = value if isinstance(value, str) else json.dumps(value)
        if CREDENTIAL_NAMES.search(key):
            found.append(f"{key}: named like a credential")
        if value == SECRET:
            found.append(f"{key}: a secret value")
        found += [f"{key}: holds {p.pattern!r}" for p in CREDENTIAL_PATTERNS if p.search(text)]
    return found


def test_the_finder_sees_a_kubeconfig_a_pem_key_and_a_secret_output():
    kubeconfig = "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {client-key-data: abc}\n"
    assert credential_findings({"kubeconfig": SECRET}, ["kubeconfig"])
    assert credential_findings({"cfg": kubeconfig}, [])
    assert credential_findings({"tls": "-----BEGIN RSA PRIVATE KEY-----\nMII"}, [])
    assert credential_findings({"nested": {"user": {"token": "x"}}}, []) == []  # a key named token is no value
    assert credential_findings({"k": "token: abc"}, [])
    assert credential_findings({"cluster_id": "c123", "kubectl_get_kubeconfig": "aliyun cs ..."}, []) == []


@pytest.mark.parametrize("stack", STACKS)
def test_no_stack_output_of_a_shipped_stack_holds_a_credential(stack):
    rec = record(stack)
    assert credential_findings(rec.outputs, rec.secret_outputs) == [], stack
