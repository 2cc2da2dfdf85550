"""xDial-Eval files build as published: every case of the noise corpus (tests/fixtures/noise.py)
builds, its odd cells are counted in the manifest and the card, and the rows that were read are
those of the clean file, with the statistics the builder has always given on it."""

from __future__ import annotations

from collections import Counter

import pyarrow.parquet as pq
import pytest

from dataset_builders.xdial_eval import XDialEvalBuilder
from tests.fixtures.noise import CASES, CsvTable, NoiseTargets, add_noise, card_counts, write_csv

LANGS = ("english", "chinese")
TARGETS = NoiseTargets(
    dialogue_column="english_ctx",
    label_column="ratings",
    other_scale=lambda raw: f"{raw}: Not a reasonable continuation",
    respell=lambda raw: f"  {raw} ",
    multiline_column="english_ctx",
)


def clean_table(n: int = 12, missing: bool = True) -> CsvTable:
    header = [f"{lang}_{s}" for lang in LANGS for s in ("ctx", "res")] + ["ratings"]
    rows = []
    for i in range(1, n + 1):
        row = []
        for lang in LANGS:
            row += [f"{lang} hello {i}\n{lang} how are you {i}?", f"{lang} fine, thanks {i}."]
        rows.append([*row, f"{1 + (i * 7) % 9 / 2:g}"])
    if missing:
        rows[-1][-1] = ""  # a missing rating (the unreadable-label case writes words there)
    return CsvTable(header, rows)


def build(tmp_path, table: CsvTable):
    write_csv(tmp_path / "src" / "turn" / "fed-turn.csv", table)
    res = XDialEvalBuilder().build(
        tmp_path / "src", tmp_path / "out", languages=["en", "zh"], show_progress=False
    )
    rows = pq.read_table(tmp_path / "out" / "fed-turn" / "test-00000-of-00001.parquet").to_pylist()
    return res, [{k: v for k, v in r.items() if k not in ("id", "item_id")} for r in rows]


#: The clean file (every rating given) as the builder read it before the odd-cell policy existed.
CLEAN_GOLDEN = {
    "rows": 24,
    "en_ratings": [4.5, 3.5, 2.5, 1.5, 5.0, 4.0, 3.0, 2.0, 1.0, 4.5, 3.5, 2.5],
    "rating_mean": 3.125,
}


def test_clean_file_reads_as_before(tmp_path):
    write_csv(tmp_path / "src" / "turn" / "fed-turn.csv", clean_table(missing=False))
    res = XDialEvalBuilder().build(
        tmp_path / "src", tmp_path / "out", languages=["en", "zh"], show_progress=False, strict=True
    )
    assert res.manifest["odd_cells"]["count"] == 0 and res.configs == {"fed-turn": CLEAN_GOLDEN["rows"]}
    rows = pq.read_table(tmp_path / "out" / "fed-turn" / "test-00000-of-00001.parquet").to_pylist()
    en = [r["rating"] for r in rows if r["language"] == "en"]
    assert en == pytest.approx(CLEAN_GOLDEN["en_ratings"])
    card = (tmp_path / "out" / "README.md").read_text()
    mean = float(card.split("rating (headline, per item): mean ", 1)[1].split(",", 1)[0])
    assert mean == pytest.approx(CLEAN_GOLDEN["rating_mean"], abs=1e-3)


@pytest.mark.parametrize("case", CASES)
def test_each_noise_case_builds_and_is_counted(tmp_path, case):
    _, clean = build(tmp_path / "clean", clean_table())
    noisy = add_noise(clean_table(), [case], TARGETS)
    res, rows = build(tmp_path / "noisy", noisy.table)
    expected = Counter({"unreadable_label": 1}) + noisy.counts
    if case == "unreadable_label":  # the empty rating now holds words: still one unreadable rating
        expected["unreadable_label"] -= 1
    want = {k: expected.get(k, 0) for k in res.manifest["odd_cells"]["counts"]}
    assert res.manifest["odd_cells"]["counts"] == want
    assert card_counts((tmp_path / "noisy" / "out" / "README.md").read_text()) == want
    assert rows == clean
