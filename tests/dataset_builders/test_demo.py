"""DemoBuilder on fixture JSONL files written by the tests (and on the packaged files, if present)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dataset_builders.demo import PACKAGED_DATA, DemoBuilder
from harness.data.builders import build_dataset
from harness.data.schema import DIALOGUE_FEATURES, TURN_FEATURES, DataValidationError, SourceUnavailableError

TURN = [
    {
        "item": "t01",
        "language": "en",
        "context": ["Hi, how are you?", "Great, I just got back from Paris."],
        "response": "Nice! What did you see there?",
        "rating": 4.5,
    },
    {
        "item": "t01",
        "language": "de",
        "context": ["Hallo, wie geht's?", "Super, ich bin gerade aus Paris zurück."],
        "response": "Schön! Was hast du dort gesehen?",
        "rating": 4.5,
    },
    {
        "item": "t01",
        "language": "zh",
        "context": ["你好，最近怎么样？", "很好，我刚从巴黎回来。"],
        "response": "太好了！你在那里看到了什么？",
        "rating": 4.5,
    },
    {
        "item": "t02",
        "language": "en",
        "context": ["What's your favourite food?"],
        "response": "The bus leaves at noon.",
        "rating": 1.0,
    },
    {
        "item": "t02",
        "language": "de",
        "context": ["Was ist dein Lieblingsessen?"],
        "response": "Der Bus fährt um zwölf.",
        "rating": 1.0,
    },
    {
        "item": "t02",
        "language": "zh",
        "context": ["你最喜欢吃什么？"],
        "response": "公交车中午出发。",
        "rating": 1.0,
    },
]
DIAL = [
    {
        "item": "d01",
        "language": "en",
        "turns": ["Hello!", "Hi! Need help?", "Yes, a recipe please.", "Sure, try pancakes."],
        "rating": 4.0,
    },
    {
        "item": "d01",
        "language": "de",
        "turns": ["Hallo!", "Hi! Brauchst du Hilfe?", "Ja, ein Rezept bitte.", "Klar, probier Pfannkuchen."],
        "rating": 4.0,
    },
    {"item": "d02", "language": "en", "turns": ["Hello!", "I like trains.", "Okay?"], "rating": 2.0},
    {"item": "d02", "language": "de", "turns": ["Hallo!", "Ich mag Züge.", "Okay?"], "rating": 2.0},
]


def _write_jsonl(path: Path, objs: list, *, raw_lines: dict[int, str] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(o, ensure_ascii=False) for o in objs]
    for idx, text in (raw_lines or {}).items():
        lines[idx - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def demo_source(tmp_path) -> Path:
    src = tmp_path / "demo_src"
    _write_jsonl(src / "turn.jsonl", TURN)
    _write_jsonl(src / "dial.jsonl", DIAL)
    return src


def _load(out: Path, config: str, cache: Path):
    import datasets

    return datasets.load_dataset(str(out), config, split="test", cache_dir=str(cache))


def test_demo_builds_two_loadable_configs(demo_source, tmp_path):
    out = tmp_path / "out"
    res = build_dataset("demo", demo_source, out, show_progress=False)
    assert res.configs == {"demo-turn": 6, "demo-dial": 4}
    cache = tmp_path / "hf_cache"

    turn = _load(out, "demo-turn", cache)
    assert turn.features == TURN_FEATURES and len(turn) == 6
    by_id = {r["id"]: r for r in turn}
    r = by_id["demo-turn-t01-en"]
    assert r["item_id"] == "demo-turn-t01" and r["dataset"] == "demo-turn" and r["level"] == "turn"
    assert r["context"] == [
        {"role": "assistant", "text": "Hi, how are you?"},
        {"role": "user", "text": "Great, I just got back from Paris."},
    ]
    assert r["response"] == "Nice! What did you see there?"
    assert r["rating"] == 4.5 and r["dimension"] == "relevance"
    assert by_id["demo-turn-t02-zh"]["context"] == [{"role": "user", "text": "你最喜欢吃什么？"}]
    assert turn["language"] == [
        "en",
        "en",
        "zh",
        "zh",
        "de",
        "de",
    ]  # canonical language order, then file order

    dial = _load(out, "demo-dial", cache)
    assert dial.features == DIALOGUE_FEATURES and len(dial) == 4
    d = {r["id"]: r for r in dial}["demo-dial-d01-de"]
    assert [t["role"] for t in d["turns"]] == ["user", "assistant", "user", "assistant"]
    assert d["turns"][0]["text"] == "Hallo!" and d["dimension"] == "coherence" and d["level"] == "dialogue"

    front = yaml.safe_load((out / "README.md").read_text(encoding="utf-8").split("---\n", 2)[1])
    assert [c["config_name"] for c in front["configs"]] == ["demo-turn", "demo-dial"]
    assert front["license"] == "cc-by-4.0" and front["language"] == ["en", "zh", "de"]
    manifest = json.loads((out / "build_manifest.json").read_text())
    assert manifest["builder"]["name"] == "demo"
    assert manifest["configs"]["demo-turn"]["expected_instances"] is None
    assert not any("lack" in w for w in res.warnings)  # every item has every language of its file


def test_demo_languages_and_fingerprint(demo_source, tmp_path):
    a = DemoBuilder().build(demo_source, tmp_path / "a", languages=["de"], show_progress=False)
    b = DemoBuilder().build(demo_source, tmp_path / "b", languages=["de"], show_progress=False)
    assert a.configs == {"demo-turn": 2, "demo-dial": 2}
    assert a.fingerprint == b.fingerprint


def test_demo_partial_languages_warned(tmp_path):
    src = tmp_path / "src"
    _write_jsonl(src / "turn.jsonl", TURN[:4])  # t02 only in English
    res = DemoBuilder().build(src, tmp_path / "out", show_progress=False)
    assert res.configs == {"demo-turn": 4}
    assert any("dial.jsonl" in w for w in res.warnings)
    assert any("t02" in w and "lack" in w for w in res.warnings)


def _bad(tmp_path: Path, line: int, obj_or_raw, name: str = "turn.jsonl") -> tuple[Path, DataValidationError]:
    src = tmp_path / "src"
    objs = list(TURN if name == "turn.jsonl" else DIAL)
    raw = None
    if isinstance(obj_or_raw, str):
        raw = {line: obj_or_raw}
    else:
        objs[line - 1] = obj_or_raw
    f = _write_jsonl(src / name, objs, raw_lines=raw)
    with pytest.raises(DataValidationError) as ei:
        DemoBuilder().build(src, tmp_path / "out", show_progress=False)
    return f, ei.value


@pytest.mark.parametrize(
    ("line", "patch", "field", "problem"),
    [
        (2, {"rating": "high"}, "rating", "finite number"),
        (3, {"rating": 7}, "rating", "outside 1-5"),
        (4, {"context": []}, "context", "non-empty list"),
        (5, {"context": ["ok", "  "]}, "context", "utterance 2"),
        (2, {"response": ""}, "response", "non-empty string"),
        (6, {"language": "xx"}, "language", "unknown language"),
        (3, {"rating": 2.0}, "rating", "translations must agree"),
    ],
)
def test_bad_demo_line_names_file_line_field(tmp_path, line, patch, field, problem):
    obj = {**TURN[line - 1], **patch}
    f, err = _bad(tmp_path, line, obj)
    msg = str(err)
    assert str(f) in msg and f"line {line}" in msg and f"field {field!r}" in msg and problem in msg
    assert (Path(err.file).name, err.row, err.column) == ("turn.jsonl", line, field)


def test_bad_demo_missing_field_and_json(tmp_path):
    obj = {k: v for k, v in DIAL[1].items() if k != "turns"}
    f, err = _bad(tmp_path, 2, obj, name="dial.jsonl")
    assert f"{f}, line 2, field 'turns': missing field" == str(err)

    f, err = _bad(tmp_path / "j", 3, '{"item": "t02", ', name="turn.jsonl")
    assert "line 3" in str(err) and "invalid JSON" in str(err) and str(f) in str(err)

    f, err = _bad(tmp_path / "d", 4, {**TURN[0]})  # duplicate of line 1
    assert "line 4" in str(err) and "duplicate item 't01'" in str(err) and "first on line 1" in str(err)


def test_demo_missing_source(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceUnavailableError, match="turn.jsonl"):
        DemoBuilder().build(tmp_path / "empty", tmp_path / "out", show_progress=False)


def test_demo_default_source_is_packaged(tmp_path):
    present = [p for p in ("turn.jsonl", "dial.jsonl") if (PACKAGED_DATA / p).is_file()]
    assert present == ["turn.jsonl", "dial.jsonl"], f"packaged demo data missing in {PACKAGED_DATA}"
    res = DemoBuilder().build(None, tmp_path / "out", show_progress=False)
    expected = {"turn.jsonl": "demo-turn", "dial.jsonl": "demo-dial"}
    assert set(res.configs) == {expected[p] for p in present}
    assert all(n > 0 for n in res.configs.values())
    assert {i["source"] for i in res.manifest["inputs"]} == {
        f"dataset_builders/demo_data/{p}" for p in present
    }
