"""Decoding and size problems in builders' source files: bytes that are not
UTF-8 are named by file, row and column and skipped (counted) with ``--skip-invalid``; cells over
the csv module's 128 KiB default are read; files with lone-CR line endings read like LF files."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from dataset_builders.helpers import CSV_FIELD_LIMIT, read_csv_records
from dataset_builders.importer.generic import GenericImporter
from dataset_builders.upheld.builder import UpheldBuilder
from dataset_builders.xdial_eval import XDialEvalBuilder
from harness.cli.app import app
from harness.data.schema import DataValidationError
from tests.dataset_builders.importer.test_importer import (
    DS_DIAL,
    DS_DIAL_HEADER,
    DS_TURN,
    DS_TURN_HEADER,
    write_csv,
)
from tests.dataset_builders.test_xdial_eval_bad_input import _turn_row, _write_turn_csv
from tests.fixtures.upheld_source import write_upheld_source

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def default_csv_limit():
    """The csv module's limit as a fresh process has it (another test may have raised it)."""
    before = csv.field_size_limit(131072)
    yield
    csv.field_size_limit(before)


def _records(out: Path) -> dict[str, list[dict]]:
    return {p.parent.name: pq.read_table(p).to_pylist() for p in sorted(out.glob("*/*.parquet"))}


