"""Tests of :mod:`harness.backends.vllm_plan`: requests → vLLM sequences (SamplingParams mapping,
choice / continuation / guided bookkeeping) and engine outputs → responses, with fake outputs."""

from __future__ import annotations

import json
import types

import pytest

from harness.backends import vllm_plan as vb
from harness.types import BackendError, GenerationConfig, Response
from tests.fixtures.fake_vllm import (
    SCHEMA,
    FakeCompletion,
    FakeLogprob,
    FakeRequestOutput,
    _cont,
    _NewAPI,
    _OldAPI,
    _req,
    _schema_req,
)


def test_sampling_kwargs_defaults():
    assert vb.sampling_kwargs(GenerationConfig()) == {
        "n": 1,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 256,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }


def test_sampling_kwargs_full():
    cfg = GenerationConfig(
        temperature=0.7,
        top_p=0.9,
        top_k=40,
        max_tokens=12,
        stop=("\n\n", "###"),
        seed=123,
        presence_penalty=0.5,
        frequency_penalty=-0.25,
        logprobs=True,
        top_logprobs=5,
        timeout=3.0,
    )
    assert vb.sampling_kwargs(cfg) == {
        "n": 1,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 40,
        "max_tokens": 12,
        "stop": ["\n\n", "###"],
        "seed": 123,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.25,
        "logprobs": 5,
    }


def test_sampling_kwargs_edge_cases():
    assert "top_k" not in vb.sampling_kwargs(GenerationConfig(top_k=0))
    assert "top_k" not in vb.sampling_kwargs(GenerationConfig(top_k=-1))
    # logprobs with no alternatives: vLLM still returns the sampled token's log-prob
    assert vb.sampling_kwargs(GenerationConfig(logprobs=True))["logprobs"] == 0
    assert "logprobs" not in vb.sampling_kwargs(GenerationConfig(top_logprobs=5))
    assert "seed" in vb.sampling_kwargs(GenerationConfig(seed=0))


def test_choice_scoring_and_text_params():
    assert vb.choice_scoring_kwargs() == {"n": 1, "temperature": 0.0, "max_tokens": 1, "prompt_logprobs": 0}
    cfg = GenerationConfig(
        temperature=1.0, top_k=5, max_tokens=50, stop=("Yes",), seed=3, logprobs=True, top_logprobs=3
    )
    kw = vb.sampling_kwargs(vb.choice_text_config(cfg))
    assert kw["temperature"] == 0.0 and kw["max_tokens"] == 1
    assert "stop" not in kw and "top_k" not in kw and "seed" not in kw
    assert kw["logprobs"] == 3


def test_build_plan():
    reqs = [_req("a", choices=("Yes", "No")), _req("b", max_tokens=7), _req("c", choices=("x y",))]
    prompt_ids = [[1, 2, 3], [4, 5], [6]]
    choice_ids = {"Yes": [10], "No": [11], "x y": [12, 13]}
    plan = vb.build_plan(reqs, prompt_ids, choice_ids)
    assert [(s.req, s.choice, s.token_ids, s.start) for s in plan] == [
        (0, "Yes", (1, 2, 3, 10), 3),
        (0, "No", (1, 2, 3, 11), 3),
        (0, None, (1, 2, 3), 0),
        (1, None, (4, 5), 0),
        (2, "x y", (6, 12, 13), 1),
        (2, None, (6,), 0),
    ]
    assert plan[0].params == vb.choice_scoring_kwargs()
    assert plan[2].params["max_tokens"] == 1 and plan[2].params["temperature"] == 0.0
    assert plan[3].params["max_tokens"] == 7
    with pytest.raises(ValueError, match="no tokens"):
        vb.build_plan([_req("a", choices=("",))], [[1]], {"": []})
    with pytest.raises(ValueError):
        vb.build_plan(reqs, prompt_ids[:2], choice_ids)


