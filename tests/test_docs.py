"""The README and docs/ point only at files and headings that exist: a dead link is documentation that lies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to '-', repeats numbered."""
    out, seen, in_code = set(), {}, False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        heading = None if in_code else re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_reaches_an_existing_file_and_heading(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    dead = []
    for url in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", url):
            continue  # http(s), mailto: not checked offline
        target, _, anchor = url.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            dead.append(f"{url} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            dead.append(f"{url} (no such heading)")
    assert dead == []


@pytest.fixture(scope="module")
def generated_figures():
    from offline.report.docs_figures import figures, render_plans

    return figures(render_plans())


@pytest.mark.parametrize("page", ["README.md", "docs/estimates.md", "docs/latency.md", "docs/stacks.md"])
def test_every_figure_a_page_quotes_from_the_plans_is_what_the_plans_say_now(page, generated_figures):
    # docs/latency.md once said 88 resources when the dev plan had 94: figures are generated, never typed.
    # Regenerate with `python -m offline.report.docs_figures`.
    from offline.report.docs_figures import PAGES, regenerate

    assert page in PAGES
    text = (REPO / page).read_text()
    assert regenerate(text, generated_figures) == text, f"{page} is stale: run python -m offline.report.docs_figures"


def test_the_generated_tables_hold_every_stack_and_no_doc_states_a_benchmark_time(generated_figures):
    table = generated_figures["plans"]
    for stack in sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (REPO / "stacks").glob("Pulumi.*.yaml")):
        assert f"| `{stack}`" in table
    # Plan and benchmark times belong to the machine `make bench` runs on: printed there, stated nowhere else.
    for page in PAGES:
        text = page.read_text()
        assert not re.search(r"\b\d+(\.\d+)? s (median|cold)|benchmark took \d|plan takes (a few|\d)", text), page
