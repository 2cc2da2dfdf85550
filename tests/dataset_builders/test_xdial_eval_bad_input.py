"""XDialEvalBuilder on small CSVs written by the tests (bad input is an error naming file, row and
field; failed builds keep the previous output) and its default (download) source."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import httpx
import pytest

import dataset_builders.xdial_eval as xmod
from dataset_builders.helpers import LANGUAGE_NAMES, LANGUAGES
from dataset_builders.xdial_eval import XDIAL_SETS, XDialEvalBuilder
from harness.data.schema import DIALOGUE_FEATURES, DataValidationError, SourceUnavailableError
from tests.dataset_builders.test_xdial_eval import _load

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
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False, strict=True)
    _assert_names(ei.value, f, 2, "ratings")


def test_empty_context(tmp_path):
    rows = [_turn_row(1), _turn_row(2), _turn_row(3, german_ctx=" \n ")]
    f = _write_turn_csv(tmp_path / "src" / "turn" / "persona-usr.csv", rows)
    with pytest.raises(DataValidationError) as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False, strict=True)
    _assert_names(ei.value, f, 3, "german_ctx")
    assert "empty context" in str(ei.value)


def test_empty_utterance_inside_context(tmp_path):
    f = _write_turn_csv(tmp_path / "src" / "turn" / "fed-turn.csv", [_turn_row(1, french_ctx="a\n\nb")])
    with pytest.raises(DataValidationError, match="empty utterance 2 of 3") as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False, strict=True)
    _assert_names(ei.value, f, 1, "french_ctx")


def test_empty_response(tmp_path):
    f = _write_turn_csv(
        tmp_path / "src" / "turn" / "fed-turn.csv", [_turn_row(1), _turn_row(2, korean_res="  ")]
    )
    with pytest.raises(DataValidationError, match="empty response") as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False, strict=True)
    _assert_names(ei.value, f, 2, "korean_res")


def test_empty_dialogue(tmp_path):
    f = _write_dial_csv(
        tmp_path / "src" / "dial" / "fed-dial.csv", [_dial_row(1), _dial_row(2, russian_dial="\n\n")]
    )
    with pytest.raises(DataValidationError, match="empty dialogue") as ei:
        XDialEvalBuilder().build(tmp_path / "src", tmp_path / "out", show_progress=False, strict=True)
    _assert_names(ei.value, f, 2, "russian_dial")


@pytest.mark.parametrize(
    ("override", "column", "kind", "rows"),
    [
        ({"rating": "abc"}, "ratings", "unreadable_label", 2),
        ({"rating": "4: Not a reasonable continuation"}, "ratings", "wording_mismatch", 2),
        ({"german_ctx": " \n "}, "german_ctx", "row_left_out", 1),
        ({"korean_res": "  "}, "korean_res", "row_left_out", 1),
    ],
)
def test_odd_cells_without_strict_are_accounted_for(tmp_path, override, column, kind, rows):
    _write_turn_csv(tmp_path / "src" / "turn" / "fed-turn.csv", [_turn_row(1), _turn_row(2, **override)])
    res = XDialEvalBuilder().build(
        tmp_path / "src", tmp_path / "out", languages=["en", "de", "ko"], show_progress=False
    )
    assert res.configs == {"fed-turn": rows * 3}
    [cell] = res.manifest["odd_cells"]["cells"]
    assert (cell["file"], cell["row"], cell["column"], cell["kind"]) == ("fed-turn.csv", 2, column, kind)
    ds = _load(tmp_path / "out", "fed-turn", tmp_path)
    if kind == "wording_mismatch":
        assert sorted(ds["rating"])[:3] == [3.0, 3.0, 3.0] and max(ds["rating"]) == 4.0
    if kind == "unreadable_label":
        assert ds["rating"].count(None) == 3


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
        XDialEvalBuilder().build(src, out, show_progress=False, strict=True)
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

    real = base.Builder._write_config
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(base.Builder, "_write_config", flaky)
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
