"""The odd-cell policy every builder applies to published source files.

Real benchmark releases are messy: a label written with another scale's wording, a cell that is
no label at all, a stray fragment of a broken export, the header repeated half-way down a file.
Every builder reads such files the same way, and accounts for what it did:

=====================  ==================================================  =======================
kind                   what was found                                      what the build does
=====================  ==================================================  =======================
``wording_mismatch``   a label whose point is on the dimension's scale     read by its point
                       but whose wording is not that point's
``unreadable_label``   a label cell that cannot be read on the scale       missing label for that
                                                                           dimension only (the
                                                                           row's other labels stay)
``row_left_out``       a row with nothing usable (no dialogue / response)  row left out
``repeated_header``    the header row again, inside the data               row left out
``blank_row``          a row whose every cell is empty                     row ignored
=====================  ==================================================  =======================

Each case is an :class:`OddCell` (file, row, column, raw value, kind, action, problem) in the
build's :class:`CellLog`; the build manifest lists them all and the dataset card gives the counts.
With ``strict`` the first one is a :class:`StrictCellError` instead, naming file, row, column and
value, and saying that without ``--strict`` the build goes on and accounts for the cell.

:func:`read_label` is the shared label reader: ``"<point>: <wording>"`` (any dash, spacing or case
in the wording), a bare point, or empty.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from harness.data.schema import DataValidationError, Dimension

CellKind = Literal["wording_mismatch", "unreadable_label", "row_left_out", "repeated_header", "blank_row"]
#: Every kind, in the order the card lists them, with what the build does about it.
KINDS: dict[str, str] = {
    "wording_mismatch": "read by its point",
    "unreadable_label": "missing label for that dimension (the row's other labels kept)",
    "row_left_out": "row left out (nothing usable in it)",
    "repeated_header": "row left out (a copy of the header)",
    "blank_row": "row ignored (every cell empty)",
}
KIND_TITLES: dict[str, str] = {
    "wording_mismatch": "wording mismatches",
    "unreadable_label": "unreadable labels",
    "row_left_out": "rows left out",
    "repeated_header": "repeated header rows",
    "blank_row": "blank rows",
}
#: How many odd cells the card lists one by one (the manifest lists every one).
CARD_LISTED = 20

_LABEL_RE = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?)(?:\s*(?:[:.)=]|[-‐‑‒–—―]+)\s*|\s+|$)(.*?)\s*$", re.S)
_DASHES = re.compile(r"\s*[-‐‑‒–—―]+\s*")


@dataclass(frozen=True)
class OddCell:
    """One odd cell or row of a source file and what the build did with it."""

    file: str
    row: int | str  # 1-based data row (header excluded), or "header"
    column: str
    raw: str
    kind: CellKind
    action: str
    problem: str = ""

    def to_dict(self) -> dict[str, int | str]:
        return asdict(self)

    def describe(self) -> str:
        why = f": {self.problem}" if self.problem else ""
        return f"{self.file}, row {self.row}, column {self.column!r}, value {_short(self.raw)!r}{why}"


class StrictCellError(DataValidationError):
    """An odd cell under ``strict``: names file, row, column and value, and the way forward."""

    def __init__(self, cell: OddCell, *, row_label: str = "row", column_label: str = "column") -> None:
        self.cell = cell
        problem = (
            f"value {_short(cell.raw)!r}: {cell.problem or KIND_TITLES[cell.kind]} [{cell.kind}]. "
            f"Without --strict the build goes on: {cell.action}, and the cell is listed in "
            "build_manifest.json ('odd_cells') and counted in the dataset card"
        )
        super().__init__(
            cell.file, cell.row, cell.column, problem, row_label=row_label, column_label=column_label
        )


@dataclass
class CellLog:
    """The odd cells of one build, in the order they were met; ``strict`` raises on the first."""

    strict: bool = False
    cells: list[OddCell] = field(default_factory=list)

    def record(
        self,
        file: str,
        row: int | str,
        column: str,
        raw: object,
        kind: CellKind,
        problem: str = "",
        action: str | None = None,
        *,
        row_label: str = "row",
        column_label: str = "column",
    ) -> OddCell:
        """Account for one odd cell (or raise :class:`StrictCellError` under ``strict``; the labels
        only change its wording: "line"/"field" for JSONL sources)."""
        cell = OddCell(
            file, row, column, "" if raw is None else str(raw), kind, action or KINDS[kind], problem
        )
        if self.strict:
            raise StrictCellError(cell, row_label=row_label, column_label=column_label)
        self.cells.append(cell)
        return cell

    def odd_row(
        self, file: str, row: int, cells: Sequence[str], header: Sequence[str], sep: str = ","
    ) -> bool:
        """Record a blank row, a repeated header row or a fragment (no letter or digit in any cell,
        whatever its number of fields: the tail of a broken export) and return True; else False."""
        named = {
            (h if j < len(header) and (h := header[j]) else f"<field {j + 1}>"): c
            for j, c in enumerate(cells)
        }
        if is_blank(cells):
            self.record(file, row, "<row>", "", "blank_row")
        elif is_repeated_header(cells, header):
            self.record(file, row, "<row>", sep.join(cells), "repeated_header")
        elif (frag := fragment(named)) is not None:
            self.record(file, row, *frag, "row_left_out", "no letter or digit in the row")
        else:
            return False
        return True

    def counts(self) -> dict[str, int]:
        """Kind -> count, every kind present (zero counts included), in :data:`KINDS` order."""
        found: Counter[str] = Counter(c.kind for c in self.cells)
        return {k: found.get(k, 0) for k in KINDS}

    def to_manifest(self) -> dict[str, object]:
        """The ``odd_cells`` entry of ``build_manifest.json``."""
        return {
            "policy": dict(KINDS),
            "strict": self.strict,
            "count": len(self.cells),
            "counts": self.counts(),
            "cells": [c.to_dict() for c in self.cells],
        }

    def summary(self) -> str:
        """One line of counts (``3 wording mismatches, 1 rows left out``), or ``no odd cells``."""
        parts = [f"{n} {KIND_TITLES[k]}" for k, n in self.counts().items() if n]
        return ", ".join(parts) if parts else "no odd cells"


def summary_of(odd: Mapping[str, object]) -> str:
    """One line of a manifest's ``odd_cells`` counts for a terminal ('' when there are none)."""
    counts = odd.get("counts")
    if not isinstance(counts, Mapping):
        return ""
    parts = [f"{n} {KIND_TITLES.get(str(k), str(k))}" for k, n in counts.items() if n]
    if not parts:
        return ""
    return (
        ", ".join(parts) + " (each listed in build_manifest.json under 'odd_cells'; --strict fails on them)"
    )