def test_sum_choice_logprob():
    ids = [1, 2, 3, 10, 12]
    plp = [
        None,
        {2: FakeLogprob(-1.0)},
        {3: FakeLogprob(-2.0)},
        {10: FakeLogprob(-0.5, rank=1), 99: FakeLogprob(-0.1)},
        {12: -0.25},  # plain floats are accepted too
    ]
    assert vb.sum_choice_logprob(plp, ids, 3) == pytest.approx(-0.75)
    assert vb.sum_choice_logprob(plp, ids, 4) == pytest.approx(-0.25)
    with pytest.raises(BackendError, match="lack token"):
        vb.sum_choice_logprob([None, {2: -1.0}, {3: -1.0}, {11: -1.0}, {12: -1.0}], ids, 3)
    with pytest.raises(BackendError):
        vb.sum_choice_logprob(None, ids, 3)
    with pytest.raises(BackendError):
        vb.sum_choice_logprob(plp[:-1], ids, 3)
    with pytest.raises(ValueError):
        vb.sum_choice_logprob(plp, ids, 0)


def test_token_logprobs_from_output():
    decode = {5: "A", 6: "B", 7: "C", 8: "D"}.get
    lps = [
        {5: FakeLogprob(-0.1, 1, "A"), 6: FakeLogprob(-2.0, 2, "B"), 7: FakeLogprob(-3.0, 3, None)},
        # sampled token outside the top-2
        {8: FakeLogprob(-4.0, 9, "D"), 5: FakeLogprob(-0.2, 1, "A"), 6: FakeLogprob(-1.9, 2, "B")},
    ]
    out = vb.token_logprobs_from_output([5, 8], lps, 2, decode)
    assert [t.token for t in out] == ["A", "D"]
    assert out[0].logprob == pytest.approx(-0.1) and out[1].logprob == pytest.approx(-4.0)
    assert out[0].top == {"A": -0.1, "B": -2.0}
    assert out[1].top == {"A": -0.2, "B": -1.9}
    only = vb.token_logprobs_from_output([5], [{5: FakeLogprob(-0.1, 1, None)}], 0, decode)
    assert only[0].token == "A" and only[0].top == {}
    assert vb.token_logprobs_from_output([5], None, 2, decode) is None


def test_assemble_responses():
    reqs = [_req("a", choices=("Yes", "No")), _req("b", logprobs=True, top_logprobs=1)]
    plan = vb.build_plan(reqs, [[1, 2], [3]], {"Yes": [10], "No": [11]})
    outs = [
        FakeRequestOutput([1, 2, 10], [None, {2: -1.0}, {10: -0.2}], [FakeCompletion("x", [4])]),
        FakeRequestOutput([1, 2, 11], [None, {2: -1.0}, {11: -1.7}], [FakeCompletion("y", [4])]),
        FakeRequestOutput([1, 2], None, [FakeCompletion("Yes", [10], None, "length")]),
        FakeRequestOutput(
            [3],
            None,
            [
                FakeCompletion(
                    "Hi!",
                    [20, 21],
                    [{20: FakeLogprob(-0.3, 1, "Hi")}, {21: FakeLogprob(-0.4, 1, "!")}],
                    "stop",
                    0,
                )
            ],
        ),
    ]
    emitted: list[tuple[int, Response]] = []
    resps = vb.assemble_responses(reqs, plan, outs, str, lambda i, r: emitted.append((i, r)))
    assert [i for i, _ in emitted] == [0, 1]
    r0, r1 = resps
    assert r0.text == "Yes" and r0.choice_logprobs == {"Yes": pytest.approx(-0.2), "No": pytest.approx(-1.7)}
    assert r0.token_logprobs is None
    assert (r0.usage.prompt_tokens, r0.usage.completion_tokens) == (2, 1)
    assert r0.raw["choice_token_ids"] == {"Yes": [10], "No": [11]}
    assert r1.choice_logprobs is None and r1.text == "Hi!" and r1.finish_reason == "stop"
    assert [t.token for t in r1.token_logprobs] == ["Hi", "!"]
    assert (r1.usage.prompt_tokens, r1.usage.completion_tokens) == (1, 2)
    assert r1.raw["stop_reason"] == 0
    json.dumps([r.to_dict() for r in resps])  # cacheable
    with pytest.raises(BackendError):
        vb.assemble_responses(reqs, plan, outs[:-1], str)


