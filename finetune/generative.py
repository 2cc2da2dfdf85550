"""Generative dialogue evaluators: a causal LM instruction-tuned with LoRA to answer Yes / No.

xDial-Eval §4 ("Proposed Metrics"): turn-level and dialogue-level synthetic data (relevant vs
irrelevant responses, coherent vs incoherent dialogues) are put into the model's instruction
template (Table 3: ``### Instruction: … ### Input: … ### Response:``) and the LLM is fine-tuned with
LoRA; the fine-tuned model scores like the zero-shot one, ``P(Yes) / (P(Yes) + P(No))``.

Training and judging share one prompt path. An example's ``prompt`` is the *user message* — for the
xDial-Eval tasks the rendered Table 3 template (:func:`prompt_for_item` builds it from a task item
exactly as the judge does) — and it is rendered and tokenized by the harness's own
:class:`~harness.backends.hf.HFBackend` (the tokenizer's chat template, or
``chat_template=alpaca|plain|<jinja>`` as in the judge spec), so the trained model sees the very
token ids it is later judged on. The target is the answer's tokens (``tokenizer(answer,
add_special_tokens=False)``, as the judge scores label words), optionally followed by EOS; the loss
is the cross-entropy on those tokens only. Prompts longer than ``max_length`` are cut from the
left, like the judge's ``max_length``.

Only the adapter is saved (``<output_dir>/adapter``); ``dialeval_adapter.json`` (in the output
directory and, as a copy, in the adapter directory) records the base model id + revision, the chat
template, the LoRA settings, the training data version, the hyper-parameters, the training result
and the judge spec to use it: ``hf:<base>,adapter=<output_dir>/adapter[,chat_template=…]``.
:func:`finetune.lora.merge_adapter` writes a merged full model for backends without adapter support
(the LoRA model and the adapter directory: :mod:`finetune.lora`).

The data (:mod:`finetune.data.generative`) is a JSONL of ``{prompt, answer}`` or a registered
training-data version (``NAME@X.Y.Z`` / its directory): training on its ``train`` split, then
:func:`evaluate_generative` on its ``test`` split, if any (answer loss; P(Yes) accuracy / AUC /
mean P(Yes) of positives and negatives for Yes/No examples), stored under ``eval`` in the metadata.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from finetune.data.generative import (
    GenerativeExample,
    PromptEncoder,
    encode_examples,
    example_for_item,
    gold_label,
    load_generative_data,
    make_left_pad_collate,
    p_yes_metrics,
    pad_batch,
    prompt_for_item,
    xdial_prompt,
)
from finetune.lora import LoraSettings, load_lora_model, save_adapter
from finetune.trainer import TrainSettings, train
from harness.backends.hf_templates import local_model_fingerprint

log = logging.getLogger(__name__)

# The data side (examples, prompts, tokenization, batching, DATA) lives in finetune.data.generative,
# the LoRA model and the adapter directory in finetune.lora.
__all__ = [
    "GenerativeConfig",
    "GenerativeExample",
    "PromptEncoder",
    "encode_examples",
    "evaluate_generative",
    "example_for_item",
    "load_generative_data",
    "make_left_pad_collate",
    "pad_batch",
    "prompt_for_item",
    "train_generative",
    "xdial_prompt",
]


class GenerativeConfig(BaseModel):
    """A generative-evaluator training job."""

    model_config = ConfigDict(extra="forbid")

    base_model: str
    revision: str | None = None
    chat_template: str | None = None  # as the hf backend option: None = the tokenizer's template
    lora: LoraSettings = Field(default_factory=LoraSettings)
    max_length: int = Field(1024, ge=2)  # prompt + answer tokens; prompts are cut from the left
    train_eos: bool = False  # also train EOS after the answer
    labels: tuple[str, str] = ("Yes", "No")  # the judge's label words (positive, negative)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False
    eval_batch_size: int = Field(8, ge=1)  # held-out evaluation after training
    train: TrainSettings = Field(default_factory=TrainSettings)


# -- model ---------------------------------------------------------------------------------------


def _forward_args(model: Any) -> set[str]:
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return set(inspect.signature(base.forward).parameters)


def _answer_logits(m: Any, batch: dict[str, Any], accepts: set[str]) -> tuple[Any, Any]:
    """(logits, labels) of the last positions of a left-padded batch, from the position before the
    first answer token on; logits[:, t] predicts labels[:, t + 1]."""
    labels = batch["labels"]
    cols = (labels != -100).any(dim=0).nonzero()
    first = int(cols[0]) if len(cols) else labels.shape[1] - 1
    keep = labels.shape[1] - first + 1
    kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if "position_ids" in accepts:
        kwargs["position_ids"] = batch["position_ids"]
    if "logits_to_keep" in accepts:
        kwargs["logits_to_keep"] = keep
    return m(**kwargs).logits[:, -keep:, :].float(), labels[:, -keep:]


def make_answer_loss(model: Any) -> Callable[[Any, dict[str, Any]], Any]:
    """Mean cross-entropy over the answer tokens of a left-padded batch. Answers sit at the end of
    every row, so only the last positions' logits are computed (``logits_to_keep``)."""
    accepts = _forward_args(model)

    def loss_fn(m: Any, batch: dict[str, Any]) -> Any:
        import torch.nn.functional as F

        logits, target = _answer_logits(m, batch, accepts)
        return F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1), ignore_index=-100
        )

    return loss_fn