def card_section(odd: Mapping[str, object]) -> list[str]:
    """The dataset card's account of a manifest's ``odd_cells`` entry (Markdown lines)."""
    counts, cells = odd.get("counts"), odd.get("cells")
    if not isinstance(counts, Mapping) or not isinstance(cells, Sequence):
        return []
    out = [
        "### Odd source cells",
        "",
        "Cells and rows of the source files that do not read cleanly, handled by the policy every "
        "builder applies (`--strict` makes each of them an error); every one is listed in "
        "`build_manifest.json` under `odd_cells`.",
        "",
        "| kind | count | what the build did |",
        "|---|---:|---|",
    ]
    out += [f"| {KIND_TITLES[k]} (`{k}`) | {counts.get(k, 0)} | {KINDS[k]} |" for k in KINDS]
    out.append("")
    if cells:
        shown = [c for c in cells if isinstance(c, Mapping)][:CARD_LISTED]
        out += [
            f"- {c['file']} row {c['row']}, `{c['column']}`: `{_md(_short(str(c['raw'])))}` → {c['kind']}"
            + (f" ({_md(str(c['problem']))})" if c.get("problem") else "")
            for c in shown
        ]
        if len(cells) > len(shown):
            out.append(f"- … {len(cells) - len(shown)} more in `build_manifest.json`")
        out.append("")
    return out


# -- reading labels ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalePoint:
    """A point as a source writes it: its wording and its value on the dimension's scale."""

    wording: str
    value: float


@dataclass(frozen=True)
class LabelReading:
    """What :func:`read_label` made of a cell: ``value`` (None = missing), and, for an odd cell,
    its ``kind`` and the ``problem``."""

    value: float | None
    kind: CellKind | None = None
    problem: str = ""