def test_guided_json_kwargs_detects_the_api():
    new = vb.guided_json_kwargs(_NewAPI, SCHEMA)
    assert list(new) == ["structured_outputs"] and new["structured_outputs"].json == SCHEMA
    old = vb.guided_json_kwargs(_OldAPI, SCHEMA)
    assert list(old) == ["guided_decoding"] and old["guided_decoding"].json == SCHEMA
    assert vb.guided_json_kwargs(types.SimpleNamespace(), SCHEMA) is None


def test_build_plan_continuation_and_guided():
    reqs = [_cont("a"), _schema_req("b", max_tokens=9), _schema_req("c", choices=("Yes",)), _req("d")]
    plan = vb.build_plan(
        reqs, [[1, 2], [3], [4], [5]], {"Yes": [10]}, {"Answer: Yes.": [7, 8, 9]}, lambda s: {"g": s}
    )
    assert [(s.req, s.token_ids, s.start, s.continuation, s.choice) for s in plan] == [
        (0, (1, 2, 7, 8, 9), 2, True, None),
        (1, (3,), 0, False, None),
        (2, (4, 10), 1, False, "Yes"),
        (2, (4,), 0, False, None),
        (3, (5,), 0, False, None),
    ]
    assert plan[0].params == vb.choice_scoring_kwargs()
    assert plan[1].params["g"] == SCHEMA and plan[1].params["max_tokens"] == 9
    assert all("g" not in s.params for s in plan[2:])  # choice requests are never guided
    unguided = vb.build_plan(reqs[1:2], [[3]], {})
    assert "g" not in unguided[0].params
    with pytest.raises(ValueError, match="no tokens"):
        vb.build_plan([_cont("a")], [[1]], {}, {"Answer: Yes.": []})


def test_prompt_token_logprobs_and_assemble_continuation():
    plp = [None, {2: -1.0}, {7: FakeLogprob(-0.5)}, {8: -0.25}]
    assert vb.prompt_token_logprobs(plp, [1, 2, 7, 8], 2) == [-0.5, -0.25]
    reqs = [_cont("a", "xy"), _schema_req("b")]
    plan = vb.build_plan(reqs, [[1, 2], [3]], {}, {"xy": [7, 8]}, lambda s: {"structured_outputs": s})
    outs = [
        FakeRequestOutput([1, 2, 7, 8], plp, [FakeCompletion("z", [5])]),
        FakeRequestOutput([3], None, [FakeCompletion('{"v":"No"}', [6, 7], None, "stop")]),
    ]
    names = {7: "x", 8: "y"}
    r0, r1 = vb.assemble_responses(reqs, plan, outs, names.get, extra_raw=[{"system_role": "prefixed"}, {}])
    assert r0.text == "" and r0.finish_reason == "continuation"
    assert [(t.token, t.logprob) for t in r0.token_logprobs] == [("x", -0.5), ("y", -0.25)]
    assert r0.continuation_logprob == pytest.approx(-0.75)
    assert (r0.usage.prompt_tokens, r0.usage.completion_tokens) == (4, 0)
    assert r0.raw == {"prompt_tokens": 2, "system_role": "prefixed", "continuation_token_ids": [7, 8]}
    assert r1.raw["guided"] is True and "system_role" not in r1.raw
    json.dumps([r.to_dict() for r in (r0, r1)])


# -- the one-token P(Yes) path ----------------------------------------------------------------------
def test_build_plan_one_token():
    reqs = [
        _req("a", choices=("Yes", "No")),
        _req("b", choices=("Yes", "No"), logprobs=True, top_logprobs=2),
        _req("c", choices=("Yes", "hello there")),
        _req("d", max_tokens=3),
    ]
    cids = {"Yes": [7], "No": [9], "hello there": [4, 5]}
    plan = vb.build_plan(reqs, [[1, 2], [1, 3], [1, 4], [1, 5]], cids, one_token=True)
    # a: one sequence; b: one-token + a top-k text sequence; c (a multi-token label): exact path
    assert [(s.req, s.one_token, s.choice) for s in plan] == [
        (0, True, None),
        (1, True, None),
        (1, False, None),
        (2, False, "Yes"),
        (2, False, "hello there"),
        (2, False, None),
        (3, False, None),
    ]
    assert plan[0].token_ids == (1, 2) and plan[0].labels == (("Yes", 7), ("No", 9))
    assert plan[0].params == {"n": 1, "temperature": 0.0, "max_tokens": 1, "logprob_token_ids": [7, 9]}
    assert plan[2].params["logprobs"] == 2 and "logprob_token_ids" not in plan[2].params
    # off: every choice through prompt log-probs, as before
    exact = vb.build_plan(reqs, [[1, 2], [1, 3], [1, 4], [1, 5]], cids)
    assert not any(s.one_token for s in exact) and len(exact) == 3 + 3 + 3 + 1
    # the top-k sequence goes to a second engine call; without one, a single call
    assert vb.engine_groups(plan) == [[0, 1, 3, 4, 5, 6], [2]]
    assert vb.engine_groups(plan[:1] + plan[3:]) == [list(range(5))]
    assert vb.engine_groups(exact) == [list(range(10))]


