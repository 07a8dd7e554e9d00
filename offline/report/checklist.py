"""The "Before your first `up`" checklist: every setting the stack file marks `# replace` (components/config/
placeholders.py `declared_placeholders`, the one declaration) and every value recognised as a placeholder, each with
where its real value is found, and the secret keys it requires. The offline plan renders placeholders; a real
`pulumi preview` refuses each recognised one (components/cloud/account_checks.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.config import Settings
from components.config.placeholders import Placeholder, declared_placeholders, placeholders
from components.config.secrets import required_secret_keys
from offline.report.section import Section


def checklist_rows(s: Settings, stack_file: Path | None) -> list[Placeholder]:
    """The declared lines first, in file order, then what the values alone show (a copy without the comments)."""
    known = placeholders(s)
    declared = declared_placeholders(stack_file.read_text()) if stack_file is not None else []
    rows: list[Placeholder] = []
    for d in declared:
        # node_ids[0] of the value check is the line `node_ids: [...]` of the file
        match = [p for p in known if p.field == d.field or p.field.startswith(d.field + "[")]
        where = match[0].where if match else (d.note or "the stack file's comment on this line")
        rows.append(Placeholder(d.field, d.value, where))
    covered = {d.field for d in declared}
    rows += [p for p in known if p.field.split("[")[0] not in covered]
    return rows


def checklist_section(s: Settings, recording: Any) -> Section:
    found = checklist_rows(s, getattr(recording, "stack_file", None))
    secrets = required_secret_keys(s)  # read_secrets refuses a run without them
    lines = []
    if found:
        lines += ["Give each setting below your account's value before the first `up` (the stack file marks each "
                  "`# replace`; a real `pulumi preview` refuses the ids and domains it recognises as placeholders):",
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
