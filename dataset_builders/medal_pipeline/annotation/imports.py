"""Reading the annotators' returned MEDAL sheets (MEDAL §5.2, App. E.1): ``<lang>/<annotator>.csv``
(UTF-8, with or without BOM; comma, semicolon or tab separated) or ``.jsonl`` files validated into an
:class:`AnnotationSet`. :func:`import_annotations` raises the first error, :func:`validate_annotations`
lists them all. Issue labels are ``0``/``1`` (``true``/``false`` accepted), ``overall`` an integer
1–5; any other cell follows the builders' odd-cell policy (:mod:`harness.data.cells`): read by its
point or a missing label, listed in ``AnnotationSet.odd_cells``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataset_builders.medal_labels import ISSUE_DEFINITIONS, MEDAL_ISSUES, MEDAL_OVERALL, OVERALL_DEFINITION
from dataset_builders.medal_pipeline.annotation.agreement import language_order
from harness.data.cells import (
    CellKind,
    CellLog,
    OddCell,
    StrictCellError,
    is_blank,
    is_repeated_header,
    read_label,
    sniff_delimiter,
)
from harness.data.schema import DataValidationError, Dimension

LABEL_COLUMNS: tuple[str, ...] = (*MEDAL_ISSUES, MEDAL_OVERALL)
REQUIRED_COLUMNS: tuple[str, ...] = ("dialogue_id", *LABEL_COLUMNS)
SHEET_STEM = "sheet"  # the blank sheet's file stem; never read as an annotator's file
_ISSUE_VALUES = {"0": 0.0, "1": 1.0, "false": 0.0, "true": 1.0}
_OVERALL_VALUES = {str(i): float(i) for i in range(1, 6)}
_SPREADSHEETS = (".xlsx", ".xls", ".ods", ".numbers")
#: The scales as the guideline words them, for reading '<point>: <wording>' cells by their point.
_SCALES: dict[str, Dimension] = {
    **{
        n: Dimension(n, ISSUE_DEFINITIONS[n], "binary", 0, 1, {0.0: "absent", 1.0: "present"})
        for n in MEDAL_ISSUES
    },
    MEDAL_OVERALL: Dimension(
        MEDAL_OVERALL,
        OVERALL_DEFINITION,
        "likert",
        1,
        5,
        {1.0: "Very bad", 2.0: "Poor", 3.0: "Fair", 4.0: "Good", 5.0: "Very good"},
    ),
}


# -- import ----------------------------------------------------------------------------------------


@dataclass
class AnnotationSet:
    """Validated human labels.

    ``labels``: ``(dialogue_id, annotator, dimension, value, raw)``, ``value`` ``None`` for a missing
    label (only with ``allow_partial``), ``raw`` as written. ``annotators``: per language, the
    annotator ids (sorted). ``coverage``: per language and annotator, the dialogues in their file.
    ``missing``: number of ``None`` labels (an unreadable cell is one, listed in ``odd_cells``);
    ``uncovered``: expected (dialogue, annotator) pairs absent
    from the annotator's file. ``language_of``: language of every annotated dialogue.
    """

    labels: list[tuple[str, str, str, float | None, str]] = field(default_factory=list)
    annotators: dict[str, list[str]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    missing: int = 0
    coverage: dict[str, dict[str, int]] = field(default_factory=dict)
    uncovered: int = 0
    language_of: dict[str, str] = field(default_factory=dict)
    comments: dict[tuple[str, str], str] = field(default_factory=dict)  # (dialogue, annotator) -> text
    #: odd cells met (:mod:`harness.data.cells`): handled by the policy, listed here
    odd_cells: list[OddCell] = field(default_factory=list)

    def ratings(self, dimension: str, language: str | None = None) -> list[tuple[str, str, float | None]]:
        """``(item, annotator, value)`` triples of one label (for :mod:`harness.meta.agreement`)."""
        return [
            (d, a, v)
            for d, a, dim, v, _ in self.labels
            if dim == dimension and (language is None or self.language_of.get(d) == language)
        ]


class _Sink:
    """Raises the first error, or collects them all (``collect=True``); odd cells go to ``cells``
    (under ``strict`` each is an error like the others)."""

    def __init__(self, collect: bool, strict: bool = False) -> None:
        self.errors: list[DataValidationError] | None = [] if collect else None
        self.cells = CellLog(strict=strict)

    def add(self, err: DataValidationError) -> None:
        if self.errors is None:
            raise err
        self.errors.append(err)

    def odd(
        self, path: Path, row: int, column: str, raw: str, kind: CellKind, problem: str, **loc: str
    ) -> None:
        try:
            self.cells.record(f"{path.parent.name}/{path.name}", row, column, raw, kind, problem, **loc)
        except StrictCellError as e:
            self.add(e)


def _filled(cell: Any) -> bool:
    return cell is not None and not (isinstance(cell, str) and not cell.strip())


def _whole_file(path: Path, column: str, problem: str) -> DataValidationError:
    return DataValidationError(path, "file", column, problem, row_label="whole")


def _decode(path: Path, sink: _Sink) -> str | None:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        sink.add(
            DataValidationError(
                path,
                line,
                "(encoding)",
                f"not UTF-8 text ({exc.reason}); save the file as UTF-8",
                row_label="line",
            )
        )
        return None


def _norm(name: Any) -> str:
    return str(name).replace("\ufeff", "").strip().lower()


def _read_csv(path: Path, text: str, sink: _Sink) -> list[tuple[int, dict[str, Any]]] | None:
    delimiter = sniff_delimiter(text.split("\n", 1)[0])
    try:
        records = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    except csv.Error as exc:
        sink.add(_whole_file(path, "(csv)", f"not a readable CSV file: {exc}"))
        return None
    header = [_norm(h) for h in records[0]] if records else []
    problems = [(c, "required column missing") for c in REQUIRED_COLUMNS if c not in header]
    problems += [
        (c, "column appears more than once") for c in dict.fromkeys(header) if c and header.count(c) > 1
    ]
    for column, problem in problems:
        sink.add(DataValidationError(path, "header", column, f"{problem} (header: {header})"))
    if problems:
        return None
    rows = []
    for number, cells in enumerate(records[1:], start=1):
        if is_blank(cells) or is_repeated_header(cells, records[0]):  # spreadsheets leave blank rows
            kind: CellKind = "blank_row" if is_blank(cells) else "repeated_header"
            sink.odd(path, number, "<row>", delimiter.join(cells), kind, "")
            continue
        rows.append((number, {h: cells[i] if i < len(cells) else "" for i, h in enumerate(header) if h}))
    return rows


def _read_jsonl(text: str) -> list[tuple[int, dict[str, Any] | str]]:
    """``(line, object)`` per non-blank line; a line that is no JSON object gives the problem text."""
    rows: list[tuple[int, dict[str, Any] | str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            row = {_norm(k): v for k, v in obj.items()} if isinstance(obj, dict) else "not a JSON object"
        except json.JSONDecodeError as exc:
            row = f"invalid JSON: {exc}"
        rows.append((number, row))
    return rows


def _parse_label(dimension: str, cell: Any) -> tuple[float | None, str, str | None, CellKind | None]:
    """``(value, raw, problem, kind)``: ``value`` None for an empty cell (``problem`` None). A cell
    that is not one of the guideline's values follows the odd-cell policy: a point of the scale with
    the guideline's words (``'4 - Good'``) is read by its point; with other words it is read by its
    point too, as a ``wording_mismatch``; anything else is a missing label (``unreadable_label``);
    ``problem`` says why."""
    if cell is None or (isinstance(cell, str) and not cell.strip()):
        return None, "" if cell is None else cell, None, None
    raw = cell if isinstance(cell, str) else json.dumps(cell)
    overall = dimension == MEDAL_OVERALL
    key = raw.strip().lower()
    if (isinstance(cell, bool) and overall) or isinstance(cell, float | list | dict):
        key = ""  # JSON 4.0, true for overall, arrays, objects: never a label
    allowed = _OVERALL_VALUES if overall else _ISSUE_VALUES
    if key in allowed:
        return allowed[key], raw, None, None
    if isinstance(cell, str) and (got := read_label(cell, _SCALES[dimension])).value is not None:
        return got.value, raw, got.problem or None, got.kind  # '4 - Good' clean, '4: <other words>' odd
    if overall:
        why = f"{raw!r} is not an overall rating: use an integer from 1 (Very bad) to 5 (Very good)"
    else:
        why = f"{raw!r} is not an issue label: use 0 (absent) or 1 (present), or false/true"
    return None, raw, why, "unreadable_label"


_Rows = list[tuple[str, dict[str, tuple[float | None, str]], str]]  # (dialogue id, labels, comment)


def _read_file(
    path: Path, lang: str, expected: Mapping[str, str], allow_partial: bool, sink: _Sink
) -> tuple[str, _Rows] | None:
    jsonl = path.suffix.lower() == ".jsonl"
    loc = {"row_label": "line", "column_label": "field"} if jsonl else {}
    text = _decode(path, sink)
    if text is None:
        return None
    parsed = _read_jsonl(text) if jsonl else _read_csv(path, text, sink)
    if parsed is None:
        return None
    annotator = path.stem
    named = [
        (n, str(r["annotator"]).strip())
        for n, r in parsed
        if isinstance(r, dict) and str(r.get("annotator") or "").strip()
    ]
    if named:
        annotator = named[0][1]
        for number, name in named:
            if name != annotator:
                sink.add(
                    DataValidationError(
                        path,
                        number,
                        "annotator",
                        f"annotator {name!r} differs from "
                        f"{annotator!r} on earlier rows: one annotator per file",
                        **loc,
                    )
                )
    result: _Rows = []
    first_row: dict[str, int] = {}
    for number, row in parsed:
        if isinstance(row, str):
            sink.add(DataValidationError(path, number, "(json)", row, **loc))
            continue
        did = str(row.get("dialogue_id") or "").strip()
        problem = None
        if "dialogue_id" not in row:
            problem = "field missing"
        elif not did:
            problem = "empty dialogue id"
        elif did not in expected:
            problem = f"unknown dialogue id {did!r} (not among the {len(expected)} expected dialogues)"
        elif expected[did] != lang:
            problem = f"dialogue {did!r} is in language {expected[did]!r}, but this file is under {lang}/"
        elif did in first_row:
            problem = (
                f"dialogue {did!r} appears twice (first on {loc.get('row_label', 'row')} {first_row[did]})"
            )
        if problem and not did.strip("[]{}(),;:\"' ") and not any(_filled(row.get(c)) for c in LABEL_COLUMNS):
            # no dialogue and no label: a fragment of a broken export, nothing usable in it
            sink.odd(
                path, number, "dialogue_id", str(row.get("dialogue_id") or ""), "row_left_out", problem, **loc
            )
            continue
        if problem:
            sink.add(DataValidationError(path, number, "dialogue_id", problem, **loc))
            continue
        first_row[did] = number
        row_lang = str(row.get("language") or "").strip()
        if row_lang and row_lang != lang:
            sink.add(
                DataValidationError(
                    path, number, "language", f"language {row_lang!r}, but this file is under {lang}/", **loc
                )
            )
        labels = {}
        for column in LABEL_COLUMNS:
            value, raw, problem, kind = _parse_label(column, row.get(column))
            if kind is not None:
                sink.odd(path, number, column, raw, kind, problem or "", **loc)
            elif value is None and not allow_partial:
                problem = "empty label: fill in every label (or import with allow_partial=True)"
                sink.add(DataValidationError(path, number, column, problem, **loc))
            labels[column] = (value, raw)
        result.append((did, labels, str(row.get("comments") or "")))
    wanted = [d for d, lg in expected.items() if lg == lang]
    absent = [d for d in wanted if d not in first_row]
    if absent and not allow_partial:
        shown = ", ".join(absent[:5]) + (", ..." if len(absent) > 5 else "")
        sink.add(
            _whole_file(
                path,
                "dialogue_id",
                f"covers {len(wanted) - len(absent)} of the {len(wanted)} "
                f"{lang!r} dialogues; missing: {shown}",
            )
        )
    return annotator, result


def _read_all(in_dir: Path, expected: Mapping[str, str], allow_partial: bool, sink: _Sink) -> AnnotationSet:
    in_dir = Path(in_dir)
    if not in_dir.is_dir():
        raise FileNotFoundError(f"annotation directory {in_dir} does not exist")
    ann = AnnotationSet()
    lang_dirs = sorted(p for p in in_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    for lang_dir in lang_dirs:
        lang = lang_dir.name
        owners: dict[str, Path] = {}
        files = sorted(p for p in lang_dir.iterdir() if p.is_file() and not p.name.startswith((".", "~")))
        for path in files:
            suffix = path.suffix.lower()
            if suffix in _SPREADSHEETS:
                sink.add(
                    _whole_file(
                        path,
                        "(format)",
                        f"spreadsheet files are not read: export it as CSV (UTF-8) to {lang}/{path.stem}.csv",
                    )
                )
            if suffix not in (".csv", ".jsonl") or path.stem == SHEET_STEM:
                continue
            if (res := _read_file(path, lang, expected, allow_partial, sink)) is None:
                continue
            annotator, rows = res
            if annotator in owners:
                sink.add(
                    _whole_file(
                        path,
                        "annotator",
                        f"annotator {annotator!r} already has a file in {lang}/: {owners[annotator].name}",
                    )
                )
                continue
            owners[annotator] = path
            ann.files.append(path)
            ann.coverage.setdefault(lang, {})[annotator] = len(rows)
            ann.uncovered += sum(lg == lang for lg in expected.values()) - len(rows)
            for did, labels, comment in rows:
                ann.language_of[did] = lang
                if comment.strip():
                    ann.comments[(did, annotator)] = comment
                for dim, (value, raw) in labels.items():
                    ann.labels.append((did, annotator, dim, value, raw))
                    ann.missing += value is None
        if owners:
            ann.annotators[lang] = sorted(owners)
    for lang in language_order(expected.values()):
        if lang not in ann.annotators and not allow_partial:
            n = sum(lg == lang for lg in expected.values())
            sink.add(
                _whole_file(
                    in_dir / lang,
                    "annotator",
                    f"no annotator file for the {n} {lang!r} dialogues "
                    f"(expected {lang}/<annotator_id>.csv or .jsonl)",
                )
            )
    return ann


def import_annotations(
    in_dir: Path, expected: Mapping[str, str], *, allow_partial: bool = False, strict: bool = False
) -> AnnotationSet:
    """Read and validate every ``<lang>/<annotator>.csv|.jsonl`` under ``in_dir``.

    ``expected`` maps every dialogue id to its language (e.g. :func:`expected_from_manifest`). The
    annotator id is the file stem, unless an ``annotator`` column holds one (consistent) id. The
    blank ``sheet.*`` files are skipped. Raises the first :class:`DataValidationError` (file, 1-based
    data row or JSONL line, column): a missing column; an unknown, duplicate or wrong-language
    dialogue id; an empty label; a file covering only part of its language's dialogues; an expected
    language without any file. With ``allow_partial`` the last three are accepted: empty labels
    become ``None`` (counted in ``missing``), absent dialogues are counted in ``uncovered`` and
    ``coverage``. Odd cells follow the builders' policy (:mod:`harness.data.cells`) and are listed in
    ``odd_cells``: a label in other words than the guideline's is read by its point when it has
    one, otherwise it is a missing label; blank rows, repeated header rows and fragment rows (no
    dialogue id, no label) are left out. With ``strict`` the first odd cell is an error.
    """
    sink = _Sink(collect=False, strict=strict)
    ann = _read_all(in_dir, expected, allow_partial, sink)
    ann.odd_cells = list(sink.cells.cells)
    return ann


def validate_annotations(
    in_dir: Path, expected: Mapping[str, str], *, allow_partial: bool = False, strict: bool = False
) -> list[DataValidationError]:
    """Every error :func:`import_annotations` would raise (empty list: the files import cleanly)."""
    sink = _Sink(collect=True, strict=strict)
    _read_all(in_dir, expected, allow_partial, sink)
    return list(sink.errors or [])
