"""harness.view.store on real runs: filters, text search in several scripts, the disagreement and
spread definitions (checked against pandas / numpy), pages, one sample with its transcript, the
on-disk index cache, and clear errors for bad queries."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from harness.view.data import read_run
from harness.view.store import Query, SampleStore


@pytest.fixture
def demo(view_runs, tmp_path):
    return SampleStore(read_run(view_runs["demo_a"]), cache_dir=tmp_path / "idx")


def q(**kw):
    return Query.from_params({k: str(v) for k, v in kw.items()})


def test_facets_and_first_page(demo, view_runs):
    f = demo.facets()
    assert f["n"] == 240 and f["parse_failures"] == 3
    assert {v["value"] for v in f["language"]} == {"en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru"}
    assert {v["value"]: v["n"] for v in f["task"]} == {"demo-turn": 160, "demo-dialogue": 80}
    assert f["transcripts"]["available"]
    page = demo.query(q())
    assert (page["total"], page["pages"], len(page["rows"])) == (240, 5, 50)
    df = pd.read_parquet(view_runs["demo_a"] / "samples.parquet")
    assert [r["id"] for r in page["rows"]] == df["id"].tolist()[:50]  # run order
    assert page["rows"][0]["snippet"] and page["rows"][0]["context_tail"]


def test_filters_and_text_search(demo):
    ar = demo.query(q(language="ar", task="demo-turn"))
    assert ar["total"] == 16 and {r["language"] for r in ar["rows"]} == {"ar"}
    failed = demo.query(q(parse="failed"))
    assert failed["total"] == 3 and {r["language"] for r in failed["rows"]} == {"en", "zh", "ar"}
    assert demo.query(q(parse="ok"))["total"] == 237
    rng = demo.query(q(score_min=0.2, score_max=0.6))
    assert rng["total"] > 0 and all(0.2 <= r["score"] <= 0.6 for r in rng["rows"])
    # words of the transcripts, in three scripts; ids and raw outputs too
    assert {r["id"] for r in demo.query(q(q="قطة"))["rows"]} == {"demo-turn-t01-ar"}
    assert "demo-turn-t01-zh" in {r["id"] for r in demo.query(q(q="小猫"))["rows"]}
    assert demo.query(q(q="बिल्ली"))["total"] >= 1
    assert demo.query(q(q="DEMO-TURN-T05-FR"))["total"] == 1
    assert demo.query(q(q="zzz-nothing"))["total"] == 0
    both = demo.query(q(q="maybe", language="zh"))
    assert [r["id"] for r in both["rows"]] == ["demo-turn-t01-zh"]


def _pct(values: pd.Series) -> pd.Series:
    n = len(values)
    return (values.rank(method="average") - 1) / (n - 1)


def test_disagreement_is_the_rank_gap_within_dataset_and_language(demo, view_runs):
    page = demo.query(q(sort="disagreement", page_size=240))
    assert page["derived_ready"] and page["total"] == 240
    df = pd.read_parquet(view_runs["demo_a"] / "samples.parquet")
    ok = df[df["score"].notna()].copy()
    g = ok.groupby(["task", "dataset", "language"])
    ok["want"] = (g["score"].transform(_pct) - g["human_rating"].transform(_pct)).abs()
    got = {r["id"]: r["disagreement"] for r in page["rows"]}
    for sid, want in zip(ok["id"], ok["want"], strict=True):
        assert got[sid] == pytest.approx(want, abs=1e-9)
    values = [r["disagreement"] for r in page["rows"]]
    nulls = [v is None for v in values]
    assert nulls == sorted(nulls)  # failures (no score) last
    assert sum(nulls) == 3
    assert values[:237] == sorted(values[:237], reverse=True)
    asc = demo.query(q(sort="disagreement", order="asc"))["rows"]
    assert asc[0]["disagreement"] == min(v for v in values if v is not None)


def test_spread_is_the_sd_of_the_annotators_labels(view_runs, tmp_path):
    st = SampleStore(read_run(view_runs["upheld"]), cache_dir=tmp_path / "idx")
    df = pd.read_parquet(view_runs["upheld"] / "samples.parquet")
    page = st.query(q(sort="spread", page_size=500))
    got = {r["id"]: r["spread"] for r in page["rows"]}
    for sid, labels, dim in zip(df["id"], df["human_labels"], df["human_dimension"], strict=True):
        vals = [v for v in json.loads(labels)[dim].values() if v is not None]
        assert got[sid] == pytest.approx(float(np.std(vals)), abs=1e-9)
    spreads = [r["spread"] for r in page["rows"]]
    assert spreads == sorted(spreads, reverse=True) and spreads[0] > 0
    one = st.sample("upheld-content", df["dataset"][0], df["id"][0])
    assert one["sample"]["human_labels"]["content"]  # every annotator's label, parsed
    assert one["item"]["reference"] and one["item"]["response"]


def test_pages_and_bad_queries(demo):
    last = demo.query(q(page=5))
    assert len(last["rows"]) == 40 and last["page"] == 5
    assert demo.query(q(page=9))["rows"] == []
    assert len(demo.query(q(page_size=7))["rows"]) == 7
    for params, msg in [
        ({"sort": "random"}, "sort='random': expected one of"),
        ({"order": "up"}, "order='up'"),
        ({"page": "0"}, "page=0 is out of range"),
        ({"page_size": "5000"}, "page_size=5000 is out of range"),
        ({"score_min": "high"}, "score_min='high' is not a number"),
        ({"page": "two"}, "page='two' is not an integer"),
    ]:
        with pytest.raises(ValueError, match=msg):
            Query.from_params(params)


def test_one_sample_with_its_transcript(demo):
    s = demo.sample("demo-turn", "demo-turn", "demo-turn-t01-ar")
    assert s["sample"]["parse_status"] != "ok" and s["sample"]["raw_output"] == "Maybe"
    assert s["item"]["context"][0]["role"] == "user" and "قطة" in s["item"]["context"][0]["text"]
    assert s["item"]["response"] and s["item_note"] is None
    d = demo.sample("demo-dialogue", "demo-dial", "demo-dial-d01-hi")
    assert len(d["item"]["turns"]) >= 4 and d["item"]["response"] is None
    assert demo.sample("demo-turn", "demo-turn", "nope") is None
    ok = demo.sample("demo-turn", "demo-turn", "demo-turn-t02-ja")["sample"]
    assert ok["extra"] is None or isinstance(ok["extra"], dict)
    assert math.isfinite(ok["score"])


def test_index_cache_is_reused_and_runs_without_their_dataset_still_open(view_runs, tmp_path):
    cache = tmp_path / "idx"
    first = SampleStore(read_run(view_runs["demo_a"]), cache_dir=cache)
    first.index.ensure("idx")
    first.index.ensure("search")
    assert first.index.cached == {"idx": False, "search": False}
    again = SampleStore(read_run(view_runs["demo_a"]), cache_dir=cache)
    again.index.ensure("idx")
    again.index.ensure("search")
    assert again.index.cached == {"idx": True, "search": True}
    assert again.query(q(sort="disagreement"))["rows"] == first.query(q(sort="disagreement"))["rows"]

    moved = tmp_path / "moved"
    moved.mkdir()
    res = json.loads((view_runs["demo_a"] / "results.json").read_text())
    for d in res["datasets"].values():
        d["location"] = "/nowhere/demo"
    (moved / "results.json").write_text(json.dumps(res))
    (moved / "samples.parquet").write_bytes((view_runs["demo_a"] / "samples.parquet").read_bytes())
    st = SampleStore(read_run(moved), cache_dir=cache)
    assert not st.facets()["transcripts"]["available"]
    assert "not on this machine" in st.facets()["transcripts"]["notes"][0]
    assert st.query(q(q="demo-turn-t01-ar"))["total"] == 1  # ids and outputs stay searchable
    one = st.sample("demo-turn", "demo-turn", "demo-turn-t01-ar")
    assert one["item"] is None and "not on this machine" in one["item_note"]


def test_a_page_before_the_search_index_and_after(view_runs, tmp_path):
    """Before the search index exists a page can leave its texts out (the server's first pages);
    the texts from the dataset files and from the index agree, and a search gives the same rows
    from the index on disk and from its texts in memory."""
    st = SampleStore(read_run(view_runs["demo_a"]), cache_dir=tmp_path / "idx")
    page = st.query(q(page_size=20), snippets=False)
    assert page["snippets_pending"] and "snippet" not in page["rows"][0]
    rids = [r["rid"] for r in page["rows"]]
    from_items = st.snippets(rids)
    assert all(from_items[r][0] for r in rids)
    st.index.ensure("search")
    assert st.snippets(rids) == from_items
    again = st.query(q(page_size=20), snippets=False)
    assert not again["snippets_pending"]
    assert [(r["snippet"], r["context_tail"]) for r in again["rows"]] == [from_items[r] for r in rids]
    on_disk = st.query(q(q="小猫", page_size=100))["rows"]
    st.index.load_text()
    assert st.index.text_loaded
    assert st.query(q(q="小猫", sort="score", page_size=100))["total"] == len(on_disk)
    assert {r["id"] for r in st.query(q(q="猫", page_size=100))["rows"]} >= {r["id"] for r in on_disk}


def test_percentile_ranks_average_ties_within_groups():
    from harness.view.index import percentile_ranks

    rng = np.random.default_rng(0)
    values = rng.integers(0, 5, 400).astype(float)  # many ties
    groups = rng.integers(0, 7, 400)
    mask = rng.random(400) > 0.1
    mask[groups == 6] = False
    mask[np.flatnonzero(groups == 5)[1:]] = False  # a group of one: no rank
    got = percentile_ranks(values, groups, mask)
    df = pd.DataFrame({"v": values, "g": groups})[mask]
    want = df.groupby("g")["v"].transform(_pct)
    assert np.isnan(got[~mask]).all()
    np.testing.assert_allclose(got[mask], want.to_numpy(), atol=1e-12)
