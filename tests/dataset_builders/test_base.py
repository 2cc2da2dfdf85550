"""Builder base class, record schema helpers, validation errors and the builder registry."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import yaml

import dataset_builders
import harness.data.builders as builder_registry
from dataset_builders import base, helpers
from dataset_builders.base import Builder
from dataset_builders.helpers import (
    LANGUAGES,
    check_rating,
    dialogue_level_roles,
    normalize_languages,
    turn_level_roles,
)
from dataset_builders.records import ConfigData, SourceFile
from harness.data.schema import DIALOGUE_FEATURES, TURN_FEATURES, DataValidationError

# -- errors --------------------------------------------------------------------------------------


def test_validation_error_names_file_row_and_column():
    e = DataValidationError("data/fed-turn.csv", 17, "english_ctx", "empty context")
    msg = str(e)
    assert msg.startswith("data/fed-turn.csv, row 17")
    assert "(data rows are 1-based, header excluded)" in msg
    assert "column 'english_ctx'" in msg and msg.endswith("empty context")
    assert (e.file, e.row, e.column) == ("data/fed-turn.csv", 17, "english_ctx")
    assert isinstance(e, ValueError)


def test_validation_error_header_and_jsonl_wording():
    e = DataValidationError("x.csv", "header", "ratings", "missing column")
    assert e.row == "header" and "header" in str(e) and "'ratings'" in str(e)
    j = DataValidationError("turn.jsonl", 3, "rating", "bad", row_label="line", column_label="field")
    assert str(j) == "turn.jsonl, line 3, field 'rating': bad"


def test_validation_error_pickles():
    e = DataValidationError("x.csv", 2, "ratings", "not a number")
    e2 = pickle.loads(pickle.dumps(e))
    assert str(e2) == str(e) and (e2.file, e2.row, e2.column) == ("x.csv", 2, "ratings")


# -- helpers -------------------------------------------------------------------------------------


def test_normalize_languages():
    assert normalize_languages(None) == LANGUAGES
    assert normalize_languages(["zh", "en"]) == ("en", "zh")  # canonical order
    assert normalize_languages("english, German") == ("en", "de")
    assert normalize_languages(["ru", "ru"]) == ("ru",)
    with pytest.raises(ValueError, match="unknown language 'xx'"):
        normalize_languages(["en", "xx"])
    with pytest.raises(ValueError):
        normalize_languages([""])


def test_roles():
    assert turn_level_roles(0) == []
    assert turn_level_roles(1) == ["user"]
    assert turn_level_roles(4) == ["assistant", "user", "assistant", "user"]
    assert turn_level_roles(3) == ["user", "assistant", "user"]
    assert dialogue_level_roles(3) == ["user", "assistant", "user"]


def test_check_rating():
    assert check_rating("3.5") == 3.5 and check_rating(2) == 2.0 and check_rating(" 1 ") == 1.0
    for bad in ["", "abc", "nan", "inf", None, True, float("nan"), [1]]:
        assert check_rating(bad) is None, bad


def test_size_category():
    assert helpers.size_category(0) == "n<1K"
    assert helpers.size_category(999) == "n<1K"
    assert helpers.size_category(1000) == "1K<n<10K"
    assert helpers.size_category(39_850) == "10K<n<100K"


def test_features_are_the_documented_schema():
    """Every column of the common schema is documented in the schema module's table, in order."""
    import re

    from harness.data import schema

    documented = re.findall(r"^``(\w+)``", schema.__doc__, flags=re.M)
    turn_only = {"context", "response", "response_role", "reference"}
    assert documented == list(TURN_FEATURES)
    assert [c for c in documented if c not in turn_only] == [c for c in DIALOGUE_FEATURES if c != "turns"]
    assert TURN_FEATURES["rating"].dtype == "float64"
    assert set(TURN_FEATURES["context"].feature) == {"role", "text"}
    assert set(DIALOGUE_FEATURES["turns"].feature) == {"role", "text"}
    assert set(TURN_FEATURES["labels"].feature) == {"annotator", "dimension", "value", "raw"}
    assert list(schema.COLUMN_DOCS) == [*TURN_FEATURES][:13] + ["turns"] + [*TURN_FEATURES][13:]


# -- a minimal builder ---------------------------------------------------------------------------


class _ToyBuilder(Builder):
    """Reads ``<config>.json`` files: {"level": ..., "items": [{"texts": [...], "rating": x}]}."""

    name = "toy"
    version = "0.1.0"
    license = "MIT"
    description = "A toy builder."
    fail_on: str | None = None

    def resolve_sources(self, source, warnings):
        files = sorted(Path(source).glob("*.json"))
        return [SourceFile(p.stem, json.loads(p.read_text())["level"], p, str(p)) for p in files]

    def read_config(self, src, languages, warnings):
        if src.config == self.fail_on:
            raise DataValidationError(src.path, 1, "items", "boom")
        data = json.loads(src.path.read_text())
        recs = []
        for lang in languages:
            for i, it in enumerate(data["items"], start=1):
                item_id = f"{src.config}-{i:05d}"
                rec = {"id": f"{item_id}-{lang}", "item_id": item_id, "dataset": src.config, "language": lang}
                rec["level"] = src.level
                if src.level == "turn":
                    ctx = it["texts"][:-1]
                    rec["context"] = helpers.messages(ctx, turn_level_roles(len(ctx)))
                    rec["response"] = it["texts"][-1]
                else:
                    rec["turns"] = helpers.messages(it["texts"], dialogue_level_roles(len(it["texts"])))
                rec["rating"] = float(it["rating"])
                rec["dimension"] = base.DEFAULT_DIMENSION[src.level]
                recs.append(rec)
        return ConfigData(src.config, src.level, recs, expected_instances=data.get("expected"))


