"""A newcomer finds their way: the README shows the two set-up commands and the short tour within its
first 80 lines and names the four concepts; docs/README.md links every page under docs/, grouped by
what a user wants to do."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT / "docs" / "README.md"
GROUPS = (
    "Evaluate a judge",
    "Build a benchmark",
    "Collect human labels",
    "Train an evaluator",
    "Scale out",
    "Extend the harness",
)


def _links(text: str) -> set[str]:
    return {t.split("#", 1)[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)}


def test_the_docs_index_links_every_page():
    text = INDEX.read_text(encoding="utf-8")
    linked = _links(text)
    pages = {p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md"}
    assert pages - linked == set(), f"docs/README.md does not link: {sorted(pages - linked)}"
    for target in linked:
        if not target.startswith(("http://", "https://")):
            assert (INDEX.parent / target).exists(), f"docs/README.md links a missing file: {target}"


def test_the_docs_index_is_grouped_by_what_a_user_wants_to_do():
    headings = re.findall(r"^## (.+)$", INDEX.read_text(encoding="utf-8"), flags=re.M)
    assert [g for g in GROUPS if g not in headings] == [], headings


def test_the_readme_shows_the_commands_and_the_tour_first():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    head = "\n".join(lines[:80])
    assert "## Set-up on a fresh machine" in head
    assert head.count("```bash") >= 3, "the two set-up commands and the tour are bash blocks"
    tour = head.split("## A short tour", 1)
    assert len(tour) == 2, "no '## A short tour' in the first 80 lines"
    block = re.search(r"```bash\n(.*?)\n```", tour[1], flags=re.S)
    assert block, "the tour's commands end after line 80"
    steps = block.group(1)
    for command in ("harness run", "harness view", "harness datasets build", "harness finetune evaluator"):
        assert command in steps, command


def test_the_readme_names_the_four_concepts_and_links_the_index():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for concept in ("**Task**", "**Judge spec**", "**Dataset version**", "**Meta-metric**"):
        assert concept in text, concept
    assert "docs/README.md" in _links(text)
    assert "<!-- bench:multilingual_table:start" in text, "the headline results table is generated"
