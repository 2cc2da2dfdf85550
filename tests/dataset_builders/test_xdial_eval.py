"""XDialEvalBuilder: on the real xDial-Eval CSVs in ../shared/data (skipped when absent) and on
small CSVs written by the tests."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import httpx
import pytest
import yaml

import dataset_builders.xdial_eval as xmod
from dataset_builders import DataValidationError, SourceUnavailableError, build_dataset
from dataset_builders.base import DIALOGUE_FEATURES, LANGUAGE_NAMES, LANGUAGES, TURN_FEATURES
from dataset_builders.xdial_eval import EXPECTED_INSTANCES, XDIAL_SETS, XDialEvalBuilder

# Table 1 of the paper, for the sets present in ../shared/data/xdial-eval.
TABLE1_PRESENT = {
    "conture-turn": 1066,
    "convai2-grade": 600,
    "dailydialog-grade": 300,
    "dailydialog-zhao": 900,
    "fed-turn": 375,
    "persona-usr": 300,
    "conture-dial": 119,
    "fed-dial": 125,
}


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


def _load(out: Path, config: str, cache: Path):
    import datasets

    return datasets.load_dataset(str(out), config, split="test", cache_dir=str(cache))


# -- the Table 1 mapping ---------------------------------------------------------------------------


def test_table1_mapping():
    assert len([s for s in XDIAL_SETS if s.level == "turn"]) == 12
    assert len([s for s in XDIAL_SETS if s.level == "dialogue"]) == 6
    assert sum(s.instances for s in XDIAL_SETS if s.level == "turn") == 14930  # paper: 14930 turns
    assert sum(s.instances for s in XDIAL_SETS if s.level == "dialogue") == 8691  # and 8691 dialogues
    for stem, n in TABLE1_PRESENT.items():
        assert EXPECTED_INSTANCES[stem] == n
    heval = xmod.SETS_BY_STEM["heval-dial"]
    assert heval.level == "dialogue" and heval.url.endswith("/data/turn/heval-dial.csv")
    assert xmod.SETS_BY_STEM["fed-dial"].url == (
        "https://raw.githubusercontent.com/e0397123/xDial-Eval/main/data/dial/fed-dial.csv"
    )


# -- the real data ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(xdial_source, tmp_path_factory):
    out = tmp_path_factory.mktemp("xdial") / "xdial-eval"
    res = XDialEvalBuilder().build(xdial_source, out, show_progress=False)
    return res, out


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hf_cache")


def _present_stems(xdial_source: Path) -> set[str]:
    return {p.stem for p in xdial_source.glob("*/*.csv")}


@pytest.mark.shared_data
def test_instance_counts_match_table1(built, xdial_source):
    res, _ = built
    present = _present_stems(xdial_source)
    assert present and present <= set(TABLE1_PRESENT)
    assert set(res.configs) == present
    for config, rows in res.configs.items():
        entry = res.manifest["configs"][config]
        assert entry["instances"] == TABLE1_PRESENT[config] == entry["expected_instances"]
        assert rows == entry["rows"] == 10 * TABLE1_PRESENT[config] == entry["expected_rows"]
        assert entry["languages"] == list(LANGUAGES)
    # counts all match, so the only warnings are about absent sets / translation quirks
    assert not any("reference count" in w for w in res.warnings)


@pytest.mark.shared_data
def test_every_config_loads_with_datasets(built, hf_cache):
    res, out = built
    for config, rows in res.configs.items():
        ds = _load(out, config, hf_cache)
        level = res.manifest["configs"][config]["level"]
        assert len(ds) == rows
        assert ds.features == (TURN_FEATURES if level == "turn" else DIALOGUE_FEATURES)
        assert set(ds.unique("language")) == set(LANGUAGES)
        assert set(ds.unique("dataset")) == {config} and set(ds.unique("level")) == {level}
        assert set(ds.unique("dimension")) == {"relevance" if level == "turn" else "coherence"}
        assert len(set(ds["id"])) == rows
        assert len(set(ds["item_id"])) == TABLE1_PRESENT[config]


@pytest.mark.shared_data
def test_turn_context_split_and_roles(built, hf_cache, xdial_source):
    _, out = built
    raw = _read_csv(xdial_source / "turn" / "fed-turn.csv")
    ds = _load(out, "fed-turn", hf_cache)
    by_id = {r["id"]: r for r in ds}
    for row_no in (1, 17, len(raw)):
        for lang in ("en", "zh", "ar"):
            name = LANGUAGE_NAMES[lang]
            rec = by_id[f"fed-turn-{row_no:05d}-{lang}"]
            expected_ctx = [u.strip() for u in raw[row_no - 1][f"{name}_ctx"].strip("\n").split("\n")]
            assert [m["text"] for m in rec["context"]] == expected_ctx
            assert rec["response"] == raw[row_no - 1][f"{name}_res"].strip()
            assert rec["rating"] == float(raw[row_no - 1]["ratings"])
            assert rec["item_id"] == f"fed-turn-{row_no:05d}"
    # every context ends with the user and alternates; the response is the assistant's
    for rec in ds:
        roles = [m["role"] for m in rec["context"]]
        assert roles[-1] == "user"
        assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
        assert all(m["text"] for m in rec["context"])
    en1 = by_id["fed-turn-00001-en"]
    assert en1["context"][0]["text"] == "Hi!"
    # FED: the human opens the conversation; 9 context utterances -> the first is the user's
    assert len(en1["context"]) % 2 == 1 and en1["context"][0]["role"] == "user"


@pytest.mark.shared_data
def test_dialogue_leading_blank_line_stripped(built, hf_cache, xdial_source):
    _, out = built
    raw = _read_csv(xdial_source / "dial" / "fed-dial.csv")
    assert raw[0]["english_dial"].startswith("\n")  # the quirk being handled
    ds = _load(out, "fed-dial", hf_cache)
    by_id = {r["id"]: r for r in ds}
    rec = by_id["fed-dial-00001-en"]
    expected = [u.strip() for u in raw[0]["english_dial"].strip("\n").split("\n")]
    assert [t["text"] for t in rec["turns"]] == expected
    assert rec["turns"][0] == {"role": "user", "text": "Hi!"}
    assert rec["turns"][1]["role"] == "assistant"
    for r in ds:
        assert r["turns"][0]["text"] != ""
        assert [t["role"] for t in r["turns"]] == [
            "user" if i % 2 == 0 else "assistant" for i in range(len(r["turns"]))
        ]


@pytest.mark.shared_data
def test_card_yaml_lists_every_config(built):
    res, out = built
    card = (out / "README.md").read_text(encoding="utf-8")
    front = _front_matter(card)
    assert [c["config_name"] for c in front["configs"]] == list(res.configs)
    for c in front["configs"]:
        assert c["data_files"] == [
            {"split": "test", "path": f"{c['config_name']}/test-00000-of-00001.parquet"}
        ]
        assert (out / c["data_files"][0]["path"]).is_file()
    assert front["license"] == "gpl-3.0"
    assert front["language"] == list(LANGUAGES)
    assert "text-classification" in front["task_categories"]
    assert "dialogue-evaluation" in front["tags"]
    assert front["size_categories"] == ["10K<n<100K"]
    assert front["pretty_name"] == "xDial-Eval"
    body = card.split("---\n", 2)[2]
    for needle in (
        "## Schema",
        "## Statistics",
        "## Provenance",
        "inferred",
        "own licenses",
        "@inproceedings",
        "rating",
    ):
        assert needle in body, needle
    for config in res.configs:
        assert f"### `{config}`" in body


@pytest.mark.shared_data
def test_manifest_hashes_match_inputs(built, xdial_source):
    res, out = built
    manifest = json.loads((out / "build_manifest.json").read_text())
    assert manifest["builder"] == {"name": "xdial-eval", "version": XDialEvalBuilder.version}
    assert manifest["fingerprint"] == res.fingerprint
    assert {i["config"] for i in manifest["inputs"]} == set(res.configs)
    for i in manifest["inputs"]:
        path = Path(i["source"])
        assert path.is_file() and path.resolve().is_relative_to(xdial_source.resolve())
        assert i["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert i["size"] == path.stat().st_size
    for config, entry in manifest["configs"].items():
        assert entry["expected_instances"] == TABLE1_PRESENT[config]
        assert entry["rows"] == res.configs[config]


@pytest.mark.shared_data
def test_missing_sets_are_warned(built, xdial_source):
    res, _ = built
    missing = [s.stem for s in XDIAL_SETS if s.stem not in _present_stems(xdial_source)]
    assert missing
    warning = next(w for w in res.warnings if "not present in the source" in w)
    for stem in missing:
        assert stem in warning
    assert warning in res.manifest["warnings"]


@pytest.mark.shared_data
def test_rebuild_gives_same_fingerprint_and_files(built, xdial_source, tmp_path):
    res, out = built
    again = XDialEvalBuilder().build(xdial_source, tmp_path / "again", show_progress=False)
    assert again.fingerprint == res.fingerprint
    for config in res.configs:
        rel = f"{config}/test-00000-of-00001.parquet"
        assert (out / rel).read_bytes() == (tmp_path / "again" / rel).read_bytes()


@pytest.mark.shared_data
def test_languages_subset(xdial_source, tmp_path, hf_cache):
    out = tmp_path / "enzh"
    res = build_dataset("xdial-eval", xdial_source, out, languages=["en", "zh"], show_progress=False)
    for config, rows in res.configs.items():
        assert rows == 2 * TABLE1_PRESENT[config]
        assert res.manifest["configs"][config]["languages"] == ["en", "zh"]
    assert _front_matter((out / "README.md").read_text())["language"] == ["en", "zh"]
    ds = _load(out, "fed-dial", hf_cache)
    assert set(ds.unique("language")) == {"en", "zh"}
    assert res.manifest["options"] == {"languages": ["en", "zh"], "skip_invalid": False}


@pytest.mark.shared_data
def test_flat_source_directory(xdial_source, tmp_path):
    """CSVs directly in --source (no turn/ dial/ folders) are accepted."""
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in ("fed-turn", "fed-dial"):
        sub = "dial" if name.endswith("dial") else "turn"
        (flat / f"{name}.csv").symlink_to(xdial_source / sub / f"{name}.csv")
    res = XDialEvalBuilder().build(flat, tmp_path / "out", languages=["en"], show_progress=False)
    assert res.configs == {"fed-turn": 375, "fed-dial": 125}
    assert res.manifest["configs"]["fed-dial"]["level"] == "dialogue"


# -- small hand-written CSVs -------------------------------------------------------------------------


def _write_turn_csv(path: Path, rows: list[dict[str, str]], drop: tuple[str, ...] = ()) -> Path:
    cols = [f"{LANGUAGE_NAMES[lang]}_{s}" for lang in LANGUAGES for s in ("ctx", "res")] + ["ratings"]
    cols = [c for c in cols if c not in drop]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    return path


def _turn_row(i: int, rating: str = "3.0", **override: str) -> dict[str, str]:
    row = {}
    for lang in LANGUAGES:
        name = LANGUAGE_NAMES[lang]
        row[f"{name}_ctx"] = f"{lang} hello {i}\n{lang} how are you {i}"
        row[f"{name}_res"] = f"{lang} fine {i}"
    row["ratings"] = rating
    row.update(override)
    return row


def _write_dial_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    cols = [f"{LANGUAGE_NAMES[lang]}_dial" for lang in LANGUAGES] + ["ratings"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    return path


def _dial_row(i: int, rating: str = "2.0", **override: str) -> dict[str, str]:
    row = {
        f"{LANGUAGE_NAMES[lang]}_dial": f"\n{lang} a {i}\n{lang} b {i}\n{lang} c {i}" for lang in LANGUAGES
    }
    row["ratings"] = rating
    row.update(override)
    return row


def _assert_names(err: DataValidationError, file: Path, row, column: str) -> None:
    msg = str(err)
    assert str(file) in msg or file.name in msg
    assert column in msg
    if row == "header":
        assert "header" in msg
    else:
        assert f"row {row}" in msg
    assert (Path(err.file).name, err.row, err.column) == (file.name, row, column)


def test_small_source_builds_and_warns_about_counts(tmp_path):
    src = tmp_path / "src"
    _write_turn_csv(src / "turn" / "fed-turn.csv", [_turn_row(1), _turn_row(2, rating="4")])
    _write_dial_csv(src / "dial" / "fed-dial.csv", [_dial_row(1)])
    res = XDialEvalBuilder().build(src, tmp_path / "out", show_progress=False)
    assert res.configs == {"fed-turn": 20, "fed-dial": 10}
    entry = res.manifest["configs"]["fed-turn"]
    assert (entry["instances"], entry["expected_instances"], entry["expected_rows"]) == (2, 375, 3750)
    assert any("fed-turn" in w and "375" in w for w in res.warnings)
    assert any("fed-dial" in w and "125" in w for w in res.warnings)
    assert all(w in res.manifest["warnings"] for w in res.warnings)


def test_heval_under_turn_folder_is_dialogue_level(tmp_path, hf_cache):
    src = tmp_path / "src"
    _write_dial_csv(src / "turn" / "heval-dial.csv", [_dial_row(1), _dial_row(2)])  # upstream layout
    res = XDialEvalBuilder().build(src, tmp_path / "out", languages=["en"], show_progress=False)
    assert res.configs == {"heval-dial": 2}
    ds = _load(tmp_path / "out", "heval-dial", hf_cache)
    assert ds.features == DIALOGUE_FEATURES
    assert [t["text"] for t in ds[0]["turns"]] == ["en a 1", "en b 1", "en c 1"]


def test_unknown_csvs_are_reported(tmp_path):
    src = tmp_path / "src"
    _write_turn_csv(src / "turn" / "fed-turn.csv", [_turn_row(1)])
    _write_turn_csv(src / "turn" / "my-own-set.csv", [_turn_row(1)])
    res = XDialEvalBuilder().build(src, tmp_path / "out", languages=["en"], show_progress=False)
    assert any("my-own-set.csv" in w for w in res.warnings)


def test_identical_translation_is_warned(tmp_path):
    src = tmp_path / "src"
    rows = [_turn_row(i, german_ctx=_turn_row(i)["english_ctx"]) for i in (1, 2, 3)]
    _write_turn_csv(src / "turn" / "fed-turn.csv", rows)
    res = XDialEvalBuilder().build(src, tmp_path / "out", show_progress=False)
    assert any("german_ctx" in w and "translation may be missing" in w for w in res.warnings)


def test_no_source_set_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceUnavailableError, match="none of the 18"):
        XDialEvalBuilder().build(tmp_path / "empty", tmp_path / "out", show_progress=False)
    with pytest.raises(SourceUnavailableError, match="does not exist"):
        XDialEvalBuilder().build(tmp_path / "nowhere", tmp_path / "out", show_progress=False)


def test_missing_column(tmp_path):
    f = _write_turn_csv(tmp_path / "src" / "turn" / "fed-turn.csv", [_turn_row(1)], drop=("english_ctx",))
    with pytest.raises(DataValidationError) as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False)
    _assert_names(ei.value, f, "header", "english_ctx")


def test_missing_column_of_an_unrequested_language_is_fine(tmp_path):
    _write_turn_csv(
        tmp_path / "src" / "turn" / "fed-turn.csv", [_turn_row(1)], drop=("hindi_ctx", "hindi_res")
    )
    res = XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", languages=["en"], show_progress=False)
    assert res.configs == {"fed-turn": 1}


@pytest.mark.parametrize("bad", ["abc", "", "nan", "inf"])
def test_non_numeric_rating(tmp_path, bad):
    f = _write_turn_csv(tmp_path / "src" / "turn" / "fed-turn.csv", [_turn_row(1), _turn_row(2, rating=bad)])
    with pytest.raises(DataValidationError) as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False)
    _assert_names(ei.value, f, 2, "ratings")


def test_empty_context(tmp_path):
    rows = [_turn_row(1), _turn_row(2), _turn_row(3, german_ctx=" \n ")]
    f = _write_turn_csv(tmp_path / "src" / "turn" / "persona-usr.csv", rows)
    with pytest.raises(DataValidationError) as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False)
    _assert_names(ei.value, f, 3, "german_ctx")
    assert "empty context" in str(ei.value)


def test_empty_utterance_inside_context(tmp_path):
    f = _write_turn_csv(tmp_path / "src" / "turn" / "fed-turn.csv", [_turn_row(1, french_ctx="a\n\nb")])
    with pytest.raises(DataValidationError, match="empty utterance 2 of 3") as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False)
    _assert_names(ei.value, f, 1, "french_ctx")


def test_empty_response(tmp_path):
    f = _write_turn_csv(
        tmp_path / "src" / "turn" / "fed-turn.csv", [_turn_row(1), _turn_row(2, korean_res="  ")]
    )
    with pytest.raises(DataValidationError, match="empty response") as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False)
    _assert_names(ei.value, f, 2, "korean_res")


def test_empty_dialogue(tmp_path):
    f = _write_dial_csv(
        tmp_path / "src" / "dial" / "fed-dial.csv", [_dial_row(1), _dial_row(2, russian_dial="\n\n")]
    )
    with pytest.raises(DataValidationError, match="empty dialogue") as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False)
    _assert_names(ei.value, f, 2, "russian_dial")


def test_ragged_row(tmp_path):
    f = _write_turn_csv(tmp_path / "src" / "turn" / "fed-turn.csv", [_turn_row(1)])
    with open(f, "a", encoding="utf-8", newline="") as fh:
        fh.write("only,three,fields\n")
    with pytest.raises(DataValidationError, match="3 fields") as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False)
    assert ei.value.row == 2 and "row 2" in str(ei.value)


def test_failed_build_keeps_previous_output(tmp_path):
    src = tmp_path / "src"
    _write_turn_csv(src / "turn" / "fed-turn.csv", [_turn_row(1)])
    _write_dial_csv(src / "dial" / "fed-dial.csv", [_dial_row(1)])
    out = tmp_path / "out"
    first = XDialEvalBuilder().build(src, out, show_progress=False)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    # fed-turn (read first) is fine and gets written to the temp dir; fed-dial (read second) is bad
    _write_turn_csv(src / "turn" / "fed-turn.csv", [_turn_row(1), _turn_row(2)])
    _write_dial_csv(src / "dial" / "fed-dial.csv", [_dial_row(1, rating="n/a")])
    with pytest.raises(DataValidationError):
        XDialEvalBuilder().build(src, out, show_progress=False)
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert json.loads((out / "build_manifest.json").read_text())["fingerprint"] == first.fingerprint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]


def test_failure_while_writing_keeps_previous_output(tmp_path, monkeypatch):
    import dataset_builders.base as base

    src = tmp_path / "src"
    _write_turn_csv(src / "turn" / "fed-turn.csv", [_turn_row(1)])
    _write_dial_csv(src / "dial" / "fed-dial.csv", [_dial_row(1)])
    out = tmp_path / "out"
    XDialEvalBuilder().build(src, out, show_progress=False)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    real = base.write_parquet
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(base, "write_parquet", flaky)
    with pytest.raises(OSError, match="disk full"):
        XDialEvalBuilder().build(src, out, languages=["en"], show_progress=False)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]


# -- the default (download) source -------------------------------------------------------------------


def test_offline_default_source_error_is_clear(monkeypatch, tmp_path):
    def offline(url, dest, client):
        raise httpx.ConnectError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(xmod, "download_file", offline)
    with pytest.raises(SourceUnavailableError) as ei:
        XDialEvalBuilder().build(None, tmp_path / "out", show_progress=False)
    msg = str(ei.value)
    assert "--source" in msg and "offline" in msg and "raw.githubusercontent.com" in msg
    assert not (tmp_path / "out").exists()


def test_default_source_downloads_into_dialeval_home(tmp_path, monkeypatch):
    """A mock transport stands in for GitHub: two sets exist, the rest are 404."""
    src = tmp_path / "served"
    _write_turn_csv(src / "fed-turn.csv", [_turn_row(1), _turn_row(2)])
    _write_dial_csv(src / "heval-dial.csv", [_dial_row(1)])
    served = {
        xmod.SETS_BY_STEM["fed-turn"].url: (src / "fed-turn.csv").read_bytes(),
        xmod.SETS_BY_STEM["heval-dial"].url: (src / "heval-dial.csv").read_bytes(),
    }
    requested: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requested.append(str(request.url))
        body = served.get(str(request.url))
        return httpx.Response(200, content=body) if body is not None else httpx.Response(404)

    res = XDialEvalBuilder(transport=httpx.MockTransport(handler)).build(
        None, tmp_path / "out", show_progress=False
    )
    assert res.configs == {"fed-turn": 20, "heval-dial": 10}
    assert len(requested) == len(XDIAL_SETS)
    from harness.cache import default_home

    cached = default_home() / "downloads" / "xdial-eval"
    assert (cached / "turn" / "fed-turn.csv").read_bytes() == served[xmod.SETS_BY_STEM["fed-turn"].url]
    assert (cached / "turn" / "heval-dial.csv").is_file()  # upstream keeps it under data/turn/
    origins = {i["config"]: i["source"] for i in res.manifest["inputs"]}
    assert origins["fed-turn"] == xmod.SETS_BY_STEM["fed-turn"].url
    missing = next(w for w in res.warnings if "not present" in w)
    assert "fed-dial" in missing and "fed-turn" not in missing

    # Offline later: the cached files are used, with a warning instead of an error.
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("offline", request=request)

    again = XDialEvalBuilder(transport=httpx.MockTransport(down)).build(
        None, tmp_path / "out", show_progress=False
    )
    assert again.configs == res.configs and again.fingerprint == res.fingerprint
    assert any("offline" in w and "--source" in w for w in again.warnings)


def test_default_source_http_error(tmp_path):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503)

    with pytest.raises(SourceUnavailableError, match="HTTP 503"):
        XDialEvalBuilder(transport=httpx.MockTransport(handler)).build(
            None, tmp_path / "out", show_progress=False
        )
