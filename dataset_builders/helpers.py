"""Helpers for builder subclasses: language selection, speaker roles, ratings, hashing, Parquet
writing with explicit features, Hub size categories and a progress bar."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features

from harness.languages import LANGUAGES as LANGUAGE_LITERALS
from harness.languages import XDIAL_LANGUAGES

#: Languages of the record schema, ISO 639-1 code -> English name (xDial-Eval column prefix).
#: Order is the canonical output order (the order of the xDial-Eval paper).
LANGUAGE_NAMES: dict[str, str] = {code: LANGUAGE_LITERALS[code].name for code in XDIAL_LANGUAGES}
LANGUAGES: tuple[str, ...] = tuple(LANGUAGE_NAMES)


def normalize_languages(languages: Iterable[str] | str | None) -> tuple[str, ...]:
    """ISO codes (or English names, e.g. ``"english"``) -> canonical tuple of ISO codes.

    ``None`` means every language. Comma-separated strings are accepted.
    """
    if languages is None:
        return LANGUAGES
    if isinstance(languages, str):
        languages = [languages]
    by_name = {name: code for code, name in LANGUAGE_NAMES.items()}
    wanted: set[str] = set()
    for raw in languages:
        for part in str(raw).split(","):
            key = part.strip().lower()
            if not key:
                continue
            code = key if key in LANGUAGE_NAMES else by_name.get(key)
            if code is None:
                raise ValueError(f"unknown language {part.strip()!r}; known: {', '.join(LANGUAGES)}")
            wanted.add(code)
    if not wanted:
        raise ValueError("languages= selects no language")
    return tuple(lang for lang in LANGUAGES if lang in wanted)


def turn_level_roles(n_context: int) -> list[str]:
    """Roles of ``n_context`` context utterances when the response is the chatbot's.

    The response is ``assistant``; going backwards from it, speakers alternate, so the last
    context utterance is ``user``, the one before it ``assistant``, and so on.
    """
    return ["user" if (n_context - i) % 2 == 1 else "assistant" for i in range(n_context)]


def dialogue_level_roles(n_turns: int) -> list[str]:
    """Roles of a dialogue whose speakers alternate starting with the human (``user``)."""
    return ["user" if i % 2 == 0 else "assistant" for i in range(n_turns)]


def messages(texts: Sequence[str], roles: Sequence[str]) -> list[dict[str, str]]:
    return [{"role": r, "text": t} for r, t in zip(roles, texts, strict=True)]


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def check_rating(value: Any) -> float | None:
    """Return the rating as a finite float, or None if it is not one (bools are rejected)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def size_category(n: int) -> str:
    """Hugging Face Hub ``size_categories`` bucket for ``n`` rows."""
    buckets = [
        (10**3, "n<1K"),
        (10**4, "1K<n<10K"),
        (10**5, "10K<n<100K"),
        (10**6, "100K<n<1M"),
        (10**7, "1M<n<10M"),
        (10**8, "10M<n<100M"),
        (10**9, "100M<n<1B"),
    ]
    for limit, label in buckets:
        if n < limit:
            return label
    return "n>1B"


def write_parquet(records: Sequence[dict[str, Any]], features: Features, path: Path) -> int:
    """Write records with an explicit schema (the datasets Features are stored in its metadata).

    Returns the in-memory (Arrow) size of the table in bytes.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(list(records), schema=features.arrow_schema)
    pq.write_table(table, path, compression="zstd")
    return table.nbytes


@contextlib.contextmanager
def progress_bar(total: int, description: str, enabled: bool = True) -> Iterator[Any]:
    """A rich progress bar (on stderr) with an ``advance(label)`` method; a no-op when disabled."""

    class _Null:
        def advance(self, label: str = "") -> None:
            pass

        def describe(self, label: str) -> None:
            pass

    if not enabled:
        yield _Null()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[label]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )

    class _Bar:
        def __init__(self) -> None:
            self.task = progress.add_task(description, total=total, label="")

        def describe(self, label: str) -> None:
            progress.update(self.task, label=label)

        def advance(self, label: str = "") -> None:
            progress.update(self.task, advance=1, label=label)

    with progress:
        yield _Bar()