# -- held-out evaluation -------------------------------------------------------------------------
def answer_logprobs(
    model: Any, rows: Sequence[dict[str, list[int]]], pad_id: int, batch_size: int = 8
) -> list[tuple[float, int]]:
    """(sum of log P(answer token | prefix), answer tokens) per encoded row, teacher-forced — the
    judge's ``log P(choice | prompt)``. Rows are sharded over the accelerate processes and gathered."""
    import torch
    from accelerate import PartialState
    from accelerate.utils import gather_object

    state = PartialState()
    accepts, collate = _forward_args(model), make_left_pad_collate(pad_id)
    device = next(model.parameters()).device
    mine = list(range(state.process_index, len(rows), state.num_processes))
    local: list[tuple[int, float, int]] = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for s in range(0, len(mine), batch_size):
                idx = mine[s : s + batch_size]
                batch = {k: v.to(device) for k, v in collate([rows[i] for i in idx]).items()}
                logits, target = _answer_logits(model, batch, accepts)
                target = target[:, 1:]
                mask = target != -100
                lsm = torch.log_softmax(logits[:, :-1], dim=-1)
                lp = lsm.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask
                local += [(i, float(lp[b].sum()), int(mask[b].sum())) for b, i in enumerate(idx)]
    finally:
        model.train(was_training)
    gathered = gather_object(local) if state.num_processes > 1 else local
    return [(lp, n) for _, lp, n in sorted(gathered)]


def _sigmoid(d: float) -> float:
    return 1.0 / (1.0 + math.exp(-d)) if d >= 0 else math.exp(d) / (1.0 + math.exp(d))


def evaluate_generative(
    model: Any, examples: Sequence[GenerativeExample], encoder: PromptEncoder, cfg: GenerativeConfig
) -> dict[str, Any]:
    """Held-out metrics of ``model`` on ``examples``: ``loss`` (mean cross-entropy per answer token,
    as the training loss) and, when every example has a Yes/No label (:func:`gold_label`), P(Yes)
    metrics (:func:`p_yes_metrics`; P(Yes) = P(Yes) / (P(Yes) + P(No)) from the label words'
    teacher-forced log-probs, as the ``hf`` judge scores them)."""
    pad = encoder.tokenizer.pad_token_id
    bs = cfg.eval_batch_size
    pos, neg = cfg.labels
    labels = [gold_label(ex, cfg.labels) for ex in examples]
    scored = all(x is not None for x in labels)
    out: dict[str, Any] = {"n": len(examples)}
    lp: dict[str, list[tuple[float, int]]] = {}
    if scored:
        for word in (pos, neg):
            rows, _ = encode_examples(
                [GenerativeExample(e.prompt, word, e.system) for e in examples], encoder, cfg.max_length
            )
            lp[word] = answer_logprobs(model, rows, pad, bs)
    if scored and not cfg.train_eos and all(e.answer in lp for e in examples):
        gold = [lp[e.answer][i] for i, e in enumerate(examples)]
    else:
        rows, _ = encode_examples(examples, encoder, cfg.max_length, cfg.train_eos)
        gold = answer_logprobs(model, rows, pad, bs)
    tokens = sum(n for _, n in gold)
    out["loss"] = -sum(x for x, _ in gold) / tokens if tokens else None
    if scored:
        p_yes = [_sigmoid(y - n) for (y, _), (n, _) in zip(lp[pos], lp[neg], strict=True)]
        out.update(p_yes_metrics(labels, p_yes))
    else:
        out["p_yes"] = f"not computed: not every answer is {pos!r} / {neg!r} (or carries a label)"
    return out


