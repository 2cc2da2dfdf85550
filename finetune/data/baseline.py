"""Fit a response baseline (:mod:`harness.encoders.baseline`) for an encoder from a dialogue corpus.

    harness finetune baseline --encoder multilingual-e5-small \\
        --source topical-chat:../shared/data/topical-chat --name topical-chat \\
        --out harness/encoders/baselines/multilingual-e5-small.topical-chat.json

The corpus is read with :func:`finetune.data.sources.load_dialogues` (Topical-Chat, a JSONL file, a
built dataset or the contexts of a turn-level one). Its utterances are deduplicated, shuffled with
``seed`` and the first ``n`` are embedded in the response role; the baseline is their mean. No
rating is read. The file records the encoder identity, the source files' SHA-256, the counts and
the seed, so the packaged baseline can be recomputed and checked.
"""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path
from typing import Any

from harness.encoders import load_encoder
from harness.encoders.baseline import ResponseBaseline, compute_baseline, write_baseline

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def sample_utterances(source: str, n: int, seed: int) -> tuple[list[str], dict[str, Any]]:
    """``n`` distinct non-empty utterances of ``source`` (seeded shuffle), and what was read."""
    from finetune.data.sources import load_dialogues

    if n < 1:
        raise ValueError(f"--n must be >= 1, got {n}")
    loaded = load_dialogues(source)
    utts = list(dict.fromkeys(t.strip() for d in loaded for t in d.turns if t.strip()))
    if not utts:
        raise ValueError(f"{source}: no utterances to average ({loaded.report.summary()})")
    random.Random(seed).shuffle(utts)
    rep = loaded.report
    info: dict[str, Any] = {
        "source": source,
        "files": [{"path": Path(str(f.get("path"))).name, "sha256": f.get("sha256")} for f in rep.files],
        "license": rep.license,
        "dialogues": rep.kept,
        "languages": dict(rep.languages),
        "distinct_utterances": len(utts),
        "n_texts": min(n, len(utts)),
        "seed": seed,
    }
    files = info["files"]
    # one digest for the whole source: the file's own, or one over "name:sha256" lines of several
    info["source_sha256"] = (
        files[0]["sha256"]
        if len(files) == 1
        else hashlib.sha256("".join(f"{f['path']}:{f['sha256']}\n" for f in files).encode()).hexdigest()
    )
    return utts[:n], info


def fit_response_baseline(
    encoder: str,
    source: str,
    *,
    name: str,
    n: int = 2000,
    seed: int = 0,
    role: str = "passage",
    progress: bool = True,
) -> ResponseBaseline:
    """The mean ``role`` embedding under ``encoder`` of ``n`` utterances of ``source``."""
    if not _NAME_RE.match(name):
        raise ValueError(
            f"--name {name!r}: use lower-case letters, digits, '-' and '_' (it becomes a file name)"
        )
    texts, info = sample_utterances(source, n, seed)
    enc = load_encoder(encoder)
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), disable=not progress) as bar:
        task = bar.add_task(f"embedding {len(texts)} utterances ({role})", total=len(texts))
        bl = compute_baseline(
            enc, texts, name=name, role=role, provenance=info, progress=lambda k: bar.advance(task, k)
        )
    enc.close()
    return bl


def main_fit(
    encoder: str,
    source: str,
    *,
    name: str,
    out: str | Path | None,
    n: int,
    seed: int,
    role: str,
    progress: bool,
) -> tuple[ResponseBaseline, Path]:
    bl = fit_response_baseline(encoder, source, name=name, n=n, seed=seed, role=role, progress=progress)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", encoder.strip("/")).lower()
    path = write_baseline(bl, out if out is not None else Path(f"{slug}.{name}.json"))
    return bl, path
