"""The generic importer reads files as published: every case of the noise corpus
(tests/fixtures/noise.py) imports, its odd cells are counted in the manifest and the card, and the
records that were read are those of the clean file, with the statistics the importer has always
given on it."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from dataset_builders.card_stats import agreement_rows
from dataset_builders.importer.generic import GenericImporter
from tests.fixtures.noise import CASES, CsvTable, NoiseTargets, add_noise, card_counts, write_csv

WORDING = {1: "Very bad", 2: "Bad", 3: "Fair", 4: "Good", 5: "Very good"}
MAPPING = {
    "name": "noisy-inhouse",
    "dimensions": [
        {
            "name": "quality",
            "scale": "likert",
            "min": 1,
            "max": 5,
            "labels": {float(k): v for k, v in WORDING.items()},
        }
    ],
    "configs": [
        {
            "name": "turns",
            "level": "turn",
            "files": ["*.csv"],
            "language": "en",
            "id": "id",
            "context": {"column": "context", "roles": "alternate_from_end"},
            "response": "response",
            "labels": [{"dimension": "quality", "columns": "rating_*", "annotator_from": "column_suffix"}],
        }
    ],
}
TARGETS = NoiseTargets(
    dialogue_column="context",
    label_column="rating_a",
    respell=lambda raw: "  " + raw.replace(":", " :").upper() + " ",
    multiline_column="context",
)


def clean_table(n: int = 10) -> CsvTable:
    rows = []
    for i in range(1, n + 1):
        a, b = 1 + (i * 3) % 5, 1 + (i * 2) % 5
        rows.append(
            [
                f"t{i}",
                f"Hello {i}.\nHow are you?",
                f"Fine, thanks ({i}).",
                f"{a}: {WORDING[a]}",
                f"{b}: {WORDING[b]}",
            ]
        )
    rows[-1][3] = ""  # a missing label (the unreadable-label case writes words there)
    return CsvTable(["id", "context", "response", "rating_a", "rating_b"], rows)


def build(tmp_path, table: CsvTable, **kw):
    write_csv(tmp_path / "src" / "ratings.csv", table)
    res = GenericImporter(MAPPING).build(tmp_path / "src", tmp_path / "out", show_progress=False, **kw)
    rows = pq.read_table(tmp_path / "out" / "turns" / "test-00000-of-00001.parquet").to_pylist()
    for r in rows:
        r["labels"] = [{k: v for k, v in lab.items() if k != "raw"} for lab in r["labels"]]
    return res, rows


#: The clean file as the importer read it before the odd-cell policy existed (labels written as
#: bare points then: '<point>: <wording>' was not read at all).
CLEAN_GOLDEN = {
    "ratings": [3.5, 3.5, 3.5, 3.5, 1.0, 3.5, 3.5, 3.5, 3.5, 1.0],
    "alpha": -0.302682,
    "percent": 0.111111,
}


def test_clean_file_reads_as_before(tmp_path):
    table = clean_table()
    for r in table.rows:
        r[3], r[4] = r[3].split(":")[0], r[4].split(":")[0]
    res, rows = build(tmp_path, table, strict=True)
    assert res.manifest["odd_cells"]["count"] == 0
    assert [r["rating"] for r in rows] == pytest.approx(CLEAN_GOLDEN["ratings"])
    [stats] = agreement_rows(rows, GenericImporter(MAPPING).dimensions).to_dict("records")
    assert stats["alpha"] == pytest.approx(CLEAN_GOLDEN["alpha"], abs=1e-6)
    assert stats["percent_agreement"] == pytest.approx(CLEAN_GOLDEN["percent"], abs=1e-6)
    _, worded = build(tmp_path / "worded", clean_table())
    assert worded[:-1] == rows[:-1]  # '<point>: <wording>' reads as the bare point


@pytest.mark.parametrize("case", CASES)
def test_each_noise_case_builds_and_is_counted(tmp_path, case):
    _, clean = build(tmp_path / "clean", clean_table())
    noisy = add_noise(clean_table(), [case], TARGETS)
    res, rows = build(tmp_path / "noisy", noisy.table)
    want = {k: noisy.counts.get(k, 0) for k in res.manifest["odd_cells"]["counts"]}
    assert res.manifest["odd_cells"]["counts"] == want
    assert card_counts((tmp_path / "noisy" / "out" / "README.md").read_text()) == want
    assert rows == clean