# -- jobs ----------------------------------------------------------------------------------------
def train_generative(
    examples: Sequence[GenerativeExample],
    cfg: GenerativeConfig,
    output_dir: str | Path,
    data_version: dict[str, Any] | None = None,
    progress: bool = True,
    on_step: Callable[[int, float], None] | None = None,
    eval_examples: Sequence[GenerativeExample] | None = None,
) -> dict[str, Any]:
    """Instruction-tune ``cfg.base_model`` with LoRA on ``examples``; save the adapter and its
    metadata under ``output_dir``; return the metadata (also written to ``dialeval_adapter.json``).
    ``eval_examples`` (e.g. the data version's test split) are scored after training
    (:func:`evaluate_generative`); the metrics go into the metadata under ``eval``."""
    if len(examples) == 0:
        raise ValueError("the training set is empty")
    if eval_examples is not None and len(eval_examples) == 0:
        raise ValueError("the evaluation set is empty (pass None for no evaluation)")
    out = Path(output_dir)
    encoder = PromptEncoder(
        cfg.base_model,
        revision=cfg.revision,
        chat_template=cfg.chat_template,
        trust_remote_code=cfg.trust_remote_code,
    )
    rows, stats = encode_examples(examples, encoder, cfg.max_length, cfg.train_eos)
    model = _load(cfg)
    result = train(
        model,
        rows,
        make_left_pad_collate(encoder.tokenizer.pad_token_id),
        make_answer_loss(model),
        cfg.train,
        out,
        progress=progress,
        description="generative evaluator",
        on_step=on_step,
    )
    extra: dict[str, Any] = {"labels": list(cfg.labels)}
    if encoder.backend.source.identity:  # a packaged model: its weights fingerprint and source
        extra["base_model_identity"] = dict(encoder.backend.source.identity)
    elif Path(cfg.base_model).is_dir():  # what pins the base beyond id + revision
        extra["base_model_fingerprint"] = local_model_fingerprint(cfg.base_model)
    else:
        extra["base_resolved_revision"] = getattr(encoder.backend.config, "_commit_hash", None)
    if eval_examples is not None:
        split = (data_version or {}).get("eval_split")
        extra["eval"] = {"split": split, **evaluate_generative(model, eval_examples, encoder, cfg)}
    pos, neg = cfg.labels
    data = {
        **(data_version or {}),
        "examples": len(rows),
        "positives": stats["answers"].get(pos, 0),
        "negatives": stats["answers"].get(neg, 0),
        "answers": stats["answers"],
        "truncated_prompts": stats["truncated_prompts"],
    }
    hp = {
        "max_length": cfg.max_length,
        "train_eos": cfg.train_eos,
        "dtype": cfg.dtype,
        "gradient_checkpointing": cfg.gradient_checkpointing,
        "trust_remote_code": cfg.trust_remote_code,
        **cfg.train.model_dump(),
    }
    return save_adapter(
        model,
        out,
        kind="generative-evaluator",
        base_model=cfg.base_model,
        revision=cfg.revision,
        chat_template=cfg.chat_template,
        chat_template_name=encoder.chat_template_name,
        chat_template_text=encoder.backend.chat_template,
        training_data=data,
        hyperparameters=hp,
        result=result,
        extra=extra,
    )


def _load(cfg: Any) -> Any:
    return load_lora_model(
        cfg.base_model,
        cfg.lora,
        revision=cfg.revision,
        dtype=cfg.dtype,
        gradient_checkpointing=cfg.gradient_checkpointing,
        trust_remote_code=cfg.trust_remote_code,
        seed=cfg.train.seed,
    )


# -- command line ----------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """``[accelerate launch …] python -m finetune.generative CONFIG.yaml DATA OUTPUT_DIR``

    CONFIG is a :class:`GenerativeConfig` in YAML. DATA is a JSONL file with one ``{"prompt",
    "answer"}`` per line, or a registered training-data version — ``NAME@X.Y.Z`` / ``NAME``
    (latest) in the registry (``--registry``, default: the harness registry) or the version's
    directory: trained on its ``train`` split, evaluated on its ``test`` split when it has one.
    """
    import argparse

    import yaml

    p = argparse.ArgumentParser(prog="python -m finetune.generative", description=main.__doc__)
    p.add_argument("config")
    p.add_argument("data")
    p.add_argument("output_dir")
    p.add_argument("--registry", default=None, help="dataset registry root for NAME@X.Y.Z references")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    cfg = GenerativeConfig.model_validate(yaml.safe_load(Path(a.config).read_text("utf-8")))
    data = load_generative_data(a.data, labels=cfg.labels, registry_root=a.registry)
    meta = train_generative(
        data.train, cfg, a.output_dir, data.version, progress=not a.no_progress, eval_examples=data.eval
    )
    summary = {
        "adapter_dir": meta["adapter_dir"],
        "judge_spec": meta["judge_spec"],
        "training_data": {
            k: meta["training_data"].get(k) for k in ("source", "name", "version", "fingerprint")
        },
        **meta["train_result"],
    }
    if meta.get("eval"):
        summary["eval"] = meta["eval"]
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
