"""UPHELD label vocabulary: dimensions (App. C) and the parser of the score strings of the files.

The annotator CSVs write every label as ``"<point>: <wording>"`` on a 1–5 response scale, e.g.
``"3: Neutral  - some overlap of content"`` or ``"5:  A reasonable continuation"``; dashes
(``-``, ``--``, ``–``, ``—``) and spacing vary between files. :func:`parse_label` maps a string
to the value on the dimension's own scale:

* content: Likert 1–5 (the written point);
* style: Likert 1–3 (written as 1 / 3 / 5 -> 1 / 2 / 3);
* reasonableness: binary (written as 1 / 5 -> 0 / 1).

The builder reads every cell with :func:`read_upheld_label`, the shared odd-cell policy of
:func:`harness.data.cells.read_label`: a point of the written scale with another wording (a style
cell holding ``"1: Not a reasonable continuation"``) is read by its point and counted as a wording
mismatch; a cell that is no label of the dimension is a missing label, counted as unreadable.
:func:`parse_label` is the strict reader: both the point and the wording must be known and must
agree, anything else raises :class:`UnknownLabel`. Either way a bare point (``"3"``) is accepted
when it is a point of the written scale, and an empty cell is a missing label (``None``).
"""

from __future__ import annotations

from harness.data.cells import LabelReading, ScalePoint, normalize_wording, read_label
from harness.data.schema import Dimension

CONTENT = Dimension(
    "content",
    "Content equivalence: do Option A (the human reference continuation) and Option B (the model "
    "continuation) have the same content, so either could replace the other without changing the "
    "conversation? Semantic similarity to the reference.",
    "likert",
    1,
    5,
    labels={
        1: "Strongly Disagree -- no content overlap",
        2: "Disagree - very little overlap of content",
        3: "Neutral - some overlap of content",
        4: "Agree - mostly same content",
        5: "Strongly Agree -- same content",
    },
    source="UPHELD §3.2, App. C (Task 1)",
)
STYLE = Dimension(
    "style",
    "Style equivalence: are Option A and Option B written in the same style (tone, formality, length, "
    "phrasing), i.e. linguistic and stylistic alignment to the reference?",
    "likert",
    1,
    3,
    labels={1: "Different styles", 2: "Somewhat same styles", 3: "Same styles"},
    source="UPHELD §3.2, App. C (Task 2)",
)
REASONABLENESS = Dimension(
    "reasonableness",
    "Reasonableness of Option B alone (reference-free): is Option B a reasonable way to continue the "
    "conversation given the chat history?",
    "binary",
    0,
    1,
    labels={0: "Not a reasonable continuation", 1: "A reasonable continuation"},
    source="UPHELD §3.2, App. C (Task 3)",
)
DIMENSIONS: tuple[Dimension, ...] = (CONTENT, STYLE, REASONABLENESS)

#: Source column -> dimension.
SCORE_COLUMNS: dict[str, str] = {
    "score_task_1_content": "content",
    "score_task_2_style": "style",
    "score_task_3_reasonableness": "reasonableness",
}

# Written point -> (normalised wording, value on the dimension's scale).
_VOCAB: dict[str, dict[int, tuple[str, float]]] = {
    "content": {
        1: ("strongly disagree - no content overlap", 1.0),
        2: ("disagree - very little overlap of content", 2.0),
        3: ("neutral - some overlap of content", 3.0),
        4: ("agree - mostly same content", 4.0),
        5: ("strongly agree - same content", 5.0),
    },
    "style": {
        1: ("different styles", 1.0),
        3: ("somewhat same styles", 2.0),
        5: ("same styles", 3.0),
    },
    "reasonableness": {
        1: ("not a reasonable continuation", 0.0),
        5: ("a reasonable continuation", 1.0),
    },
}

_POINTS: dict[str, dict[float, ScalePoint]] = {
    dim: {float(p): ScalePoint(w, v) for p, (w, v) in vocab.items()} for dim, vocab in _VOCAB.items()
}
_BY_NAME = {d.name: d for d in DIMENSIONS}

__all__ = [
    "DIMENSIONS",
    "SCORE_COLUMNS",
    "UnknownLabel",
    "normalize_wording",
    "parse_label",
    "read_upheld_label",
]


class UnknownLabel(ValueError):
    """A score string that is not one of the known labels of its dimension."""


def read_upheld_label(raw: str | None, dimension: str) -> LabelReading:
    """A score cell read under the odd-cell policy (:func:`harness.data.cells.read_label`)."""
    if dimension not in _POINTS:
        raise ValueError(f"unknown UPHELD dimension {dimension!r}")
    return read_label(raw, _BY_NAME[dimension], _POINTS[dimension])


def known_labels(dimension: str) -> str:
    return "; ".join(f'"{p}: {w}"' for p, (w, _) in _VOCAB[dimension].items())


def parse_label(raw: str | None, dimension: str) -> float | None:
    """The value of ``raw`` on ``dimension``'s scale; ``None`` for an empty cell; a wording that
    does not match its point, or a cell that is no label, raises :class:`UnknownLabel`."""
    got = read_upheld_label(raw, dimension)
    if got.kind is not None:
        raise UnknownLabel(f"{raw!r}: {got.problem}; known {dimension} labels: {known_labels(dimension)}")
    return got.value
