"""Train only the top of an encoder: a frozen lower stack computed once, the adapted layers above it.

With ``frozen_layers: N`` (:class:`finetune.discriminative.DiscriminativeConfig`) the embeddings and
the lowest ``N`` transformer layers of a BERT-family encoder (BERT, XLM-R / E5, RoBERTa, MiniLM) stay
exactly as pre-trained — LoRA goes on the layers above only (PEFT ``layers_to_transform``). Their
output for a training text never changes, so with ``cache_frozen: true`` it is computed once, before
training, in length-sorted batches without autograd (:func:`precompute`), and kept per text as a
float16 ``[tokens, hidden]`` tensor; every training step then starts at layer ``N``
(:func:`top_hidden`). On a CPU this is what makes fine-tuning fit: measured on multilingual-e5-small
(12 layers), a step over 16 × 128 tokens costs ~2.9 s for the whole model, ~1.35 s with only the top 4
layers adapted, and less again when the lower 8 are not recomputed at every step and epoch.

Scoring (the judge) runs the whole encoder as usual: :func:`top_hidden` (cached input) and the normal
forward give the same numbers (the split is only where the computation starts; tested against the
full forward, float32 paths on one machine). The float16 cache rounds the layer-``N`` states
(relative error ~5e-4), which only training sees. The frozen layers run without dropout in training
too, cached or not (:func:`hold_frozen_in_eval`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: suffixes of the token sequences a feature can hold: "" (cross, siamese first), "_b" (siamese second)
SUFFIXES = ("", "_b")


def base_encoder(encoder: Any) -> Any:
    """The underlying transformers model of a (possibly PEFT-wrapped) encoder."""
    get = getattr(encoder, "get_base_model", None)
    return get() if callable(get) else encoder


def layer_count(encoder: Any) -> int:
    return len(_stack(base_encoder(encoder))[1])


def _stack(model: Any) -> tuple[Any, Sequence[Any]]:
    emb = getattr(model, "embeddings", None)
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if emb is None or layers is None:
        raise ValueError(
            f"frozen_layers needs a BERT-family encoder (.embeddings and .encoder.layer); "
            f"{type(model).__name__} has no such stack: set frozen_layers: 0"
        )
    return emb, layers


def check_frozen_layers(encoder: Any, n: int) -> None:
    total = layer_count(encoder)
    if not 0 <= n < total:
        raise ValueError(
            f"frozen_layers {n} must be between 0 and {total - 1} (the encoder has {total} layers; "
            "at least the top one must train)"
        )


def hold_frozen_in_eval(encoder: Any, n: int) -> None:
    """Put the embeddings and the lowest ``n`` layers in inference mode (no dropout), whatever mode the
    rest is in: a frozen layer computes the same function whether its output comes from the cache or
    is recomputed at every step (and then training from the cache follows training without it)."""
    if n <= 0:
        return
    emb, layers = _stack(base_encoder(encoder))
    emb.eval()
    for layer in layers[:n]:
        layer.eval()


def _mask(model: Any, attention_mask: Any, hidden: Any) -> Any:
    """The attention mask in the form the model's layers take (the model's own helper)."""
    create = getattr(model, "_create_attention_masks", None)
    if callable(create):  # transformers >= 5
        mask, _ = create(
            attention_mask=attention_mask,
            encoder_attention_mask=None,
            embedding_output=hidden,
            encoder_hidden_states=None,
            cache=None,
        )
        return mask
    return model.get_extended_attention_mask(attention_mask, attention_mask.shape)  # pragma: no cover


def _run(layers: Sequence[Any], hidden: Any, mask: Any) -> Any:
    for layer in layers:
        out = layer(hidden, attention_mask=mask)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


def bottom_hidden(
    encoder: Any, input_ids: Any, attention_mask: Any, n: int, token_type_ids: Any = None
) -> Any:
    """Output of the embeddings and the lowest ``n`` layers (``[batch, tokens, hidden]``)."""
    model = base_encoder(encoder)
    emb, layers = _stack(model)
    kw = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
    hidden = emb(input_ids=input_ids, **kw)
    return _run(layers[:n], hidden, _mask(model, attention_mask, hidden))


def top_hidden(encoder: Any, hidden: Any, attention_mask: Any, n: int) -> Any:
    """The layers from ``n`` up, from the layer-``n`` input ``hidden`` (LoRA included when the
    encoder is PEFT-wrapped: the adapted modules sit inside these layers)."""
    model = base_encoder(encoder)
    _, layers = _stack(model)
    return _run(layers[n:], hidden, _mask(model, attention_mask, hidden))


def precompute(
    encoder: Any,
    feats: list[dict[str, Any]],
    n: int,
    *,
    pad_id: int,
    max_tokens: int = 8192,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Replace the token ids of every sequence in ``feats`` by its layer-``n`` hidden states
    (``hidden{suffix}``: float16 ``[tokens, hidden]``, CPU); cosine-mode features hold a list of
    ``segments``, each handled alike. Batches are length-sorted and at most ``max_tokens`` padded
    tokens; no autograd. ``progress(k)`` is called with the sequences done per batch. Returns the
    number of sequences computed."""
    import torch

    seqs: list[tuple[dict[str, Any], str]] = []
    for f in feats:
        rows = f["segments"] if "segments" in f else [f]
        for row in rows:
            seqs += [(row, s) for s in SUFFIXES if f"input_ids{s}" in row]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i][0][f"input_ids{seqs[i][1]}"]))
    was_training = encoder.training
    encoder.eval()
    device = next(encoder.parameters()).device
    try:
        with torch.inference_mode():
            start = 0
            while start < len(order):
                end = start + 1
                longest = len(seqs[order[start]][0][f"input_ids{seqs[order[start]][1]}"])
                while end < len(order):
                    n_tok = len(seqs[order[end]][0][f"input_ids{seqs[order[end]][1]}"])
                    if (end - start + 1) * max(longest, n_tok) > max_tokens:
                        break
                    longest = max(longest, n_tok)
                    end += 1
                idx = order[start:end]
                ids = torch.full((len(idx), longest), pad_id, dtype=torch.long)
                att = torch.zeros((len(idx), longest), dtype=torch.long)
                tt = None
                for j, i in enumerate(idx):
                    row, s = seqs[i]
                    k = len(row[f"input_ids{s}"])
                    ids[j, :k] = torch.tensor(row[f"input_ids{s}"])
                    att[j, :k] = 1
                    if f"token_type_ids{s}" in row:
                        tt = tt if tt is not None else torch.zeros_like(ids)
                        tt[j, :k] = torch.tensor(row[f"token_type_ids{s}"])
                hidden = bottom_hidden(
                    encoder, ids.to(device), att.to(device), n, tt.to(device) if tt is not None else None
                )
                for j, i in enumerate(idx):
                    row, s = seqs[i]
                    k = len(row[f"input_ids{s}"])
                    row[f"hidden{s}"] = hidden[j, :k].to(torch.float16).cpu().clone()
                    for key in ("input_ids", "token_type_ids", "attention_mask"):
                        row.pop(f"{key}{s}", None)
                if progress is not None:
                    progress(len(idx))
                start = end
    finally:
        encoder.train(was_training)
    return len(seqs)


def pad_hidden(rows: Sequence[Mapping[str, Any]], suffix: str = "") -> dict[str, Any]:
    """``hidden_states{suffix}`` (float32 ``[batch, tokens, hidden]``, zeros after each row's end) and
    ``attention_mask{suffix}`` for rows holding cached ``hidden{suffix}`` tensors."""
    import torch

    states = [r[f"hidden{suffix}"] for r in rows]
    n = max(int(h.shape[0]) for h in states)
    out = torch.zeros((len(states), n, int(states[0].shape[1])), dtype=torch.float32)
    mask = torch.zeros((len(states), n), dtype=torch.long)
    for j, h in enumerate(states):
        out[j, : h.shape[0]] = h.float()
        mask[j, : h.shape[0]] = 1
    return {f"hidden_states{suffix}": out, f"attention_mask{suffix}": mask}


def cached_length(feat: Mapping[str, Any]) -> int:
    """Tokens of a feature whose sequences were replaced by cached hidden states."""
    rows = feat["segments"] if "segments" in feat else [feat]
    return sum(int(r[f"hidden{s}"].shape[0]) for r in rows for s in SUFFIXES if f"hidden{s}" in r)
