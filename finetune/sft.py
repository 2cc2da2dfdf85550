"""Chatbot supervised fine-tuning (SFT) with LoRA, the loss on assistant turns only.

UPHELD App. B.1 fine-tunes a chatbot on held-out UPHELD conversations and shows that it follows the
human conversations' content and style far better than the base models; this module is that step
for any dialogue data in the harness schema (``[{"role": "user"|"assistant"|"system", "text"}]``).

Each dialogue is rendered with the chat template (the tokenizer's, or ``chat_template=`` as in the
judge spec) and tokenized once. The assistant tokens are found by rendering prefixes: for the
``k``-th message, if it is an assistant message, the text from the end of
``render(messages[:k], add_generation_prompt=True)`` to the end of ``render(messages[:k+1])`` is the
assistant's part — its content plus the template's end-of-turn marker (so the model learns to stop),
not the generation prompt (``<|im_start|>assistant\\n``), which is given at inference. Tokens that
start inside such a span get their id as label, every other token ``-100`` (character offsets of a
fast tokenizer; a slow tokenizer counts tokens of the text prefixes instead). A template whose
render of a prefix is not a prefix of the whole render (e.g. one that drops earlier reasoning) is an
error. Dialogues longer than ``max_length`` tokens are cut (``truncation="right"`` keeps the start,
``"left"`` the end); a dialogue left with no assistant token is dropped (counted in the metadata).
A dialogue's opening message, if it is the assistant's, is context (templates cannot render the
empty prefix before it).
The loss is the mean cross-entropy over a micro-batch's assistant tokens.

TRL's ``SFTTrainer`` (``assistant_only_loss=True`` with a ``peft_config``) does the same job and is
the natural choice in a project built on TRL. This project keeps one accelerate training loop
(:mod:`finetune.trainer`) for every job, so checkpoints, exact resume, logging, metadata and the
launch configs are identical for evaluators and chatbots — and ``trl`` is not a dependency.

Only the adapter is saved (``<output_dir>/adapter``), with ``dialeval_adapter.json`` (kind
``chatbot``); judge or chat with it as ``hf:<base>,adapter=<output_dir>/adapter``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from finetune.data.generative import pad_batch
from finetune.lora import LoraSettings, load_lora_model, save_adapter
from finetune.trainer import TrainSettings, train

log = logging.getLogger(__name__)

ROLE_ALIASES = {
    "human": "user",
    "bot": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "gpt": "assistant",
}


class SFTConfig(BaseModel):
    """A chatbot SFT job."""

    model_config = ConfigDict(extra="forbid")

    base_model: str
    revision: str | None = None
    chat_template: str | None = None  # as the hf backend option: None = the tokenizer's template
    system_prompt: str | None = None  # prepended as a system message to dialogues without one
    lora: LoraSettings = Field(default_factory=LoraSettings)
    max_length: int = Field(2048, ge=2)
    truncation: Literal["right", "left"] = "right"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False
    train: TrainSettings = Field(default_factory=TrainSettings)


class ChatEncoder:
    """Renders dialogues with a chat template and labels the assistant tokens."""

    def __init__(
        self,
        base_model: str,
        *,
        revision: str | None = None,
        chat_template: str | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        from transformers import AutoTokenizer

        from harness.backends.hf_templates import resolve_chat_template, resolve_weights

        # a packaged model's short name (smollm2-135m-instruct) reads its materialised checkpoint, and
        # its weights fingerprint identifies the base model in the adapter's metadata
        self.source = resolve_weights(base_model)
        self.tokenizer = AutoTokenizer.from_pretrained(
            self.source.path, revision=revision, trust_remote_code=trust_remote_code
        )
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.chat_template_name, self.chat_template = resolve_chat_template(
            chat_template, getattr(self.tokenizer, "chat_template", None), base_model
        )
        # Like the hf backend: a built-in / custom template gets the tokenizer's BOS when it uses one.
        bos = self.tokenizer.bos_token_id
        probe = self.tokenizer("a", add_special_tokens=True)["input_ids"]
        self._bos = (
            bos
            if self.chat_template_name != "tokenizer" and bos is not None and probe and probe[0] == bos
            else None
        )

    def render(self, messages: list[dict[str, str]], generation_prompt: bool = False) -> str:
        text = self.tokenizer.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=generation_prompt,
            chat_template=self.chat_template,
        )
        # transformers types the result for every ``tokenize``; with tokenize=False it is the text
        return cast(str, text)

    def assistant_spans(self, messages: list[dict[str, str]]) -> tuple[str, list[tuple[int, int]]]:
        """The rendered dialogue and the character spans of its assistant parts."""
        full = self.render(messages)
        spans = []
        for k, m in enumerate(messages):
            if m["role"] != "assistant" or k == 0:  # an opening assistant message is context
                continue
            prefix = self.render(messages[:k], generation_prompt=True)
            through = self.render(messages[: k + 1])
            if not (full.startswith(through) and through.startswith(prefix)):
                raise ValueError(
                    f"chat template {self.chat_template_name!r}: rendering the first {k + 1} messages is not a "
                    "prefix of the whole dialogue's rendering, so assistant tokens cannot be located; "
                    "use another chat_template"
                )
            spans.append((len(prefix), len(through)))
        return full, spans

    def encode(self, messages: list[dict[str, str]]) -> dict[str, list[int]]:
        """``input_ids`` and ``labels`` (the id on assistant tokens, -100 elsewhere)."""
        text, spans = self.assistant_spans(messages)
        tok = self.tokenizer
        if tok.is_fast:
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            ids, starts = list(enc["input_ids"]), [s for s, _ in enc["offset_mapping"]]
            labels = [
                t if any(a <= s < b for a, b in spans) else -100 for t, s in zip(ids, starts, strict=True)
            ]
        else:  # count the tokens of text prefixes
            ids = list(tok(text, add_special_tokens=False)["input_ids"])
            labels = [-100] * len(ids)
            for a, b in spans:
                i = len(tok(text[:a], add_special_tokens=False)["input_ids"])
                j = len(tok(text[:b], add_special_tokens=False)["input_ids"])
                labels[i:j] = ids[i:j]
        if self._bos is not None and (not ids or ids[0] != self._bos):
            ids, labels = [self._bos] + ids, [-100] + labels
        return {"input_ids": ids, "labels": labels}


def to_messages(
    dialogue: Sequence[Mapping[str, Any]], system_prompt: str | None = None
) -> list[dict[str, str]]:
    """Harness turns (``role`` + ``text``, or ``content``) → chat-template messages."""
    msgs = []
    for i, t in enumerate(dialogue):
        role = ROLE_ALIASES.get(str(t.get("role", "")).lower(), str(t.get("role", "")).lower())
        if role not in ("system", "user", "assistant"):
            raise ValueError(f"turn {i}: unknown role {t.get('role')!r} (use user / assistant / system)")
        text = t.get("text", t.get("content"))
        if not isinstance(text, str):
            raise ValueError(f"turn {i}: no text")
        msgs.append({"role": role, "content": text})
    if system_prompt and not any(m["role"] == "system" for m in msgs):
        msgs.insert(0, {"role": "system", "content": system_prompt})
    return msgs


def encode_dialogues(
    dialogues: Sequence[Sequence[Mapping[str, Any]]],
    encoder: ChatEncoder,
    max_length: int,
    truncation: str = "right",
    system_prompt: str | None = None,
) -> tuple[list[dict[str, list[int]]], dict[str, int]]:
    rows, stats = (
        [],
        {
            "dialogues": len(dialogues),
            "truncated": 0,
            "dropped_no_assistant": 0,
            "assistant_turns": 0,
            "assistant_tokens": 0,
            "tokens": 0,
        },
    )
    for d in dialogues:
        msgs = to_messages(d, system_prompt)
        stats["assistant_turns"] += sum(m["role"] == "assistant" for m in msgs)
        row = encoder.encode(msgs)
        if len(row["input_ids"]) > max_length:
            stats["truncated"] += 1
            cut = slice(None, max_length) if truncation == "right" else slice(-max_length, None)
            row = {k: v[cut] for k, v in row.items()}
        n_assist = sum(x != -100 for x in row["labels"])
        if n_assist == 0:
            stats["dropped_no_assistant"] += 1
            continue
        stats["assistant_tokens"] += n_assist
        stats["tokens"] += len(row["input_ids"])
        rows.append(row)
    if stats["truncated"] or stats["dropped_no_assistant"]:
        log.warning(
            "SFT data: %d dialogues truncated to %d tokens, %d dropped (no assistant tokens)",
            stats["truncated"],
            max_length,
            stats["dropped_no_assistant"],
        )
    return rows, stats


def make_right_pad_collate(pad_id: int) -> Callable[[list[dict[str, list[int]]]], dict[str, Any]]:
    def collate(rows: list[dict[str, list[int]]]) -> dict[str, Any]:
        return pad_batch(rows, pad_id, "right")

    return collate


def assistant_loss(model: Any, batch: dict[str, Any]) -> Any:
    """Mean next-token cross-entropy over the labelled (assistant) tokens of the micro-batch."""
    import torch.nn.functional as F

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    target = batch["labels"][:, 1:]
    keep = target != -100  # upcast only the assistant positions' logits
    return F.cross_entropy(logits[:, :-1][keep].float(), target[keep])


def train_chatbot(
    dialogues: Sequence[Sequence[Mapping[str, Any]]],
    cfg: SFTConfig,
    output_dir: str | Path,
    data_version: dict[str, Any] | None = None,
    progress: bool = True,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """LoRA SFT of ``cfg.base_model`` on ``dialogues`` (loss on assistant turns only); saves the
    adapter + ``dialeval_adapter.json`` under ``output_dir`` and returns the metadata."""
    if len(dialogues) == 0:
        raise ValueError("the training set is empty")
    out = Path(output_dir)
    encoder = ChatEncoder(
        cfg.base_model,
        revision=cfg.revision,
        chat_template=cfg.chat_template,
        trust_remote_code=cfg.trust_remote_code,
    )
    rows, stats = encode_dialogues(dialogues, encoder, cfg.max_length, cfg.truncation, cfg.system_prompt)
    if not rows:
        raise ValueError("the training set is empty: no dialogue has an assistant turn within max_length")
    model = load_lora_model(
        cfg.base_model,
        cfg.lora,
        revision=cfg.revision,
        dtype=cfg.dtype,
        gradient_checkpointing=cfg.gradient_checkpointing,
        trust_remote_code=cfg.trust_remote_code,
        seed=cfg.train.seed,
    )
    result = train(
        model,
        rows,
        make_right_pad_collate(encoder.tokenizer.pad_token_id),
        assistant_loss,
        cfg.train,
        out,
        progress=progress,
        description="chatbot SFT",
        on_step=on_step,
    )
    data = {**(data_version or {}), "examples": len(rows), **stats}
    hp = {
        "max_length": cfg.max_length,
        "truncation": cfg.truncation,
        "system_prompt": cfg.system_prompt,
        "dtype": cfg.dtype,
        "gradient_checkpointing": cfg.gradient_checkpointing,
        "trust_remote_code": cfg.trust_remote_code,
        "loss": "assistant tokens only",
        **cfg.train.model_dump(),
    }
    return save_adapter(
        model,
        out,
        kind="chatbot",
        base_model=cfg.base_model,
        revision=cfg.revision,
        chat_template=cfg.chat_template,
        chat_template_name=encoder.chat_template_name,
        chat_template_text=encoder.chat_template,
        training_data=data,
        hyperparameters=hp,
        result=result,
        extra={"base_model_identity": dict(encoder.source.identity)} if encoder.source.identity else None,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``[accelerate launch …] python -m finetune.sft CONFIG.yaml DIALOGUES.jsonl OUTPUT_DIR``

    CONFIG is an :class:`SFTConfig` in YAML; DIALOGUES has one dialogue per line: a list of
    ``{"role", "text"}`` turns, or an object with such a list under ``turns``.
    """
    import argparse

    import yaml

    p = argparse.ArgumentParser(prog="python -m finetune.sft", description=main.__doc__)
    p.add_argument("config")
    p.add_argument("dialogues")
    p.add_argument("output_dir")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    cfg = SFTConfig.model_validate(yaml.safe_load(Path(a.config).read_text("utf-8")))
    rows = [json.loads(x) for x in Path(a.dialogues).read_text("utf-8").splitlines() if x.strip()]
    dialogues = [r["turns"] if isinstance(r, dict) else r for r in rows]
    meta = train_chatbot(
        dialogues, cfg, a.output_dir, {"source": str(a.dialogues)}, progress=not a.no_progress
    )
    print(
        json.dumps(
            {"adapter_dir": meta["adapter_dir"], "judge_spec": meta["judge_spec"], **meta["train_result"]},
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
