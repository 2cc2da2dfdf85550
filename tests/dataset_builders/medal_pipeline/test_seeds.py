"""MEDAL seed contexts (App. C.1): affect/gender detection, Atomic templating, scene and persona
loading, and balanced, deterministic sampling."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from dataset_builders.medal_pipeline import seeds
from dataset_builders.medal_pipeline.seeds import (
    AFFECT_KEYWORDS,
    AFFECTIVE_STATES,
    ATOMIC_TEMPLATES,
    DEFAULT_PERSONA_SOURCE,
    Persona,
    Scene,
    atomic_sentence,
    detect_affect,
    detect_gender,
    load_personas,
    load_scenes,
    sample_seed_contexts,
    seed_summary,
)
from dataset_builders.medal_pipeline.types import SeedContext, stable_id
from harness.data.schema import DataValidationError, SourceUnavailableError

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_DATA = Path(os.environ.get("DIALEVAL_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
PERSONAHUB_TOOL = SHARED_DATA / "personahub" / "tool.jsonl"


def _personas(n: int = 30) -> list[Persona]:
    texts = [f"A hobbyist who collects item number {i}" for i in range(n)]
    return [Persona(stable_id("persona", t), t, "test") for t in texts]


def _scene(text: str, i: int | None = None) -> Scene:
    return Scene(f"s{i}" if i is not None else stable_id("scene", text), text, "test")


# -- affective states ----------------------------------------------------------------------------


def test_affective_states_are_balanced_and_detectable():
    assert set(AFFECTIVE_STATES) == {
        "positive-activated",
        "negative-activated",
        "negative-deactivated",
        "positive-deactivated",
    }
    sizes = {len(v) for v in AFFECTIVE_STATES.values()}
    assert len(sizes) == 1 and sizes.pop() >= 3
    all_states = [s for v in AFFECTIVE_STATES.values() for s in v]
    assert len(all_states) == len(set(all_states))
    for state in all_states:
        assert state in AFFECT_KEYWORDS
        assert detect_affect(f"PersonX goes to the park. PersonX is {state}.") == state
    assert len(AFFECT_KEYWORDS) >= 120


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PersonX gives a speech. PersonX feels nervous.", "nervous"),
        ("PersonX is PROUD of the team", "proud"),
        ("PersonX is Anxious and then scared", "anxious"),  # the first one found
        ("PersonX is on   edge before the exam", "on edge"),
        ("PersonX feels good about it", "feels good"),
        ("PersonX is made aware. Now PersonX wants to find out more.", None),
        ("PersonX reads a madness novel", None),  # "mad" only as a whole word
        ("PersonX visits Saddleworth", None),  # no "sad" inside words
    ],
)
def test_detect_affect(text, expected):
    assert detect_affect(text) == expected


# -- gender --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PersonX calls his father", "male"),
        ("PersonX meets Mr. Smith", "male"),
        ("PersonX visits HER grandmother", "female"),
        ("PersonX calls his mother", "mixed"),
        ("PersonX goes to the park with PersonY", None),
        ("PersonX walks there and helps others", None),  # no "he"/"her" inside words
        ("A shepherd in the hills", None),
    ],
)
def test_detect_gender(text, expected):
    assert detect_gender(text) == expected


# -- Atomic templates ----------------------------------------------------------------------------


def test_atomic_figure3_example():
    assert atomic_sentence("PersonX is made aware", "xWant", "to find out more") == (
        "PersonX is made aware. Now PersonX wants to find out more."
    )
    # trailing periods / whitespace are stripped before templating; relation is case-insensitive
    assert atomic_sentence(" PersonX is made aware. ", "XWANT", "to find out more.") == (
        "PersonX is made aware. Now PersonX wants to find out more."
    )


def test_atomic_templates_cover_relations():
    for rel in (
        "xWant",
        "xReact",
        "xAttr",
        "xEffect",
        "xIntent",
        "xNeed",
        "oReact",
        "oWant",
        "oEffect",
        "HinderedBy",
        "isAfter",
        "isBefore",
    ):
        assert rel in ATOMIC_TEMPLATES
        sentence = atomic_sentence("PersonX bakes bread", rel, "something")
        assert "PersonX bakes bread" in sentence and "something" in sentence
        assert sentence.endswith(".") and ".." not in sentence
    assert atomic_sentence("PersonX gives a speech", "xReact", "nervous") == (
        "PersonX gives a speech. PersonX feels nervous."
    )
    assert atomic_sentence("PersonX bakes bread", "xNeed", "to buy flour") == (
        "Before that, PersonX needed to buy flour. PersonX bakes bread."
    )


def test_atomic_unknown_relation_and_empty_parts():
    with pytest.raises(ValueError, match=r"'xFoo'.*xWant"):
        atomic_sentence("PersonX runs", "xFoo", "fast")
    with pytest.raises(ValueError, match="empty tail"):
        atomic_sentence("PersonX runs", "xWant", " . ")


# -- loading scenes ------------------------------------------------------------------------------


def test_builtin_scenes():
    scenes = load_scenes()
    assert scenes == load_scenes("builtin")
    assert len(scenes) >= 50
    assert all(s.source == "builtin" and s.relation in ATOMIC_TEMPLATES for s in scenes)
    assert len({s.id for s in scenes}) == len(scenes)
    assert len({s.relation for s in scenes}) >= 7
    assert scenes[0].text == "PersonX is made aware. Now PersonX wants to find out more."
    gendered = [s for s in scenes if detect_gender(s.text)]
    with_affect = [s for s in scenes if detect_affect(s.text)]
    assert len(gendered) >= 8 and len(with_affect) >= 8
    assert not set(s.id for s in gendered) & set(s.id for s in with_affect)
    assert len(scenes) - len(gendered) - len(with_affect) >= 30
    assert len(load_scenes(limit=5)) == 5 and load_scenes(limit=5) == scenes[:5]


def test_load_scenes_file_formats(tmp_path):
    rows = [
        {"id": "a", "head": "PersonX bakes bread", "relation": "xWant", "tail": "to share it"},
        {"scene": "PersonX waits at the station."},
    ]
    expected_first = Scene("a", "PersonX bakes bread. Now PersonX wants to share it.", "s.jsonl", "xWant")
    second_text = "PersonX waits at the station."

    (tmp_path / "s.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    got = load_scenes(str(tmp_path / "s.jsonl"))
    assert got[0] == expected_first
    assert got[1] == Scene(stable_id("scene", second_text), second_text, "s.jsonl", None)

    (tmp_path / "s.json").write_text(json.dumps(rows), encoding="utf-8")
    assert [s.text for s in load_scenes(str(tmp_path / "s.json"))] == [expected_first.text, second_text]

    (tmp_path / "s.csv").write_text("id,head,relation,tail\na,PersonX bakes bread,xWant,to share it\n")
    assert load_scenes(str(tmp_path / "s.csv")) == [Scene("a", expected_first.text, "s.csv", "xWant")]

    (tmp_path / "s.tsv").write_text("sentence\tother\nPersonX sings.\tx\nPersonX dances.\ty\n")
    assert [s.text for s in load_scenes(str(tmp_path / "s.tsv"))] == ["PersonX sings.", "PersonX dances."]

    (tmp_path / "s.txt").write_text("PersonX sings.\n\n  PersonX dances.  \n")
    txt = load_scenes(str(tmp_path / "s.txt"), limit=1)
    assert txt == [Scene(stable_id("scene", "PersonX sings."), "PersonX sings.", "s.txt")]

    (tmp_path / "custom.jsonl").write_text(json.dumps({"desc": "PersonX naps.", "text": "ignored"}) + "\n")
    assert load_scenes(str(tmp_path / "custom.jsonl"), field="desc")[0].text == "PersonX naps."


@pytest.mark.parametrize(
    ("content", "row", "column", "problem"),
    [
        (
            '{"head": "PersonX runs", "relation": "xWant", "tail": "to win"}\n'
            '{"head": "PersonX runs", "relation": "xWant", "tail": ""}\n',
            2,
            "tail",
            "empty",
        ),
        (
            '{"head": "PersonX runs", "relation": "xWant", "tail": "to win"}\n\n'
            '{"head": "PersonX runs", "relation": "xFoo", "tail": "x"}\n',
            3,
            "relation",
            "unknown",
        ),
        ('{"relation": "xWant", "tail": "to win"}\n', 1, "head", "missing"),
        ('{"scene": "   "}\n', 1, "scene", "empty"),
        ('{"scene": 3}\n', 1, "scene", "string"),
        ('{"other": "x"}\n', 1, "scene", "no text field"),
        ('{"id": "a", "scene": "x"}\n{"id": "a", "scene": "y"}\n', 2, "id", "duplicate id"),
        ('{"scene": "same"}\n{"scene": "same"}\n', 2, "scene", "duplicate scene text"),
        ('{"scene": "ok"}\n{not json\n', 2, "<record>", "invalid JSON"),
    ],
)
def test_load_scenes_bad_rows(tmp_path, content, row, column, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataValidationError) as e:
        load_scenes(str(path))
    assert (e.value.file, e.value.row, e.value.column) == (str(path), row, column)
    assert problem in e.value.problem
    assert str(path) in str(e.value) and f"line {row}" in str(e.value)


def test_load_scenes_csv_errors(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("head,relation,tail\nPersonX runs,xWant,to win\nPersonX walks,,to rest\n")
    with pytest.raises(DataValidationError, match=r"row 2 .*column 'relation'"):
        load_scenes(str(path))
    path.write_text("foo\nbar\n")
    with pytest.raises(DataValidationError, match="header") as e:
        load_scenes(str(path))
    assert e.value.row == "header"


def test_load_scenes_missing_and_unsupported(tmp_path):
    with pytest.raises(SourceUnavailableError, match="nope.jsonl"):
        load_scenes(str(tmp_path / "nope.jsonl"))
    (tmp_path / "s.xml").write_text("<x/>")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_scenes(str(tmp_path / "s.xml"))
    with pytest.raises(ValueError, match="limit"):
        load_scenes(limit=-1)


def test_hf_source_offline(monkeypatch):
    import datasets

    calls = []

    def offline(*args, **kwargs):
        calls.append((args, kwargs))
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(SourceUnavailableError, match=r"hf:allenai/atomic10x.*local file"):
        load_scenes("hf:allenai/atomic10x", split="validation")
    assert calls[-1] == (("allenai/atomic10x", None), {"split": "validation"})
    with pytest.raises(SourceUnavailableError, match=re.escape(DEFAULT_PERSONA_SOURCE)):
        load_personas()
    assert calls[-1] == (("proj-persona/PersonaHub", "persona"), {"split": "train"})
    # a SourceUnavailableError is a FileNotFoundError
    with pytest.raises(FileNotFoundError):
        load_personas()


def test_hf_source_rows(monkeypatch):
    import datasets

    rows = [{"persona": "A baker"}, {"persona": "A pilot"}, {"persona": "A baker"}, {"persona": ""}]
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: rows)
    assert [p.text for p in load_personas(limit=2)] == ["A baker", "A pilot"]
    with pytest.raises(DataValidationError, match=r"record 4, field 'persona'"):
        load_personas()
    scene_rows = [{"head": "PersonX sleeps", "relation": "xEffect", "tail": "wakes up rested"}]
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: scene_rows)
    got = load_scenes("hf:org/scenes:cfg")
    assert got[0].text == "PersonX sleeps. As a result, PersonX wakes up rested."
    assert got[0].source == "hf:org/scenes:cfg"


# -- loading personas ----------------------------------------------------------------------------


def test_load_personas_formats_and_dedup(tmp_path):
    path = tmp_path / "p.jsonl"
    lines = [{"input persona": "A chef"}, {"input persona": "A poet"}, {"input persona": "A chef"}]
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    got = load_personas(str(path))
    assert [p.text for p in got] == ["A chef", "A poet"]
    assert got[0] == Persona(stable_id("persona", "A chef"), "A chef", "p.jsonl")
    (tmp_path / "p.csv").write_text("persona\nA chef\nA poet\n")
    assert load_personas(str(tmp_path / "p.csv")) == [Persona(p.id, p.text, "p.csv") for p in got]
    (tmp_path / "p.txt").write_text("A chef\nA poet\nA chef\n")
    assert [p.id for p in load_personas(str(tmp_path / "p.txt"))] == [p.id for p in got]
    (tmp_path / "p.json").write_text(json.dumps([{"who": "A chef"}]))
    assert load_personas(str(tmp_path / "p.json"), field="who")[0].id == got[0].id
    with pytest.raises(DataValidationError, match=r"record 1, field 'input persona'"):
        load_personas(str(tmp_path / "p.json"))
    path.write_text(
        json.dumps({"input persona": "A chef"}) + "\n" + json.dumps({"input persona": " "}) + "\n"
    )
    with pytest.raises(DataValidationError, match=r"line 2, field 'input persona'.*empty"):
        load_personas(str(path))


@pytest.mark.skipif(not PERSONAHUB_TOOL.is_file(), reason=f"PersonaHub sample not found at {PERSONAHUB_TOOL}")
def test_load_personahub_sample():
    personas = load_personas(str(PERSONAHUB_TOOL))
    n_lines = sum(1 for line in PERSONAHUB_TOOL.open(encoding="utf-8") if line.strip())
    assert 0 < len(personas) <= n_lines
    assert len({p.text for p in personas}) == len(personas)
    assert all(p.text and p.source == "tool.jsonl" and p.id == stable_id("persona", p.text) for p in personas)
    first = json.loads(PERSONAHUB_TOOL.open(encoding="utf-8").readline())["input persona"]
    assert personas[0].text == " ".join(first.split())
    assert load_personas(str(PERSONAHUB_TOOL), limit=10) == personas[:10]
    contexts = sample_seed_contexts(load_scenes(), personas, ["en"], 20, seed=3)
    assert len({c.persona_id for c in contexts}) == 20


# -- sampling ------------------------------------------------------------------------------------


def test_quadrant_balance_and_affect_only_when_absent():
    scenes = load_scenes()
    personas = _personas()
    for seed in range(5):
        for n in (7, 13, 30):
            contexts = sample_seed_contexts(scenes, personas, ["en"], n, seed=seed)
            sampled = [c for c in contexts if c.affective_state is not None]
            counts = Counter(c.affect_quadrant for c in sampled)
            assert sum(counts.values()) == len(sampled)
            assert max(counts.values()) - min(counts.get(q, 0) for q in AFFECTIVE_STATES) <= 1
            for c in contexts:
                original = next(s for s in scenes if s.id == c.scene_id).text
                if c.scene_affect is not None:
                    assert c.affective_state is None and c.affect_quadrant is None
                    assert c.scene == original and c.scene_affect == detect_affect(original)
                else:
                    assert c.affective_state in AFFECTIVE_STATES[c.affect_quadrant]
                    assert c.scene == f"{original} PersonX is {c.affective_state}."


def test_scene_with_own_affect_keeps_its_text():
    scenes = [_scene("PersonX gives a speech. PersonX feels nervous.", 0), _scene("PersonX naps", 1)]
    contexts = sample_seed_contexts(scenes, _personas(), ["en"], 2, seed=0)
    by_id = {c.scene_id: c for c in contexts}
    assert by_id["s0"].scene == "PersonX gives a speech. PersonX feels nervous."
    assert by_id["s0"].scene_affect == "nervous" and by_id["s0"].affective_state is None
    assert by_id["s1"].scene.startswith("PersonX naps. PersonX is ")  # a period is added first
    assert by_id["s1"].scene_affect is None and by_id["s1"].affective_state is not None


def test_gender_only_for_neutral_scenes_and_personas():
    scenes = load_scenes()
    gendered_ids = {s.id for s in scenes if detect_gender(s.text)}
    neutral_count = len(scenes) - len(gendered_ids)
    contexts = sample_seed_contexts(scenes, _personas(), ["en"], neutral_count, seed=1)
    assert not {c.scene_id for c in contexts} & gendered_ids  # gendered scenes excluded by default
    assert all(c.gender in ("female", "male") and c.scene_gender is None for c in contexts)
    assert len({c.gender for c in contexts}) == 2
    with pytest.raises(ValueError, match=f"only {neutral_count} gender-neutral scenes"):
        sample_seed_contexts(scenes, _personas(), ["en"], neutral_count + 1)

    contexts = sample_seed_contexts(scenes, _personas(), ["en"], len(scenes), neutral_scenes_only=False)
    assert {c.scene_id for c in contexts} == {s.id for s in scenes}
    for c in contexts:
        if c.scene_id in gendered_ids:
            assert c.gender is None and c.scene_gender in ("male", "female", "mixed")
        else:
            assert c.gender in ("female", "male") and c.scene_gender is None

    gendered_persona = [Persona("p-his", "A retired farmer who loves his dog", "test")]
    contexts = sample_seed_contexts(scenes, gendered_persona, ["en"], 5, genders=("x",))
    assert all(c.gender is None for c in contexts)
    contexts = sample_seed_contexts(scenes, _personas(), ["en"], 5, genders=("nonbinary",))
    assert all(c.gender == "nonbinary" for c in contexts)


def test_languages_crossing_ids_and_order():
    scenes, personas = load_scenes(), _personas(3)
    contexts = sample_seed_contexts(scenes, personas, ["en", "pt-BR", "zh"], 5, seed=2)
    assert len(contexts) == 15
    assert [c.language for c in contexts] == ["en", "pt-BR", "zh"] * 5
    for i in range(0, 15, 3):
        group = contexts[i : i + 3]
        assert len({(c.scene_id, c.scene, c.persona_id, c.affective_state, c.gender) for c in group}) == 1
    assert len({c.scene_id for c in contexts}) == 5
    # 5 scenes, 3 personas: each persona used before any is reused
    persona_counts = Counter(c.persona_id for c in contexts[::3])
    assert set(persona_counts) == {p.id for p in personas} and max(persona_counts.values()) == 2
    for c in contexts:
        assert isinstance(c, SeedContext)
        assert c.id == stable_id("seed", c.scene_id, c.persona_id, c.affective_state, c.gender, c.language)
        assert c.scene_source == "builtin" and c.persona_source == "test"
        assert SeedContext.from_dict(c.to_dict()) == c
    assert len({c.id for c in contexts}) == 15


def test_determinism_and_seed_sensitivity():
    scenes, personas = load_scenes(), _personas()
    a = sample_seed_contexts(scenes, personas, ["en", "de"], 10, seed=7)
    b = sample_seed_contexts(list(scenes), list(personas), ["en", "de"], 10, seed=7)
    assert a == b and [c.id for c in a] == [c.id for c in b]
    c = sample_seed_contexts(scenes, personas, ["en", "de"], 10, seed=8)
    assert [x.id for x in a] != [x.id for x in c]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"languages": ["EN"]}, "invalid language code 'EN'"),
        ({"languages": ["english"]}, "invalid language code"),
        ({"languages": []}, "languages is empty"),
        ({"languages": "en"}, "not the string"),
        ({"languages": ["en", "en"]}, "duplicate language"),
        ({"n_scenes": 0}, "n_scenes must be a positive integer"),
        ({"personas": []}, "no personas"),
        ({"genders": ()}, "genders"),
    ],
)
def test_sampling_argument_errors(kwargs, match):
    args = {"scenes": load_scenes(), "personas": _personas(), "languages": ["en"], "n_scenes": 3} | kwargs
    with pytest.raises(ValueError, match=match):
        sample_seed_contexts(**args)


def test_seed_summary():
    scenes = load_scenes()
    contexts = sample_seed_contexts(scenes, _personas(), ["en", "fr"], len(scenes), neutral_scenes_only=False)
    summary = seed_summary(contexts)
    json.dumps(summary)  # serialisable for the dataset card
    n_affect = sum(detect_affect(s.text) is not None for s in scenes)
    n_gendered = sum(detect_gender(s.text) is not None for s in scenes)
    assert summary["contexts"] == 2 * len(scenes) and summary["scenes"] == len(scenes)
    assert summary["personas"] == 30 and summary["languages"] == {"en": len(scenes), "fr": len(scenes)}
    assert summary["scenes_with_own_affect"] == n_affect
    assert sum(summary["affect_quadrants"].values()) == len(scenes) - n_affect
    assert set(summary["affect_quadrants"]) == set(AFFECTIVE_STATES)
    assert summary["genders"]["unspecified"] == n_gendered
    assert summary["genders"]["female"] + summary["genders"]["male"] == len(scenes) - n_gendered
    assert summary["scene_genders"]["neutral"] == len(scenes) - n_gendered
    assert seeds.seed_summary([])["contexts"] == 0
