"""Tests of the ``vllm`` backend's one-token P(Yes) path option (``choice_scoring``) against the
stand-in engine (:mod:`tests.fixtures.fake_vllm`): engine arguments, identity, fallbacks. Parity
of the path with the exact prompt-log-prob path on the real engine: ``test_vllm.py``
(``test_real_one_token_path_equals_exact_path``, marked ``vllm``)."""

from __future__ import annotations

import pytest

from harness.backends import vllm_backend as vb
from tests.fixtures.fake_vllm import _FakeLLM, _req


def test_fake_engine_choice_scoring_option_and_identity(fake_vllm, tiny_qwen2):
    auto = vb.VLLMBackend(str(tiny_qwen2), dtype="float32")
    exact = vb.VLLMBackend(str(tiny_qwen2), dtype="float32", choice_scoring="exact")
    assert auto.one_token and not exact.one_token
    assert _FakeLLM.instances[-1].kwargs["enable_prefix_caching"] is True
    # the path is part of the cache identity; the exact path keeps the identity it always had
    assert auto.identity()["choice_scoring"] == "one_token" and "choice_scoring" not in exact.identity()
    assert {k: v for k, v in auto.identity().items() if k != "choice_scoring"} == exact.identity()
    # processed log-probs would not be the model's distribution: the one-token path turns itself off
    processed = vb.VLLMBackend(str(tiny_qwen2), logprobs_mode="processed_logprobs")
    assert not processed.one_token and processed.identity()["engine_options"] == {
        "logprobs_mode": "processed_logprobs"
    }
    no_cache = vb.VLLMBackend(str(tiny_qwen2), enable_prefix_caching=False)
    assert _FakeLLM.instances[-1].kwargs["enable_prefix_caching"] is False
    assert no_cache.identity() == vb.VLLMBackend(str(tiny_qwen2)).identity()
    with pytest.raises(ValueError, match="choice_scoring"):
        vb.VLLMBackend(str(tiny_qwen2), choice_scoring="fast")

    # an installed vLLM without SamplingParams.logprob_token_ids: exact path, old identity
    class OldParams:
        def __init__(self, max_tokens=16, prompt_logprobs=None, logprobs=None, **kw):
            if "logprob_token_ids" in kw:
                raise TypeError("unexpected keyword argument 'logprob_token_ids'")
            self.max_tokens, self.prompt_logprobs, self.logprobs = max_tokens, prompt_logprobs, logprobs
            self.logprob_token_ids = None

    fake_vllm.SamplingParams = OldParams
    old = vb.VLLMBackend(str(tiny_qwen2), dtype="float32")
    assert not old.one_token and old.identity() == exact.identity()
    assert "enable_prefix_caching" not in _FakeLLM.instances[-1].kwargs  # such an engine's own default
    (resp,) = old.generate([_req("hello", choices=("Yes", "No"))])
    assert resp.raw["choice_scoring"] == "prompt_logprobs"
