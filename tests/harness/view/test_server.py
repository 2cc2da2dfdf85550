"""The viewer's HTTP API (Starlette's test client): every route, read-only, JSON errors with the
right status, the page and its assets from the package."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from harness.view.data import read_runs
from harness.view.server import Viewer, create_app


@pytest.fixture(scope="module")
def api(view_runs, tmp_path_factory):
    runs = read_runs([view_runs["demo_a"].parent])
    viewer = Viewer(runs, cache_dir=tmp_path_factory.mktemp("idx"))
    with TestClient(create_app(viewer)) as client:
        client.keys = {p.name: r.key for r in runs for p in [r.path]}
        yield client


def test_page_and_assets_come_from_the_package(api):
    page = api.get("/")
    assert page.status_code == 200 and 'window.DIALEVAL_MODE = "server"' in page.text
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN
    for name in ("app.js", "source.js", "plots.js", "util.js", "style.css"):
        r = api.get(f"/assets/{name}")
        assert r.status_code == 200 and len(r.text) > 500
    assert api.get("/assets/nope.js").status_code == 404


def test_runs_overview_facets_samples_sample_scatter(api):
    runs = api.get("/api/runs").json()
    assert [r["key"] for r in runs] == list(api.keys.values())
    key, up = api.keys["demo-a"], api.keys["upheld-rouge"]
    ov = api.get(f"/api/runs/{key}/overview").json()
    assert ov["judge"].startswith("replay:") and ov["tasks"] == ["demo-turn", "demo-dialogue"]
    assert [p["name"] for p in ov["provenance"]][:5] == [
        "run",
        "judge",
        "judge identity",
        "decoding",
        "dataset",
    ]
    turn = ov["task_tables"][0]
    assert [r["lang"] for r in turn["rows"]][-1] == "all" and turn["rows"][0]["per_dataset"]
    sections = {s["key"] for s in api.get(f"/api/runs/{up}/overview").json()["sections"]}
    assert {"ceilings", "alt_test", "alt_test_annotators"} <= sections
    assert api.get(f"/api/runs/{key}/facets").json()["n"] == 240
    page = api.get(f"/api/runs/{key}/samples", params={"language": "hi", "sort": "disagreement"}).json()
    assert page["total"] == 24 and page["rows"][0]["disagreement"] >= page["rows"][-1]["disagreement"]
    one = api.get(
        f"/api/runs/{key}/sample",
        params={"task": "demo-turn", "dataset": "demo-turn", "id": "demo-turn-t01-hi"},
    )
    assert one.status_code == 200 and one.json()["item"]["response"]
    first = api.get(f"/api/runs/{key}/samples", params={"page_size": 5}).json()
    rids = [r["rid"] for r in first["rows"]]
    texts = api.get(f"/api/runs/{key}/snippets", params={"rids": ",".join(map(str, rids))}).json()["snippets"]
    assert list(texts) == [str(r) for r in rids] and all(t[0] for t in texts.values())
    if not first["snippets_pending"]:  # the search index was there: the page carried the same texts
        assert [[r["snippet"], r["context_tail"]] for r in first["rows"]] == list(texts.values())
    sc = api.get(f"/api/runs/{key}/scatter", params={"task": "demo-turn"}).json()
    assert {lg["language"] for lg in sc["languages"]} >= {"ar", "hi", "zh"}
    assert all(len(p) == 5 for lg in sc["languages"] for p in lg["points"])


def test_compare_route(api):
    a, b = api.keys["demo-a"], api.keys["demo-b"]
    c = api.get("/api/compare", params={"a": a, "b": b, "task": "demo-dialogue"}).json()
    assert [t["task"] for t in c["tasks"]] == ["demo-dialogue"] and c["a"]["key"] == a


@pytest.mark.parametrize(
    "url, status, message",
    [
        ("/api/runs/nope/overview", 404, "no run 'nope'"),
        ("/api/runs/{a}/samples?sort=random", 400, "sort='random'"),
        ("/api/runs/{a}/samples?page_size=0", 400, "page_size=0 is out of range"),
        ("/api/runs/{a}/sample?task=demo-turn&dataset=demo-turn&id=nope", 404, "no sample 'nope'"),
        ("/api/runs/{a}/sample?task=demo-turn", 400, "missing query parameter 'dataset'"),
        ("/api/runs/{a}/scatter?task=nope", 404, "has no task 'nope'"),
        ("/api/runs/{a}/snippets?rids=1,x", 400, "expected row numbers"),
        ("/api/compare?a={a}&b={a}", 400, "two different runs"),
    ],
)
def test_errors_are_json_with_a_status(api, url, status, message):
    r = api.get(url.format(a=api.keys["demo-a"]))
    assert r.status_code == status and message in r.json()["error"]


def test_read_only(api):
    key = api.keys["demo-a"]
    assert api.post("/api/runs").status_code == 405
    assert api.delete(f"/api/runs/{key}/overview").status_code == 405
