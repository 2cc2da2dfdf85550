"""harness view --bundle: the static site's files and data (the page itself is driven in
test_browser.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.view.bundle import write_bundle
from harness.view.data import read_runs


def load(path: Path) -> tuple[str, object]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("dialevalPut(") and text.endswith(");\n")
    name, _, body = text[len("dialevalPut(") : -3].partition(", ")
    return json.loads(name), json.loads(body)


@pytest.fixture(scope="module")
def bundle(view_runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "site"
    runs = read_runs([view_runs["demo_a"], view_runs["demo_b"]])
    return out, runs, write_bundle(runs, out)


def test_files_of_the_static_site(bundle):
    out, runs, res = bundle
    a, b = (r.key for r in runs)
    assert (out / "index.html").read_text().count('window.DIALEVAL_MODE = "bundle"') == 1
    assert {p.name for p in (out / "assets").iterdir()} >= {"app.js", "source.js", "style.css"}
    card = (out / "README.md").read_text()
    assert "sdk: static" in card and "app_file: index.html" in card
    assert sorted(res.comparisons) == sorted([f"{a}__{b}", f"{b}__{a}"])
    name, listed = load(out / "data" / "runs.js")
    assert name == "runs" and [r["key"] for r in listed] == [a, b]
    _, manifest = load(out / "data" / a / "manifest.js")
    assert manifest["n"] == 240 and manifest["tasks"] == ["demo-turn", "demo-dialogue"]
    _, index = load(out / "data" / a / "index-0.js")
    assert len(index["rid"]) == 240 and index["rid"] == sorted(index["rid"])
    langs = [index["dicts"]["language"][c] for c in index["language"]]
    assert langs.count("ar") == 24
    i = index["id"].index("demo-turn-t01-ar")
    assert "قطة" in index["text"][i] and index["snippet"][i]
    _, rows = load(out / "data" / a / "rows-0.js")
    detail = rows[str(index["rid"][i])]
    assert detail["sample"]["id"] == "demo-turn-t01-ar" and detail["item"]["context"]
    _, cmp = load(out / "data" / "compare" / f"{a}__{b}.js")
    assert cmp["a"]["key"] == a and cmp["tasks"][0]["deltas"]["languages"]
    assert res.bytes == sum(p.stat().st_size for p in (out / "data").rglob("*.js"))


def test_rewrites_a_bundle_but_not_another_folder(bundle, view_runs, tmp_path):
    out, runs, _ = bundle
    again = write_bundle(runs[:1], out)
    assert again.comparisons == [] and not (out / "data" / runs[1].key).exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not empty and is not a viewer bundle"):
        write_bundle(runs[:1], other)
    assert (other / "notes.txt").read_text() == "keep me"
