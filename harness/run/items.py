"""The items of a run's tasks, counted first and then streamed in batches.

:func:`plan_task` checks a task against its dataset (configs present, languages, the rows' level)
and counts the items it will judge, reading only the ``language`` and ``level`` columns.
:meth:`TaskItems.batches` then yields the items in ``step``-sized batches — the same items, in the
same order and grouping, as a list of all of them cut every ``step`` items — reading the Parquet
record batch by record batch, so a run holds a batch of items, never the dataset. A task with a
``prepare`` hook (e.g. turns grouped into dialogues) sees all its items at once, as the hook needs:
those items are held in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeAlias

from harness.data.resolve import DatasetHandle, iter_items
from harness.run.records import check_item
from harness.tasks import TaskSpec, load_hook

#: a dataset row as a judge gets it (checked as a :class:`~harness.run.records.TurnItem` /
#: :class:`~harness.run.records.DialogueItem` on read)
ItemRow: TypeAlias = dict[str, object]


@dataclass
class TaskItems:
    spec: TaskSpec
    handle: DatasetHandle
    configs: list[str]  # the configs the items come from, in order
    missing: list[str]  # configs of the task the dataset does not have
    languages: list[str]
    limit: int | None
    total: int = 0
    prepared: list[ItemRow] | None = field(default=None, repr=False)

    def rows(self) -> Iterator[list[ItemRow]]:
        """The selected rows, each validated as an item of the task's level (:func:`check_item`)."""
        if self.prepared is not None:
            yield self.prepared
            return
        yield from self._read()

    def _read(self) -> Iterator[list[ItemRow]]:
        level = self.spec.row_level
        for config in self.configs:
            where, n = f"{self.handle.location} config {config!r}", 0
            for batch in iter_items(self.handle, config, languages=self.languages, limit=self.limit):
                for row in batch:
                    n += 1
                    check_item(row, level, where, n)
                yield batch

    def batches(self, step: int) -> Iterator[list[ItemRow]]:
        """The items in batches of ``step`` (the last one shorter), across config boundaries."""
        yield from rebatch(self.rows(), step)


def rebatch(chunks: Iterable[list[ItemRow]], step: int) -> Iterator[list[ItemRow]]:
    """The rows of ``chunks`` in lists of ``step`` (the last one shorter)."""
    buf: list[ItemRow] = []
    for chunk in chunks:
        buf.extend(chunk)
        while len(buf) >= step:
            yield buf[:step]
            buf = buf[step:]
    if buf:
        yield buf


def _levels(
    handle: DatasetHandle, config: str, languages: list[str], limit: int | None
) -> tuple[int, object, set[object]]:
    """(rows selected, the first row's level, every level present) of a config; reads two columns."""
    n: int = 0
    first: object = None
    levels: set[object] = set()
    for batch in iter_items(handle, config, languages=languages, limit=limit, columns=["language", "level"]):
        if n == 0:
            first = batch[0].get("level")
        n += len(batch)
        levels.update(r.get("level") for r in batch)
    return n, first, levels


def _first_at_other_level(
    handle: DatasetHandle, config: str, spec: TaskSpec, languages: list[str], limit: int | None
) -> ItemRow | None:
    for batch in iter_items(
        handle, config, languages=languages, limit=limit, columns=["id", "language", "level"]
    ):
        for r in batch:
            if r.get("level") not in (None, spec.row_level):
                return r
    return None


def plan_task(
    spec: TaskSpec, handle: DatasetHandle, languages: list[str] | None, limit: int | None
) -> TaskItems:
    """The task's items: rows of its configs (every config at the task's input level for
    ``configs=("*",)``), filtered to the languages, then the task's ``prepare`` hook if any.
    Errors name the task, the dataset and the way out."""
    if spec.any_config:
        present, missing = list(handle.configs), []
    else:
        present = [c for c in spec.configs if c in handle.configs]
        missing = [c for c in spec.configs if c not in handle.configs]
    if not present:
        raise ValueError(
            f"task {spec.name!r}: none of its dataset configs {list(spec.configs)} is in {handle.location} "
            f"(it has {handle.configs})"
        )
    langs = languages or list(spec.languages)
    unknown = [lang for lang in langs if lang not in spec.languages]
    if unknown:
        raise ValueError(f"task {spec.name!r} has no language(s) {unknown}; it covers {list(spec.languages)}")
    used: list[str] = []
    other_level: list[str] = []
    total = 0
    for config in present:
        n, first, levels = _levels(handle, config, langs, limit)
        if spec.any_config and n and first not in (None, spec.row_level):
            other_level.append(config)
            continue
        if levels - {None, spec.row_level}:
            r = _first_at_other_level(handle, config, spec, langs, limit) or {}
            raise ValueError(
                f"{handle.location} config {config!r}: row {r.get('id')} is level {r.get('level')!r}, "
                f"task {spec.name!r} expects {spec.row_level!r}"
            )
        used.append(config)
        total += n
    if spec.any_config and not total and other_level:
        raise ValueError(
            f"task {spec.name!r} reads {spec.row_level}-level rows, but every config of {handle.location} "
            f"({', '.join(other_level)}) is at another level"
        )
    plan = TaskItems(spec, handle, used, missing, langs, limit, total)
    if spec.prepare and total:
        items = [r for chunk in plan._read() for r in chunk]
        plan.prepared = list(load_hook(spec.prepare)(spec, items))
        plan.total = len(plan.prepared)
    return plan
