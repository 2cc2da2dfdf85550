"""Real-model tier: chatbot SFT of SmolLM2-135M-Instruct named by its packaged short name — the
chat encoder reads the materialised checkpoint's tokenizer and chat template (no Hub look-up), one
LoRA step on two CCC-style dialogues with the loss on assistant tokens only, and the adapter's
metadata names the short name and the weights fingerprint."""

from __future__ import annotations

import json

import pytest

from finetune.lora import ADAPTER_DIR, METADATA_FILE, LoraSettings
from finetune.sft import ChatEncoder, SFTConfig, encode_dialogues, train_chatbot
from finetune.trainer import TrainSettings
from harness.modelstore import weights_fingerprint

pytestmark = pytest.mark.real_model

DIALOGUES = [
    [
        {"role": "user", "text": "hey, how was your weekend?"},
        {"role": "assistant", "text": "pretty good! went hiking with my sister. you?"},
        {"role": "user", "text": "just stayed in and read a book"},
        {"role": "assistant", "text": "nice, which book?"},
    ],
    [
        {"role": "user", "text": "do you like cooking?"},
        {"role": "assistant", "text": "I love it, especially pasta."},
    ],
]


def test_sft_step_on_the_packaged_model_by_short_name(tmp_path, smollm2):
    enc = ChatEncoder("smollm2-135m-instruct")
    assert enc.chat_template_name == "tokenizer" and "<|im_start|>" in enc.chat_template
    rows, stats = encode_dialogues(DIALOGUES, enc, 96, "right", None)
    assert len(rows) == 2
    for row in rows:  # the labelled tokens decode to the assistant turns only
        labelled = enc.tokenizer.decode(
            [t for t, y in zip(row["input_ids"], row["labels"], strict=True) if y != -100]
        )
        assert "weekend" not in labelled and "cooking" not in labelled
    assert "pasta" in enc.tokenizer.decode(
        [t for t, y in zip(rows[1]["input_ids"], rows[1]["labels"], strict=True) if y != -100]
    )

    cfg = SFTConfig(
        base_model="smollm2-135m-instruct",
        dtype="float32",
        max_length=96,
        lora=LoraSettings(r=4, alpha=8, dropout=0.0),
        train=TrainSettings(batch_size=2, max_steps=1, learning_rate=1e-3, log_every=1),
    )
    meta = train_chatbot(DIALOGUES, cfg, tmp_path / "sft", {"name": "toy", "version": "1"}, progress=False)
    assert len(meta["losses"]) == 1 and 0 < meta["losses"][0] < 20
    assert (tmp_path / "sft" / ADAPTER_DIR / "adapter_model.safetensors").is_file()
    peft_cfg = json.loads((tmp_path / "sft" / ADAPTER_DIR / "adapter_config.json").read_text())
    assert peft_cfg["base_model_name_or_path"] == "smollm2-135m-instruct"  # not this machine's path
    saved = json.loads((tmp_path / "sft" / METADATA_FILE).read_text())
    assert saved["base_model"] == "smollm2-135m-instruct" and saved["kind"] == "chatbot"
    assert saved["base_model_identity"]["model_fingerprint"] == weights_fingerprint(smollm2)
