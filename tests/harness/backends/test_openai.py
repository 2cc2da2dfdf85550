"""The ``openai`` backend against a local OpenAI-compatible stand-in server (offline)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time

import pytest
from scipy.special import logsumexp

from harness.backends.base import backend_class
from harness.backends.hf import HFBackend
from harness.backends.openai_api import OpenAIBackend
from harness.backends.openai_http import parse_retry_after, sanitize_base_url
from harness.cache import CachedBackend, RequestCache
from harness.parsing.logprobs import choice_logprobs_from_top, p_yes
from harness.types import (
    BackendError,
    ChatMessage,
    GenerationConfig,
    LogprobsUnavailableError,
    Request,
)
from tests.fixtures.servers.openai import Fault, OpenAIStandIn, Reply

SECRET = "sk-test-DO-NOT-LEAK-4f3c2b1a9e8d7c6b"
FAST = dict(retry_initial=0.001, retry_max_wait=0.01, retry_after_cap=5.0)


@pytest.fixture
def server():
    with OpenAIStandIn() as srv:
        yield srv


def req(i: int | str, *, choices=None, **cfg) -> Request:
    return Request(
        messages=(ChatMessage("system", "You are a judge."), ChatMessage("user", f"question q{i}?")),
        config=GenerationConfig(**cfg),
        choices=choices,
    )


def backend(srv: OpenAIStandIn, **kw) -> OpenAIBackend:
    opts = {**FAST, **kw}
    return OpenAIBackend(opts.pop("model", "stand-in-model"), base_url=srv.base_url, **opts)


# -- basics -------------------------------------------------------------------------------------
def test_registered_and_payload(server):
    assert backend_class("openai") is OpenAIBackend
    b = backend(server)
    cfg = dict(temperature=0.7, top_p=0.9, max_tokens=5, stop=("\n",), seed=3, presence_penalty=0.5)
    (r,) = b.generate([req(0, **cfg)])
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/chat/completions"
    assert body["model"] == "stand-in-model"
    assert body["messages"][1] == {"role": "user", "content": "question q0?"}
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["stop"], body["seed"]) == (
        0.7,
        0.9,
        5,
        ["\n"],
        3,
    )
    assert body["presence_penalty"] == 0.5 and body["frequency_penalty"] == 0.0
    assert "logprobs" not in body and "top_logprobs" not in body
    assert r.text.split(".")[0] in ("Yes", "No")
    assert r.finish_reason == "length" and r.usage.completion_tokens == 5 and r.usage.prompt_tokens > 0
    assert r.raw["object"] == "chat.completion" and r.choice_logprobs is None and r.token_logprobs is None
    assert b.stats.requests == 1 and b.stats.retries == 0


def test_token_logprobs_mapped(server):
    b = backend(server)
    (r,) = b.generate([req(1, max_tokens=3, logprobs=True, top_logprobs=2)])
    body = server.requests[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 2
    assert len(r.token_logprobs) == 3
    first = r.token_logprobs[0]
    assert first.token == r.text[: len(first.token)] and first.token in ("Yes", "No")
    assert len(first.top) == 2 and first.top[first.token] == pytest.approx(first.logprob)
    assert "".join(t.token for t in r.token_logprobs) == r.text


def test_identity_and_base_url(monkeypatch):
    assert (
        sanitize_base_url("HTTPS://user:pw@Host.Example:8443/v1/?api_key=x#frag")
        == "https://host.example:8443/v1"
    )
    b = OpenAIBackend("m", base_url="http://u:p@localhost:8000/v1/?token=abc")
    assert b.identity() == {
        "backend": "openai",
        "model": "m",
        "revision": None,
        "base_url": "http://localhost:8000/v1",
    }
    assert "p@" not in repr(b) and "abc" not in repr(b)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.0.0.5:9000/v1")
    assert OpenAIBackend("m").identity()["base_url"] == "http://10.0.0.5:9000/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert OpenAIBackend("m").identity()["base_url"] == "https://api.openai.com/v1"
    with pytest.raises(ValueError, match="limit of 20"):
        OpenAIBackend("m", choice_top_logprobs=50)
    # Local servers may allow more than 20 alternatives (vLLM: --max-logprobs).
    wide = OpenAIBackend("m", base_url="http://localhost:8000/v1", choice_top_logprobs=50)
    merged = OpenAIBackend("m", base_url="http://localhost:8000/v1", choice_match="normalized")
    # Non-default choice-scoring settings change results, so they join the identity (cache key).
    assert wide.identity()["choice_top_logprobs"] == 50 and merged.identity()["choice_match"] == "normalized"
    assert "choice_match" not in OpenAIBackend("m", base_url="http://localhost:8000/v1").identity()
    with pytest.raises(ValueError, match="choice_match"):
        OpenAIBackend("m", choice_match="fuzzy")


def test_parse_retry_after():
    import email.utils

    import httpx

    assert parse_retry_after(httpx.Headers({"Retry-After": "2.5"})) == 2.5
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "150", "Retry-After": "9"})) == 0.15
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after(httpx.Headers({"Retry-After": date})) <= 31


# -- retries ------------------------------------------------------------------------------------
def test_batch_survives_faults(server):
    server.script("q1", Fault.rate_limited(retry_after="0"), Fault.server_error(500))
    server.script("q3", Fault.slow(2.0))  # longer than the client timeout
    server.script("q4", Fault.server_error(503, "overloaded"))
    b = backend(server, timeout=0.3, concurrency=4)
    reqs = [req(i, max_tokens=1, choices=("Yes", "No")) for i in range(6)]
    out = b.generate(reqs)
    assert b.stats.retries == 4
    assert [len(server.requests_matching(f"q{i}?")) for i in range(6)] == [1, 3, 1, 2, 2, 1]
    for r in out:
        assert r.text in ("Yes", "No") and p_yes(r).ok
    # Order is preserved: each response answers its own request.
    again = backend(server).generate(reqs)
    assert [r.choice_logprobs for r in out] == [r.choice_logprobs for r in again]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_limit(concurrency):
    with OpenAIStandIn(delay=0.08) as srv:
        b = backend(srv, concurrency=concurrency)
        out = b.generate([req(i, max_tokens=2) for i in range(9)])
        assert len(out) == 9
        assert srv.max_in_flight <= concurrency
        if concurrency > 1:
            assert srv.max_in_flight > 1
        else:
            assert srv.max_in_flight == 1


def test_retry_after_honoured(server):
    server.script("q0", Fault.rate_limited(retry_after="0.6"))
    b = backend(server, retry_initial=0.001)
    t0 = time.monotonic()
    b.generate([req(0, max_tokens=1)])
    assert time.monotonic() - t0 >= 0.55
    assert b.stats.retries == 1
    sent = server.requests_matching("q0?")
    assert len(sent) == 2 and sent[1].received - sent[0].received >= 0.55


def test_retry_after_capped(server):
    server.script("q0", Fault.rate_limited(retry_after="3600"))
    b = backend(server, retry_after_cap=0.05)
    t0 = time.monotonic()
    b.generate([req(0, max_tokens=1)])
    assert time.monotonic() - t0 < 5
    assert b.stats.retries == 1


def test_exhausted_retries(server):
    server.script(None, *[Fault.server_error(503, "engine overloaded, try later")] * 10)
    b = backend(server, max_retries=2, model="my-judge")
    with pytest.raises(BackendError) as ei:
        b.generate([req(0)])
    msg = str(ei.value)
    assert "503" in msg and "engine overloaded" in msg and "my-judge" in msg and server.base_url in msg
    assert b.stats.retries == 2 and len(server.requests) == 3


def test_exhausted_timeouts(server):
    server.script(None, Fault.slow(2.0), Fault.slow(2.0))
    b = backend(server, max_retries=1, timeout=0.2)
    with pytest.raises(BackendError, match="timed out"):
        b.generate([req(0)])
    assert b.stats.retries == 1


def test_connection_refused():
    with OpenAIStandIn() as srv:
        url = srv.base_url
    b = OpenAIBackend("m", base_url=url, max_retries=1, **FAST)
    with pytest.raises(BackendError, match="cannot reach"):
        b.generate([req(0)])
    assert b.stats.retries == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_not_retried(server, status):
    server.script("q0", Fault(status, "'messages.1.role' must be one of system/user/assistant"))
    b = backend(server)
    with pytest.raises(BackendError) as ei:
        b.generate([req(0)])
    assert not isinstance(ei.value, LogprobsUnavailableError)
    msg = str(ei.value)
    assert f"HTTP {status}" in msg and "'messages.1.role' must be one of" in msg and "stand-in-model" in msg
    assert b.stats.retries == 0 and len(server.requests) == 1


# -- API key ------------------------------------------------------------------------------------
def test_api_key_sent_and_never_leaked(server, monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("JUDGE_KEY", SECRET)
    b = backend(server, api_key_env="JUDGE_KEY")
    cache = RequestCache(tmp_path / "cache.sqlite")
    cb = CachedBackend(b, cache)
    out = cb.generate(
        [req(i, max_tokens=2, logprobs=True, top_logprobs=3, choices=("Yes", "No")) for i in range(3)]
    )
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert SECRET not in json.dumps(b.identity()) and SECRET not in repr(b) and SECRET not in str(vars(b))
    assert all(SECRET not in json.dumps(r.raw) for r in out)

    # A server that echoes the key in errors and in a response body.
    caplog.set_level(logging.DEBUG)
    server.script(
        "q7", Fault.rate_limited(message=f"slow down, {SECRET}"), Reply(text=f"your key is {SECRET}")
    )
    (echo,) = cb.generate([req(7, max_tokens=2)])
    assert SECRET not in echo.text and SECRET not in json.dumps(echo.raw) and "***" in echo.text
    server.script("q8", Fault(401, f"Incorrect API key provided: {SECRET}."))
    with pytest.raises(BackendError) as ei:
        cb.generate([req(8)])
    assert SECRET not in str(ei.value) and SECRET not in repr(ei.value) and "***" in str(ei.value)
    server.script("q9", *[Fault.server_error(500, f"boom {SECRET}")] * 3)
    with pytest.raises(BackendError) as ei:
        backend(server, api_key_env="JUDGE_KEY", max_retries=2).generate([req(9)])
    assert SECRET not in str(ei.value)
    assert all(SECRET not in rec.getMessage() for rec in caplog.records)

    assert cache.count() == 4
    cache.close()  # checkpoints the WAL into the main file
    files = list(tmp_path.glob("cache.sqlite*"))
    blob = b"".join(f.read_bytes() for f in files)
    assert b"chat.completion" in blob and b"your key is ***" in blob  # the cache holds the responses...
    assert SECRET.encode() not in blob  # ...but never the key


def test_missing_key(monkeypatch, server):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    b = OpenAIBackend("gpt-4o-mini", base_url="https://api.openai.com/v1")
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        b.generate([req(0)])  # fails before any network access
    # Local servers: no key, no Authorization header.
    backend(server).generate([req(0)])
    assert "authorization" not in server.requests[0].headers


# -- log-probs ----------------------------------------------------------------------------------
def test_server_without_logprobs():
    with OpenAIStandIn(logprobs=False) as srv:
        b = backend(srv, model="no-lp-model")
        with pytest.raises(LogprobsUnavailableError) as ei:
            b.generate([req(0, max_tokens=1, choices=("Yes", "No"))])
        assert srv.base_url in str(ei.value) and "no-lp-model" in str(ei.value)
        with pytest.raises(LogprobsUnavailableError):
            b.generate([req(1, logprobs=True, top_logprobs=2)])
        assert b.stats.retries == 0
        # Plain generation still works.
        assert b.generate([req(2, max_tokens=1)])[0].text in ("Yes", "No")


def test_choice_logprobs_from_top_variants(server):
    top = {
        " Yes": -0.5,
        "yes": -2.0,
        "YES": -3.0,
        "No": -1.5,
        " no\n": -2.5,
        "Maybe": -4.0,
        "Yesterday": -5.0,
    }
    server.script("q0", Reply(top_logprobs=[top]))
    b = backend(server, choice_match="normalized")
    (r,) = b.generate([req(0, max_tokens=1, choices=("Yes", "No", "Perhaps"))])
    assert server.requests[0].body["top_logprobs"] == 20 and server.requests[0].body["logprobs"] is True
    assert r.choice_logprobs["Yes"] == pytest.approx(float(logsumexp([-0.5, -2.0, -3.0])))
    assert r.choice_logprobs["No"] == pytest.approx(float(logsumexp([-1.5, -2.5])))
    assert r.choice_logprobs["Perhaps"] is None
    py = math.exp(logsumexp([-0.5, -2.0, -3.0]))
    pn = math.exp(logsumexp([-1.5, -2.5]))
    assert p_yes(r).value == pytest.approx(py / (py + pn))


def test_choice_reads_first_token_only(server):
    # max_tokens from the config is kept; only the first position's top-k counts.
    server.script("q0", Reply(text="No, yes.", top_logprobs=[{"No": -0.2, "Yes": -1.8}, {"yes": -0.01}]))
    b = backend(server, choice_top_logprobs=5)
    (r,) = b.generate([req(0, max_tokens=8, choices=("Yes", "No"))])
    assert server.requests[0].body["max_tokens"] == 8 and server.requests[0].body["top_logprobs"] == 5
    assert r.choice_logprobs == {"Yes": -1.8, "No": -0.2} and r.text == "No, yes."


def test_labels_outside_top_k_are_none(server):
    server.script("q0", Reply(top_logprobs=[{"Sure": -0.1, "No": -3.0}]))
    (r,) = backend(server).generate([req(0, max_tokens=1, choices=("Yes", "No"))])
    assert r.choice_logprobs == {"Yes": None, "No": -3.0}
    assert p_yes(r).value == pytest.approx(0.0)
    server.script("q1", Reply(top_logprobs=[{"Sure": -0.1}]))
    (r,) = backend(server).generate([req(1, max_tokens=1, choices=("Yes", "No"))])
    assert p_yes(r).status == "missing_logprobs"


# -- streaming results / failure isolation ------------------------------------------------------
def test_emit_per_request_and_partial_failure(server, tmp_path):
    server.script("q3", Fault.bad_request("prompt too long"))
    b = backend(server, concurrency=1)
    seen: list[int] = []
    with pytest.raises(BackendError, match="prompt too long"):
        b.generate([req(i, max_tokens=1) for i in range(5)], on_result=lambda i, r: seen.append(i))
    assert seen == [0, 1, 2]
    assert len(server.requests_matching("q4?")) == 0  # not started after the permanent failure

    # Through the write-through cache: finished calls survive, a rerun sends only the rest.
    server.reset()
    server.script("q3", Fault.bad_request("prompt too long"))
    cache = RequestCache(tmp_path / "c.sqlite")
    cb = CachedBackend(backend(server, concurrency=2), cache)
    reqs = [req(i, max_tokens=1) for i in range(6)]
    with pytest.raises(BackendError):
        cb.generate(reqs)
    stored = cache.count()
    assert stored >= 3
    n_before = len(server.requests)
    out = cb.generate(reqs)
    assert len(out) == 6 and sum(r.cached for r in out) == stored
    assert len(server.requests) - n_before == 6 - stored


def test_generate_inside_running_event_loop(server):
    b = backend(server, concurrency=2)
    reqs = [req(i, max_tokens=1, choices=("Yes", "No")) for i in range(4)]

    async def main():
        sync = b.generate(reqs)  # e.g. from a Jupyter cell: runs on a worker thread
        seen = []
        asy = await b.agenerate(reqs, on_result=lambda i, r: seen.append(i))
        return sync, asy, seen

    sync, asy, seen = asyncio.run(main())
    assert [r.choice_logprobs for r in sync] == [r.choice_logprobs for r in asy]
    assert sorted(seen) == [0, 1, 2, 3]
    assert b.stats.batches == 2 and b.stats.requests == 8


# -- parity with the HF backend on a real (tiny) model ------------------------------------------
PARITY_PROMPTS = [
    "Dialogue Context: hello , tell me something about yourself !\nDialogue Response: i am a housekeeper .",
    "Is the response relevant to the context? Answer Yes or No.",
    "do you have any hobbies or interests ? i like to read and write poetry .",
    "¿Cómo estás? Muy bien, gracias.",
    "你好，你今天怎么样？我很好，谢谢。",
    "Привет, как дела? Rating: 4",
]


def test_p_yes_parity_with_hf_backend(tiny_qwen2):
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(str(tiny_qwen2)))
    msgs = [
        (ChatMessage("system", "You are a careful dialogue judge."), ChatMessage("user", p))
        for p in PARITY_PROMPTS
    ]
    reqs = [Request(messages=m, config=GenerationConfig(max_tokens=1), choices=("Yes", "No")) for m in msgs]
    # A random tiny model almost never puts "Yes"/"No" in its top-20, so the stand-in serves the
    # whole distribution (like vLLM with a large --max-logprobs) and the backend asks for all of it.
    with OpenAIStandIn(model_dir=tiny_qwen2, max_top_logprobs=None) as srv:
        opts = dict(base_url=srv.base_url, choice_top_logprobs=vocab, **FAST)
        exact = OpenAIBackend(str(tiny_qwen2), **opts).generate(reqs)  # default: exact label tokens
        merged = OpenAIBackend(str(tiny_qwen2), choice_match="normalized", **opts).generate(reqs)
    hf = HFBackend(str(tiny_qwen2))
    try:
        hf_out = hf.generate(reqs)
        # The hf backend's full next-token distribution, for the variant-merging comparison.
        full = hf.generate(
            [
                Request(messages=m, config=GenerationConfig(max_tokens=1, logprobs=True, top_logprobs=vocab))
                for m in msgs
            ]
        )
    finally:
        hf.close()

    # 1. Exact label tokens (what hf scores): P(Yes) agrees.
    hf_p = [p_yes(r).value for r in hf_out]
    api_p = [p_yes(r).value for r in exact]
    assert all(v is not None for v in api_p + hf_p)
    assert len({round(v, 3) for v in hf_p}) > 1  # the prompts give different scores
    assert api_p == pytest.approx(hf_p, abs=1e-4)
    for a, h in zip(exact, hf_out, strict=True):
        assert a.text == h.text  # the greedy first token agrees too
        assert a.choice_logprobs == pytest.approx(h.choice_logprobs, abs=1e-4)

    # 2. choice_match=normalized merges " Yes"/"no"/" No"... variants: equal to the same mapping applied
    #    to the hf backend's full distribution.
    ref = [p_yes(choice_logprobs_from_top(r.token_logprobs[0].top, ("Yes", "No"))).value for r in full]
    assert [p_yes(r).value for r in merged] == pytest.approx(ref, abs=1e-4)


# -- guided JSON (response_format) and continuation scoring -------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["Yes", "No"]}},
    "required": ["verdict"],
}


def _schema_req(i: int | str, **cfg) -> Request:
    r = req(i, **cfg)
    return Request(messages=r.messages, config=r.config, json_schema=SCHEMA)


def test_json_schema_sent_as_response_format(server):
    b = backend(server)
    assert OpenAIBackend.capabilities.guided_json and not OpenAIBackend.capabilities.continuation_logprobs
    guided, plain = b.generate([_schema_req(0, max_tokens=4), req(1, max_tokens=4)])
    bodies = {r.body["messages"][1]["content"]: r.body for r in server.requests}
    assert bodies["question q0?"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": False},
    }
    assert "response_format" not in bodies["question q1?"]
    assert guided.raw["guided"] is True and "guided" not in plain.raw
    assert guided.raw["object"] == "chat.completion"  # raw is still the server's answer


@pytest.mark.parametrize(
    "message",
    [
        "response_format json_schema is not supported by this model",
        "Unsupported parameter: 'response_format.type' must be 'json_object' or 'text'",
    ],
)
def test_rejected_response_format_falls_back_once(server, caplog, message):
    server.script("q5", Fault.bad_request(message), Fault.rate_limited(retry_after="0"))
    b = backend(server)
    with caplog.at_level(logging.WARNING, logger="harness.backends.openai_api"):
        (r,) = b.generate([_schema_req(5, max_tokens=2)])
    sent = [x.body for x in server.requests_matching("q5?")]
    assert len(sent) == 3  # rejected, then without response_format: a 429 retried, then answered
    assert "response_format" in sent[0] and all("response_format" not in s for s in sent[1:])
    assert r.raw["guided"] is False and r.text
    assert b.stats.retries == 1  # the fallback is not a retry; the 429 is
    assert "response_format" in caplog.text


def test_other_client_errors_are_not_retried_without_response_format(server):
    server.script("q6", Fault.bad_request("temperature must be <= 2"))
    b = backend(server)
    with pytest.raises(BackendError, match="temperature must be"):
        b.generate([_schema_req(6)])
    assert len(server.requests) == 1
    # without a json_schema a 400 naming response_format is just an error too
    server.script("q7", Fault.bad_request("response_format is not supported"))
    with pytest.raises(BackendError, match="response_format"):
        b.generate([req(7)])
    assert len(server.requests) == 2


def test_continuation_scoring_is_a_clear_error(server):
    b = backend(server)
    cont = Request(messages=req(8).messages, continuation="Answer: Yes.")
    with pytest.raises(LogprobsUnavailableError, match=r"hf or vllm") as ei:
        b.generate([req(9), cont])
    assert "openai" in str(ei.value) and "continuation" in str(ei.value)
    with pytest.raises(LogprobsUnavailableError, match=r"continuation.*hf or vllm"):
        asyncio.run(b.agenerate([cont]))
    assert server.requests == [] and b.stats.requests == 0
