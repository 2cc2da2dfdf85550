import json

import pytest

from harness.backends.base import create_backend
from harness.backends.replay import ReplayBackend
from harness.parsing.logprobs import p_yes
from harness.spec import parse_spec
from harness.types import ChatMessage, GenerationConfig, Request


def _req(text, choices=("Yes", "No")):
    return Request(messages=(ChatMessage("user", text),), choices=choices)


def test_rules_sequences_default_and_hash(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"match": "poetry", "response": {"text": "Yes", "p_yes": 0.9}},
                {"match": "cycle", "responses": [{"p_yes": 0.2}, {"p_yes": 0.7}]},
                {"match": "broken", "response": {"text": "I think so"}},
                {"default": {"hashed_p_yes": True}},
            ]
        )
    )
    be = create_backend(parse_spec(f"replay:{f}"))
    out = be.generate(
        [_req("i like poetry"), _req("cycle"), _req("cycle"), _req("cycle"), _req("broken"), _req("other")]
    )
    assert p_yes(out[0]).value == pytest.approx(0.9)
    assert [round(p_yes(o).value, 6) for o in out[1:4]] == [0.2, 0.7, 0.2]
    assert p_yes(out[4]).value is None  # no log-probs scripted: a parse failure, not 0
    h1 = p_yes(out[5]).value
    h2 = p_yes(create_backend(parse_spec(f"replay:{f}")).generate([_req("other")])[0]).value
    assert h1 == h2 and 0 < h1 < 1
    assert be.stats.requests == 6


def test_unmatched_request_is_an_error(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"match": "x", "response": {"text": "Yes"}}) + "\n")
    with pytest.raises(LookupError, match="no rule matching"):
        create_backend(parse_spec(f"replay:{f}")).generate([_req("nothing")])


def test_bad_file_names_line(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"match": "x", "response": {}}\n{not json}\n')
    with pytest.raises(ValueError, match=r"r.jsonl:2"):
        create_backend(parse_spec(f"replay:{f}"))


def test_json_schema_ignored_and_continuation_capability(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"default": {"text": "Yes", "p_yes": 0.8}}) + "\n")
    be = create_backend(parse_spec(f"replay:{f}"))
    caps = be.capabilities
    assert caps.continuation_logprobs and not caps.guided_json
    msgs = (ChatMessage("user", "hi"),)
    plain, guided = be.generate([Request(msgs), Request(msgs, json_schema={"type": "object"})])
    assert plain.to_dict() == guided.to_dict()
    (cont,) = be.generate([Request(msgs, continuation="Answer: Yes.")])  # p_yes does not apply here
    assert cont.text == "" and cont.choice_logprobs is None and cont.continuation_logprob < 0
    assert [t.token for t in cont.token_logprobs] == ["Answer:", " Yes."]


def test_select_seed_picks_by_decoding_seed_not_call_order(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(
        json.dumps(
            {"match": "hi", "select": "seed", "responses": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}
        )
        + "\n"
    )
    b = ReplayBackend(str(f))

    def ask(seed):
        return b.generate(
            [Request([ChatMessage("user", "hi")], GenerationConfig(temperature=1.0, seed=seed))]
        )[0].text

    assert [ask(s) for s in (2, 0, 1, 2, 4)] == ["c", "a", "b", "c", "b"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"match": "x", "select": "random", "responses": [{"text": "a"}]}) + "\n")
    with pytest.raises(ValueError, match="'select' is 'order'"):
        ReplayBackend(str(bad))


def test_unique_appends_a_request_hash(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"default": {"text": "ok", "unique": True}}) + "\n")
    b = ReplayBackend(str(f))
    a1, a2, b1 = (b.generate([_req(t, None)])[0].text for t in ("one", "one", "two"))
    assert a1 == a2 != b1 and a1.startswith("ok [") and len(a1) == len("ok [") + 11
