"""bench/scaling/scale.py: its synthetic xDial-Eval-format source builds with the real builder (the 18 sets,
10 languages, N items), and the docs table is what the bench renders from its committed JSON."""

from __future__ import annotations

import json

from bench.docs_tables import read_block
from bench.scaling import scale
from dataset_builders.xdial_eval import XDIAL_SETS, XDialEvalBuilder


def test_the_synthetic_source_builds_into_n_items_in_10_languages(tmp_path):
    rows = scale.write_source(tmp_path / "src", 720)
    assert set(rows) == {s.stem for s in XDIAL_SETS} and sum(rows.values()) == 72
    res = XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False)
    assert sum(res.configs.values()) == 720 and len(res.configs) == 18
    # no "translation missing" or role-alignment warnings: only the set sizes differ from Table 1
    assert all("reference count" in w for w in res.warnings), res.warnings
    assert scale.write_source(tmp_path / "again", 720) == rows
    assert (tmp_path / "again" / "turn" / "fed-turn.csv").read_bytes() == (
        tmp_path / "src" / "turn" / "fed-turn.csv"
    ).read_bytes()  # deterministic


def test_the_docs_table_is_rendered_from_the_committed_json():
    r = json.loads(scale.RESULTS.read_text(encoding="utf-8"))
    assert [x["items"] for x in r["sizes"]] == sorted(x["items"] for x in r["sizes"])
    assert read_block(scale.DOC, "scale") == scale.markdown(r).rstrip("\n")
    s = scale.summary(r["sizes"])
    assert s["rss_ratio"] == r["summary"]["rss_ratio"] and set(s["goals"]) == set(r["summary"]["goals"])
