"""``harness reproduce upheld --source DIR`` on a release carrying the noise of published files
(tests/fixtures/noise.py) in main/ and in a topical_chat/ folder: it builds, reproduces, prints the
odd-cell counts and the card lists them; ``--strict`` fails naming the cell and the way forward."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.fixtures.noise import CsvTable, NoiseTargets, add_noise, card_counts, write_csv
from tests.fixtures.upheld_source import write_upheld_source

TARGETS = NoiseTargets(
    dialogue_column="chat_history",
    label_column="score_task_2_style",
    respell=lambda raw: " " + raw.replace("-", "–").lower() + "  ",
    multiline_column="chat_history",
)


def _table(path: Path) -> CsvTable:
    with open(path, encoding="utf-8", newline="") as f:
        header, *rows = list(csv.reader(f))
    return CsvTable(header, rows)


def noisy_release(root: Path) -> tuple[Path, dict[str, int]]:
    src = write_upheld_source(root, n_items=6, n_arena=6)
    shutil.copytree(src / "llm_arena", src / "topical_chat")
    expected: dict[str, int] = {}

    def noise(path: Path, cases: list[str]) -> None:
        t = _table(path)
        got = add_noise(t, cases, TARGETS)
        write_csv(path, got.table)
        for k, n in got.counts.items():
            expected[k] = expected.get(k, 0) + n

    noise(src / "main" / "annotator_3.csv", ["stray_bracket"])
    noise(src / "main" / "annotator_2.csv", ["other_scale_label", "crlf"])
    noise(
        src / "topical_chat" / "annotator_1.csv",
        ["bom", "semicolon", "blank_rows", "repeated_header", "unnamed_column", "odd_spelling", "multiline"],
    )
    noise(src / "topical_chat" / "annotator_4.csv", ["stray_bracket", "other_scale_label"])
    return src, expected


@pytest.mark.slow
def test_reproduce_builds_a_noisy_release_and_strict_names_the_way_forward(tmp_path, monkeypatch):
    monkeypatch.setenv("DIALEVAL_HOME", str(tmp_path / "home"))
    src, expected = noisy_release(tmp_path / "release")
    assert expected == {"row_left_out": 2, "wording_mismatch": 2, "blank_row": 2, "repeated_header": 1}
    args = ["reproduce", "upheld", "--source", str(src), "--bootstrap", "5", "--folds", "2", "--quiet"]
    args += ["--protocol", "pearson-mean", "--ensemble-protocol", "pearson-mean", "--no-cache"]
    r = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert (
        "odd source cells: 2 wording mismatches, 2 rows left out, 1 repeated header rows, 2 blank rows"
        in r.output
    )
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["dataset"]["n_items"] == {"main": 36, "llm_arena": 6, "topical_chat": 6}
    assert res["dataset"]["odd_cells"]["count"] == 7
    built = Path(res["dataset"]["location"])
    manifest = json.loads((built / "build_manifest.json").read_text())
    cells = manifest["odd_cells"]["cells"]
    assert {(c["file"], c["column"], c["kind"]) for c in cells if c["kind"] == "row_left_out"} == {
        ("annotator_3.csv", "chat_history", "row_left_out"),
        ("annotator_4.csv", "chat_history", "row_left_out"),
    }
    assert all(c["raw"] == "]" for c in cells if c["kind"] == "row_left_out")
    card = (built / "README.md").read_text()
    assert {k: n for k, n in card_counts(card).items() if n} == expected
    assert "Topical-Chat verification set" in card

    r = CliRunner().invoke(app, [*args, "--strict", "-o", str(tmp_path / "strict")])
    assert r.exit_code != 0
    out = " ".join(r.output.split())
    assert (
        "annotator_2.csv, row 1 (data rows are 1-based, header excluded), column 'score_task_2_style'" in out
    )
    assert "Without --strict the build goes on" in out
