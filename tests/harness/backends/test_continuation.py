"""Continuation scoring (GPTScore) and the system-role fallback, shared by the hf and vllm backends
(:mod:`harness.backends.hf_scoring`), tested on the hf backend against manual transformers
computations; the replay backend's scripted continuations. vLLM: tests/harness/backends/test_vllm.py."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness.backends import hf_scoring
from harness.backends.base import create_backend
from harness.backends.hf import HFBackend, PromptTooLongError
from harness.spec import parse_spec
from harness.types import ChatMessage, GenerationConfig, Request

CPU = {"device": "cpu"}
ATOL = 1e-4
CONTINUATION = "Answer: Yes."
PROMPTS = [
    "hello , tell me something about yourself !",
    "do you have any hobbies or interests ? i like to read and write poetry . " * 3,
    "¿Cómo estás? Muy bien, gracias.",
    "Is the response relevant? Dialogue Response: i am 56 years old",
    "hi",
]
# A ChatML template that drops system messages, and one that raises on them (Gemma-style).
IGNORES_SYSTEM = (
    "{% for m in messages if m['role'] != 'system' %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
RAISES_ON_SYSTEM = (
    "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _cont(text: str, continuation: str = CONTINUATION, system: str | None = None) -> Request:
    head = (ChatMessage("system", system),) if system else ()
    return Request((*head, ChatMessage("user", text)), continuation=continuation)


def _manual_continuation(path, prompt_text: str, continuation: str, max_length: int | None = None):
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    pids = tok(prompt_text, add_special_tokens=False)["input_ids"]
    if max_length is not None:
        pids = pids[-max_length:]
    cids = tok(continuation, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        lsm = torch.log_softmax(model(torch.tensor([pids + cids])).logits[0].float(), -1)
    return pids, cids, [float(lsm[len(pids) - 1 + j, t]) for j, t in enumerate(cids)]


def _with_template(src, dst, template: str):
    shutil.copytree(src, dst)
    tok = AutoTokenizer.from_pretrained(str(dst))
    tok.chat_template = template
    tok.save_pretrained(str(dst))
    return dst


@pytest.fixture(scope="module", params=["tiny_llama", "tiny_qwen2"])
def model_path(request):
    return request.getfixturevalue(request.param)


# -- token strings ----------------------------------------------------------------------------------
def test_token_strings_concatenate_back(tiny_llama):
    tok = AutoTokenizer.from_pretrained(str(tiny_llama))
    decode = hf_scoring.tokenizer_decoder(tok)
    for text in [CONTINUATION, " Answer: No.", "The answer is: yes , it is", "¿Cómo estás? 你好 Yes"]:
        ids = hf_scoring.continuation_ids(tok, text)
        names = hf_scoring.token_strings(decode, ids)
        assert len(names) == len(ids)
        assert "".join(names) == decode(ids) == text
    ids = hf_scoring.continuation_ids(tok, CONTINUATION)
    names = hf_scoring.token_strings(decode, ids)
    # the caller finds the word by character offsets: "Yes" is one token of its own here
    start = CONTINUATION.index("Yes")
    offsets = [sum(len(n) for n in names[:k]) for k in range(len(names))]
    assert [n for n, o in zip(names, offsets, strict=True) if start <= o < start + 3] == ["Yes"]
    with pytest.raises(ValueError, match="no tokens"):
        hf_scoring.continuation_ids(tok, "")


def test_token_strings_sentencepiece_like_and_partial_characters():
    # a decoder that drops the leading space of the text (SentencePiece) still concatenates back
    pieces = {1: "▁Answer", 2: ":", 3: "▁Yes", 4: "."}

    def sp_decode(ids):
        return "".join(pieces[i] for i in ids).replace("▁", " ").lstrip(" ")

    assert hf_scoring.token_strings(sp_decode, [1, 2, 3, 4]) == ["Answer", ":", " Yes", "."]
    # byte tokens of one character: the completing token carries it
    raw = {1: b"a", 2: "é".encode()[:1], 3: "é".encode()[1:], 4: b"!"}

    def byte_decode(ids):
        return b"".join(raw[i] for i in ids).decode("utf-8", errors="replace")

    assert hf_scoring.token_strings(byte_decode, [1, 2, 3, 4]) == ["a", "", "é", "!"]


# -- system role ------------------------------------------------------------------------------------
def test_merge_system_messages_and_probe():
    msgs = [
        {"role": "system", "content": "Be strict."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "again"},
    ]
    assert hf_scoring.merge_system_messages(msgs) == [
        {"role": "user", "content": "Be strict.\n\nhi"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "again"},
    ]
    assert msgs[1]["content"] == "hi"  # the input is left alone
    two = [
        {"role": "system", "content": "A"},
        {"role": "system", "content": "B"},
        {"role": "user", "content": "u"},
    ]
    assert hf_scoring.merge_system_messages(two) == [{"role": "user", "content": "A\n\nB\n\nu"}]
    only = [{"role": "system", "content": "S"}, {"role": "assistant", "content": "x"}]
    assert hf_scoring.merge_system_messages(only) == [
        {"role": "user", "content": "S"},
        {"role": "assistant", "content": "x"},
    ]
    assert hf_scoring.probe_system_role(lambda m: "\n".join(x["content"] for x in m)) == "system_message"
    assert hf_scoring.probe_system_role(lambda m: m[-1]["content"]) == "prefixed"

    def raises(m):
        raise ValueError("System role not supported")

    assert hf_scoring.probe_system_role(raises) == "prefixed"


@pytest.mark.parametrize("template", [IGNORES_SYSTEM, RAISES_ON_SYSTEM], ids=["ignores", "raises"])
def test_hf_system_role_prefixed_when_template_cannot_carry_it(tiny_llama, tmp_path, template):
    path = _with_template(tiny_llama, tmp_path / "tpl", template)
    b = HFBackend(str(path), **CPU)
    msgs = (ChatMessage("system", "Be strict."), ChatMessage("user", "hi"))
    assert b.render_prompt(msgs) == "<|im_start|>user\nBe strict.\n\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert b.system_role_mode == "prefixed"
    with_sys = Request(msgs, GenerationConfig(max_tokens=1), choices=("Yes", "No"))
    without = Request(msgs[1:], GenerationConfig(max_tokens=2))
    r1, r2, r3 = b.generate([with_sys, without, _cont("hi", system="Be strict.")])
    assert r1.raw["system_role"] == "prefixed" and "system_role" not in r2.raw
    assert r3.raw["system_role"] == "prefixed"
    # the same scores as writing the prefix into the user message by hand
    manual = b.generate(
        [
            Request(
                (ChatMessage("user", "Be strict.\n\nhi"),),
                GenerationConfig(max_tokens=1),
                choices=("Yes", "No"),
            )
        ]
    )[0]
    assert r1.choice_logprobs == pytest.approx(manual.choice_logprobs, abs=ATOL)  # batched vs alone: padding
    assert "system_role" not in manual.raw


def test_hf_system_role_kept_as_system_message(tiny_llama):
    b = HFBackend(str(tiny_llama), **CPU)
    assert b._system_role is None  # computed lazily
    msgs = (ChatMessage("system", "Be strict."), ChatMessage("user", "hi"))
    assert b.render_prompt(msgs).startswith("<|im_start|>system\nBe strict.<|im_end|>\n")
    assert b.system_role_mode == "system_message"
    (r,) = b.generate([Request(msgs, GenerationConfig(max_tokens=1))])
    assert r.raw["system_role"] == "system_message"
    # built-in templates carry system messages too
    assert HFBackend(str(tiny_llama), **CPU, chat_template="alpaca").system_role_mode == "system_message"
    assert HFBackend(str(tiny_llama), **CPU, chat_template="plain").system_role_mode == "system_message"


# -- hf continuation scoring ------------------------------------------------------------------------
def test_hf_continuation_matches_manual_teacher_forcing(model_path):
    b = HFBackend(str(model_path), **CPU, batch_size=2)
    reqs = [_cont(p) for p in PROMPTS] + [_cont(PROMPTS[0], " Answer: No.")]
    seen: list[int] = []
    resps = b.generate(reqs, on_result=lambda i, r: seen.append(i))
    assert sorted(seen) == list(range(len(reqs)))
    for req, resp in zip(reqs, resps, strict=True):
        pids, cids, ref = _manual_continuation(model_path, b.render_prompt(req), req.continuation)
        assert [t.logprob for t in resp.token_logprobs] == pytest.approx(ref, abs=ATOL)
        assert resp.continuation_logprob == pytest.approx(sum(ref), abs=ATOL)
        assert resp.continuation_logprob == pytest.approx(
            sum(t.logprob for t in resp.token_logprobs), abs=1e-9
        )
        assert "".join(t.token for t in resp.token_logprobs) == req.continuation
        assert all(t.top == {} and t.logprob <= 0 for t in resp.token_logprobs)
        assert resp.text == "" and resp.finish_reason == "continuation" and resp.choice_logprobs is None
        assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (len(pids) + len(cids), 0)
        assert resp.raw["prompt_tokens"] == len(pids) and resp.raw["continuation_token_ids"] == cids
        json.dumps(resp.to_dict())
    # batched == one by one
    single = b.generate([reqs[2]])[0]
    assert single.continuation_logprob == pytest.approx(resps[2].continuation_logprob, abs=1e-5)


def test_hf_continuation_mixed_with_choices_and_generation(tiny_llama):
    b = HFBackend(str(tiny_llama), **CPU, batch_size=3)
    reqs = [
        Request((ChatMessage("user", PROMPTS[0]),), GenerationConfig(max_tokens=1), choices=("Yes", "No")),
        _cont(PROMPTS[0]),
        Request((ChatMessage("user", PROMPTS[1]),), GenerationConfig(max_tokens=4)),
        Request(
            (ChatMessage("user", PROMPTS[3]),), GenerationConfig(max_tokens=1), choices=("hello there", "No")
        ),
        _cont(PROMPTS[3], "Answer: Yes, it is."),
    ]
    mixed = b.generate(reqs)
    alone = [b.generate([r])[0] for r in reqs]
    for m, a in zip(mixed, alone, strict=True):
        assert m.text == a.text and m.finish_reason == a.finish_reason
        if a.choice_logprobs is not None:
            assert m.choice_logprobs == pytest.approx(a.choice_logprobs, abs=1e-5)
        if a.continuation_logprob is not None:
            assert m.continuation_logprob == pytest.approx(a.continuation_logprob, abs=1e-5)
    assert mixed[2].continuation_logprob is None and mixed[2].usage.completion_tokens >= 1
    assert [t.token for t in mixed[1].token_logprobs].count("Yes") == 1  # the word a GPTScore judge reads


def test_hf_continuation_plain_template_and_max_length(tiny_llama):
    plain = HFBackend(str(tiny_llama), **CPU, chat_template="plain")
    req = _cont(PROMPTS[0], system="Evaluate the response.")
    (resp,) = plain.generate([req])
    text = "Evaluate the response.\n\n" + PROMPTS[0] + "\n"
    assert plain.render_prompt(req) == text
    _, _, ref = _manual_continuation(tiny_llama, text, CONTINUATION)
    assert resp.continuation_logprob == pytest.approx(sum(ref), abs=ATOL)
    assert resp.raw["system_role"] == "system_message"

    short = HFBackend(str(tiny_llama), **CPU, max_length=12)
    long_req = _cont(PROMPTS[1])
    (resp,) = short.generate([long_req])
    pids, cids, ref = _manual_continuation(tiny_llama, short.render_prompt(long_req), CONTINUATION, 12)
    assert resp.raw["truncated"] is True and resp.raw["prompt_tokens"] == 12
    assert resp.usage.prompt_tokens == 12 + len(cids)
    assert resp.continuation_logprob == pytest.approx(sum(ref), abs=ATOL)
    assert short.truncated == 1


def test_hf_continuation_over_position_limit(tiny_llama, tmp_path):
    path = tmp_path / "short_ctx"
    shutil.copytree(tiny_llama, path)
    cfg = json.loads((path / "config.json").read_text())
    cfg["max_position_embeddings"] = 24
    (path / "config.json").write_text(json.dumps(cfg))
    b = HFBackend(str(path), **CPU)
    n_prompt = len(b.encode_prompt(b.render_prompt(_cont("hi"))))
    fits = "Yes"
    too_long = "Answer: yes , it is relevant and coherent and fine ." * 2
    assert n_prompt + 1 <= 24
    assert b.generate([_cont("hi", fits)])[0].token_logprobs[0].token == "Yes"
    with pytest.raises(PromptTooLongError, match=r"prompt \+ continuation is \d+ tokens"):
        b.generate([_cont("hi", too_long)])


def test_hf_capabilities_and_json_schema_ignored(tiny_llama):
    caps = HFBackend.capabilities
    assert caps.continuation_logprobs and not caps.guided_json
    b = HFBackend(str(tiny_llama), **CPU)
    schema = {"type": "object", "properties": {"verdict": {"enum": ["Yes", "No"]}}}
    plain = Request((ChatMessage("user", "hi"),), GenerationConfig(max_tokens=3))
    guided = Request((ChatMessage("user", "hi"),), GenerationConfig(max_tokens=3), json_schema=schema)
    a, g = b.generate([plain, guided])
    assert a.text == g.text and "guided" not in g.raw


# -- replay -----------------------------------------------------------------------------------------
def test_replay_continuations(tmp_path):
    f = tmp_path / "r.jsonl"
    rules = [
        {"match": "scripted total", "response": {"continuation_logprob": -0.25}},
        {
            "match": "scripted tokens",
            "response": {
                "token_logprobs": [
                    {"token": "Answer:", "logprob": -1.0},
                    {"token": " Yes", "logprob": -0.5},
                    {"token": ".", "logprob": -0.125},
                ]
            },
        },
        {"default": {"hashed_p_yes": True}},
    ]
    f.write_text("\n".join(json.dumps(r) for r in rules))
    be = create_backend(parse_spec(f"replay:{f}"))
    assert be.capabilities.continuation_logprobs
    total, tokens, hashed, hashed_no, plain = be.generate(
        [
            _cont("scripted total"),
            _cont("scripted tokens"),
            _cont("anything else", system="Be strict."),
            _cont("anything else", "Answer: No.", system="Be strict."),
            Request((ChatMessage("user", "anything else"),), choices=("Yes", "No")),
        ]
    )
    assert total.continuation_logprob == -0.25 and [t.token for t in total.token_logprobs] == [CONTINUATION]
    assert tokens.continuation_logprob == pytest.approx(-1.625)
    assert [t.token for t in tokens.token_logprobs] == ["Answer:", " Yes", "."]
    for r in (total, tokens, hashed):
        assert r.text == "" and r.finish_reason == "continuation" and r.usage.completion_tokens == 0
    assert [t.token for t in hashed.token_logprobs] == ["Answer:", " Yes."]
    assert hashed.continuation_logprob == pytest.approx(sum(t.logprob for t in hashed.token_logprobs))
    assert all(-4.0 < t.logprob < 0 for t in hashed.token_logprobs)
    assert hashed.continuation_logprob != hashed_no.continuation_logprob
    again = create_backend(parse_spec(f"replay:{f}")).generate([_cont("anything else", system="Be strict.")])[
        0
    ]
    assert again.continuation_logprob == hashed.continuation_logprob  # deterministic
    assert plain.continuation_logprob is None and plain.choice_logprobs is not None
    pieces = create_backend(parse_spec(f"replay:{f}")).generate([_cont("x", "  a b\t c ")])[0].token_logprobs
    assert "".join(t.token for t in pieces) == "  a b\t c "
