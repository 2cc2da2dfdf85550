"""Helpers for builder subclasses: language selection, speaker roles, ratings, hashing, atomic
downloads, Parquet writing with explicit features, Hub size categories, a progress bar, CSV
records read with every decoding problem named by file, row and column, and numbered raw records
of a local JSONL / JSON / CSV / TSV / text file or an ``hf:`` dataset (:func:`open_rows`)."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features

from harness.data.cells import sniff_delimiter
from harness.data.schema import DataValidationError, SourceUnavailableError
from harness.languages import LANGUAGES as LANGUAGE_LITERALS
from harness.languages import XDIAL_LANGUAGES

if TYPE_CHECKING:
    import httpx

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


def download_file(url: str, dest: Path, client: httpx.Client) -> bool:
    """Download ``url`` to ``dest`` (atomically). Returns False on HTTP 404.

    Network failures propagate as :class:`httpx.TransportError`; other HTTP errors as
    :class:`httpx.HTTPStatusError`.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part-{os.getpid()}")
    try:
        with client.stream("GET", url) as resp:
            if resp.status_code == 404:
                return False
            resp.raise_for_status()
            with open(tmp, "wb") as f:
                for chunk in resp.iter_bytes():
                    f.write(chunk)
        os.replace(tmp, dest)
        return True
    finally:
        if tmp.exists():
            tmp.unlink()


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


# -- CSV sources: decoding and size problems named by file, row and column -------------------------
#: The csv module refuses fields over 128 KiB by default; long dialogues and UPHELD chat histories
#: exceed that. Sources are read with the largest limit every platform's csv module accepts (2**31 - 1
#: characters), so a field is never too large before the file is.
CSV_FIELD_LIMIT = 2**31 - 1
_SURROGATE = re.compile("[\udc80-\udcff]")


def read_csv_records(path: Path) -> list[list[str]]:
    """Every record (header first) of a UTF-8 CSV file: :func:`iter_csv_records` as a list."""
    return list(iter_csv_records(path))


def iter_csv_records(path: Path) -> Iterator[list[str]]:
    """The records (header first) of a UTF-8 CSV file, read as they are needed (a BOM is dropped;
    the separator, comma, semicolon or tab, is the most frequent one on the header line).
    Bytes that are not UTF-8 stay in the text as lone surrogates, so the row that holds them can be
    reported (or skipped) with :func:`undecodable_cell`. Line endings ``\\n``, ``\\r\\n`` and a lone
    ``\\r`` (old Mac files) all end a record; inside a quoted field they are kept. A record the csv
    module cannot parse is a :class:`DataValidationError` naming the file and data row."""
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        delimiter = sniff_delimiter(f.readline())
        f.seek(0)
        if f.read(1) != "\ufeff":  # utf-8-sig drops the BOM only on the first read
            f.seek(0)
        reader = csv.reader(f, delimiter=delimiter)
        n = 0
        while True:
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise DataValidationError(
                    path,
                    "header" if not n else n,
                    "<record>",
                    f"the csv module cannot read it (line {reader.line_num} of the file): {e}",
                ) from None
            n += 1
            yield record


def undecodable_cell(
    path: Path,
    row: int | str,
    header: Sequence[str],
    cells: Sequence[str],
    columns: Iterable[int] | None = None,
) -> DataValidationError | None:
    """A :class:`DataValidationError` for the first cell (of ``columns``, default all) holding bytes
    that are not UTF-8 — naming file, row, column, the byte and its position — else None."""
    for j in range(len(cells)) if columns is None else columns:
        m = _SURROGATE.search(cells[j]) if j < len(cells) else None
        if m is not None:
            byte = ord(m.group()) - 0xDC00
            column = header[j] if j < len(header) else f"<field {j + 1}>"
            return DataValidationError(
                path,
                row,
                column,
                f"invalid UTF-8 byte 0x{byte:02x} at character {m.start() + 1} of the cell: the file must be UTF-8 "
                "(convert it, e.g. iconv -f latin1 -t utf-8, or leave such rows out with --skip-invalid)",
            )
    return None


@dataclass
class RawRows:
    """Numbered raw records of a source (:func:`open_rows`) and how its errors name them."""

    file: str  # how errors name the source
    name: str  # recorded as Scene.source / Persona.source
    rows: Iterator[tuple[int, Any]]  # (1-based row number, record: mapping or string)
    row_label: str
    column_label: str = "field"
    header: tuple[str, ...] | None = None  # CSV/TSV columns

    def error(self, row: int | str, column: str, problem: str) -> DataValidationError:
        return DataValidationError(
            self.file, row, column, problem, row_label=self.row_label, column_label=self.column_label
        )


