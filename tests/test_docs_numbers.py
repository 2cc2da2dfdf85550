"""Numbers in README/docs that come from a bench are generated: each block of
``bench.docs_tables.GENERATED`` sits between its markers in its document and equals what its bench
script renders from the committed JSON under ``bench/results/`` (``python bench/docs_tables.py``
rewrites them all; each bench's ``--write-docs`` / ``--docs-only`` its own). Every block's JSON is
committed: there are no hand-copied blocks."""

from __future__ import annotations

import json
import re

import pytest

from bench.docs_tables import (
    ROOT,
    Block,
    blocks,
    read_block,
    read_start,
    render,
    replace_between_markers,
    results_path,
    script_of,
    start_marker,
)

BLOCKS = blocks()
DOCS = [
    ROOT / "README.md",
    ROOT / "bench" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "model_cards").glob("*.md")),
]


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.doc}:{b.name}" for b in BLOCKS])
def test_the_block_equals_what_its_bench_renders_from_the_committed_json(block: Block):
    doc = ROOT / block.doc
    assert doc.is_file(), f"{block.doc} does not exist"
    shown = read_block(doc, block.name)
    assert shown is not None, (
        f"{block.doc}: no '<!-- bench:{block.name}:start ... -->' ... '<!-- bench:{block.name}:end -->' markers"
    )
    start = read_start(doc, block.name)
    path = results_path(block.module)
    assert path.is_file(), (
        f"{path.relative_to(ROOT)} is missing (run python {script_of(block.module)} --write-docs)"
    )
    assert start == start_marker(block.name, block.module), start
    assert shown == render(block), (
        f"{block.doc}:{block.name} differs from {path.relative_to(ROOT)} "
        f"(rewrite it: python bench/docs_tables.py, or rerun {block.module} with --write-docs)"
    )


def test_every_marker_in_the_docs_is_a_known_block():
    """A marker pair no entry knows would never be checked."""
    known = {(b.doc, b.name) for b in BLOCKS}
    seen = set()
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        rel = str(doc.relative_to(ROOT))
        for name in re.findall(r"<!-- bench:([\w-]+):start", text):
            assert (rel, name) in known, f"{rel}: block {name!r} is not in bench.docs_tables.GENERATED"
            assert text.count(f"<!-- bench:{name}:start") == 1, f"{rel}: block {name!r} starts twice"
            assert text.count(f"<!-- bench:{name}:end -->") == 1, f"{rel}: block {name!r} has not one end"
            seen.add((rel, name))
    assert seen == known, f"blocks without markers: {sorted(known - seen)}"


def test_every_committed_result_belongs_to_a_block():
    owned = {results_path(b.module) for b in BLOCKS}
    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        assert path in owned, f"{path.relative_to(ROOT)} is rendered into no document"
        json.loads(path.read_text(encoding="utf-8"))


def test_a_changed_number_is_caught_and_writing_the_block_restores_it(tmp_path):
    block = next(b for b in BLOCKS if results_path(b.module).is_file())
    doc = tmp_path / "doc.md"
    original = (ROOT / block.doc).read_text(encoding="utf-8")
    doc.write_text(original, encoding="utf-8")
    expected = render(block)
    assert read_block(doc, block.name) == expected
    i = re.search(r"\d", expected).start()
    edited = expected[:i] + str((int(expected[i]) + 1) % 10) + expected[i + 1 :]
    replace_between_markers(doc, block.name, edited, start_marker(block.name, block.module))
    assert read_block(doc, block.name) != expected
    replace_between_markers(doc, block.name, render(block), start_marker(block.name, block.module))
    assert doc.read_text(encoding="utf-8") == original
    assert read_block(doc, "no-such-block") is None
