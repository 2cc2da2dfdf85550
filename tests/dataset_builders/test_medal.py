"""MedalBuilder on the synthetic MEDAL fixture: configs, labels, aggregates, card, bad rows, offline."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from datasets import load_dataset
from typer.testing import CliRunner

from dataset_builders.medal import MEDAL_DIMENSIONS, MedalBuilder
from dataset_builders.medal_labels import MEDAL_HUB_ID, MEDAL_ISSUES, MEDAL_LANGUAGES, MEDAL_OVERALL
from harness.data.builders import build_dataset, get_builder
from harness.data.schema import DIALOGUE_FEATURES, DataValidationError, SourceUnavailableError
from tests.fixtures.medal_source import expected_counts, medal_records, planted_issue, write_medal_source

CJK = re.compile(r"[\u4e00-\u9fff]")


def load(out: Path, config: str, tmp_path: Path):
    return load_dataset(str(out), config, split="test", cache_dir=str(tmp_path / "hf"))


def build(src, out, **kw):
    return build_dataset("medal", src, out, show_progress=False, **kw)


def test_builder_metadata():
    b = get_builder("medal")
    assert isinstance(b, MedalBuilder) and b.version == "0.1.0" and b.license == "cc-by-nc-sa-4.0"
    assert b.default_source == f"hub:{MEDAL_HUB_ID}" and b.default_dimension == MEDAL_OVERALL
    assert [d.name for d in MEDAL_DIMENSIONS] == [*MEDAL_ISSUES, MEDAL_OVERALL]
    assert all(d.scale == "binary" and d.source == "MEDAL Table 1" for d in MEDAL_DIMENSIONS[:8])
    overall = MEDAL_DIMENSIONS[-1]
    assert (overall.scale, overall.min, overall.max, overall.source) == (
        "likert",
        1,
        5,
        "MEDAL Table 11 / §5.2",
    )
    assert "Persona Hub (CC-BY-NC-SA-4.0)" in b.license_note() and "Atomic10x (CC-BY-4.0)" in b.license_note()


def test_fixture_is_deterministic_and_in_language(tmp_path):
    a = write_medal_source(tmp_path / "a", seed=3).joinpath("benchmark.jsonl").read_bytes()
    b = write_medal_source(tmp_path / "b", seed=3).joinpath("benchmark.jsonl").read_bytes()
    c = write_medal_source(tmp_path / "c", seed=4).joinpath("benchmark.jsonl").read_bytes()
    assert a == b and a != c
    for rec in medal_records(languages=MEDAL_LANGUAGES):
        text = " ".join(t["text"] for t in rec["turns"])
        assert bool(CJK.search(text)) == (rec["language"] == "zh"), rec["id"]
        assert 4 <= len(rec["turns"]) <= 8 and len(rec["turns"]) % 2 == 0
        assert "aggregates" not in rec
    words = {
        "de": "Gitarre|Reise|Hostel",
        "fr": "guitare|voyager",
        "pt": "guitarra|viajar",
        "es": "guitarra|viajar",
    }
    for rec in medal_records(languages=tuple(words), n_per_pair=2):
        assert re.search(words[rec["language"]], " ".join(t["text"] for t in rec["turns"])), rec["id"]


def test_build_benchmark(tmp_path):
    src = write_medal_source(tmp_path / "src")
    out = tmp_path / "out"
    res = build(src, out)
    assert res.configs == {"benchmark": 18}
    ds = load(out, "benchmark", tmp_path)
    assert ds.features == DIALOGUE_FEATURES
    expected = expected_counts()
    assert {lang: ds["language"].count(lang) for lang in expected} == {
        lang: e["dialogues"] for lang, e in expected.items()
    }
    planted_seen = {}
    for r in ds:
        lang = r["language"]
        anns = sorted({lab["annotator"] for lab in r["labels"]})
        assert anns == expected[lang]["annotators"]
        assert len(r["labels"]) == 9 * len(anns) and r["dimension"] == MEDAL_OVERALL
        assert [t["role"] for t in r["turns"]] == ["user", "assistant"] * (len(r["turns"]) // 2)
        agg = {a["dimension"]: a for a in r["aggregates"]}
        assert list(agg) == [*MEDAL_ISSUES, MEDAL_OVERALL] and all(a["n"] == len(anns) for a in agg.values())
        overall = [lab["value"] for lab in r["labels"] if lab["dimension"] == MEDAL_OVERALL]
        assert (
            r["rating"] == pytest.approx(sum(overall) / len(overall)) == pytest.approx(agg["overall"]["mean"])
        )
        assert agg["overall"]["aggregate"] == pytest.approx(sum(overall) / (5 * len(overall)))
        k, bot = int(r["id"].split("-")[2]), r["system"]
        issue = planted_issue(k, ("bot-a", "bot-b").index(bot), 2)
        if issue is None:
            continue
        planted_seen[issue] = planted_seen.get(issue, 0) + 1
        ann1 = {lab["dimension"]: lab["value"] for lab in r["labels"] if lab["annotator"] == f"{lang}-ann1"}
        assert ann1[issue] == 1.0 and agg[issue]["mean"] >= 0.5
        assistant = [t["text"] for t in r["turns"] if t["role"] == "assistant"]
        if issue == "repetitive":
            assert assistant[-1] == assistant[-2]
    assert planted_seen == {k: v * 3 for k, v in expected["en"]["planted"].items()}
    clean = [r["rating"] for r in ds if all(a["mean"] == 0 for a in r["aggregates"][:8])]
    flawed = [r["rating"] for r in ds if any(a["mean"] >= 0.5 for a in r["aggregates"][:8])]
    assert sum(clean) / len(clean) > sum(flawed) / len(flawed) + 1

    man = res.manifest
    assert man["configs"]["benchmark"]["computed"] == {"aggregates": 18}  # the fixture leaves aggregates out
    assert [d["name"] for d in man["dimensions"]] == [*MEDAL_ISSUES, MEDAL_OVERALL]
    assert any(
        "counts differ from the paper" in w and "de 6 dialogues / 1 annotator(s)" in w for w in res.warnings
    )
    card = (out / "README.md").read_text()
    assert "## MEDAL labels (Table 1)" in card and "| `lacks_empathy` | !Emp |" in card
    assert "| German (`de`) | 6 | 100 | 1 | 1 | de-ann1 |" in card
    assert "| Chinese (`zh`) | 6 | 100 | 2 | 2 | zh-ann1, zh-ann2 |" in card
    assert "not verified offline" in card and "Persona Hub" in card and "mendonca2026medal" in card
    assert "license: cc-by-nc-sa-4.0" in card


def test_all_six_languages_and_filter(tmp_path):
    src = write_medal_source(
        tmp_path / "src", languages=MEDAL_LANGUAGES, chatbots=("x", "y", "z"), n_per_pair=2
    )
    res = build(src, tmp_path / "all")
    assert res.configs == {"benchmark": 36}
    per_lang = {
        lang: {
            lab["annotator"]
            for r in load(tmp_path / "all", "benchmark", tmp_path)
            if r["language"] == lang
            for lab in r["labels"]
        }
        for lang in MEDAL_LANGUAGES
    }
    assert {k: len(v) for k, v in per_lang.items()} == {"zh": 2, "en": 2, "de": 1, "fr": 2, "pt": 2, "es": 1}
    res = build(src, tmp_path / "de", languages=["german", "es"])
    assert res.configs == {"benchmark": 12} and res.manifest["options"]["languages"] == ["de", "es"]
    assert set(load(tmp_path / "de", "benchmark", tmp_path)["language"]) == {"de", "es"}
    with pytest.raises(ValueError, match=r"not MEDAL languages"):
        build(src, tmp_path / "ja", languages=["ja"])


def _mutate(case: str, rec: dict) -> tuple[str, str]:
    if case == "invalid json":
        return "<json>", "invalid JSON"
    if case == "missing turns":
        del rec["turns"]
        return "turns", "required field is missing"
    if case == "binary label 2":
        i = next(i for i, lab in enumerate(rec["labels"]) if lab["dimension"] == "repetitive")
        rec["labels"][i]["value"] = 2
        return f"labels.{i}.value", "2 is outside the binary (0/1) scale of 'repetitive'"
    if case == "overall 6":
        i = next(i for i, lab in enumerate(rec["labels"]) if lab["dimension"] == MEDAL_OVERALL)
        rec["labels"][i]["value"] = 6
        return f"labels.{i}.value", "outside the Likert 1–5 scale"
    if case == "mixed level":
        rec["level"] = "turn"
        return "level", "all rows of a file must share one level"
    if case == "unknown language code":
        rec["language"] = "ja"
        return "language", "'ja' is not a language of this dataset (zh, en, de, fr, pt, es)"
    if case == "not a language code":
        rec["language"] = "Deutsch"
        return "language", "not an ISO 639 language code"
    if case == "unknown dimension":
        rec["labels"][0]["dimension"] = "boring"
        return "labels.0.dimension", "unknown dimension 'boring'"
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "invalid json",
        "missing turns",
        "binary label 2",
        "overall 6",
        "mixed level",
        "unknown language code",
        "not a language code",
        "unknown dimension",
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path, case):
    src = write_medal_source(tmp_path / "src")
    path = src / "benchmark.jsonl"
    lines = path.read_text("utf-8").splitlines()
    rec = json.loads(lines[4])
    field, fragment = _mutate(case, rec)
    lines[4] = (
        json.dumps(rec, ensure_ascii=False)[:-3]
        if case == "invalid json"
        else json.dumps(rec, ensure_ascii=False)
    )
    path.write_text("\n".join(lines) + "\n", "utf-8")
    with pytest.raises(DataValidationError) as ei:
        build(src, tmp_path / "out")
    msg = str(ei.value)
    assert msg.startswith(str(path)) and "line 5," in msg and f"field {field!r}" in msg and fragment in msg, (
        msg
    )
    res = build(src, tmp_path / "out", skip_invalid=True)
    assert res.configs == {"benchmark": 17}
    assert res.manifest["skipped"] == {
        "count": 1,
        "rows": [{"file": "benchmark.jsonl", "row": 5, "field": field, "problem": ei.value.problem}],
    }


def test_other_configs_and_dataset_yaml_extensions(tmp_path):
    src = write_medal_source(tmp_path / "src", languages=("en",), n_per_pair=2)
    auto = []
    for r in medal_records(languages=("en",), n_per_pair=2):
        labels = [{"annotator": "gpt-4.1", "dimension": d, "value": 0} for d in (*MEDAL_ISSUES, "other")]
        labels.append({"annotator": "gpt-4.1", "dimension": MEDAL_OVERALL, "value": 4})
        rec = {k: v for k, v in r.items() if k not in ("labels", "rating", "dimension")}
        auto.append({**rec, "dataset": "auto_labels", "labels": labels})
    (src / "auto_labels.jsonl").write_text(
        "\n".join(json.dumps(a, ensure_ascii=False) for a in auto), "utf-8"
    )
    with pytest.raises(DataValidationError, match=r"auto_labels.jsonl, line 1, field 'labels.8.dimension'"):
        build(src, tmp_path / "out")
    (src / "dataset.yaml").write_text(
        "pretty_name: ignored\ndimensions:\n  - {name: other, scale: binary, definition: Any other issue.}\n"
    )
    res = build(src, tmp_path / "out")
    assert res.configs == {"auto_labels": 4, "benchmark": 4}
    assert any("only 'dimensions' is read; ignored ['pretty_name']" in w for w in res.warnings)
    assert [d["name"] for d in res.manifest["dimensions"]][-1] == "other"
    auto_ds = load(tmp_path / "out", "auto_labels", tmp_path)
    assert set(auto_ds["dimension"]) == {MEDAL_OVERALL} and set(auto_ds["rating"]) == {4.0}  # defaults
    (src / "dataset.yaml").write_text("dimensions:\n  - {name: overall, scale: likert, min: 0, max: 10}\n")
    with pytest.raises(ValueError, match="'overall' is built into MEDAL"):
        build(src, tmp_path / "out")


def test_benchmark_must_be_dialogue_level(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    rec = {
        "id": "t1",
        "item_id": "t1",
        "language": "en",
        "level": "turn",
        "context": [],
        "response": "Hello!",
        "labels": [{"annotator": "a", "dimension": "overall", "value": 4}],
    }
    (src / "benchmark.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(DataValidationError, match=r"benchmark.jsonl, line 1, field 'level'.*dialogue-level"):
        build(src, tmp_path / "out")
    (src / "benchmark.jsonl").rename(src / "turns.jsonl")
    assert build(src, tmp_path / "out").configs == {"turns": 1}


def test_default_source_offline_fails_fast(tmp_path, monkeypatch):
    import datasets
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    start = time.monotonic()
    with pytest.raises(SourceUnavailableError) as ei:
        build(None, tmp_path / "out")
    assert time.monotonic() - start < 60
    msg = str(ei.value)
    assert f"could not load hub:{MEDAL_HUB_ID}" in msg and "--source DIR" in msg and "`import` builder" in msg
    assert not (tmp_path / "out").exists()


def test_cli_build_medal(tmp_path):
    from harness.cli import app

    src = write_medal_source(tmp_path / "src")
    out = tmp_path / "out"
    args = ["datasets", "build", "medal", "--source", str(src), "--output", str(out), "--language", "zh"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "benchmark" in result.output and "counts differ from the paper" in result.output
    ds = load(out, "benchmark", tmp_path)
    assert ds.num_rows == 6 and set(ds["language"]) == {"zh"}
    bad = CliRunner().invoke(
        app, ["datasets", "build", "medal", "--source", str(src), "-o", str(out), "-l", "ja"]
    )
    assert bad.exit_code != 0 and "not MEDAL languages" in bad.output
