"""A section of the offline plan: a title, markdown for reviewers and plain data for plan.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    key: str
    title: str
    markdown: str
    data: Any = field(default=None)


def table(rows: list[tuple[str, Any]], head: tuple[str, str] = ("", "")) -> str:
    lines = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)
