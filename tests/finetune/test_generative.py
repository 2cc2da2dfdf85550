"""finetune.generative: LoRA instruction tuning to Yes/No, adapter save/reload/merge, judged via the harness."""

from __future__ import annotations

import json

import pytest
import torch

from finetune.generative import (
    ADAPTER_DIR,
    METADATA_FILE,
    GenerativeConfig,
    GenerativeExample,
    LoraSettings,
    PromptEncoder,
    default_target_modules,
    encode_examples,
    merge_adapter,
    prompt_for_item,
    train_generative,
    xdial_prompt,
)
from finetune.trainer import TrainSettings
from harness.cache import RequestCache
from harness.judges.base import load_judge
from harness.tasks import get_task

TOPICS = ["cats", "dogs", "music", "food"]


def item(i: int, word: str) -> dict:
    return {"id": f"{word}-{i}", "language": "en", "dataset": "toy",
            "context": [{"role": "user", "text": f"hello , tell me about {TOPICS[i % 4]} ."}],
            "response": f"it is {word} ."}  # fmt: skip


ITEMS = [item(i, w) for i in range(4) for w in ("good", "bad")]


def examples(task) -> list[GenerativeExample]:
    return [
        GenerativeExample(prompt_for_item(task, it), "Yes" if "good" in it["response"] else "No")
        for it in ITEMS
    ]


