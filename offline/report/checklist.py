"""The "Before your first `up`" checklist: the placeholders this stack still holds (components/config/
placeholders.py), each with where its real value is found, and the secret keys it requires. The offline plan
renders placeholders; a real `pulumi preview` refuses each one (components/cloud/account_checks.py)."""

from __future__ import annotations

from typing import Any

from components.config import Settings
from components.config.placeholders import placeholders
from components.config.secrets import required_secret_keys
from offline.report.section import Section


def checklist_section(s: Settings, recording: Any) -> Section:
    found = placeholders(s)
    secrets = required_secret_keys(s)  # read_secrets refuses a run without them
    lines = []
    if found:
        lines += ["A real `pulumi preview` refuses this stack until each placeholder below holds your account's value:",
                  "", "| field | shipped placeholder | where the real value is |", "|---|---|---|"]
        lines += [f"| `{p.field}` | `{p.value}` | {p.where} |" for p in found]
    else:
        lines.append("No placeholder left: every id and domain is the stack file's own.")
    if secrets:
        lines += ["", "Secrets it requires (set once per stack, stored encrypted): "
                  + ", ".join(f"`pulumi config set --secret {k} ...`" for k in secrets) + "."]
    lines += ["", "The deploying identity's RAM policy, ACK's service roles and the rest: docs/real-cloud.md."]
    return Section("checklist", "Before your first `up`", "\n".join(lines), {
        "placeholders": [{"field": p.field, "value": p.value, "where": p.where} for p in found],
        "secret_keys": secrets})
