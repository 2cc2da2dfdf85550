"""MEDAL annotators' files are read as returned: every case of the noise corpus
(tests/fixtures/noise.py) imports, its odd cells are listed and counted, the labels that were read
are those of the clean file, and the agreement on clean files is what the import always gave."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from dataset_builders.medal_pipeline.annotation.sheets import (
    agreement_tables,
    expected_from_manifest,
    import_annotations,
)
from harness.data.cells import StrictCellError
from tests.dataset_builders.medal_pipeline.annotation.test_annotation import (
    fill_all,
    label_vectors,
    make_dialogues,
)
from tests.fixtures.noise import CASES, CsvTable, NoiseTargets, add_noise, write_csv

WORDS = {1: "Very bad", 2: "Poor", 3: "Fair", 4: "Good", 5: "Very good"}
TARGETS = NoiseTargets(
    dialogue_column="dialogue",
    label_column="overall",
    respell=lambda raw: f"  {raw.strip()} – {WORDS[int(raw)].upper()} ",
    multiline_column="dialogue",
)


@pytest.fixture
def sheets(tmp_path):
    from dataset_builders.medal_pipeline.annotation.sheets import export_sheets

    dialogues, seeds = make_dialogues()
    out = tmp_path / "sheets"
    export_sheets(dialogues, out, seeds=seeds, created_at="2025-01-01T00:00:00+00:00")
    vectors = label_vectors()
    vectors[("en", "ann1", "overall")] = [*vectors[("en", "ann1", "overall")][:-1], None]  # a missing label
    fill_all(out, vectors)
    return out


def _table(path: Path) -> CsvTable:
    with open(path, encoding="utf-8", newline="") as f:
        header, *rows = list(csv.reader(f))
    return CsvTable(header, rows)


def _labels(ann) -> list[tuple]:
    return sorted(((d, a, dim, v) for d, a, dim, v, _ in ann.labels), key=str)


def _overall_en(ann) -> dict[str, float]:
    stats = agreement_tables(ann)["languages"]["en"]["dimensions"]["overall"]
    return {k: stats[k] for k in ("n_items", "percent_agreement", "alpha")}


#: en/overall agreement of the clean files as the import computed it before the odd-cell policy.
CLEAN_GOLDEN = {"n_items": 5, "percent_agreement": 0.4, "alpha": 0.735294}


def test_clean_files_import_as_before(sheets):
    ann = import_annotations(sheets, expected_from_manifest(sheets), allow_partial=True, strict=True)
    assert ann.odd_cells == [] and ann.missing == 1
    assert _overall_en(ann) == pytest.approx(CLEAN_GOLDEN, abs=1e-6)


@pytest.mark.parametrize("case", CASES)
def test_each_noise_case_imports_and_is_counted(sheets, case):
    expected = expected_from_manifest(sheets)
    clean = import_annotations(sheets, expected, allow_partial=True)
    path = sheets / "en" / "ann1.csv"
    noisy = add_noise(_table(path), [case], TARGETS)
    write_csv(path, noisy.table)
    ann = import_annotations(sheets, expected, allow_partial=True)
    assert Counter(c.kind for c in ann.odd_cells) == noisy.counts
    assert all(c.file == "en/ann1.csv" for c in ann.odd_cells)
    assert _labels(ann) == _labels(clean)
    assert _overall_en(ann) == pytest.approx(_overall_en(clean))
    if noisy.counts:
        with pytest.raises(StrictCellError, match="Without --strict the build goes on"):
            import_annotations(sheets, expected, allow_partial=True, strict=True)
