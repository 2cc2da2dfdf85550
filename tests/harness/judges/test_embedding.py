import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from harness.cache import RequestCache
from harness.judges import load_judge
from harness.tasks import get_task

TURN = get_task("demo-turn")
DIAL = get_task("demo-dialogue")


def _turn(ctx, resp, lang="en"):
    roles = ["user" if (len(ctx) - 1 - k) % 2 == 0 else "assistant" for k in range(len(ctx))]
    return {
        "language": lang,
        "context": [{"role": r, "text": t} for r, t in zip(roles, ctx, strict=True)],
        "response": resp,
    }


@pytest.fixture(scope="module")
def encoder(minilm_path):
    return SentenceTransformer(str(minilm_path))


def test_scores_equal_manual_cosines_and_cache(tmp_path, encoder):
    items = [
        _turn(
            ["I adopted a puppy.", "How old is it?", "Ten weeks, and very playful."],
            "Puppies that age need lots of naps!",
        ),
        _turn(["What did you cook tonight?"], "The train to Berlin leaves at nine."),
    ]
    cache = RequestCache(tmp_path / "c.sqlite")
    j = load_judge("embed:minilm", cache)
    v = j.score(TURN, items)
    e = encoder.encode(
        [
            items[0]["context"][-1]["text"],
            items[0]["response"],
            items[1]["context"][-1]["text"],
            items[1]["response"],
        ],
        normalize_embeddings=True,
    )
    assert v[0].score == pytest.approx(float(e[0] @ e[1]), abs=1e-5)
    assert v[1].score == pytest.approx(float(e[2] @ e[3]), abs=1e-5)
    assert v[0].score > v[1].score
    assert j.backend_stats()["requests"] == 4 and not v[0].cached
    # whole context, when asked for
    full = load_judge("embed:minilm,context_turns=all", cache).score(TURN, items[:1])[0]
    ctx = encoder.encode(
        ["\n".join(t["text"] for t in items[0]["context"]), items[0]["response"]], normalize_embeddings=True
    )
    assert full.score == pytest.approx(float(ctx[0] @ ctx[1]), abs=1e-5)
    # a second judge over the same cache encodes nothing
    j2 = load_judge("embed:minilm", cache)
    again = j2.score(TURN, items)
    assert j2.backend_stats()["requests"] == 0 and all(x.cached for x in again)
    assert [x.score for x in again] == pytest.approx([x.score for x in v], abs=1e-7)


def test_dialogue_adjacent_cosine(tmp_path, encoder):
    turns = ["Do you like jazz?", "Yes, especially Coltrane.", "Which album?", "A Love Supreme."]
    item = {
        "language": "en",
        "turns": [{"role": "user" if k % 2 == 0 else "assistant", "text": t} for k, t in enumerate(turns)],
    }
    v = load_judge("embed:minilm", RequestCache(enabled=False)).score(
        DIAL, [item, {"language": "en", "turns": item["turns"][:1]}]
    )
    e = encoder.encode(turns, normalize_embeddings=True)
    assert v[0].score == pytest.approx(np.mean([e[k] @ e[k + 1] for k in range(3)]), abs=1e-5)
    assert v[1].score is None and v[1].status == "invalid_item"


@pytest.mark.parametrize(
    "spec, match",
    [("embed:minilm,temperature=0", "unsupported"), ("embed:minilm,context_turns=-2", "context_turns")],
)
def test_bad_options(spec, match):
    with pytest.raises(ValueError, match=match):
        load_judge(spec)


def test_identity_fingerprints_packaged_weights():
    ident = load_judge("embed:default").identity()
    assert ident["backend"] == "embed" and len(ident["fingerprint"]) == 16
    assert load_judge("embed:minilm").identity() == ident
