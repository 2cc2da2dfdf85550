"""The judge role: turns task items into scored verdicts.

A judge is named by a spec string (see :mod:`harness.spec`; :func:`harness.judges.load_judge`
creates it) and is always a separate role from any model under test. Verdicts keep the raw output and a parse status; a failed parse is a
``None`` score, counted and reported — never coerced to 0.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from harness.backends.base import BackendStatsRecord
from harness.cache import RequestCache
from harness.jsontypes import JSONObject
from harness.meta.panel_vote import PanelView
from harness.spec import JudgeSpec
from harness.tasks import TaskSpec
from harness.types import Usage

#: one item handed to a judge: a row of the common schema (:mod:`harness.data.schema`) or a
#: task's derived row; judges read the fields they need and check their types
Item: TypeAlias = Mapping[str, object]


@dataclass
class Verdict:
    score: float | None
    status: str  # "ok" | "missing_logprobs" | "parse_error" | "invalid_item"
    raw: str
    prompt_hash: str
    detail: str = ""
    usage: Usage = field(default_factory=Usage)
    cached: bool = False
    # the scorer's extras (Scored.extra) plus the judge's own: written to samples.parquet and read
    # by plug-ins (a pipeline's labels, a task's parts)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.score is not None


class Judge(ABC):
    role = "judge"

    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        self.spec = spec
        self.cache = cache
        self.seed = seed
        self.usage = Usage()

    @abstractmethod
    def score(self, task: TaskSpec, items: Sequence[Item]) -> list[Verdict]: ...

    @abstractmethod
    def identity(self) -> JSONObject:
        """Model id, revision, adapter/weights fingerprint: recorded in results and cache keys."""

    def decoding(self, task: TaskSpec) -> JSONObject | None:
        """Decoding parameters used for ``task`` (None for judges that do not decode)."""
        return None

    def method(self, task: TaskSpec) -> str:
        """How this judge turns an item into a score for ``task`` (recorded in results)."""
        return task.scoring

    def score_range(self, task: TaskSpec) -> tuple[float, float] | None:
        """The fixed (lo, hi) interval every ``ok`` score for ``task`` lies in, independent of the
        items scored, or None when it is not known (the ``mean:`` ensemble needs it to normalise)."""
        return None

    def item_score_range(self, task: TaskSpec, item: Item) -> tuple[float, float] | None:
        """The fixed range of ``item``'s score: :meth:`score_range` unless the judge routes items to
        judges with different ranges (``bylang:``), where it is the range of the item's route."""
        return self.score_range(task)

    def has_score_range(self, task: TaskSpec) -> bool:
        """Whether every item of ``task`` has a fixed range (:meth:`item_score_range` is not None)."""
        return self.score_range(task) is not None

    def panel_view(self, task: TaskSpec) -> PanelView | None:
        """For a judge that votes over members: its members, vote, quorum and the members' score
        ranges on ``task`` (what the panel meta-metrics need); None for a single judge."""
        return None

    def backend_stats(self) -> BackendStatsRecord:
        """Work sent to the model: requests, batches, retries, lazy weight-loading seconds."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Release the judge's model / connections."""

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def summed_backend_stats(parts: Sequence[BackendStatsRecord]) -> BackendStatsRecord:
    """The counts of a composite judge's parts, summed (keys no part has left out); the caller
    adds the per-part breakdown."""
    total = BackendStatsRecord()
    for stats in parts:
        if "requests" in stats:
            total["requests"] = total.get("requests", 0) + stats["requests"]
        if "batches" in stats:
            total["batches"] = total.get("batches", 0) + stats["batches"]
        if "retries" in stats:
            total["retries"] = total.get("retries", 0) + stats["retries"]
        if "load_seconds" in stats:
            total["load_seconds"] = total.get("load_seconds", 0) + stats["load_seconds"]
    return total


def close_all(judges: Iterable[Judge]) -> None:
    """Close every judge, even when one fails; the first failure is raised after the others closed."""
    error: Exception | None = None
    for j in judges:
        try:
            j.close()
        except Exception as e:
            error = error or e
    if error is not None:
        raise error


def item_text(item: Item, key: str) -> str:
    """``item[key]`` as a string (``response``, ``reference``...); a clear error when it is not one."""
    value = item[key]
    if not isinstance(value, str):
        raise TypeError(f"item {item.get('id')!r}: {key!r} is {type(value).__name__}, expected a string")
    return value


def message_texts(item: Item, key: str) -> list[str]:
    """The ``text`` of every message of ``item[key]`` (``context`` / ``turns``: lists of
    ``{role, text}``), oldest first; a clear error when the field has another shape."""
    messages = item[key]
    if isinstance(messages, str | bytes) or not isinstance(messages, Iterable):
        raise TypeError(
            f"item {item.get('id')!r}: {key!r} is {type(messages).__name__}, expected a list of messages"
        )
    texts = []
    for m in messages:
        text = m.get("text") if isinstance(m, Mapping) else None
        if not isinstance(text, str):
            raise TypeError(f"item {item.get('id')!r}: a message of {key!r} has no text: {m!r}")
        texts.append(text)
    return texts
