"""UPHELD releases build as published: every case of the noise corpus (tests/fixtures/noise.py)
builds, the odd cells are counted in the manifest and the card, the rows that were read are the
clean build's rows, and the statistics on clean data are those the builder has always given."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataset_builders.card_stats import agreement_rows
from dataset_builders.upheld.builder import UpheldBuilder
from dataset_builders.upheld.labels import DIMENSIONS
from harness.data.cells import StrictCellError
from tests.fixtures.noise import CASES, CsvTable, NoiseTargets, add_noise, card_counts, write_csv
from tests.fixtures.upheld_source import CONTENT, MAIN_HEADER, REASON, STYLE, SYSTEMS

TARGETS = NoiseTargets(
    dialogue_column="chat_history",
    label_column="score_task_2_style",
    other_scale=lambda raw: f"{raw.split(':')[0]}: Not a reasonable continuation",
    respell=lambda raw: "  " + raw.replace(" ", "  ").replace("-", "—").upper() + " ",
    multiline_column="chat_history",
)
HIST = "user: Hi, I need help planning a day out.\nassistant: Sure, where are you going?\nuser: Cambridge."


def clean_tables(n_items: int = 6, seed: int = 0) -> dict[int, CsvTable]:
    """annotator -> a clean main/ file; the first row's style is point 1 (so another scale's
    '1: ...' wording reads as the same label) and annotator 1's last style cell is empty."""
    rng = random.Random(seed)
    tables = {a: CsvTable(list(MAIN_HEADER), []) for a in range(1, 6)}
    for i in range(n_items):
        for system in SYSTEMS[:3]:
            a, b = f"Reference {i} {system}.", f"Continuation {i} of {system}."
            for t in tables.values():
                c, s, r = rng.randint(1, 5), rng.choice((1, 3, 5)), rng.choice((1, 5))
                t.rows.append([f"{i}-2", HIST, a, b, CONTENT[c], STYLE[s], REASON[r], system])
    for t in tables.values():
        t.rows[0][t.col("score_task_2_style")] = STYLE[1]
    tables[1].rows[-1][tables[1].col("score_task_2_style")] = ""
    return tables


def write_release(root: Path, tables: dict[int, CsvTable], folder: str = "main") -> Path:
    for ann, t in tables.items():
        write_csv(root / folder / f"annotator_{ann}.csv", t)
    return root


def records(out: Path, config: str) -> list[dict]:
    rows = pq.read_table(out / config / "test-00000-of-00001.parquet").to_pylist()
    for r in rows:
        r["labels"] = [{k: v for k, v in lab.items() if k != "raw"} for lab in r["labels"]]
    return rows


def statistics(recs: list[dict]) -> dict[str, dict[str, float]]:
    table = agreement_rows(recs, DIMENSIONS)
    cols = ("percent_agreement", "adjacent_agreement", "alpha", "cohen_mean", "fleiss_kappa")
    return {row["dimension"]: {c: float(row[c]) for c in cols} for _, row in table.iterrows()}


#: Statistics of the clean fixture as the builder computed them before the odd-cell policy existed.
CLEAN_GOLDEN = {
    "rows": 18,
    "labels": 269,
    "missing": 1,
    "stats": {
        "content": {
            "percent_agreement": 0.166667,
            "adjacent_agreement": 0.533333,
            "alpha": 0.030402,
            "cohen_mean": -0.030371,
            "fleiss_kappa": -0.041988,
        },
        "reasonableness": {
            "percent_agreement": 0.544444,
            "adjacent_agreement": 1.0,
            "alpha": 0.097229,
            "cohen_mean": 0.107795,
            "fleiss_kappa": 0.087086,
        },
        "style": {
            "percent_agreement": 0.342593,
            "adjacent_agreement": 0.725926,
            "alpha": 0.039590,
            "cohen_mean": 0.000748,
            "fleiss_kappa": -0.000642,
        },
    },
}