def normalize_wording(text: str) -> str:
    """Lower-case, every run of dashes -> ``" - "``, whitespace collapsed."""
    text = _DASHES.sub(" - ", text.strip().lower())
    return " ".join(text.split())


def read_label(
    raw: str | None,
    dimension: Dimension,
    points: Mapping[float, ScalePoint] | None = None,
    *,
    check_scale: bool = True,
) -> LabelReading:
    """Read one label cell of ``dimension``.

    ``points`` is the scale as the source writes it (written point -> wording and value), when it
    differs from the dimension's own (UPHELD writes style 1/3/5 for 1/2/3); without it the written
    point is the value and the wording is the dimension's ``labels[point]``. An empty cell is a
    missing label (not odd); a point on the scale with another wording is a ``wording_mismatch``
    read by its point; anything else is an ``unreadable_label`` (value None). ``check_scale=False``
    takes any finite point (sources whose sets each keep their own rating scale)."""
    if raw is None or not raw.strip():
        return LabelReading(None)
    m = _LABEL_RE.match(raw)
    if m is None:
        return LabelReading(
            None, "unreadable_label", f"not a label of {dimension.name!r} ('<point>: <wording>')"
        )
    number, wording = float(m.group(1)), m.group(2)
    if points is not None:
        point = points.get(number)
        if point is None:
            written = ", ".join(f"{p:g}" for p in points)
            return LabelReading(
                None, "unreadable_label", f"{number:g} is not a point of {dimension.name!r} ({written})"
            )
        value, expected = point.value, point.wording
    else:
        problem = dimension.problem(number) if check_scale else None
        if problem is not None or not math.isfinite(number):
            return LabelReading(None, "unreadable_label", problem or "not a finite number")
        value, expected = number, dimension.labels.get(number, "")
    if wording and normalize_wording(wording) != normalize_wording(expected):
        said = f"{expected!r}" if expected else "no wording"
        return LabelReading(
            value,
            "wording_mismatch",
            f"the wording is not that of point {number:g} of {dimension.name!r} ({said}); read as {value:g}",
        )
    return LabelReading(value)


# -- rows ----------------------------------------------------------------------------------------


def is_blank(cells: Sequence[str]) -> bool:
    """Every cell empty (or whitespace)."""
    return not any(c.strip() for c in cells)


def is_repeated_header(cells: Sequence[str], header: Sequence[str]) -> bool:
    """The row repeats the header (the same names, case and spacing aside; trailing empty cells
    and a BOM ignored) — a file concatenated from several exports."""

    def norm(xs: Sequence[str]) -> list[str]:
        out = [x.replace("\ufeff", "").strip().casefold() for x in xs]
        while out and not out[-1]:
            out.pop()
        return out

    named = norm(header)
    return len([h for h in named if h]) >= 2 and norm(cells) == named


def fragment(cells: Mapping[str, str]) -> tuple[str, str] | None:
    """(column, text) of a row that holds no letter or digit in any cell (e.g. a lone ``]`` left by a
    broken export): nothing usable in it; None for any other row."""
    filled = [(k, v) for k, v in cells.items() if v.strip()]
    if filled and not any(ch.isalnum() for _, v in filled for ch in v):
        return filled[0]
    return None


def read_rating(raw: str, dimension: Dimension, *, check_scale: bool = True) -> LabelReading:
    """A numeric rating cell: a finite number as it is (no scale check, as the source gives it);
    otherwise :func:`read_label` (a point followed by words is read by its point), and an empty cell
    is an ``unreadable_label`` too (a source whose every row has a rating)."""
    try:
        value = float(raw.strip())
        if math.isfinite(value):
            return LabelReading(value)
    except ValueError:
        pass
    if not raw.strip():
        return LabelReading(None, "unreadable_label", "empty rating")
    return read_label(raw, dimension, check_scale=check_scale)


def sniff_delimiter(first_line: str) -> str:
    """The field separator of a delimited text file from its header line: the most frequent of
    comma, semicolon and tab (a comma on a tie) — spreadsheet exports in some locales use ``;``."""
    return max(",;\t", key=lambda c: (first_line.count(c), c == ","))


def _short(text: str, n: int = 120) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= n else text[: n - 1] + "…"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")
