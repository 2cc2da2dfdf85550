"""The ``hf`` backend against manual transformers computations on the tiny random models."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness.backends.hf import HFBackend, PromptTooLongError
from harness.backends.hf_templates import ALPACA_PREAMBLE, ChatTemplateError
from harness.parsing.logprobs import p_yes
from harness.types import ChatMessage, GenerationConfig, Request

PROMPTS = [
    "hello , tell me something about yourself !",
    "do you have any hobbies or interests ? i like to read and write poetry . " * 3,
    "¿Cómo estás? Muy bien, gracias.",
    "Given the following dialogue context and response, predict whether the response is relevant to the context. "
    "Dialogue Context: hello Dialogue Response: i am 56 years old",
]
ATOL = 1e-4
CPU = {"device": "cpu"}  # exact float32 comparisons with the manual CPU computations, even on a GPU machine


def _msgs(text: str, system: str | None = None) -> tuple[ChatMessage, ...]:
    head = (ChatMessage("system", system),) if system else ()
    return (*head, ChatMessage("user", text))


def _req(text: str, **kw) -> Request:
    choices = kw.pop("choices", None)
    return Request(_msgs(text), GenerationConfig(**kw), choices=choices)


class Manual:
    """Reference computations straight from transformers (no padding, no cache)."""

    def __init__(self, path, adapter=None):
        self.tok = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
        self.model = model.eval()

    def prompt_ids(self, text: str) -> list[int]:
        rendered = self.tok.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        return self.tok(rendered, add_special_tokens=False)["input_ids"]

    @torch.no_grad()
    def logits(self, ids: list[int]) -> torch.Tensor:
        return self.model(torch.tensor([ids])).logits[0].float()

    def next_logprobs(self, ids: list[int]) -> torch.Tensor:
        return torch.log_softmax(self.logits(ids)[-1], -1)

    def choice_logprob(self, ids: list[int], choice: str) -> float:
        cids = self.tok(choice, add_special_tokens=False)["input_ids"]
        lsm = torch.log_softmax(self.logits(ids + cids), -1)
        return float(sum(lsm[len(ids) - 1 + j, t] for j, t in enumerate(cids)))

    def greedy(self, ids: list[int], n: int) -> list[int]:
        out, eos = [], self.tok.eos_token_id
        for _ in range(n):
            t = int(self.logits(ids + out)[-1].argmax())
            if t == eos:
                break
            out.append(t)
        return out


@pytest.fixture(scope="module", params=["tiny_llama", "tiny_qwen2"])
def model_path(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def backend(model_path):
    b = HFBackend(str(model_path), **CPU, batch_size=3)
    yield b
    b.close()


@pytest.fixture(scope="module")
def manual(model_path):
    return Manual(model_path)


@pytest.fixture(scope="module")
def llama_backend(tiny_llama):
    b = HFBackend(str(tiny_llama), **CPU, batch_size=4)
    yield b
    b.close()


@pytest.fixture(scope="module")
def llama_manual(tiny_llama):
    return Manual(tiny_llama)


def _tok_str(tok, i: int) -> str:
    """Token naming rule of the backend: decoded text, or the vocabulary entry for partial UTF-8."""
    s = tok.decode([i])
    return tok.convert_ids_to_tokens(i) if "\ufffd" in s else s


# -- generation ---------------------------------------------------------------------------------
def test_greedy_deterministic_batched_equals_single_and_manual(backend, manual):
    reqs = [_req(p, max_tokens=8, logprobs=True) for p in PROMPTS]
    seen = []
    batched = backend.generate(reqs, on_result=lambda i, r: seen.append(i))
    assert sorted(seen) == list(range(len(reqs)))
    again = backend.generate(reqs)
    singles = [backend.generate([r])[0] for r in reqs]
    for p, b, a, s in zip(PROMPTS, batched, again, singles, strict=True):
        assert b.text == a.text == s.text
        ref = manual.greedy(manual.prompt_ids(p), 8)
        assert b.text == manual.tok.decode(ref, skip_special_tokens=True)
        assert b.usage.prompt_tokens == len(manual.prompt_ids(p))
        assert b.usage.completion_tokens == (8 if len(ref) == 8 else len(ref) + 1)
        assert b.finish_reason == ("length" if len(ref) == 8 else "stop")
        assert b.raw == {"prompt_tokens": b.usage.prompt_tokens, "truncated": False}
        assert [t.logprob for t in b.token_logprobs] == pytest.approx(
            [t.logprob for t in s.token_logprobs], abs=ATOL
        )


def test_choice_logprobs_yes_no_match_manual_and_p_yes(backend, manual):
    reqs = [_req(p, max_tokens=1, choices=("Yes", "No")) for p in PROMPTS]
    batched = backend.generate(reqs)
    for p, resp in zip(PROMPTS, batched, strict=True):
        ids = manual.prompt_ids(p)
        logits = manual.logits(ids)[-1]
        lsm = torch.log_softmax(logits, -1)
        yes, no = manual.tok.convert_tokens_to_ids(["Yes", "No"])
        assert resp.choice_logprobs["Yes"] == pytest.approx(float(lsm[yes]), abs=ATOL)
        assert resp.choice_logprobs["No"] == pytest.approx(float(lsm[no]), abs=ATOL)
        expected = float(torch.softmax(logits[[yes, no]], -1)[0])
        score = p_yes(resp)
        assert score.ok and score.value == pytest.approx(expected, abs=ATOL)
        assert resp.text == manual.tok.decode([int(logits.argmax())], skip_special_tokens=True)
        assert resp.usage.completion_tokens == 1
        assert resp.raw["choice_tokens"] == {"Yes": 1, "No": 1}
    singles = [backend.generate([r])[0] for r in reqs]
    for b, s in zip(batched, singles, strict=True):
        assert b.choice_logprobs == pytest.approx(s.choice_logprobs, abs=ATOL)
    assert len({round(r.choice_logprobs["Yes"], 4) for r in batched}) > 1  # prompts really differ


def test_multi_token_and_digit_choices_match_teacher_forcing(backend, manual):
    choices = ("Maybe so", "Yes", "1", "2", "3", "4", "5")
    assert len(manual.tok("Maybe so", add_special_tokens=False)["input_ids"]) > 1
    reqs = [_req(p, max_tokens=1, choices=choices) for p in PROMPTS]
    batched = backend.generate(reqs)
    singles = [backend.generate([r])[0] for r in reqs]
    for p, b, s in zip(PROMPTS, batched, singles, strict=True):
        ids = manual.prompt_ids(p)
        for c in choices:
            assert b.choice_logprobs[c] == pytest.approx(manual.choice_logprob(ids, c), abs=ATOL), c
            assert s.choice_logprobs[c] == pytest.approx(b.choice_logprobs[c], abs=ATOL)
        assert list(b.choice_logprobs) == list(choices)
        assert b.text == manual.tok.decode([int(manual.logits(ids)[-1].argmax())], skip_special_tokens=True)
    # with max_tokens > 1 the text comes from generation and the choice log-probs are unchanged
    long = backend.generate([_req(PROMPTS[0], max_tokens=5, choices=choices)])[0]
    assert long.choice_logprobs == pytest.approx(batched[0].choice_logprobs, abs=ATOL)
    assert long.text == backend.generate([_req(PROMPTS[0], max_tokens=5)])[0].text


def test_token_logprobs_match_manual_and_top_sorted(llama_backend, llama_manual):
    k = 5
    for temperature in (0.0, 2.0):  # sampled tokens still carry the unprocessed log-probs
        resp = llama_backend.generate(
            [_req(PROMPTS[1], max_tokens=4, logprobs=True, top_logprobs=k, temperature=temperature, seed=3)]
        )[0]
        ids = llama_manual.prompt_ids(PROMPTS[1])
        assert len(resp.token_logprobs) == 4
        gen: list[int] = []
        for tl in resp.token_logprobs:
            lsm = llama_manual.next_logprobs(ids + gen)
            # the generated id: a vocabulary entry that decodes to tl.token and has exactly its log-prob
            cands = [i for i in range(len(llama_manual.tok)) if _tok_str(llama_manual.tok, i) == tl.token]
            tok = next((i for i in cands if abs(float(lsm[i]) - tl.logprob) < ATOL), None)
            assert tok is not None, (tl, cands)
            vals, idx = torch.topk(lsm, k)
            manual_top = {
                _tok_str(llama_manual.tok, i): v for v, i in zip(vals.tolist(), idx.tolist(), strict=True)
            }
            assert len(manual_top) == k  # no decode collisions in this case
            assert list(tl.top) == list(manual_top)
            assert list(tl.top.values()) == pytest.approx(list(manual_top.values()), abs=ATOL)
            assert list(tl.top.values()) == sorted(tl.top.values(), reverse=True)
            gen.append(tok)
        if temperature == 0.0:
            assert resp.token_logprobs[0].token == next(iter(resp.token_logprobs[0].top))


def test_sampling_seeded_reproducible(llama_backend):
    cfg = dict(max_tokens=16, temperature=1.5, seed=1234)
    reqs = [_req(p, **cfg) for p in PROMPTS]
    a = [r.text for r in llama_backend.generate(reqs)]
    b = [r.text for r in llama_backend.generate(reqs)]
    single = [llama_backend.generate([r])[0].text for r in reqs]  # per-request generators
    assert a == b == single
    other = [r.text for r in llama_backend.generate([_req(p, **{**cfg, "seed": 99}) for p in PROMPTS])]
    assert other != a
    greedy = [r.text for r in llama_backend.generate([_req(p, max_tokens=16) for p in PROMPTS])]
    assert greedy != a


def test_stop_strings_and_finish_reason(llama_backend):
    full = llama_backend.generate([_req(PROMPTS[0], max_tokens=12)])[0]
    assert full.finish_reason == "length" and full.usage.completion_tokens == 12
    k = next(
        i
        for i in range(2, len(full.text) - 1)
        if "\ufffd" not in full.text[i : i + 2] and full.text.find(full.text[i : i + 2]) == i
    )
    stop = full.text[k : k + 2]
    resp = llama_backend.generate(
        [_req(PROMPTS[0], max_tokens=12, stop=("never-there", stop), logprobs=True)]
    )[0]
    assert resp.text == full.text[:k]
    assert resp.finish_reason == "stop"
    assert resp.usage.completion_tokens < 12
    assert 1 <= len(resp.token_logprobs) <= resp.usage.completion_tokens
    # no stop string found -> same as without stop
    same = llama_backend.generate([_req(PROMPTS[0], max_tokens=12, stop=("never-there",))])[0]
    assert same.text == full.text and same.finish_reason == "length"


# -- adapters, templates, limits, identity ------------------------------------------------------
def _make_adapter(base_path, out_dir, seed):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(str(base_path), dtype=torch.float32)
    cfg = LoraConfig(r=4, lora_alpha=16, init_lora_weights=False, target_modules=["q_proj", "v_proj"])
    get_peft_model(base, cfg).save_pretrained(str(out_dir))
    return out_dir


def test_lora_adapter_changes_logprobs_and_identity(tiny_llama, tmp_path, llama_backend):
    adapter = _make_adapter(tiny_llama, tmp_path / "lora_a", seed=1)
    req = _req(PROMPTS[3], max_tokens=1, choices=("Yes", "No"))
    with HFBackend(str(tiny_llama), **CPU, adapter=str(adapter)) as lb:
        ident = lb.identity()
        resp = lb.generate([req])[0]
    base = llama_backend.generate([req])[0]
    assert abs(resp.choice_logprobs["Yes"] - base.choice_logprobs["Yes"]) > 1e-3
    ref = Manual(tiny_llama, adapter=adapter)
    ids = ref.prompt_ids(PROMPTS[3])
    assert resp.choice_logprobs["Yes"] == pytest.approx(ref.choice_logprob(ids, "Yes"), abs=ATOL)
    assert ident["adapter"] == str(adapter) and len(ident["adapter_sha256"]) == 16
    assert "adapter" not in llama_backend.identity()
    assert {k: v for k, v in ident.items() if not k.startswith("adapter")} == llama_backend.identity()
    other = _make_adapter(tiny_llama, tmp_path / "lora_b", seed=2)
    assert (
        HFBackend(str(tiny_llama), **CPU, adapter=str(other)).identity()["adapter_sha256"]
        != ident["adapter_sha256"]
    )


def test_alpaca_and_plain_templates(tiny_llama, tmp_path, llama_backend):
    alpaca = HFBackend(str(tiny_llama), **CPU, chat_template="alpaca")
    user = "### Instruction: predict\n\n### Input: Dialogue Context: hello"
    assert alpaca.render_prompt(_msgs(user)) == ALPACA_PREAMBLE + user + "\n\n### Response:\n"
    assert alpaca.render_prompt(_msgs(user, system="Be strict.")) == (
        "Be strict.\n\nBelow is an instruction that describes a task, paired with an input that provides further "
        "context. Write a response that appropriately completes the request.\n\n"
        + user
        + "\n\n### Response:\n"
    )
    plain = HFBackend(str(tiny_llama), **CPU, chat_template="plain")
    assert plain.render_prompt(_msgs("b", system="a")) == "a\n\nb\n"
    assert (
        llama_backend.render_prompt(_msgs("hi")) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    jinja = "{% for m in messages %}[{{ m['content'] }}]{% endfor %}"
    f = tmp_path / "t.jinja"
    f.write_text(jinja)
    assert HFBackend(str(tiny_llama), **CPU, chat_template=str(f)).render_prompt(_msgs("x")) == "[x]"
    shas = {b.identity()["chat_template_sha256"] for b in (alpaca, plain, llama_backend)}
    shas.add(HFBackend(str(tiny_llama), **CPU, chat_template=jinja).identity()["chat_template_sha256"])
    assert len(shas) == 4
    with pytest.raises(ChatTemplateError, match="alpacca"):
        HFBackend(str(tiny_llama), **CPU, chat_template="alpacca")
    resp = alpaca.generate([_req(user, max_tokens=1, choices=("Yes", "No"))])[0]
    ref = Manual(tiny_llama)
    ids = ref.tok(ALPACA_PREAMBLE + user + "\n\n### Response:\n", add_special_tokens=False)["input_ids"]
    assert resp.usage.prompt_tokens == len(ids)
    assert resp.choice_logprobs["Yes"] == pytest.approx(ref.choice_logprob(ids, "Yes"), abs=ATOL)


def test_bos_prepended_only_for_builtin_templates(tiny_llama, tmp_path):
    from tokenizers import processors

    path = tmp_path / "adds_bos"
    shutil.copytree(tiny_llama, path)
    tok = AutoTokenizer.from_pretrained(str(path))
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.bos_token_id)]
    )
    tok.save_pretrained(str(path))
    assert AutoTokenizer.from_pretrained(str(path))("a")["input_ids"][0] == tok.bos_token_id
    alpaca = HFBackend(str(path), **CPU, chat_template="alpaca")
    text = alpaca.render_prompt(_msgs("hi"))
    assert alpaca.encode_prompt(text) == [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
    own = HFBackend(str(path), **CPU)  # the model's own template renders what it needs; nothing is added
    text = own.render_prompt(_msgs("hi"))
    assert own.encode_prompt(text) == tok(text, add_special_tokens=False)["input_ids"]
    long_jinja = "{# " + "x" * 400 + " #}{{ messages[0]['content'] }}"  # longer than a file name may be
    assert HFBackend(str(path), **CPU, chat_template=long_jinja).render_prompt(_msgs("hi")) == "hi"


def test_missing_chat_template_is_a_clear_error(tiny_qwen2, tmp_path):
    path = tmp_path / "no_template"
    shutil.copytree(tiny_qwen2, path)
    (path / "chat_template.jinja").unlink(missing_ok=True)
    cfg = json.loads((path / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (path / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ChatTemplateError, match=r"chat_template=alpaca\|plain"):
        HFBackend(str(path), **CPU)
    assert HFBackend(str(path), **CPU, chat_template="plain").render_prompt(_msgs("hi")) == "hi\n"


def test_max_length_truncates_from_left_and_counts(tiny_llama, llama_manual):
    b = HFBackend(str(tiny_llama), **CPU, max_length=20)
    long_req = _req(PROMPTS[1], max_tokens=1, choices=("Yes", "No"))
    short_req = _req("hi", max_tokens=1, choices=("Yes", "No"))
    long_resp, short_resp = b.generate([long_req, short_req])
    ids = llama_manual.prompt_ids(PROMPTS[1])
    assert len(ids) > 20 >= len(llama_manual.prompt_ids("hi"))
    assert b.truncated == 1
    assert long_resp.raw["truncated"] is True and long_resp.usage.prompt_tokens == 20
    assert short_resp.raw["truncated"] is False
    assert long_resp.choice_logprobs["No"] == pytest.approx(
        llama_manual.choice_logprob(ids[-20:], "No"), abs=ATOL
    )
    assert b.identity()["max_length"] == 20


def test_prompt_over_model_limit_raises(tiny_llama, tmp_path):
    path = tmp_path / "short_ctx"
    shutil.copytree(tiny_llama, path)
    cfg = json.loads((path / "config.json").read_text())
    cfg["max_position_embeddings"] = 24
    (path / "config.json").write_text(json.dumps(cfg))
    b = HFBackend(str(path), **CPU)
    with pytest.raises(PromptTooLongError, match=r"is \d+ tokens.*limit of 24"):
        b.generate([_req(PROMPTS[1])])
    # a prompt that fits generates at most up to the position limit
    resp = b.generate([_req("hi", max_tokens=50)])[0]
    assert resp.usage.prompt_tokens + resp.usage.completion_tokens <= 25


def test_identity_is_stable_and_needs_no_weights(tiny_llama, tiny_qwen2):
    a, b = HFBackend(str(tiny_llama), **CPU), HFBackend(str(tiny_llama), **CPU)
    ia = a.identity()
    assert ia == b.identity()
    assert a._model is None  # identity never loads the weights
    assert ia["backend"] == "hf" and ia["dtype"] == "float32" and len(ia["model_fingerprint"]) == 16
    assert HFBackend(str(tiny_qwen2), **CPU).identity()["model_fingerprint"] != ia["model_fingerprint"]
    assert HFBackend(str(tiny_llama), **CPU, dtype="bf16").identity()["dtype"] == "bfloat16"


def test_created_from_a_judge_spec(tiny_llama):
    from harness.backends.base import create_backend
    from harness.spec import parse_spec

    b = create_backend(
        parse_spec(f"hf:{tiny_llama},device=cpu,chat_template=alpaca,batch_size=2,max_length=64")
    )
    assert isinstance(b, HFBackend)
    assert (b.batch_size, b.max_length, b.chat_template_name) == (2, 64, "alpaca")
    assert (
        b.identity()["chat_template_sha256"]
        != HFBackend(str(tiny_llama), **CPU).identity()["chat_template_sha256"]
    )


def test_options_are_validated(tiny_llama):
    with pytest.raises(ValueError, match="unknown hf backend option"):
        HFBackend(str(tiny_llama), **CPU, batchsize=4)
    with pytest.raises(ValueError, match="dtype"):
        HFBackend(str(tiny_llama), **CPU, dtype="int3")


def test_close_is_idempotent_and_reloads(tiny_llama):
    b = HFBackend(str(tiny_llama), **CPU)
    first = b.generate([_req("hi", max_tokens=3)])[0].text
    b.close()
    b.close()
    assert b._model is None
    assert b.generate([_req("hi", max_tokens=3)])[0].text == first
    assert math.isfinite(b.generate([_req("hi", choices=("Yes",), max_tokens=1)])[0].choice_logprobs["Yes"])


def test_left_padding_masks_and_positions(llama_backend):
    ids, mask, pos = llama_backend._pad([[5, 6], [7, 8, 9, 10]])
    pad = llama_backend.tokenizer.pad_token_id
    assert ids.tolist() == [[pad, pad, 5, 6], [7, 8, 9, 10]]
    assert mask.tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]
    assert pos.tolist() == [[0, 0, 0, 1], [0, 1, 2, 3]]  # positions restart at each row's first real token


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_auto_device_and_dtype(tiny_llama, llama_backend):
    gpu = HFBackend(str(tiny_llama))
    assert gpu.device == "cuda"
    assert gpu.identity()["dtype"] == ("bfloat16" if torch.cuda.is_bf16_supported() else "float16")
    req = _req(PROMPTS[0], max_tokens=1, choices=("Yes", "No"))
    got, ref = gpu.generate([req])[0], llama_backend.generate([req])[0]
    assert p_yes(got).value == pytest.approx(p_yes(ref).value, abs=0.05)
    sampled = [_req(p, max_tokens=8, temperature=1.0, seed=7) for p in PROMPTS]
    assert [r.text for r in gpu.generate(sampled)] == [r.text for r in gpu.generate(sampled)]
    gpu.close()
