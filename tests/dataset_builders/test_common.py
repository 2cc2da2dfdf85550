"""CommonSchemaBuilder: common-schema JSONL / JSON / Parquet sources, dataset.yaml, bad rows, hub:."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import load_dataset
from typer.testing import CliRunner

from harness.data.builders import build_dataset, get_builder
from harness.data.schema import DIALOGUE_FEATURES, TURN_FEATURES, DataValidationError, SourceUnavailableError
from tests.fixtures.engagingness_source import N_FED, N_KDCONV, fed_records, write_engagingness_source


def load(out: Path, config: str, tmp_path: Path):
    return load_dataset(str(out), config, split="test", cache_dir=str(tmp_path / "hf"))


def manifest(out: Path) -> dict:
    return json.loads((out / "build_manifest.json").read_text())


def test_engagingness_fixture_builds_and_loads(tmp_path):
    src = write_engagingness_source(tmp_path / "src")
    out = tmp_path / "out"
    res = build_dataset("common", src, out, show_progress=False)
    assert res.configs == {"fed-turn": 3 * N_FED, "kdconv-dial": 2 * N_KDCONV}
    assert res.warnings == []

    fed = load(out, "fed-turn", tmp_path)
    assert fed.features == TURN_FEATURES and fed.num_rows == 3 * N_FED
    by_item: dict[str, list] = {}
    for r in fed:
        by_item.setdefault(r["item_id"], []).append(r)
        assert r["level"] == "turn" and r["dimension"] == "engagingness" and r["dataset"] == "fed-turn"
        assert 2 <= len(r["context"]) <= 4 and r["context"][-1]["role"] == "user"
        values = [lab["value"] for lab in r["labels"]]
        assert len(values) == 3 and all(v in (0.0, 1.0, 2.0) for v in values)
        (agg,) = r["aggregates"]  # computed by the builder (the source has none)
        assert agg["dimension"] == "engagingness" and agg["n"] == 3
        assert agg["mean"] == pytest.approx(sum(values) / 3) == pytest.approx(r["rating"])
        assert agg["aggregate"] == pytest.approx(sum(values) / (2 * 3))  # sum / sum of maxima (max 2)
    assert len(by_item) == N_FED and all(
        sorted(x["language"] for x in v) == ["en", "es", "zh"] for v in by_item.values()
    )
    # engaging responses (a question) are rated higher
    asks = [r["rating"] for r in fed if "?" in r["response"] or "？" in r["response"]]
    plain = [r["rating"] for r in fed if not ("?" in r["response"] or "？" in r["response"])]
    assert sum(asks) / len(asks) > sum(plain) / len(plain) + 0.8

    kd = load(out, "kdconv-dial", tmp_path)
    assert kd.features == DIALOGUE_FEATURES and set(kd["language"]) == {"zh", "en"}
    for r in kd:  # the source has no rating: mean of the engagingness labels
        assert r["rating"] == pytest.approx(sum(lab["value"] for lab in r["labels"]) / 3)
        assert [t["role"] for t in r["turns"]] == ["user", "assistant", "user", "assistant"]
    man = manifest(out)
    assert man["configs"]["kdconv-dial"]["computed"] == {"aggregates": 2 * N_KDCONV, "rating": 2 * N_KDCONV}
    assert man["configs"]["fed-turn"]["computed"] == {"aggregates": 3 * N_FED}
    assert man["dimensions"][0]["source"] == "FED / DSTC11 T4 (synthetic fixture)"
    assert (
        man["options"]["dataset_name"] == "meep-engagingness-fixture" and man["builder"]["name"] == "common"
    )
    card = (out / "README.md").read_text()
    assert "pretty_name: MEEP engagingness (synthetic fixture)" in card and "license: cc-by-4.0" in card
    assert (
        "## Configs and dimensions" in card and "Likert 0–2" in card and "declared in `dataset.yaml`" in card
    )


def test_harness_load_items_reads_the_built_configs(tmp_path):
    from harness.data.resolve import load_items, prepare_dataset

    src = write_engagingness_source(tmp_path / "src")
    handle = prepare_dataset("common", source=src, show_progress=False)
    assert handle.configs == ["fed-turn", "kdconv-dial"]
    rows = load_items(handle, "fed-turn", languages=["es"], limit=5)
    assert len(rows) == 5 and {r["language"] for r in rows} == {"es"}


def test_json_array_and_parquet_without_dataset_yaml(tmp_path):
    records = fed_records()
    src = tmp_path / "src"
    src.mkdir()
    (src / "as-json.json").write_text(json.dumps(records, ensure_ascii=False), "utf-8")
    for r in records:
        r.pop("rating")
    pq.write_table(pa.Table.from_pylist(records), src / "as-parquet.parquet")
    res = build_dataset("common", src, tmp_path / "out", show_progress=False)
    assert res.configs == {"as-json": 3 * N_FED, "as-parquet": 3 * N_FED}
    # no dimension table: labels are unchecked, the scale maximum is inferred (2 = largest label)
    assert any("no dataset.yaml dimension table" in w and "engagingness ≤ 2" in w for w in res.warnings)
    a, b = (load(tmp_path / "out", c, tmp_path) for c in ("as-json", "as-parquet"))
    assert a["rating"] == b["rating"] and a["aggregates"] == b["aggregates"]
    assert (
        res.manifest["dimensions"] == []
        and "No dimension table" in (tmp_path / "out" / "README.md").read_text()
    )


def test_single_file_source_and_languages_filter(tmp_path):
    src = write_engagingness_source(tmp_path / "src")
    res = build_dataset("common", src / "fed-turn.jsonl", tmp_path / "one", show_progress=False)
    assert res.configs == {"fed-turn": 3 * N_FED}
    assert res.manifest["dimensions"][0]["name"] == "engagingness"  # dataset.yaml next to the file
    res = build_dataset("common", src, tmp_path / "es", languages=["spanish"], show_progress=False)
    assert res.configs == {"fed-turn": N_FED}  # a config left without rows is not written
    assert set(load(tmp_path / "es", "fed-turn", tmp_path)["language"]) == {"es"}
    assert any("kdconv-dial: no row to write" in w for w in res.warnings)
    res = build_dataset("common", src, tmp_path / "zh-en", languages="zh,en", show_progress=False)
    assert res.configs == {"fed-turn": 2 * N_FED, "kdconv-dial": 2 * N_KDCONV}
    with pytest.raises(ValueError, match="unknown language"):
        build_dataset("common", src, tmp_path / "x", languages=["klingon"], show_progress=False)


# -- bad input: errors naming file, row and field; or counted skips --------------------------------


def _lines(src: Path, name: str = "fed-turn.jsonl") -> list[dict]:
    return [json.loads(line) for line in (src / name).read_text("utf-8").splitlines()]


def _write(src: Path, name: str, rows: list) -> None:
    text = "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows)
    (src / name).write_text(text + "\n", "utf-8")


def _mutate(case: str, rows: list) -> tuple[str, str]:
    """Break line 3; return (field, message fragment)."""
    rec = rows[2]
    if case == "invalid json":
        rows[2] = json.dumps(rec)[:-5]
        return "<json>", "invalid JSON"
    if case == "missing response":
        del rec["response"]
        return "response", "required field is missing"
    if case == "label off the scale":
        rec["labels"][1]["value"] = 3
        return "labels.1.value", "outside the Likert 0–2 scale"
    if case == "mixed level":
        rec["level"] = "dialogue"
        return "level", "all rows of a file must share one level"
    if case == "unknown language":
        rec["language"] = "english"
        return "language", "not an ISO 639 language code"
    if case == "language not declared":
        rec["language"] = "fr"
        return "language", "not a language of this dataset (en, es, zh)"
    if case == "unknown dimension":
        rec["dimension"] = "fun"
        return "dimension", "unknown dimension 'fun'"
    if case == "duplicate id":
        rec["id"] = rows[0]["id"]
        return "id", "duplicate id 'fed-00-en' (first on line 1)"
    if case == "extra field":
        rec["score"] = 1
        return "score", "not a field of turn-level common-schema records"
    raise AssertionError(case)


CASES = [
    "invalid json",
    "missing response",
    "label off the scale",
    "mixed level",
    "unknown language",
    "language not declared",
    "unknown dimension",
    "duplicate id",
    "extra field",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_rows_are_errors_or_counted_skips(tmp_path, case):
    src = write_engagingness_source(tmp_path / "src")
    rows = _lines(src)
    field, fragment = _mutate(case, rows)
    _write(src, "fed-turn.jsonl", rows)
    with pytest.raises(DataValidationError) as ei:
        build_dataset("common", src, tmp_path / "out", show_progress=False)
    msg = str(ei.value)
    assert "fed-turn.jsonl" in msg and "line 3," in msg and f"field {field!r}" in msg and fragment in msg, msg
    assert ei.value.row == 3 and ei.value.column == field
    assert not (tmp_path / "out").exists()

    res = build_dataset("common", src, tmp_path / "out", show_progress=False, skip_invalid=True)
    assert res.configs == {"fed-turn": 3 * N_FED - 1, "kdconv-dial": 2 * N_KDCONV}
    skipped = res.manifest["skipped"]
    assert skipped["count"] == 1
    assert skipped["rows"][0] == {
        "file": "fed-turn.jsonl",
        "row": 3,
        "field": field,
        "problem": ei.value.problem,
    }
    assert "Skipped source rows: 1" in (tmp_path / "out" / "README.md").read_text()


def test_json_array_rows_are_records_and_file_errors(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    rows = fed_records()[:4]
    rows[3]["turns"] = []
    (src / "cfg.json").write_text(json.dumps(rows), "utf-8")
    with pytest.raises(DataValidationError, match=r"cfg.json, record 4, field 'turns': not a field"):
        build_dataset("common", src, tmp_path / "out", show_progress=False)
    (src / "cfg.json").write_text('{"id": "x"}', "utf-8")
    with pytest.raises(DataValidationError, match=r"cfg.json, header, field '<json>': expected a JSON array"):
        build_dataset("common", src, tmp_path / "out", show_progress=False)
    (src / "cfg.json").write_text("[\n{,", "utf-8")
    with pytest.raises(DataValidationError, match=r"cfg.json, header, field '<json>': invalid JSON.*line 2"):
        build_dataset("common", src, tmp_path / "out", show_progress=False)
    (src / "cfg.json").unlink()
    (src / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataValidationError, match=r"bad.parquet, .*'<parquet>': unreadable Parquet"):
        build_dataset("common", src, tmp_path / "out", show_progress=False)


def test_invalid_utf8_and_missing_level(tmp_path):
    src = write_engagingness_source(tmp_path / "src")
    good = (src / "fed-turn.jsonl").read_bytes().splitlines(keepends=True)
    (src / "fed-turn.jsonl").write_bytes(b"".join(good[:1]) + b'{"id": "caf\xe9"}\n' + b"".join(good[1:]))
    with pytest.raises(DataValidationError, match=r"line 2, field '<json>': invalid UTF-8"):
        build_dataset("common", src, tmp_path / "out", show_progress=False)
    rows = _lines(src, "kdconv-dial.jsonl")
    del rows[1]["level"]
    _write(src, "kdconv-dial.jsonl", rows)
    (src / "fed-turn.jsonl").write_bytes(b"".join(good))
    with pytest.raises(DataValidationError, match=r"kdconv-dial.jsonl, line 2, field 'level': missing"):
        build_dataset("common", src, tmp_path / "out", show_progress=False)


def test_dataset_yaml_problems(tmp_path):
    src = write_engagingness_source(tmp_path / "src")
    meta = src / "dataset.yaml"
    meta.write_text(meta.read_text() + "colour: blue\n")
    with pytest.raises(ValueError, match=r"dataset.yaml: key 'colour': Extra inputs"):
        build_dataset("common", src, tmp_path / "out", show_progress=False)
    meta.write_text("dimensions:\n  - {name: engagingness, scale: likert}\n")
    with pytest.raises(ValueError, match=r"dataset.yaml: dimension 'engagingness': a likert scale needs"):
        build_dataset("common", src, tmp_path / "out", show_progress=False)


def test_missing_sources(tmp_path):
    with pytest.raises(SourceUnavailableError, match="--source is required"):
        build_dataset("common", None, tmp_path / "out", show_progress=False)
    with pytest.raises(SourceUnavailableError, match="does not exist"):
        build_dataset("common", tmp_path / "nowhere", tmp_path / "out", show_progress=False)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hi")
    with pytest.raises(SourceUnavailableError, match="no <config>.jsonl"):
        build_dataset("common", tmp_path / "empty", tmp_path / "out", show_progress=False)


def test_hub_source_roundtrips_a_built_dataset(tmp_path):
    src = write_engagingness_source(tmp_path / "src")
    first = build_dataset("common", src, tmp_path / "first", show_progress=False)
    builder = get_builder("common", cache_dir=tmp_path / "hf_cache")
    res = builder.build(f"hub:{tmp_path / 'first'}", tmp_path / "again", show_progress=False)
    assert res.configs == first.configs
    assert res.manifest["inputs"][0]["source"] == f"hub:{tmp_path / 'first'}/fed-turn.parquet"
    a, b = load(tmp_path / "first", "fed-turn", tmp_path), load(tmp_path / "again", "fed-turn", tmp_path)
    assert a.to_list() == b.to_list()
    with pytest.raises(SourceUnavailableError, match="could not load hub:"):
        builder.build(f"hub:{tmp_path / 'nowhere'}", tmp_path / "x", show_progress=False)


def test_cli_builds_common(tmp_path):
    from harness.cli import app

    src = write_engagingness_source(tmp_path / "src")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["datasets", "build", "common", "--source", str(src), "--output", str(out), "-l", "zh"]
    )
    assert result.exit_code == 0, result.output
    assert "fed-turn" in result.output and "kdconv-dial" in result.output
    assert set(load(out, "kdconv-dial", tmp_path)["language"]) == {"zh"}
