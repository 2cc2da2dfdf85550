"""CPDScore (ComperDial §4, App. B): score parsing, prompts, turn / dialogue scoring through the
request cache with a replay judge, three-level correlations, the evaluate module, and a tiny hf run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from harness.cache import CachedBackend, RequestCache
from tasks.cpdscore.prompts import ALL_PROMPTS, DIALOGUE, DIALOGUE_KEYS, TURN_PROMPTS
from tasks.cpdscore.scoring import (
    CPDScorer,
    correlate_dialogue_levels,
    correlate_levels,
    dialogue_frame,
    group_dialogues,
    parse_score,
    run_cpdscore,
    turn_frame,
)

MODULE = str(Path(__file__).resolve().parents[3] / "tasks" / "cpdscore")
SYSTEMS = ["sysA", "sysB", "sysC", "sysD"]
MALFORMED = "I cannot rate this response."
BAD_TURN = "sysB-d1-0"  # one of three calls malformed
DEAD_TURN = "sysC-d2-1"  # all three calls malformed
BAD_DIALOGUE = ("d2", "sysA")  # one step-2 call without a Final Score


# -- parse_score -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("Score: 4", None, 4.0),
        ("Overall score: 3.5/5", "overall", 3.5),
        ("**4**", None, 4.0),
        (
            "humanness - 5\nfluency - 4\ncoherency - 3\nconsistency - 2\nengagingness - 1\noverall - 3",
            "overall",
            3.0,
        ),
        ("- Humanness: 4\n\nExplanation: natural and on topic.", "humanness", 4.0),
        ("**Humanness**: **2**", "humanness", 2.0),
        ("4", "humanness", 4.0),
        ("4\n\nThe response feels like a person talking.", "humanness", 4.0),
        ("Humanness: 4.5.", "humanness", 4.5),
        ("Rating: 2 out of 5", None, 2.0),
        (
            "Overall Dialogue Turn Score - 3.5\nDialogue Interaction Score - 2\nFinal Score - 3",
            "final score",
            3.0,
        ),
        (
            "Overall Dialogue Turn Score - 3.5\nDialogue Interaction Score - 2\nFinal Score - 3",
            "overall dialogue turn score",
            3.5,
        ),
        (
            "Overall Dialogue Score - 4\nDialogue Interaction Score - 2\nFinal Score - 3.5",
            DIALOGUE_KEYS["intermediate"],
            4.0,
        ),
        # the keyed line wins over other numbers, and the last keyed line over earlier ones
        ("Score: 2\noverall - 5", "overall", 5.0),
        ("overall - 2 ... on reflection, overall - 4", "overall", 4.0),
        # malformed / absent / out of range -> None, never 0
        ("", "overall", None),
        (None, "overall", None),
        (MALFORMED, "overall", None),
        ("overall - x", "overall", None),
        ("overall - 7", "overall", None),
        ("Score: 7", None, None),
        ("0", None, None),
        ("Score: -1", None, None),
        ("4/10", None, None),
        ("Humanness (1-5) Is the response human-like or not?", "humanness", None),
        ("1. Read the conversation, the corresponding fact and the response carefully.", "humanness", None),
        ("humanness - 5\nfluency - 4", "overall", None),  # the asked-for line is missing
    ],
)
def test_parse_score(text, key, expected):
    got = parse_score(text, 1, 5, key=key)
    assert got == expected
    assert got != 0


def test_parse_score_without_fallback_needs_the_key():
    text = "Overall Dialogue Turn Score - 4\nDialogue Interaction Score - 2"
    assert parse_score(text, 1, 5, key="final score", fallback=False) is None
    assert parse_score("Score: 4", 1, 5, key="final score", fallback=False) is None
    assert parse_score("Score: 4", 1, 5, key="final score") == 4.0


# -- fixture data ----------------------------------------------------------------------------------


def _records():
    recs = []
    for si, s in enumerate(SYSTEMS):
        for di, d in enumerate(("d1", "d2")):
            for t in range(2):
                recs.append(
                    {
                        "id": f"{s}-{d}-{t}",
                        "dialogue_id": d,
                        "system": s,
                        "context": [
                            {"role": "user", "text": f"hello from {d}"},
                            {"role": "assistant", "text": f"hi, turn {t} of {d}"},
                            {"role": "user", "text": f"what next in {d} {t}?"},
                        ],
                        "response": f"resp-{s}-{d}-{t}",
                        "reference": f"gold-{d}-{t}",
                        "rating": float(1 + (2 * si + t + di) % 5),
                    }
                )
    return recs


def _turn_outputs(rec_id):
    if rec_id == BAD_TURN:
        return ["humanness - 4\noverall - 4", MALFORMED, "humanness - 5\noverall - 5"]
    if rec_id == DEAD_TURN:
        return [MALFORMED, "overall - 9", "no idea"]
    s, d, t = rec_id.split("-")
    base = 1 + (3 * SYSTEMS.index(s) + int(t) + (d == "d2")) % 5
    vals = [base, min(5, base + 1), base]
    # The same text serves both prompt variants: "humanness" (Detail) and "overall" (Simple) lines.
    return [f"humanness - {v}\nfluency - 3\noverall - {v}" for v in vals]


def _dialogue_outputs(d, s):
    si = SYSTEMS.index(s)
    inter, final = 1 + si, 1 + (si + (d == "d2")) % 5
    texts = [
        f"Overall Dialogue Turn Score - {inter}\nDialogue Interaction Score - 3\nFinal Score - {final}",
        f"Overall Dialogue Turn Score - {inter}\nDialogue Interaction Score - 2\nFinal Score - {final}",
        f"Overall Dialogue Turn Score - {inter}\nDialogue Interaction Score - 4\nFinal Score - {final}",
    ]
    if (d, s) == BAD_DIALOGUE:
        texts[2] = f"Overall Dialogue Turn Score - {inter}\nDialogue Interaction Score - 2\nFinal: unclear"
    return texts


@pytest.fixture
def replay(tmp_path):
    rules = []
    for rec in _records():
        rules.append(
            {
                "match": re.escape(f"### Response:\n{rec['response']}\n"),
                "responses": [{"text": x} for x in _turn_outputs(rec["id"])],
            }
        )
    for d in ("d1", "d2"):
        for s in SYSTEMS:
            rules.append(
                {
                    "match": re.escape(f"### Responses:\nTurn 1: resp-{s}-{d}-0\nTurn 2: resp-{s}-{d}-1\n"),
                    "responses": [{"text": x} for x in _dialogue_outputs(d, s)],
                }
            )
    path = tmp_path / "cpdscore_replay.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rules), encoding="utf-8")
    return path


def _expected_turn(rec_id):
    vals = [parse_score(x, 1, 5, key="overall") for x in _turn_outputs(rec_id)]
    vals = [v for v in vals if v is not None]
    return sum(vals) / len(vals) if vals else None


# -- turn scoring ----------------------------------------------------------------------------------


def test_score_turns_end_to_end_with_malformed_calls(replay, tmp_path):
    recs = _records()
    with CPDScorer(f"replay:{replay}", "simple", True, cache=tmp_path / "c.sqlite") as sc:
        ts = sc.score_turns(recs)
        assert sc.cached.backend.stats.batches == 1  # one generate() call for all items x calls
        assert sc.cached.backend.stats.requests == 3 * len(recs)
    by_id = {t.id: t for t in ts}
    for rec in recs:
        want = _expected_turn(rec["id"])
        assert by_id[rec["id"]].score == (pytest.approx(want) if want is not None else None)
        assert by_id[rec["id"]].human == rec["rating"]
    bad = by_id[BAD_TURN]
    assert bad.score == pytest.approx(4.5)  # mean over the two parsed calls
    assert (bad.n_parsed, bad.parse_failures) == (2, 1)
    assert bad.scores == [4.0, None, 5.0] and bad.raw[1] == MALFORMED
    dead = by_id[DEAD_TURN]
    assert dead.score is None and dead.parse_failures == 3 and dead.raw[1] == "overall - 9"
    assert sum(t.parse_failures for t in ts) == 4
    ok = by_id["sysA-d1-0"]
    assert ok.scores == [1.0, 2.0, 1.0] and ok.score == pytest.approx(4 / 3)


def test_three_calls_are_distinct_seeded_requests_and_rerun_is_cached(replay, tmp_path):
    recs = _records()
    cache = tmp_path / "c.sqlite"
    with CPDScorer(f"replay:{replay}", "detail", False, seed=10, cache=cache) as sc:
        reqs = sc.turn_requests(recs)
        assert [r.config.seed for r in reqs[:3]] == [10, 11, 12]
        assert {r.config.temperature for r in reqs} == {1.0}
        assert len(set(sc.cached.keys(reqs))) == 3 * len(recs)
        first = sc.score_turns(recs)
        assert sc.cached.backend.stats.requests == 3 * len(recs)
    with CPDScorer(f"replay:{replay}", "detail", False, seed=10, cache=cache) as sc2:
        again = sc2.score_turns(recs)
        assert sc2.cached.backend.stats.requests == 0  # every call served from the cache
    assert [t.scores for t in again] == [t.scores for t in first]
    assert all(t.cached == 3 for t in again) and all(t.cached == 0 for t in first)
    # n_calls and temperature are configurable and enter the requests
    with CPDScorer(f"replay:{replay}", "detail", False, n_calls=5, temperature=0.7, cache=cache) as sc3:
        reqs = sc3.turn_requests(recs[:1])
        assert [r.config.seed for r in reqs] == [0, 1, 2, 3, 4] and reqs[0].config.temperature == 0.7


def test_prompts_hold_the_reference_only_with_reference(replay, tmp_path):
    rec = _records()[0]
    cache = RequestCache(tmp_path / "c.sqlite")
    for variant in ("simple", "detail"):
        with_ref = CPDScorer(f"replay:{replay}", variant, True, cache=cache).turn_prompt(rec)
        without = CPDScorer(f"replay:{replay}", variant, False, cache=cache).turn_prompt(rec)
        assert rec["reference"] in with_ref and "Reference" in with_ref
        assert rec["reference"] not in without and "reference" not in without.lower()
        for p in (with_ref, without):
            assert rec["response"] in p and "Person A: hello from d1" in p and "Person B: hi, turn 0" in p
    assert "rate the possible response" in TURN_PROMPTS[("detail", False)].template  # B.2.3 wording
    assert "rate the possible response" not in TURN_PROMPTS[("detail", True)].template  # B.2.2 wording
    assert len({p.sha256 for p in ALL_PROMPTS.values()}) == len(ALL_PROMPTS)
    assert all(p.source.startswith("ComperDial") for p in ALL_PROMPTS.values())
    no_ref = {**rec, "id": "turn-without-gold", "reference": None}
    with pytest.raises(ValueError, match="turn-without-gold"):
        CPDScorer(f"replay:{replay}", "detail", True, cache=cache).score_turns([no_ref])
    assert CPDScorer(f"replay:{replay}", "detail", False, cache=cache).turn_prompt(no_ref)


# -- correlations ----------------------------------------------------------------------------------


def _scipy3(x, y):
    return {
        "pearson": stats.pearsonr(x, y).statistic,
        "spearman": stats.spearmanr(x, y).statistic,
        "kendall": stats.kendalltau(x, y).statistic,
    }


def test_three_level_correlations_match_scipy_on_hand_computed_means(replay, tmp_path):
    recs = _records()
    with CPDScorer(f"replay:{replay}", "simple", False, cache=tmp_path / "c.sqlite") as sc:
        ts = sc.score_turns(recs)
    got = correlate_levels(turn_frame(ts))
    judge = {r["id"]: _expected_turn(r["id"]) for r in recs}
    # turn level: parse failures excluded
    pairs = [(judge[r["id"]], r["rating"]) for r in recs if judge[r["id"]] is not None]
    want = _scipy3(*zip(*pairs, strict=True))
    assert got["turn"]["pearson"]["n"] == len(recs) - 1
    # system level (footnote 9): mean of the system's turn scores vs mean of its turn ratings
    sys_j, sys_h = [], []
    for s in sorted(SYSTEMS):
        js = [judge[r["id"]] for r in recs if r["system"] == s and judge[r["id"]] is not None]
        hs = [r["rating"] for r in recs if r["system"] == s]
        sys_j.append(sum(js) / len(js))
        sys_h.append(sum(hs) / len(hs))
    want_sys = _scipy3(sys_j, sys_h)
    # dialogue level: per (system, dialogue)
    dj, dh = [], []
    for s in sorted(SYSTEMS):
        for d in ("d1", "d2"):
            rows = [r for r in recs if r["system"] == s and r["dialogue_id"] == d]
            js = [judge[r["id"]] for r in rows if judge[r["id"]] is not None]
            dj.append(np.mean(js))
            dh.append(np.mean([r["rating"] for r in rows]))
    want_dial = _scipy3(dj, dh)
    for m in ("pearson", "spearman", "kendall"):
        assert got["turn"][m]["value"] == pytest.approx(want[m], abs=1e-12)
        assert got["system"][m]["value"] == pytest.approx(want_sys[m], abs=1e-12)
        assert got["dialogue"][m]["value"] == pytest.approx(want_dial[m], abs=1e-12)
        assert got["system"][m]["n"] == 4 and got["dialogue"][m]["n"] == 8
        assert got["system"][m]["p_value"] is not None
    assert got["system"]["pearson"]["p_value"] == pytest.approx(stats.pearsonr(sys_j, sys_h).pvalue)


# -- CPDS-Dialogue ---------------------------------------------------------------------------------


def test_score_dialogues_two_steps(replay, tmp_path):
    recs = _records()
    sc = CPDScorer(f"replay:{replay}", "simple", True, cache=tmp_path / "c.sqlite")
    seen = []
    orig = sc.cached.generate

    def spy(requests, on_result=None):
        seen.append(list(requests))
        return orig(requests, on_result)

    sc.cached.generate = spy
    ratings = {
        (d, s): float(1 + (i % 5)) for i, (d, s) in enumerate((d, s) for d in ("d1", "d2") for s in SYSTEMS)
    }
    ds = sc.score_dialogues(group_dialogues(recs, ratings))
    sc.close()
    assert len(seen) == 2  # step 1 (all turns) and step 2 (all dialogues), one call each
    assert len(seen[0]) == 3 * len(recs) and len(seen[1]) == 3 * 8
    assert [r.config.seed for r in seen[1][:3]] == [0, 1, 2]
    by_key = {(d.dialogue_id, d.system): d for d in ds}
    # step-1 turn results are written into the step-2 prompt
    prompt = seen[1][3 * list(by_key).index(("d1", "sysB"))].messages[0].content
    assert "### Dialogue Turn Scores:\nTurn 1 Score - 4.5\nTurn 2 Score - " in prompt
    assert "Turn 1: resp-sysB-d1-0\nTurn 2: resp-sysB-d1-1" in prompt
    assert prompt.startswith(DIALOGUE.template.split("{")[0])
    dead = by_key[("d2", "sysC")]
    assert dead.turns[1].score is None
    assert "Turn 2 Score - N/A" in seen[1][3 * list(by_key).index(("d2", "sysC"))].messages[0].content
    for (d, s), dsc in by_key.items():
        si = SYSTEMS.index(s)
        assert dsc.human == ratings[(d, s)]
        assert dsc.score == 1 + (si + (d == "d2")) % 5
        assert dsc.intermediate == 1 + si
        assert dsc.adjustment == pytest.approx(dsc.score - dsc.intermediate)
        assert dsc.turn_mean == pytest.approx(np.mean([t.score for t in dsc.turns if t.score is not None]))
    bad = by_key[BAD_DIALOGUE]
    assert (bad.n_parsed, bad.parse_failures) == (2, 1) and "unclear" in bad.raw[2]
    assert bad.interactions == [3.0, 2.0, 2.0] and bad.interaction == pytest.approx(7 / 3)
    got = correlate_dialogue_levels(dialogue_frame(ds))
    sys_j = [np.mean([by_key[(d, s)].score for d in ("d1", "d2")]) for s in sorted(SYSTEMS)]
    sys_h = [np.mean([ratings[(d, s)] for d in ("d1", "d2")]) for s in sorted(SYSTEMS)]
    assert got["system"]["spearman"]["value"] == pytest.approx(stats.spearmanr(sys_j, sys_h).statistic)
    assert got["dialogue"]["pearson"]["n"] == 8
    with pytest.raises(ValueError, match="turn records"):
        CPDScorer(f"replay:{replay}", "simple", cache=tmp_path / "c.sqlite").score_dialogues(
            [{"turns": [{"role": "user", "text": "hi"}]}]
        )


def test_run_cpdscore_results_dict(replay, tmp_path):
    res = run_cpdscore(_records(), f"replay:{replay}", cache=tmp_path / "c.sqlite")
    json.dumps(res)  # results.json-ready
    assert set(res["results"]) == {
        "cpds-s-ref",
        "cpds-s-noref",
        "cpds-d-ref",
        "cpds-d-noref",
        "cpds-dial[cpds-s-ref]",
        "cpds-dial[cpds-s-noref]",
        "cpds-dial[cpds-d-ref]",
        "cpds-dial[cpds-d-noref]",
    }
    s = res["results"]["cpds-s-ref"]
    assert set(s) >= {"turn", "dialogue", "system", "parse_failures", "prompt_sha256"}
    assert set(s["system"]) == {"pearson", "spearman", "kendall"}
    assert s["parse_failures"] == 4 and s["unscored_items"] == 1
    assert s["prompt_sha256"] == TURN_PROMPTS[("simple", True)].sha256
    dial = res["results"]["cpds-dial[cpds-d-noref]"]
    assert dial["parse_failures"] == 1 and dial["prompt_sha256"] == DIALOGUE.sha256
    assert set(dial["intermediate"]) == {"dialogue", "system"}
    assert res["seeds"] == [0, 1, 2] and res["decoding"]["temperature"] == 1.0
    assert res["prompts"]["cpds-dialogue"]["sha256"] == DIALOGUE.sha256


# -- a real (tiny, random) model through the hf backend ----------------------------------------------


def test_cpds_simple_on_tiny_hf_model(tiny_llama, tmp_path):
    recs = _records()[:3]
    spec = f"hf:{tiny_llama},device=cpu"
    with CPDScorer(spec, "simple", False, max_tokens=6, cache=tmp_path / "c.sqlite") as sc:
        ts = sc.score_turns(recs)
        assert sc.cached.backend.stats.requests == 9
    assert len(ts) == 3
    for t in ts:
        assert len(t.raw) == 3 and t.n_parsed + t.parse_failures == 3
        assert (t.score is None) == (t.n_parsed == 0)
        assert all(s is None or 1 <= s <= 5 for s in t.scores)
    assert sum(t.parse_failures for t in ts) == sum(s is None for t in ts for s in t.scores)


# -- the evaluate module ---------------------------------------------------------------------------


def test_evaluate_module_matches_library(replay, tmp_path):
    import evaluate

    recs = _records()
    metric = evaluate.load(MODULE)
    out = metric.compute(
        contexts=[[m["text"] for m in r["context"]] for r in recs],
        responses=[r["response"] for r in recs],
        references=[r["reference"] for r in recs],
        systems=[r["system"] for r in recs],
        dialogue_ids=[r["dialogue_id"] for r in recs],
        human_scores=[r["rating"] for r in recs],
        judge=f"replay:{replay}",
        variant="detail",
        with_reference=True,
        cache_path=str(tmp_path / "module.sqlite"),
    )
    backend_cache = RequestCache(tmp_path / "lib.sqlite")
    from harness.backends.base import create_backend
    from harness.spec import parse_spec

    cached = CachedBackend(create_backend(parse_spec(f"replay:{replay}")), backend_cache)
    ts = CPDScorer(cached, "detail", True).score_turns(recs)
    assert out["scores"] == pytest.approx([t.score for t in ts], abs=1e-12)
    assert out["n_parsed"] == [t.n_parsed for t in ts]
    assert out["parse_failures"] == sum(t.parse_failures for t in ts) == 4
    lib = correlate_levels(turn_frame(ts))
    for level in ("turn", "dialogue", "system"):
        for m in ("pearson", "spearman", "kendall"):
            assert out[level][m]["value"] == pytest.approx(lib[level][m]["value"], abs=1e-12)
            assert out[level][m]["n"] == lib[level][m]["n"]
    assert out["prompt_sha256"] == TURN_PROMPTS[("detail", True)].sha256