def test_first_token_label_logprobs_and_assemble_one_token():
    reqs = [_req("a", choices=("Yes", "No")), _req("b", choices=("No", "Yes"), logprobs=True, top_logprobs=1)]
    plan = vb.build_plan(reqs, [[1, 2], [1, 3]], {"Yes": [7], "No": [9]}, one_token=True)
    first = {5: FakeLogprob(-0.5, 1), 7: FakeLogprob(-1.25, 2), 9: FakeLogprob(-3.0, 4)}
    outs = [
        FakeRequestOutput([1, 2], None, [FakeCompletion("x", [5], [first])]),
        FakeRequestOutput(
            [1, 3],
            None,
            [
                FakeCompletion(
                    "x", [5], [{5: FakeLogprob(-0.1, 1), 7: FakeLogprob(-2.0, 2), 9: FakeLogprob(-4.0, 3)}]
                )
            ],
        ),
        FakeRequestOutput([1, 3], None, [FakeCompletion("y", [6], [{6: FakeLogprob(-0.2, 1)}])]),
    ]
    a, b = vb.assemble_responses(reqs, plan, outs, decode=lambda t: f"<{t}>")
    assert a.choice_logprobs == {"Yes": -1.25, "No": -3.0} and a.text == "x" and a.token_logprobs is None
    assert a.raw["choice_scoring"] == "one_token" and a.raw["choice_token_ids"] == {"Yes": [7], "No": [9]}
    assert a.usage.prompt_tokens == 2 and a.usage.completion_tokens == 1
    # b: choices from its one-token sequence, text and top-k token log-probs from its text sequence
    assert list(b.choice_logprobs) == ["No", "Yes"] and b.choice_logprobs == {"No": -4.0, "Yes": -2.0}
    assert b.text == "y" and b.token_logprobs[0].top == {"<6>": -0.2}
    with pytest.raises(BackendError, match="lack label token 9"):
        vb.first_token_label_logprobs([{7: FakeLogprob(-1.0)}], [7, 9])
    with pytest.raises(BackendError, match="no log-probs"):
        vb.first_token_label_logprobs(None, [7])
    exact = vb.build_plan(reqs[:1], [[1, 2]], {"Yes": [7], "No": [9]})
    outs = [
        FakeRequestOutput([1, 2, 7], [None, {2: FakeLogprob(-9.0)}, {7: FakeLogprob(-1.25)}], []),
        FakeRequestOutput([1, 2, 9], [None, {2: FakeLogprob(-9.0)}, {9: FakeLogprob(-3.0)}], []),
        FakeRequestOutput([1, 2], None, [FakeCompletion("x", [5])]),
    ]
    (e,) = vb.assemble_responses(reqs[:1], exact, outs, decode=str)
    assert e.choice_logprobs == a.choice_logprobs and e.raw["choice_scoring"] == "prompt_logprobs"


def test_supports_label_logprobs():
    class Old:
        def __init__(self, max_tokens=16, logprobs=None):
            self.max_tokens = max_tokens

    class New(Old):
        def __init__(self, logprob_token_ids=None, **kw):
            super().__init__(**kw)
            self.logprob_token_ids = logprob_token_ids

    assert vb.supports_label_logprobs(New) and not vb.supports_label_logprobs(Old)
