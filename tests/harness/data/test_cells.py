"""The odd-cell policy shared by every builder: how a label cell is read, how odd cells are logged,
what --strict says, and the manifest / card / console accounting."""

from __future__ import annotations

import pytest

from harness.data.cells import (
    KINDS,
    CellLog,
    ScalePoint,
    StrictCellError,
    card_section,
    fragment,
    is_repeated_header,
    read_label,
    read_rating,
    sniff_delimiter,
    summary_of,
)
from harness.data.schema import DataValidationError, Dimension

LIKERT = Dimension("quality", "", "likert", 1, 5, {1.0: "Very bad", 3.0: "Fair", 5.0: "Very good"})
STYLE_POINTS = {1.0: ScalePoint("different styles", 1.0), 3.0: ScalePoint("somewhat same styles", 2.0)}
STYLE = Dimension("style", "", "likert", 1, 3)


@pytest.mark.parametrize(
    ("raw", "value", "kind"),
    [
        ("", None, None),
        ("  ", None, None),
        ("3", 3.0, None),
        ("3: Fair", 3.0, None),
        ("  3 –  FAIR ", 3.0, None),
        ("3:fair", 3.0, None),
        ("3: Not a reasonable continuation", 3.0, "wording_mismatch"),
        ("2: Poor", 2.0, "wording_mismatch"),  # a point without wording in the table: words are odd
        ("2", 2.0, None),
        ("7", None, "unreadable_label"),
        ("3.5", None, "unreadable_label"),
        ("great", None, "unreadable_label"),
        ("]", None, "unreadable_label"),
        ("4abc", None, "unreadable_label"),
    ],
)
def test_read_label_on_the_dimension_scale(raw, value, kind):
    got = read_label(raw, LIKERT)
    assert (got.value, got.kind) == (value, kind)
    assert bool(got.problem) == (kind is not None)


def test_read_label_with_the_written_scale_of_the_source():
    assert read_label("3: Somewhat  same styles", STYLE, STYLE_POINTS).value == 2.0
    odd = read_label("1: Not a reasonable continuation", STYLE, STYLE_POINTS)
    assert (odd.value, odd.kind) == (1.0, "wording_mismatch") and "'different styles'" in odd.problem
    assert read_label("2", STYLE, STYLE_POINTS).kind == "unreadable_label"  # 2 is not a written point
    assert read_label("9: whatever", LIKERT, check_scale=False).value == 9.0


def test_read_rating_takes_any_finite_number_and_reads_words_by_their_point():
    cont = Dimension("relevance", "", "continuous", 0, 5)
    assert read_rating(" 4.25 ", cont).value == 4.25 and read_rating("1e1", cont).kind is None
    assert read_rating("", cont).kind == "unreadable_label"
    assert read_rating("nan", cont).kind == "unreadable_label"
    got = read_rating("3: Not a reasonable continuation", cont)
    assert (got.value, got.kind) == (3.0, "wording_mismatch")


def test_log_accounts_for_cells_and_strict_names_the_way_forward():
    log = CellLog()
    log.record("a.csv", 4, "style", "1: x", "wording_mismatch", "wrong words")
    log.record("a.csv", 7, "<row>", "", "blank_row")
    assert log.counts() == {**dict.fromkeys(KINDS, 0), "wording_mismatch": 1, "blank_row": 1}
    manifest = log.to_manifest()
    assert manifest["count"] == 2 and manifest["cells"][0] == {
        "file": "a.csv",
        "row": 4,
        "column": "style",
        "raw": "1: x",
        "kind": "wording_mismatch",
        "action": "read by its point",
        "problem": "wrong words",
    }
    assert summary_of(manifest).startswith("1 wording mismatches, 1 blank rows (each listed")
    assert summary_of(CellLog().to_manifest()) == ""
    card = "\n".join(card_section(manifest))
    assert "| wording mismatches (`wording_mismatch`) | 1 | read by its point |" in card
    assert "- a.csv row 4, `style`: `1: x` → wording_mismatch (wrong words)" in card

    with pytest.raises(StrictCellError) as ei:
        CellLog(strict=True).record("a.csv", 4, "style", "1: x", "wording_mismatch", "wrong words")
    err = ei.value
    assert isinstance(err, DataValidationError) and (err.file, err.row, err.column) == ("a.csv", 4, "style")
    assert str(err).startswith(
        "a.csv, row 4 (data rows are 1-based, header excluded), column 'style': value '1: x'"
    )
    assert "Without --strict the build goes on: read by its point" in str(err)


def test_card_lists_twenty_cells_and_points_to_the_manifest():
    log = CellLog()
    for i in range(25):
        log.record("f.csv", i + 1, "x", "?", "unreadable_label")
    card = card_section(log.to_manifest())
    assert sum(line.startswith("- f.csv") for line in card) == 20
    assert "- … 5 more in `build_manifest.json`" in card


def test_odd_rows_and_separators():
    header = ["\ufeffid", "Chat History", "score", ""]
    assert is_repeated_header(["id", "chat history ", "SCORE"], header)
    assert not is_repeated_header(["t-1", "user: hi", "3"], header)
    log = CellLog()
    assert log.odd_row("f.csv", 3, ["", " ", ""], header) and log.odd_row(
        "f.csv", 4, ["id", "Chat History", "score"], header
    )
    assert not log.odd_row("f.csv", 5, ["t-1", "user: hi", "3"], header)
    assert [c.kind for c in log.cells] == ["blank_row", "repeated_header"]
    assert fragment({"id": "", "context": "]", "score": ""}) == ("context", "]")
    assert fragment({"id": "", "context": "] ,", "x": '"'}) == ("context", "] ,")
    assert fragment({"id": "t1", "context": "]"}) is None and fragment({"id": ""}) is None
    assert sniff_delimiter("a;b;c") == ";" and sniff_delimiter("a,b,c") == ","
    assert sniff_delimiter("a\tb\tc") == "\t" and sniff_delimiter("a;b,c") == ","