def line_rows(path: Path, parse_json: bool) -> Iterator[tuple[int, Any]]:
    """Non-blank lines of a JSONL (``parse_json``) or text file, with their 1-based line numbers."""
    with path.open(encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line) if parse_json else line.strip()
            except json.JSONDecodeError as e:
                msg = f"invalid JSON: {e.msg}"
                raise DataValidationError(
                    path, lineno, "<record>", msg, row_label="line", column_label="field"
                ) from e


def open_rows(source: str, *, split: str, kind: str) -> RawRows:
    """Resolve ``source`` (a local file or ``hf:org/name[:config]``) into numbered raw records.

    ``kind`` names the records in messages (``"scene"``: the hint names ``load_scenes``)."""
    hint = f"pass a local file instead, e.g. load_{kind}s('path/to/{kind}s.jsonl')"
    if source.startswith("hf:"):
        name, _, config = source[3:].partition(":")
        if not name:
            raise ValueError(f"{kind} source {source!r}: expected hf:org/name[:config]")
        try:
            import datasets

            ds = datasets.load_dataset(name, config or None, split=split)
        except Exception as e:  # offline, unknown dataset, bad split, ...
            raise SourceUnavailableError(
                f"could not load {kind} source {source!r} (split {split!r}): {type(e).__name__}: {e}. "
                f"Without network access, {hint}"
            ) from e
        return RawRows(source, source, enumerate(ds, 1), "record")
    path = Path(source).expanduser()
    if not path.is_file():
        raise SourceUnavailableError(f"{kind} source {source!r} not found: no such file")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".txt"):
        return RawRows(str(path), path.name, line_rows(path, suffix == ".jsonl"), "line")
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from e
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON array of records, got {type(data).__name__}")
        return RawRows(str(path), path.name, enumerate(data, 1), "record")
    if suffix in (".csv", ".tsv"):
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",")
            rows = list(reader)
            header = tuple(reader.fieldnames or ())
        return RawRows(str(path), path.name, enumerate(rows, 1), "row", "column", header)
    raise ValueError(
        f"{kind} source {source!r}: unsupported file type {suffix or '(none)'!r}; "
        "use .jsonl, .json, .csv, .tsv or .txt, or hf:org/name[:config]"
    )


def text_value(rows: RawRows, rownum: int, rec: Mapping[str, Any], key: str) -> str:
    """The text of ``rec[key]`` with runs of whitespace collapsed; an error if missing or empty."""
    value = rec.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise rows.error(rownum, key, "missing or empty")
    if not isinstance(value, str):
        raise rows.error(rownum, key, f"expected a string, got {type(value).__name__}")
    return " ".join(value.split())


def pick_field(rows: RawRows, rownum: int, rec: Mapping[str, Any], candidates: Sequence[str]) -> str:
    """The first of ``candidates`` that ``rec`` has; an error (at the header of a CSV) if none."""
    for key in candidates:
        if key in rec:
            return key
    where: int | str = "header" if rows.header is not None else rownum
    raise rows.error(where, candidates[0], f"no text field; expected one of {', '.join(candidates)}")


class RowSpill:
    """The kept rows of a source file (the text columns a build reads, with their data-row
    numbers), written to a temporary Parquet file as they are checked and read back a few columns and
    a chunk of rows at a time: one pass over the source, and memory for one chunk, however many rows
    and languages it has (the xDial-Eval builder writes its language-major records from it)."""

    CHUNK = 2048

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self._dir = tempfile.TemporaryDirectory(prefix="dialeval-xdial-")
        self.path = Path(self._dir.name) / "rows.parquet"
        self._schema = pa.schema([("__row", pa.int64()), *((c, pa.string()) for c in columns)])
        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(self.path, self._schema)
        self._rows: list[int] = []
        self._cells: list[list[str]] = []

    def add(self, row: int, cells: list[str]) -> None:
        self._rows.append(row)
        self._cells.append(cells)
        if len(self._rows) >= self.CHUNK:
            self._flush()

    def _flush(self) -> None:
        if not self._rows or self._writer is None:
            return
        data = {"__row": self._rows, **{c: [r[j] for r in self._cells] for j, c in enumerate(self.columns)}}
        # undecodable bytes (lone surrogates) were reported or skipped by the checks; cells here are text
        self._writer.write_table(pa.Table.from_pydict(data, schema=self._schema))
        self._rows, self._cells = [], []

    def finish(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def read(self, columns: list[str]) -> Iterator[tuple[list[int], dict[str, list[str]]]]:
        pf = pq.ParquetFile(self.path)
        for batch in pf.iter_batches(batch_size=self.CHUNK, columns=["__row", *dict.fromkeys(columns)]):
            d = batch.to_pydict()
            yield d.pop("__row"), d

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._dir.cleanup()