def _latin1_xdial(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    f = _write_turn_csv(src / "turn" / "fed-turn.csv", [_turn_row(1), _turn_row(2), _turn_row(3)])
    f.write_bytes(f.read_bytes().replace(b"de fine 2", b"de f\xe9ine 2"))  # one latin-1 byte, row 2
    return src


def test_xdial_non_utf8_names_file_row_column_and_skip_invalid_skips_the_row(tmp_path):
    src = _latin1_xdial(tmp_path)
    with pytest.raises(DataValidationError) as ei:
        XDialEvalBuilder().build(src, tmp_path / "out", show_progress=False)
    e = ei.value
    assert (Path(e.file).name, e.row, e.column) == ("fed-turn.csv", 2, "german_res")
    assert "invalid UTF-8 byte 0xe9 at character 5 of the cell" in str(e) and "--skip-invalid" in str(e)
    res = XDialEvalBuilder().build(src, tmp_path / "out", show_progress=False, skip_invalid=True)
    assert res.manifest["skipped"]["count"] == 1
    assert res.manifest["skipped"]["rows"][0] | {"problem": ""} == {
        "file": "fed-turn.csv",
        "row": 2,
        "field": "german_res",
        "problem": "",
    }
    rows = _records(tmp_path / "out")["fed-turn"]
    assert sorted({r["item_id"] for r in rows}) == [
        "fed-turn-00001",
        "fed-turn-00003",
    ]  # source row numbers kept
    # only the columns a build reads matter: English alone builds every row
    assert XDialEvalBuilder().build(src, tmp_path / "en", languages=["en"], show_progress=False).configs == {
        "fed-turn": 3
    }


def test_xdial_odd_cells_are_accounted_for_or_strict_errors(tmp_path):
    src = tmp_path / "src"
    _write_turn_csv(
        src / "turn" / "fed-turn.csv",
        [_turn_row(1), _turn_row(2, rating="nan"), _turn_row(3, english_res=" ")],
    )
    with pytest.raises(DataValidationError, match="row 2 .*'ratings': value 'nan'.*Without --strict"):
        XDialEvalBuilder().build(src, tmp_path / "out", show_progress=False, strict=True)
    res = XDialEvalBuilder().build(src, tmp_path / "out", show_progress=False)
    assert [(c["row"], c["column"], c["kind"]) for c in res.manifest["odd_cells"]["cells"]] == [
        (2, "ratings", "unreadable_label"),
        (3, "english_res", "row_left_out"),
    ]
    assert res.manifest["skipped"]["count"] == 0
    assert res.configs == {"fed-turn": 20}  # row 2 kept (rating missing), row 3 left out


def test_cli_reports_the_decoding_problem_in_one_line(tmp_path):
    src = _latin1_xdial(tmp_path)
    r = CliRunner().invoke(
        app, ["datasets", "build", "xdial-eval", "--source", str(src), "--output", str(tmp_path / "o"), "-q"]
    )
    line = r.output.strip().splitlines()[-1]
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "fed-turn.csv, row 2" in line and "column 'german_res'" in line and "0xe9" in line
    r = CliRunner().invoke(
        app,
        [
            "datasets",
            "build",
            "xdial-eval",
            "--source",
            str(src),
            "--output",
            str(tmp_path / "o"),
            "-q",
            "--skip-invalid",
        ],
    )
    assert r.exit_code == 0 and "skipped source rows: 1" in r.output


def _big_cell_upheld(tmp_path: Path) -> tuple[Path, str]:
    src = write_upheld_source(tmp_path / "upheld", n_items=3, n_arena=2)
    big = " ".join(["word"] * 40_000) + "."  # 200 KB, over the csv module's 128 KiB default
    for f in (src / "main").glob("annotator_*.csv"):
        rows = list(csv.reader(open(f, newline="", encoding="utf-8")))
        rows[2][3] = big  # Option B of data row 2, in every annotator's file
        with open(f, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows(rows)
    return src, big


@pytest.mark.parametrize("skip_invalid", [False, True])
def test_upheld_reads_cells_over_128_kib(tmp_path, default_csv_limit, skip_invalid):
    src, big = _big_cell_upheld(tmp_path)
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False, skip_invalid=skip_invalid)
    assert res.manifest["skipped"]["count"] == 0
    labels = [lab for r in _records(tmp_path / "out")["main"] if r["response"] == big for lab in r["labels"]]
    assert {lab["annotator"] for lab in labels} == {f"annotator_{k}" for k in range(1, 6)}
    assert csv.field_size_limit() == CSV_FIELD_LIMIT


def _to_lone_cr(folder: Path) -> None:
    for f in folder.rglob("*.csv"):
        f.write_bytes(f.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r"))


def test_lone_cr_line_endings_read_like_lf(tmp_path):
    """Old Mac files end lines (and the line breaks inside quoted fields) with a lone CR."""
    lf, cr = tmp_path / "lf", tmp_path / "cr"
    for root in (lf, cr):
        _write_turn_csv(root / "x" / "turn" / "fed-turn.csv", [_turn_row(1), _turn_row(2)])
        write_upheld_source(root / "u", n_items=2, n_arena=2)
        write_csv(root / "d" / "test" / "chateval_turn_annotations.csv", DS_TURN_HEADER, DS_TURN)
        write_csv(root / "d" / "test" / "chateval_dial_annotations.csv", DS_DIAL_HEADER, DS_DIAL)
    _to_lone_cr(cr)
    assert b"\r" in (cr / "u" / "main" / "annotator_1.csv").read_bytes()
    assert b"\n" not in (cr / "u" / "main" / "annotator_1.csv").read_bytes()
    mapping = yaml.safe_load((ROOT / "tests/fixtures/importer/wide-turn-dial.yaml").read_text())
    for root in (lf, cr):
        XDialEvalBuilder().build(root / "x", root / "xo", show_progress=False)
        UpheldBuilder().build(root / "u", root / "uo", show_progress=False)
        GenericImporter(mapping).build(root / "d", root / "do", show_progress=False)
    for out in ("xo", "uo", "do"):
        assert _records(cr / out) == _records(lf / out), out
    assert len(read_csv_records(cr / "x" / "turn" / "fed-turn.csv")) == 3


def test_a_record_the_csv_module_refuses_names_file_and_row(tmp_path, default_csv_limit, monkeypatch):
    monkeypatch.setattr("dataset_builders.helpers.CSV_FIELD_LIMIT", 10)  # stands in for a > 2 GiB cell
    csv.field_size_limit(5)
    f = tmp_path / "x.csv"
    f.write_text("a,b\n1,2\n3," + "4" * 20 + "\n", encoding="utf-8")
    with pytest.raises(
        DataValidationError, match=r"x.csv, row 2 .*'<record>'.*field larger than field limit"
    ):
        read_csv_records(f)
