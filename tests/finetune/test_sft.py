"""finetune.sft: assistant-only labels from rendered prefixes, LoRA SFT, adapter + metadata."""

from __future__ import annotations

import json

import pytest
import torch

from finetune.lora import ADAPTER_DIR, METADATA_FILE
from finetune.sft import ChatEncoder, SFTConfig, encode_dialogues, to_messages, train_chatbot
from finetune.trainer import TrainSettings

DIALOGUE = [
    {"role": "user", "text": "hello , tell me something about yourself !"},
    {"role": "assistant", "text": "i am 56 years old and i am a housekeeper ."},
    {"role": "user", "text": "do you have any hobbies or interests ?"},
    {"role": "assistant", "text": "i like to read and write poetry ."},
]


def runs(ids, labels, labelled: bool) -> list[list[int]]:
    """Maximal runs of token ids whose label is (not) -100."""
    out, cur = [], []
    for t, lab in zip(ids, labels, strict=True):
        if (lab != -100) == labelled:
            cur.append(t)
        elif cur:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def test_labels_are_exactly_the_assistant_turns(tiny_llama):
    enc = ChatEncoder(str(tiny_llama))
    msgs = to_messages(DIALOGUE, system_prompt="be nice")
    row = enc.encode(msgs)
    ids, labels = row["input_ids"], row["labels"]
    assert all(lab in (-100, t) for t, lab in zip(ids, labels, strict=True))
    dec = enc.tokenizer.decode
    assert [dec(r) for r in runs(ids, labels, True)] == [
        "i am 56 years old and i am a housekeeper .<|im_end|>\n",
        "i like to read and write poetry .<|im_end|>\n",
    ]
    assert [dec(r) for r in runs(ids, labels, False)] == [
        "<|im_start|>system\nbe nice<|im_end|>\n<|im_start|>user\nhello , tell me something about yourself !"
        "<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\ndo you have any hobbies or interests ?<|im_end|>\n<|im_start|>assistant\n",
    ]
    assert dec(ids) == enc.render(msgs)


def test_slow_tokenizer_path_counts_prefix_tokens(tiny_llama):
    enc = ChatEncoder(str(tiny_llama))
    fast = enc.encode(to_messages(DIALOGUE))

    class Slow:  # the same tokenizer without offsets
        is_fast = False

        def __getattr__(self, name):
            return getattr(tok, name)

        def __call__(self, *a, **k):
            return tok(*a, **k)

    tok = enc.tokenizer
    enc.tokenizer = Slow()
    assert enc.encode(to_messages(DIALOGUE)) == fast


def test_alpaca_like_template_gets_bos_and_non_prefix_template_is_an_error(tiny_llama):
    enc = ChatEncoder(str(tiny_llama), chat_template="plain")
    assert enc.chat_template_name == "plain"
    # a template that hides earlier assistant turns: a prefix render is not a prefix of the whole
    hiding = (
        "{% for m in messages %}{% if m['role'] == 'assistant' and not loop.last %}[hidden]"
        "{% else %}{{ m['role'] }}: {{ m['content'] }}{% endif %}\n{% endfor %}"
    )
    with pytest.raises(ValueError, match="not a prefix"):
        ChatEncoder(str(tiny_llama), chat_template=hiding).encode(to_messages(DIALOGUE))


def test_roles_truncation_and_drops(tiny_llama):
    assert to_messages([{"role": "human", "text": "a"}, {"role": "bot", "content": "b"}]) == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
    ]
    with pytest.raises(ValueError, match="unknown role"):
        to_messages([{"role": "narrator", "text": "x"}])
    enc = ChatEncoder(str(tiny_llama))
    rows, stats = encode_dialogues([DIALOGUE, DIALOGUE[:1]], enc, max_length=1000)
    assert len(rows) == 1 and stats["dropped_no_assistant"] == 1 and stats["assistant_turns"] == 2
    rows, stats = encode_dialogues([DIALOGUE], enc, max_length=12)  # right truncation: no assistant left
    assert rows == [] and stats["truncated"] == 1
    rows, _ = encode_dialogues([DIALOGUE], enc, max_length=12, truncation="left")
    assert len(rows[0]["input_ids"]) == 12 and rows[0]["labels"][-1] != -100


def test_empty_training_set_is_an_error(tmp_path, tiny_llama):
    cfg = SFTConfig(base_model=str(tiny_llama))
    with pytest.raises(ValueError, match="empty"):
        train_chatbot([], cfg, tmp_path)
    with pytest.raises(ValueError, match="empty"):
        train_chatbot([DIALOGUE[:1]], cfg, tmp_path)


def test_train_chatbot_loss_decreases_and_saves_adapter(tmp_path, tiny_llama):
    other = [
        {"role": "user", "text": "Wie geht es dir?"},
        {"role": "assistant", "text": "Ça va très bien, merci."},
    ]
    cfg = SFTConfig(
        base_model=str(tiny_llama),
        train=TrainSettings(batch_size=2, max_steps=40, learning_rate=1e-2, checkpoint_every=100),
    )
    meta = train_chatbot(
        [DIALOGUE, other] * 2, cfg, tmp_path, {"name": "toy-chat", "version": "1"}, progress=False
    )
    losses = meta["losses"]
    assert len(losses) == 40 and sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5
    saved = json.loads((tmp_path / METADATA_FILE).read_text())
    assert saved["kind"] == "chatbot" and saved["training_data"]["name"] == "toy-chat"
    assert saved["training_data"]["examples"] == 4 and saved["training_data"]["assistant_turns"] == 6
    assert saved["hyperparameters"]["loss"] == "assistant tokens only"
    assert saved["judge_spec"] == f"hf:{tiny_llama},adapter={tmp_path / ADAPTER_DIR}"

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    enc = ChatEncoder(str(tiny_llama))
    row = enc.encode(to_messages(other))
    x, y = torch.tensor([row["input_ids"]]), torch.tensor([row["labels"]])
    base = AutoModelForCausalLM.from_pretrained(str(tiny_llama), dtype=torch.float32)

    def nll(model):
        with torch.no_grad():
            logits = model(x).logits[0, :-1]
        return torch.nn.functional.cross_entropy(logits, y[0, 1:], ignore_index=-100).item()

    before = nll(base)
    after = nll(PeftModel.from_pretrained(base, str(tmp_path / ADAPTER_DIR)).eval())
    assert after < 0.5 * before  # the reloaded adapter learned the assistant turn
