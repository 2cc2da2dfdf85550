"""Dialogue sources and the xDial-Eval §4 / App. C.1 self-supervised pairs (finetune.data)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from finetune.data import (
    SourceDialogue,
    coherence_pairs,
    load_dialogues,
    norm_text,
    relevance_pairs,
)
from harness.data.schema import DataValidationError

SHARED_DATA = Path(
    os.environ.get("DIALEVAL_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)
TOPICAL_CHAT = SHARED_DATA / "topical-chat"
needs_topical_chat = pytest.mark.skipif(
    not (TOPICAL_CHAT / "valid_freq.json").exists(), reason=f"Topical-Chat not found at {TOPICAL_CHAT}"
)


def dlg(did: str, turns: list[str], language: str = "en") -> SourceDialogue:
    roles = ["user" if i % 2 == 0 else "assistant" for i in range(len(turns))]
    return SourceDialogue(did, language, list(turns), roles, "test")


def corpus() -> list[SourceDialogue]:
    """Awkward on purpose: repeated utterances (also across dialogues), two-utterance dialogues, a
    language with a single dialogue, another language with two."""
    return [
        dlg("en1", ["Hi there!", "Hello, how are you?", "Fine, thanks.", "ok", "OK", "Bye."]),
        dlg("en2", ["ok", "Do you like jazz?", "I love it.", "Me too!", "hi there!"]),
        dlg("en3", ["Where do you live?", "In Lisbon."]),
        dlg("en4", ["Same.", "same", "Different."]),
        dlg("en5", ["What did you eat?", "Pasta with tomato.", "Sounds good.", "It was.", "Bye."]),
        dlg("de1", ["Hallo!", "Wie geht's?", "Gut, danke.", "Schön."], "de"),
        dlg("de2", ["Was machst du?", "Ich lese.", "Was denn?"], "de"),
        dlg("fr1", ["Bonjour.", "Salut, ça va ?", "Oui, et toi ?"], "fr"),  # alone in French
    ]


def by_id(dialogues):
    return {d.id: d for d in dialogues}


# -- relevance pairs (turn level, PoE) ---------------------------------------------------------------


def check_relevance(examples, dialogues, max_context=4):
    ds = by_id(dialogues)
    pos = {}
    for e in examples:
        assert e.level == "turn" and e.turns is None
        d = ds[e.source_id]
        i = e.meta["position"]
        assert e.language == d.language
        assert e.context == d.turns[max(0, i - max_context) : i] and len(e.context) >= 1
        assert e.roles == [*d.roles[max(0, i - max_context) : i], d.roles[i]]
        if e.label == 1:
            assert e.kind == "positive" and e.response == d.turns[i]
            pos[(e.source_id, i)] = e
            continue
        assert e.label == 0 and e.kind in ("random", "hard")
        # never the positive: neither its position nor its text
        assert norm_text(e.response) != norm_text(d.turns[i])
        src = ds[e.meta["from_dialogue"]]
        assert src.turns[e.meta["from_position"]] == e.response
        assert src.language == d.language
        if e.kind == "hard":
            assert src.id == d.id and e.meta["from_position"] != i
        else:
            assert src.id != d.id
    # every negative belongs to a positive of the same position
    for e in examples:
        if e.label == 0:
            assert (e.source_id, e.meta["position"]) in pos


@pytest.mark.parametrize("npp", [1, 2, 3])
def test_relevance_negatives_never_the_positive_over_many_seeds(npp):
    dialogues = corpus()
    for seed in range(150):
        ex = relevance_pairs(dialogues, seed=seed, negatives_per_positive=npp)
        check_relevance(ex, dialogues)
        labels = Counter(e.label for e in ex)
        assert labels[1] == labels[0] > 0  # balanced
        for lang in ("en", "de", "fr"):
            per = Counter(e.label for e in ex if e.language == lang)
            assert per[1] == per[0], lang
        # a positive's negatives are distinct texts
        negs: dict[tuple[str, int], list[str]] = {}
        for e in ex:
            if e.label == 0:
                negs.setdefault((e.source_id, e.meta["position"]), []).append(norm_text(e.response))
        assert all(len(v) == len(set(v)) for v in negs.values())


def test_relevance_balance_pairs_and_counts():
    dialogues = corpus()
    ex = relevance_pairs(dialogues, seed=3, negatives_per_positive=2)
    rep = ex.report
    assert rep.positives == rep.negatives == len(ex) // 2
    # with balance, each negative has its own positive copy with the same pair number
    pairs = Counter((e.source_id, e.meta["position"], e.meta["pair"], e.label) for e in ex)
    assert all(n == 1 for n in pairs.values())
    for (sid, i, k, label), _ in pairs.items():
        assert (sid, i, k, 1 - label) in pairs
    positions = sum(len(d.turns) - 1 for d in dialogues)
    assert rep.unique_positives + rep.positives_dropped == positions
    assert sum(rep.by_kind.values()) == len(ex)
    ex[0].context.append("mutated")  # examples share no mutable state
    assert all("mutated" not in e.context for e in ex[1:]) and "mutated" not in dialogues[0].turns
    unbalanced = relevance_pairs(dialogues, seed=3, negatives_per_positive=2, balance=False)
    assert Counter(e.label for e in unbalanced)[1] == rep.unique_positives


def test_relevance_hard_ratio_and_context_window():
    dialogues = corpus()
    ex = relevance_pairs(dialogues, seed=1, hard_negative_ratio=1.0, max_context=2)
    check_relevance(ex, dialogues, max_context=2)
    assert all(len(e.context) <= 2 for e in ex)
    kinds = Counter(e.kind for e in ex if e.label == 0)
    assert set(kinds) <= {"hard", "random"} and kinds["hard"] > 0
    # hard wanted everywhere: random only where the dialogue has no other text (en3 pos 1 -> "Where..."
    # is a valid hard negative, en4 "same" vs "Same." is not)
    assert sum(ex.report.fallbacks.values()) == kinds["random"]
    only_random = relevance_pairs(dialogues, seed=1, hard_negative_ratio=0.0)
    # random wanted everywhere: French has a single dialogue, so its 2 negatives fall back to hard
    assert {e.kind for e in only_random if e.label == 0 and e.language != "fr"} == {"random"}
    assert {e.kind for e in only_random if e.label == 0 and e.language == "fr"} == {"hard"}
    assert only_random.report.fallbacks == {"random->hard": 2}
    big = [dlg(f"d{i}", [f"utterance {i}-{j}" for j in range(6)]) for i in range(40)]
    mixed = relevance_pairs(big, seed=0, hard_negative_ratio=0.25)
    k = Counter(e.kind for e in mixed if e.label == 0)
    assert k["hard"] == round(200 * 0.25) and k["random"] == 150 and not mixed.report.fallbacks


def test_relevance_no_possible_negative_is_dropped_and_counted():
    # French alone: only hard negatives; "Same"/"same" cannot be a negative of each other
    dialogues = [dlg("a", ["Same.", "same"], "it"), dlg("b", ["Uno.", "Due."], "es")]
    ex = relevance_pairs(dialogues, seed=0)
    rep = ex.report
    assert [e.source_id for e in ex if e.label == 1] == ["b"]
    assert rep.positives_dropped == 1 and rep.unfilled_negatives == 1
    assert rep.positives == rep.negatives == 1
    (neg,) = [e for e in ex if e.label == 0]
    assert neg.kind == "hard" and neg.response == "Uno."  # the only candidate, and it is in the context


def test_relevance_deterministic_and_seed_sensitive():
    dialogues = corpus()
    a = relevance_pairs(dialogues, seed=7)
    b = relevance_pairs(list(dialogues), seed=7)
    c = relevance_pairs(dialogues, seed=8)
    assert a == b
    assert [e.response for e in a] != [e.response for e in c]
    # per-language streams: adding a language leaves the others untouched
    more = relevance_pairs([*dialogues, dlg("ja1", ["こんにちは", "元気?", "元気です"], "ja")], seed=7)
    assert [e for e in more if e.language != "ja"] == list(a)


def test_relevance_rejects_bad_parameters_and_duplicate_ids():
    with pytest.raises(ValueError, match="negatives_per_positive"):
        relevance_pairs(corpus(), seed=0, negatives_per_positive=0)
    with pytest.raises(ValueError, match="hard_negative_ratio"):
        relevance_pairs(corpus(), seed=0, hard_negative_ratio=1.5)
    with pytest.raises(ValueError, match="duplicate dialogue id"):
        relevance_pairs([dlg("x", ["a", "b"]), dlg("x", ["c", "d"])], seed=0)


# -- coherence pairs (dialogue level, FineD-Eval) -------------------------------------------------


def check_coherence(examples, dialogues, max_fraction=0.5):
    ds = by_id(dialogues)
    for e in examples:
        d = ds[e.source_id]
        assert e.level == "dialogue" and e.context == [] and e.response is None
        assert e.language == d.language and e.roles == d.roles and len(e.turns) == len(d.turns)
        if e.label == 1:
            assert e.kind == "positive" and e.turns == d.turns
            continue
        assert e.label == 0
        keys = [norm_text(t) for t in e.turns]
        assert keys != [norm_text(t) for t in d.turns]  # never the positive
        if e.kind == "shuffle":
            perm = e.meta["permutation"]
            assert sorted(perm) == list(range(len(d.turns))) and perm != list(range(len(d.turns)))
            assert e.turns == [d.turns[p] for p in perm]
            if len(d.turns) == 2:
                assert e.turns == d.turns[::-1]
        else:
            assert e.kind == "replace"
            replaced = e.meta["replaced"]
            assert 1 <= len(replaced) <= max(1, int(len(d.turns) * max_fraction))
            positions = {r["position"] for r in replaced}
            own = {norm_text(t) for t in d.turns}
            for r in replaced:
                src = ds[r["from_dialogue"]]
                assert src.id != d.id and src.language == d.language
                assert e.turns[r["position"]] == src.turns[r["from_position"]]
                assert norm_text(e.turns[r["position"]]) not in own
            assert all(e.turns[p] == d.turns[p] for p in range(len(d.turns)) if p not in positions)


@pytest.mark.parametrize("npp", [1, 3])
def test_coherence_negatives_over_many_seeds(npp):
    dialogues = corpus()
    for seed in range(150):
        ex = coherence_pairs(dialogues, seed=seed, negatives_per_positive=npp)
        check_coherence(ex, dialogues)
        labels = Counter(e.label for e in ex)
        assert labels[1] == labels[0] == len(dialogues) * npp
        # French has one dialogue: never a replacement (nothing else in French), always a shuffle
        assert {e.kind for e in ex if e.language == "fr" and e.label == 0} == {"shuffle"}


def test_coherence_shuffle_and_replace_shares_and_fallback():
    dialogues = [dlg(f"d{i}", [f"line {i}.{j}" for j in range(2 + i % 5)]) for i in range(30)]
    ex = coherence_pairs(dialogues, seed=0, shuffle_ratio=0.3)
    check_coherence(ex, dialogues)
    kinds = Counter(e.kind for e in ex if e.label == 0)
    assert kinds == {"shuffle": 9, "replace": 21}
    assert not ex.report.fallbacks
    alone = coherence_pairs([dlg("x", ["a", "b", "c"], "ko")], seed=0, shuffle_ratio=0.0)
    assert [e.kind for e in alone if e.label == 0] == ["shuffle"]
    assert alone.report.fallbacks == {"replace->shuffle": 1}
    only_same = coherence_pairs([dlg("x", ["same", "Same"], "ko"), dlg("y", ["a", "b"], "pt")], seed=0)
    assert only_same.report.positives_dropped == 1 and {e.source_id for e in only_same} == {"y"}


def test_coherence_two_utterances_swap_and_determinism():
    dialogues = [dlg("a", ["x?", "y."]), dlg("b", ["p?", "q."]), dlg("c", ["r?", "s."])]
    ex = coherence_pairs(dialogues, seed=0, shuffle_ratio=1.0)
    for e in ex:
        if e.label == 0:
            assert e.kind == "shuffle" and e.meta["permutation"] == [1, 0]
    big = corpus()
    assert coherence_pairs(big, seed=5) == coherence_pairs(big, seed=5)
    runs = {json.dumps([e.to_dict() for e in coherence_pairs(big, seed=s)]) for s in range(5)}
    assert len(runs) > 1


def test_dialogues_too_short_for_pairs_are_counted():
    dialogues = [dlg("a", ["only one"]), dlg("b", ["x", "y"]), dlg("c", ["u", "v"])]
    for fn in (relevance_pairs, coherence_pairs):
        ex = fn(dialogues, seed=0)
        assert ex.report.skipped_short == 1 and ex.report.skipped_ids == ["a"]
        assert "a" not in {e.source_id for e in ex}


# -- sources -----------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", "utf-8")
    return path


def test_jsonl_source_counts_bad_data(tmp_path):
    src = write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"id": "a", "language": "en", "turns": ["Hi", "  ", "Hello", "", "How are you?"]},
            {
                "id": "b",
                "language": "zh",
                "turns": [{"role": "user", "text": "你好"}, {"role": "assistant", "text": "你好!"}],
            },
            {"id": "c", "language": "en", "turns": ["only one"]},
            {"id": "d", "language": "en", "turns": ["one", "   "]},
            {"id": "e", "language": "pt-BR", "turns": []},
            "",
            {"id": 7, "language": "de", "turns": ["Hallo", "Hi", None]},
        ],
    )
    ds = load_dialogues(src)
    rep = ds.report
    assert [d.id for d in ds] == ["a", "b", "7"]
    # roles are given by the position in the source (dropping an empty turn does not re-attribute)
    assert ds[0].turns == ["Hi", "Hello", "How are you?"] and ds[0].roles == ["user", "user", "user"]
    assert ds[1].roles == ["user", "assistant"] and ds[1].language == "zh"
    assert (rep.read, rep.kept, rep.skipped_one_turn, rep.empty_utterances_dropped) == (6, 3, 3, 4)
    assert rep.skipped_ids["one_turn"] == ["c", "d", "e"]
    assert rep.empty_utterances_by_dialogue == {"a": 2, "d": 1, "7": 1}
    assert rep.languages == {"de": 1, "en": 1, "zh": 1} and rep.utterances_kept == 7
    assert rep.files[0]["sha256"] and "skipped 3" in rep.summary()
    assert load_dialogues(f"jsonl:{src}", language="en").report.skipped_ids["language"] == ["b", "e", "7"]
    limited = load_dialogues(src, limit=2)
    assert [d.id for d in limited] == ["a", "b"] and limited.report.limit_reached


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        ({"id": "x1", "language": "xx", "turns": ["a", "b"]}, "language", "unknown language code 'xx'"),
        ({"id": "x2", "language": "English", "turns": ["a", "b"]}, "language", "not an ISO 639"),
        ({"id": "x3", "turns": ["a", "b"]}, "language", "missing language"),
        (
            {"id": "x4", "language": "en", "turns": [{"role": "bot", "text": "a"}]},
            "turns.0.role",
            "unknown role",
        ),
        ({"id": "x5", "language": "en", "turns": ["a", {"role": "user", "text": "b"}]}, "turns", "mixes"),
        ({"language": "en", "turns": ["a", "b"]}, "id", "missing dialogue id"),
    ],
)
def test_jsonl_source_errors_name_file_and_dialogue(tmp_path, row, field, problem):
    src = write_jsonl(tmp_path / "bad.jsonl", [{"id": "ok", "language": "en", "turns": ["a", "b"]}, row])
    with pytest.raises(DataValidationError) as ei:
        load_dialogues(src)
    msg = str(ei.value)
    assert "bad.jsonl" in msg and f"'{field}'" in msg and problem in msg
    if "id" in row:
        assert repr(row["id"]) in msg


def test_jsonl_duplicate_ids_and_bad_json(tmp_path):
    src = write_jsonl(tmp_path / "dup.jsonl", [{"id": "a", "language": "en", "turns": ["x", "y"]}] * 2)
    with pytest.raises(DataValidationError, match="duplicate dialogue id"):
        load_dialogues(src)
    src = write_jsonl(
        tmp_path / "broken.jsonl", ['{"id": "a", "language": "en", "turns": ["x", "y"]}', "{oops"]
    )
    with pytest.raises(DataValidationError, match=r"broken\.jsonl, line 2"):
        load_dialogues(src)
    with pytest.raises(ValueError, match="language="):
        load_dialogues(src, language="zz")
    with pytest.raises(FileNotFoundError):
        load_dialogues(tmp_path / "nowhere")


def test_topical_chat_layout_bad_data(tmp_path):
    conv = {
        "t_1": {
            "content": [
                {"message": "Hi!", "agent": "agent_1"},
                {"message": " ", "agent": "agent_2"},
                {"message": "Do you like football?", "agent": "agent_1"},
                {"message": "Yes.", "agent": "agent_2"},
            ]
        },
        "t_2": {"content": [{"message": "Anyone?", "agent": "agent_2"}]},
        "t_3": {"content": [{"message": "A", "agent": "agent_2"}, {"message": "B", "agent": "agent_1"}]},
    }
    (tmp_path / "tc").mkdir()
    (tmp_path / "tc" / "valid_freq.json").write_text(json.dumps(conv), "utf-8")
    ds = load_dialogues(f"topical-chat:{tmp_path / 'tc'}")
    assert [d.id for d in ds] == ["t_1", "t_3"]
    assert ds[0].turns == ["Hi!", "Do you like football?", "Yes."]
    assert ds[0].roles == ["user", "user", "assistant"]  # roles follow the agent, not the position
    assert ds[1].roles == ["user", "assistant"] and ds[1].origin == "topical-chat:valid_freq.json"
    rep = ds.report
    assert (rep.read, rep.kept, rep.skipped_one_turn, rep.empty_utterances_dropped) == (3, 2, 1, 1)
    assert rep.license == "cdla-sharing-1.0"
    conv["t_4"] = {
        "content": [
            {"message": "x", "agent": "agent_1"},
            {"message": "y", "agent": "agent_3"},
            {"message": "z", "agent": "agent_2"},
        ]
    }
    (tmp_path / "tc" / "valid_freq.json").write_text(json.dumps(conv), "utf-8")
    with pytest.raises(DataValidationError, match=r"valid_freq\.json, dialogue 't_4'.*third speaker"):
        load_dialogues(f"topical-chat:{tmp_path / 'tc' / 'valid_freq.json'}")


@pytest.mark.shared_data
@needs_topical_chat
def test_topical_chat_real_files_counts():
    freq = load_dialogues(f"topical-chat:{TOPICAL_CHAT / 'valid_freq.json'}")
    rep = freq.report
    assert rep.read == rep.kept == 539 and rep.skipped_one_turn == 0 and rep.empty_utterances_dropped == 0
    assert rep.utterances_kept == 11681 and rep.languages == {"en": 539}
    assert all(d.language == "en" and len(d.turns) >= 20 and d.roles[0] == "user" for d in freq)
    assert all(r1 != r2 for d in freq for r1, r2 in zip(d.roles, d.roles[1:], strict=False))  # alternate
    both = load_dialogues(f"topical-chat:{TOPICAL_CHAT}")
    names = [Path(f["path"]).name for f in both.report.files]
    assert names == sorted(names) and {"valid_freq.json", "valid_rare.json"} <= set(names)
    assert both.report.kept >= 1078
    small = load_dialogues(f"topical-chat:{TOPICAL_CHAT}", limit=25)
    assert len(small) == 25 and small.report.limit_reached
    assert len(load_dialogues(f"topical-chat:{TOPICAL_CHAT}", language="de")) == 0
    ex = relevance_pairs(small, seed=0)
    check_relevance(ex, small)
    assert ex.report.positives == ex.report.negatives == sum(len(d.turns) - 1 for d in small)
    co = coherence_pairs(small, seed=0)
    check_coherence(co, small)
    assert co.report.positives == co.report.negatives == 25


def test_dataset_directory_and_registry_sources(tmp_path):
    from dataset_builders.demo import DemoBuilder
    from harness.data.registry import DatasetRegistry

    out = tmp_path / "demo"
    DemoBuilder().build(None, out, show_progress=False)
    hf = tmp_path / "hf"
    ds = load_dialogues(f"{out}:demo-dial", cache_dir=hf)
    assert len(ds) > 0 and ds.report.kept == len(ds)
    assert all(set(d.roles) <= {"user", "assistant"} and len(d.turns) >= 2 for d in ds)
    assert ds[0].origin == f"{out}:demo-dial"
    assert [d.id for d in load_dialogues(str(out), cache_dir=hf)] == [
        d.id for d in ds
    ]  # single dialogue config
    with pytest.raises(ValueError, match="turn-level"):
        load_dialogues(f"{out}:demo-turn", cache_dir=hf)
    reg = DatasetRegistry(tmp_path / "registry")
    reg.register(
        "demo",
        "1.0.0",
        lambda staging, rel: DemoBuilder().build(None, staging, release=rel, show_progress=False),
    )
    via_ref = load_dialogues("demo@1.0.0:demo-dial", registry=reg.root, cache_dir=hf)
    assert [d.turns for d in via_ref] == [d.turns for d in ds]
    assert via_ref[0].origin == "demo@1.0.0:demo-dial"
    assert via_ref.report.files[0]["release"]["version"] == "1.0.0"
    with pytest.raises(FileNotFoundError, match="neither"):
        load_dialogues("nope@1.0.0:demo-dial", registry=reg.root)
