"""Real-model tier: one LoRA training step on SmolLM2-135M-Instruct as a generative P(Yes) evaluator
(xDial-Eval Table 3 prompts rendered with the model's own chat template), interrupted after the
first step's checkpoint and resumed to the same adapter and losses as an uninterrupted run; the
adapter's judge spec names the packaged model and loads through the hf backend."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from finetune.generative import GenerativeConfig, GenerativeExample, prompt_for_item, train_generative
from finetune.lora import ADAPTER_DIR, METADATA_FILE, LoraSettings
from finetune.trainer import TrainSettings
from harness.cache import RequestCache
from harness.judges import load_judge
from harness.modelstore import weights_fingerprint
from harness.tasks import get_task

pytestmark = pytest.mark.real_model


class Stop(Exception):
    pass


def _items() -> list[dict]:
    pairs = [
        ("Do you like cats?", "Yes, they are so calm and funny."),
        ("What did you cook tonight?", "The train leaves from platform nine."),
        ("¿Qué libro estás leyendo?", "Una novela de misterio, me encanta."),
        ("你周末做什么？", "我喜欢吃苹果手机。"),
    ]
    return [
        {"id": f"i{i}", "language": "en", "context": [{"role": "user", "text": c}], "response": r}
        for i, (c, r) in enumerate(pairs)
    ]


def test_lora_step_and_exact_resume(tmp_path, smollm2):
    task = get_task("xdial-eval-turn")
    exs = [
        GenerativeExample(prompt_for_item(task, it), "Yes" if i % 2 == 0 else "No")
        for i, it in enumerate(_items())
    ]
    cfg = GenerativeConfig(
        base_model="smollm2-135m-instruct",
        dtype="float32",
        max_length=192,
        lora=LoraSettings(r=4, alpha=8, dropout=0.0),
        train=TrainSettings(batch_size=2, max_steps=2, learning_rate=1e-3, checkpoint_every=1, log_every=1),
    )
    data = {"name": "toy", "version": "1", "fingerprint": "abc"}
    ref = train_generative(exs, cfg, tmp_path / "ref", data, progress=False)

    def stop(step: int, loss: float) -> None:
        if step == 1:
            raise Stop

    with pytest.raises(Stop):
        train_generative(exs, cfg, tmp_path / "run", data, progress=False, on_step=stop)
    got = train_generative(exs, cfg, tmp_path / "run", data, progress=False)
    assert got["train_result"]["resumed_from"] == 1 and len(ref["losses"]) == 2
    assert got["losses"] == pytest.approx(ref["losses"], abs=1e-6)
    a = load_file(tmp_path / "ref" / ADAPTER_DIR / "adapter_model.safetensors")
    b = load_file(tmp_path / "run" / ADAPTER_DIR / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)

    meta = json.loads((tmp_path / "run" / METADATA_FILE).read_text())
    assert meta["base_model"] == "smollm2-135m-instruct"
    assert meta["base_model_identity"]["model_fingerprint"] == weights_fingerprint(smollm2)
    with load_judge(meta["judge_spec"], RequestCache(tmp_path / "c.sqlite")) as judge:
        verdicts = judge.score(task, _items()[:2])
        assert judge.identity()["adapter_sha256"] == meta["adapter_sha256"]
    assert all(v.ok and 0 < v.score < 1 for v in verdicts)