@pytest.fixture
def toy_source(tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a-turn.json").write_text(
        json.dumps(
            {
                "level": "turn",
                "expected": 2,
                "items": [{"texts": ["hi", "hello"], "rating": 3}, {"texts": ["q", "a"], "rating": 1}],
            }
        )
    )
    (src / "b-dial.json").write_text(
        json.dumps({"level": "dialogue", "expected": 5, "items": [{"texts": ["x", "y", "z"], "rating": 2.5}]})
    )
    return src


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_toy_build_writes_parquet_card_manifest(toy_source, tmp_path):
    import datasets

    out = tmp_path / "out"
    res = _ToyBuilder().build(toy_source, out, languages=["en", "fr"], show_progress=False)
    assert res.output_dir == out.resolve()
    assert res.configs == {"a-turn": 4, "b-dial": 2}
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "a-turn", "b-dial", "build_manifest.json"]

    manifest = json.loads((out / "build_manifest.json").read_text())
    assert manifest == res.manifest
    assert manifest["builder"] == {"name": "toy", "version": "0.1.0"}
    assert manifest["fingerprint"] == res.fingerprint and len(res.fingerprint) == 64
    assert manifest["created_at"].endswith("Z")
    assert manifest["configs"]["a-turn"]["expected_rows"] == 4
    assert manifest["configs"]["b-dial"] == {
        "level": "dialogue",
        "data_file": "b-dial/test-00000-of-00001.parquet",
        "rows": 2,
        "instances": 1,
        "expected_instances": 5,
        "expected_rows": 10,
        "languages": ["en", "fr"],
    }
    # instance-count mismatch is a warning, recorded in both places
    assert any("b-dial" in w and "5" in w for w in res.warnings)
    assert manifest["warnings"] == res.warnings

    card = (out / "README.md").read_text()
    front = yaml.safe_load(card.split("---\n")[1])
    assert front["license"] == "mit" and front["language"] == ["en", "fr"]
    assert [c["config_name"] for c in front["configs"]] == ["a-turn", "b-dial"]

    cache = tmp_path / "hf_cache"
    ds = datasets.load_dataset(str(out), "a-turn", split="test", cache_dir=str(cache))
    assert ds.features == TURN_FEATURES and len(ds) == 4
    assert ds[0]["context"] == [{"role": "user", "text": "hi"}] and ds[0]["response"] == "hello"
    dd = datasets.load_dataset(str(out), "b-dial", split="test", cache_dir=str(cache))
    assert dd.features == DIALOGUE_FEATURES
    assert [t["role"] for t in dd[0]["turns"]] == ["user", "assistant", "user"]


def test_failed_build_leaves_previous_output_untouched(toy_source, tmp_path):
    out = tmp_path / "out"
    _ToyBuilder().build(toy_source, out, show_progress=False)
    before = _snapshot(out)
    failing = _ToyBuilder()
    failing.fail_on = "b-dial"  # the second file fails, after the first was written
    with pytest.raises(DataValidationError):
        failing.build(toy_source, out, show_progress=False)
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]  # no temp dirs left behind


def test_failed_first_build_leaves_nothing(toy_source, tmp_path):
    failing = _ToyBuilder()
    failing.fail_on = "a-turn"
    with pytest.raises(DataValidationError):
        failing.build(toy_source, tmp_path / "out", show_progress=False)
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_rebuild_replaces_output_and_keeps_fingerprint(toy_source, tmp_path):
    out = tmp_path / "out"
    r1 = _ToyBuilder().build(toy_source, out, show_progress=False)
    (out / "stale.txt").write_text("from an older build")
    r2 = _ToyBuilder().build(toy_source, out, show_progress=False)
    assert r1.fingerprint == r2.fingerprint
    assert not (out / "stale.txt").exists()
    r3 = _ToyBuilder().build(toy_source, out, languages=["en"], show_progress=False)
    assert r3.fingerprint != r1.fingerprint  # options are part of the fingerprint


def test_refuses_to_replace_a_foreign_directory(toy_source, tmp_path):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="refusing"):
        _ToyBuilder().build(toy_source, out, show_progress=False)
    assert (out / "notes.txt").read_text() == "keep me"


def test_progress_bar_runs(toy_source, tmp_path, capsys):
    _ToyBuilder().build(toy_source, tmp_path / "out", show_progress=True)
    assert "building toy" in capsys.readouterr().err


# -- registry ------------------------------------------------------------------------------------


def test_registry_lists_and_instantiates():
    names = builder_registry.list_builders()
    assert {"xdial-eval", "demo"} <= set(names) and names == sorted(names)
    assert isinstance(builder_registry.get_builder("xdial-eval"), dataset_builders.XDialEvalBuilder)
    assert isinstance(builder_registry.get_builder("demo"), dataset_builders.DemoBuilder)
    with pytest.raises(KeyError, match="xdial-eval"):
        builder_registry.get_builder("nope")


def test_register_builder(toy_source, tmp_path):
    with builder_registry.BUILDERS.isolated():
        assert builder_registry.register_builder(_ToyBuilder) is _ToyBuilder
        builder_registry.register_builder(_ToyBuilder)  # idempotent
        assert "toy" in builder_registry.list_builders()

        class Other(_ToyBuilder):
            name = "toy"

        with pytest.raises(ValueError, match="dataset builder 'toy' is already registered"):
            builder_registry.register_builder(Other)
        with pytest.raises(TypeError):
            builder_registry.register_builder(dict)  # type: ignore[arg-type]

        res = builder_registry.build_dataset(
            "toy", toy_source, tmp_path / "out", languages="de", show_progress=False
        )
        assert res.configs == {"a-turn": 2, "b-dial": 1}
    assert "toy" not in builder_registry.list_builders()