def test_prompt_matches_table3_and_labels_only_the_answer(tiny_llama):
    task = get_task("xdial-eval-turn")
    p = prompt_for_item(task, ITEMS[0])
    assert p == xdial_prompt(
        "Given the following dialogue context and response, predict whether the response is relevant to the context.",
        "Dialogue Context:\nhello , tell me about cats .\n\nDialogue Response:\nit is good .",
    )
    enc = PromptEncoder(str(tiny_llama), chat_template="alpaca")
    rows, stats = encode_examples([GenerativeExample(p, "Yes")], enc, 512, train_eos=True)
    ids, labels = rows[0]["input_ids"], rows[0]["labels"]
    tok = enc.tokenizer
    prompt_ids = [t for t, lab in zip(ids, labels, strict=True) if lab == -100]
    assert tok.decode(prompt_ids).endswith("### Response:\n") and "Below is an instruction" in tok.decode(
        prompt_ids
    )
    assert [t for t in labels if t != -100] == [tok.convert_tokens_to_ids("Yes"), tok.eos_token_id]
    assert prompt_ids == ids[: len(prompt_ids)] and stats == {"truncated_prompts": 0, "answers": {"Yes": 1}}
    # the very ids the judge builds for the item's request
    from harness.backends.hf import HFBackend

    judge_backend = HFBackend(str(tiny_llama), chat_template="alpaca", device="cpu")
    assert enc.prompt_ids(p) == judge_backend.encode_prompt(
        judge_backend.render_prompt(task.build_request(ITEMS[0]))
    )
    chatml = PromptEncoder(str(tiny_llama))
    assert tok.decode(chatml.prompt_ids("hi", system="be brief")) == (
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    # prompts longer than max_length are cut from the left, like the judge's max_length
    rows, stats = encode_examples([GenerativeExample(p, "No")], enc, 10)
    assert (
        len(rows[0]["input_ids"]) == 10 and stats["truncated_prompts"] == 1 and rows[0]["labels"][-1] != -100
    )


def test_default_target_modules():
    assert default_target_modules("llama") == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert default_target_modules("qwen2") == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert default_target_modules("no-such-arch") == "all-linear"


def test_empty_examples_is_an_error(tmp_path, tiny_llama):
    with pytest.raises(ValueError, match="empty"):
        train_generative([], GenerativeConfig(base_model=str(tiny_llama)), tmp_path)


def test_train_save_judge_reload_merge(tmp_path, tiny_llama):
    task = get_task("xdial-eval-turn")
    cfg = GenerativeConfig(
        base_model=str(tiny_llama),
        lora=LoraSettings(r=8, alpha=16, dropout=0.0),
        train=TrainSettings(
            batch_size=8, max_steps=30, learning_rate=5e-3, checkpoint_every=100, log_every=10
        ),
    )
    data_version = {"name": "toy-good-bad", "version": "1", "fingerprint": "abc"}
    out = tmp_path / "run"
    meta = train_generative(examples(task), cfg, out, data_version, progress=False)

    # training: the loss goes down; only the adapter and metadata are written
    losses = meta["losses"]
    assert len(losses) == 30 and sum(losses[-5:]) / 5 < 0.2 * sum(losses[:5]) / 5
    adapter = out / ADAPTER_DIR
    assert {p.name for p in adapter.iterdir()} == {"adapter_config.json", "adapter_model.safetensors",
                                                     "README.md", METADATA_FILE}  # fmt: skip
    saved = json.loads((out / METADATA_FILE).read_text())
    assert saved == json.loads((adapter / METADATA_FILE).read_text())
    assert saved["kind"] == "generative-evaluator" and saved["base_model"] == str(tiny_llama)
    assert saved["base_revision"] is None and saved["training_data"]["fingerprint"] == "abc"
    assert saved["training_data"]["positives"] == saved["training_data"]["negatives"] == 4
    assert saved["adapter"]["r"] == 8 and saved["adapter"]["target_modules"] == [
        "k_proj",
        "o_proj",
        "q_proj",
        "v_proj",
    ]
    assert saved["hyperparameters"]["learning_rate"] == 5e-3 and saved["train_result"]["steps"] == 30
    assert saved["judge_spec"] == f"hf:{tiny_llama},adapter={adapter}"

    # the harness judge loads the adapter and P(Yes) separates the rule's two classes
    with load_judge(saved["judge_spec"], RequestCache(tmp_path / "c.sqlite")) as judge:
        assert judge.identity()["adapter_sha256"] == saved["adapter_sha256"]
        verdicts = judge.score(task, ITEMS)
    assert all(v.ok for v in verdicts)
    good = [v.score for v, it in zip(verdicts, ITEMS, strict=True) if "good" in it["response"]]
    bad = [v.score for v, it in zip(verdicts, ITEMS, strict=True) if "bad" in it["response"]]
    assert sum(good) / len(good) > 0.9 and sum(bad) / len(bad) < 0.1

    # reload with peft; the merged model gives the adapter model's logits
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    x = torch.tensor([[1, 20, 30, 40, 50, 60]])
    base = AutoModelForCausalLM.from_pretrained(str(tiny_llama), dtype=torch.float32)
    with torch.no_grad():
        base_logits = base(x).logits
        peft_model = PeftModel.from_pretrained(base, str(adapter)).eval()
        adapter_logits = peft_model(x).logits
    assert not torch.allclose(adapter_logits, base_logits, atol=1e-3)
    merged_dir = merge_adapter(adapter, tmp_path / "merged")
    merged = AutoModelForCausalLM.from_pretrained(str(merged_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        torch.testing.assert_close(merged(x).logits, adapter_logits, atol=1e-4, rtol=1e-4)
    mmeta = json.loads((merged_dir / "dialeval_merged.json").read_text())
    assert mmeta["merged_from"] == str(adapter) and mmeta["judge_spec"] == f"hf:{merged_dir}"
    assert (merged_dir / "tokenizer.json").is_file()


def test_qwen2_alpaca_template_smoke(tmp_path, tiny_qwen2):
    task = get_task("xdial-eval-turn")
    cfg = GenerativeConfig(base_model=str(tiny_qwen2), chat_template="alpaca",
                           train=TrainSettings(batch_size=4, max_steps=2, checkpoint_every=100))  # fmt: skip
    meta = train_generative(examples(task)[:4], cfg, tmp_path, progress=False)
    assert meta["judge_spec"].endswith(",chat_template=alpaca") and meta["chat_template_name"] == "alpaca"
    assert (
        meta["train_result"]["steps"] == 2
        and (tmp_path / ADAPTER_DIR / "adapter_model.safetensors").is_file()
    )
