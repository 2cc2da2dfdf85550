"""``samples.parquet``, written as a run goes and read back column by column.

A run appends each judged batch's rows to a :class:`SampleWriter` — Arrow record batches flushed as
Parquet row groups of :data:`ROW_GROUP` rows into a hidden temporary file in the output directory —
so memory holds one row group, never the run. :meth:`SampleWriter.commit` renames the file into
place once ``results.json`` is ready to follow; a run that raises removes it.

The meta-evaluation reads the file back one task at a time with :func:`task_frame`, only the columns
the statistics use (never the raw judge outputs, whose size grows with the run), as a pandas frame
indexed by row number in the file — the same rows, in the same order, as the run produced them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from harness import interrupt
from harness.meta.issue_metrics import human_labels_json
from harness.meta.soft_labels import item_dimension, item_distribution
from harness.run.records import SampleError, SampleRow
from harness.run.results import SAMPLE_SCHEMA, SAMPLES_FILE
from harness.tasks import TaskSpec

if TYPE_CHECKING:
    from harness.judges.base import Verdict

#: rows per Parquet row group (and per flush): bounds what a run holds of its samples
ROW_GROUP = 8192
#: columns the meta-evaluation never reads (kept in the file for people and the viewer)
HEAVY_COLUMNS = ("run_id", "judge", "prompt_hash", "raw_output", "parse_detail")
#: columns only annotator-level statistics, panels and issue labels read
LABEL_COLUMNS = ("id", "extra", "human_distribution", "cached", "prompt_tokens", "completion_tokens")
SAMPLE_COLUMNS = list(SAMPLE_SCHEMA.names)
#: the samples file while a run writes it: ``.samples.<owner>.parquet`` (:func:`harness.interrupt.temp_name`)
TEMP_PREFIX = ".samples."
_LEGACY_TEMP = re.compile(r"\.samples\.[0-9a-f]{12}\.parquet")  # written before names carried an owner


def sample_row(
    run_id: str, spec: TaskSpec, judge: str, item: Mapping[str, object], v: Verdict
) -> dict[str, object]:
    """One row of samples.parquet: the item's identity and human rating, the judge's verdict."""
    extra = {k: val for k, val in v.extra.items() if val is not None and k != "labels"}
    return {
        "run_id": run_id,
        "task": spec.name,
        "dataset": item["dataset"],
        "language": item["language"],
        "id": item["id"],
        "item_id": item["item_id"],
        "judge": judge,
        "prompt_hash": v.prompt_hash,
        "raw_output": v.raw,
        "score": v.score if v.ok else None,
        "parse_status": v.status,
        "parse_detail": v.detail,
        "human_rating": spec.human_rating(item),
        "cached": bool(v.cached),
        "prompt_tokens": int(v.usage.prompt_tokens),
        "completion_tokens": int(v.usage.completion_tokens),
        "extra": json.dumps(extra, ensure_ascii=False, allow_nan=True) if extra else None,
        "system": item.get("system"),
        "dialogue_id": item.get("dialogue_id"),
        "human_dimension": (dim := item_dimension(spec.dimension, item)),
        "human_distribution": item_distribution(item, dim),
        "human_labels": human_labels_json(item),
        "judge_labels": json.dumps(v.extra["labels"], ensure_ascii=False) if v.extra.get("labels") else None,
    }


def _float_or_none(x: object) -> object:
    """NaN (a float score of NaN, as pandas held it) is null in the file."""
    return None if isinstance(x, float) and x != x else x


class SampleWriter:
    """Appends sample rows to ``<output_dir>/.samples.<owner>.parquet`` in row groups; counts the
    rows of each task. Use as a context manager: leaving it with an exception removes the file (and
    the output folder, when the writer made it and it is empty); so does a hard stop
    (:mod:`harness.interrupt`). A stale file a killed run left is removed (:func:`sweep_stale_samples`)."""

    def __init__(
        self,
        output_dir: Path,
        row_group: int | None = None,
        validate: Callable[[Mapping[str, object]], None] | None = None,
    ) -> None:
        self.output_dir = Path(output_dir)
        self._made_dir = not self.output_dir.exists()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        if self._made_dir:  # a hard stop (a second Ctrl-C) removes the folder this run made
            interrupt.track(self.output_dir)
        sweep_stale_samples(self.output_dir)
        self.path = interrupt.track(self.output_dir / interrupt.temp_name(TEMP_PREFIX, ".parquet"))
        self.row_group = row_group or ROW_GROUP
        self.validate = validate
        self.rows_by_task: Counter[str] = Counter()
        self._buffer: list[Mapping[str, object]] = []
        self.committed: Path | None = None
        self._writer: pq.ParquetWriter | None = None
        try:
            self._writer = pq.ParquetWriter(self.path, SAMPLE_SCHEMA)
        except BaseException:  # e.g. a stop signal right now: the caller never gets to abort()
            self.abort()
            raise

    @property
    def n_rows(self) -> int:
        return sum(self.rows_by_task.values())

    def add(self, rows: Iterable[Mapping[str, object]]) -> None:
        for r in rows:
            if self.validate is not None:
                self.validate(r)
            self._buffer.append(r)
            self.rows_by_task[str(r["task"])] += 1
        if len(self._buffer) >= self.row_group:
            self.flush()

    def flush(self) -> None:
        if not self._buffer or self._writer is None:
            return
        cols = {
            name: [
                _float_or_none(r.get(name)) if name in ("score", "human_rating") else r.get(name)
                for r in self._buffer
            ]
            for name in SAMPLE_SCHEMA.names
        }
        self._writer.write_table(
            pa.Table.from_pydict(cols, schema=SAMPLE_SCHEMA), row_group_size=len(self._buffer)
        )
        self._buffer = []

    def close(self) -> Path:
        """Flush and close the file (still under its temporary name); return its path."""
        self.flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return self.path

    def commit(self) -> Path:
        """Move the closed file to ``samples.parquet`` (atomically replacing an older one)."""
        self.close()
        final = self.output_dir / SAMPLES_FILE
        os.replace(self.path, final)
        interrupt.untrack(self.path)
        interrupt.untrack(self.output_dir)
        self.committed = self.path = final
        return final

    def abort(self) -> None:
        try:
            if self._writer is not None:
                self._writer.close()
        finally:
            self._writer = None
            if self.committed is None:
                self.path.unlink(missing_ok=True)
                interrupt.untrack(self.path)
                interrupt.untrack(self.output_dir)
                if self._made_dir and not any(self.output_dir.iterdir()):
                    self.output_dir.rmdir()  # a run that failed leaves no empty output folder

    def __enter__(self) -> SampleWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()


def sweep_stale_samples(output_dir: Path) -> list[Path]:
    """Remove samples files a killed run left (``kill -9``, a power cut): in ``output_dir`` (one
    without an owner in its name, from an older harness, too) and in the run folders beside it, the
    default place of the next run's output; a folder left empty by that goes too. A file whose
    writer still runs is kept. Such files are never read as results (only ``samples.parquet`` is)."""
    removed = interrupt.sweep(output_dir, f"{TEMP_PREFIX}*.parquet")
    for legacy in output_dir.glob(f"{TEMP_PREFIX}*.parquet"):
        if _LEGACY_TEMP.fullmatch(legacy.name):
            legacy.unlink(missing_ok=True)
            removed.append(legacy)
    try:
        siblings = [d for d in output_dir.parent.iterdir() if d.is_dir() and d != output_dir]
    except OSError:
        return removed
    for d in siblings:
        gone = interrupt.sweep(d, f"{TEMP_PREFIX}*.parquet")
        if gone:
            removed += gone
            with contextlib.suppress(OSError):
                d.rmdir()  # only when nothing else is in it
    return removed


def _columns(path: Path, labelled: bool) -> list[str]:
    schema = pq.read_schema(path)
    skip = set(HEAVY_COLUMNS) | (set() if labelled else set(LABEL_COLUMNS))
    return [c for c in schema.names if c not in skip]


def has_labels(path: Path, task: str) -> bool:
    """Whether any sample of ``task`` carries annotator labels (human or judge)."""
    pf = pq.ParquetFile(path)
    for i in range(pf.num_row_groups):
        t = pf.read_row_group(i, columns=["task", "human_labels", "judge_labels"])
        mine = t.filter(pc.equal(t["task"], task))
        if mine.num_rows and (
            mine["human_labels"].null_count < mine.num_rows or mine["judge_labels"].null_count < mine.num_rows
        ):
            return True
    return False


def task_frame(
    path: Path, task: str, *, full: bool | None = None, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """The samples of ``task`` from ``path`` as a DataFrame indexed by row position in the file.

    Only the columns the statistics read: without annotator labels (``full=False``, decided from the
    file when None) the per-label columns are left out too. ``columns`` picks them explicitly."""
    path = Path(path)
    if columns is None:
        labelled = has_labels(path, task) if full is None else full
        columns = _columns(path, labelled)
    cols = list(dict.fromkeys(["task", *columns]))
    pf = pq.ParquetFile(path)
    parts: list[pa.Table] = []
    index: list[np.ndarray] = []
    offset = 0
    for i in range(pf.num_row_groups):
        t = pf.read_row_group(i, columns=cols)
        mask = pc.equal(t["task"], task)
        rows = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
        if rows.size:
            parts.append(t.filter(mask))
            index.append(rows + offset)
        offset += t.num_rows
    table = pa.concat_tables(parts) if parts else pq.read_schema(path).empty_table().select(cols)
    frame = table.to_pandas()
    frame.index = pd.Index(np.concatenate(index) if index else np.array([], np.int64), dtype="int64")
    return frame


def iter_samples(path: str | Path, batch_size: int = 4096) -> Iterator[SampleRow]:
    """The rows of a samples.parquet (a file, or the run directory holding one) as validated
    :class:`SampleRow` objects, a record batch at a time. A file whose columns are not those of a
    sample, or a row that does not validate, is a :class:`SampleError` naming the file."""
    p = Path(path)
    if p.is_dir():
        p = p / SAMPLES_FILE
    pf = pq.ParquetFile(p)
    names = pf.schema_arrow.names
    missing = [
        c for c in ("task", "dataset", "language", "id", "item_id", "score", "parse_status") if c not in names
    ]
    unknown = [c for c in names if c not in SampleRow.model_fields]
    if missing or unknown:
        raise SampleError(
            f"{p}: not a samples file of this harness (missing columns {missing}, unknown {unknown})"
        )
    n = 0
    for batch in pf.iter_batches(batch_size=batch_size):
        for row in batch.to_pylist():
            n += 1
            try:
                yield SampleRow.model_validate(row)
            except ValidationError as e:
                err = e.errors()[0]
                raise SampleError(
                    f"{p}, row {n}: field {'.'.join(map(str, err['loc']))!r}: {err['msg']}"
                ) from None