@pytest.fixture(scope="module")
def clean_build(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clean")
    src = write_release(tmp / "src", clean_tables())
    res = UpheldBuilder().build(src, tmp / "out", show_progress=False)
    return res, records(tmp / "out", "main")


def test_clean_build_is_unchanged(clean_build):
    res, recs = clean_build
    assert res.manifest["odd_cells"]["count"] == 0
    assert len(recs) == CLEAN_GOLDEN["rows"]
    labels = [lab["value"] for r in recs for lab in r["labels"]]
    assert sum(v is not None for v in labels) == CLEAN_GOLDEN["labels"]
    assert labels.count(None) == CLEAN_GOLDEN["missing"]
    for dim, stats in statistics(recs).items():
        assert stats == pytest.approx(CLEAN_GOLDEN["stats"][dim], abs=1e-6)


@pytest.mark.parametrize("case", CASES)
def test_each_noise_case_builds_and_is_counted(tmp_path, clean_build, case):
    _, clean = clean_build
    tables = clean_tables()
    noisy = add_noise(tables[1], [case], TARGETS)
    tables[1] = noisy.table
    src = write_release(tmp_path / "src", tables)
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    expected = {k: noisy.counts.get(k, 0) for k in res.manifest["odd_cells"]["counts"]}
    assert res.manifest["odd_cells"]["counts"] == expected
    assert card_counts((tmp_path / "out" / "README.md").read_text()) == expected
    for cell in res.manifest["odd_cells"]["cells"]:
        assert cell["file"] == "annotator_1.csv" and isinstance(cell["row"], int)
    got = records(tmp_path / "out", "main")
    assert got == clean  # the rows that were read are the clean rows, label for label
    for dim, stats in statistics(got).items():
        assert stats == pytest.approx(statistics(clean)[dim], nan_ok=True)


def test_issue_cells_are_named_and_strict_names_the_way_forward(tmp_path):
    tables = clean_tables()
    style = tables[1].col("score_task_2_style")
    tables[1].rows[0][style] = "1: Not a reasonable continuation"
    src = write_release(tmp_path / "src", tables)
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    [cell] = res.manifest["odd_cells"]["cells"]
    assert cell == {
        "file": "annotator_1.csv",
        "row": 1,
        "column": "score_task_2_style",
        "raw": "1: Not a reasonable continuation",
        "kind": "wording_mismatch",
        "action": "read by its point",
        "problem": cell["problem"],
    }
    with pytest.raises(StrictCellError) as ei:
        UpheldBuilder().build(src, tmp_path / "strict", show_progress=False, strict=True)
    msg = str(ei.value)
    assert msg.startswith(
        "annotator_1.csv, row 1 (data rows are 1-based, header excluded), column 'score_task_2_style'"
    )
    assert "'1: Not a reasonable continuation'" in msg and "Without --strict the build goes on" in msg
    with pytest.raises(ValueError, match="contradict"):
        UpheldBuilder().build(src, tmp_path / "x", show_progress=False, strict=True, skip_invalid=True)


#: Agreement on the real release (../shared/data/upheld) as the builder computed it before the
#: odd-cell policy existed (the release has no odd cell, so nothing may change).
REAL_GOLDEN = {
    "main": {
        "rows": 2462,
        "labels": 36873,
        "content": {"percent_agreement": 0.555244, "alpha": 0.732457, "fleiss_kappa": 0.401912},
        "style": {"percent_agreement": 0.624390, "alpha": 0.557389, "fleiss_kappa": 0.387637},
        "reasonableness": {"percent_agreement": 0.837209, "alpha": 0.569005, "fleiss_kappa": 0.567792},
    },
    "llm_arena": {
        "rows": 122,
        "labels": 1826,
        "content": {"percent_agreement": 0.471858, "alpha": 0.486118, "fleiss_kappa": 0.288925},
        "style": {"percent_agreement": 0.475683, "alpha": 0.295506, "fleiss_kappa": 0.208004},
        "reasonableness": {"percent_agreement": 0.933607, "alpha": 0.133847, "fleiss_kappa": 0.140984},
    },
}


@pytest.mark.shared_data
def test_real_release_statistics_unchanged(shared_data, tmp_path):
    src = shared_data / "upheld"
    if not src.is_dir():
        pytest.skip("../shared/data/upheld not found")
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False, strict=True)
    assert res.manifest["odd_cells"]["count"] == 0
    for config, golden in REAL_GOLDEN.items():
        recs = records(tmp_path / "out", config)
        assert len(recs) == golden["rows"]
        assert sum(lab["value"] is not None for r in recs for lab in r["labels"]) == golden["labels"]
        stats = statistics(recs)
        for dim in ("content", "style", "reasonableness"):
            got = {k: stats[dim][k] for k in golden[dim]}
            assert got == pytest.approx(golden[dim], abs=1e-6), (config, dim)


def test_cli_build_prints_the_counts_and_strict_fails_with_the_way_forward(tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    tables = clean_tables()
    tables[2] = add_noise(tables[2], ["stray_bracket", "other_scale_label", "semicolon"], TARGETS).table
    src = write_release(tmp_path / "src", tables)
    base = ["datasets", "build", "upheld", "--source", str(src), "-q"]
    r = CliRunner().invoke(app, [*base, "--output", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "odd source cells: 1 wording mismatches, 1 rows left out" in " ".join(r.output.split())
    r = CliRunner().invoke(app, [*base, "--output", str(tmp_path / "strict"), "--strict"])
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert (
        "annotator_2.csv, row 1 (data rows are 1-based, header excluded), column 'score_task_2_style'" in out
    )
    assert "Without --strict the build goes on" in out and not (tmp_path / "strict").exists()
    r = CliRunner().invoke(app, [*base, "--output", str(tmp_path / "x"), "--strict", "--skip-invalid"])
    assert r.exit_code == 2 and "contradict" in r.output
    reg = ["--registry", str(tmp_path / "reg")]
    assert CliRunner().invoke(app, [*base, *reg]).exit_code == 0
    r = CliRunner().invoke(app, ["datasets", "show", "upheld@1.0.0", *reg, "--no-agreement"])
    assert "odd source cells: 1 wording mismatches, 1 rows left out" in " ".join(r.output.split()), r.output


def test_a_fragment_row_with_too_few_fields_is_left_out(tmp_path, clean_build):
    tables = clean_tables()
    tables[3].rows.insert(2, ["]"])  # the tail of a broken export, on a row of its own
    src = write_release(tmp_path / "src", tables)
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    [cell] = res.manifest["odd_cells"]["cells"]
    assert (cell["file"], cell["row"], cell["raw"], cell["kind"]) == (
        "annotator_3.csv",
        3,
        "]",
        "row_left_out",
    )
    assert records(tmp_path / "out", "main") == clean_build[1]
