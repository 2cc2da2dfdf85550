"""UPHELD label vocabulary: dimensions (App. C) and the parser of the score strings of the files.

The annotator CSVs write every label as ``"<point>: <wording>"`` on a 1–5 response scale, e.g.
``"3: Neutral  - some overlap of content"`` or ``"5:  A reasonable continuation"``; dashes
(``-``, ``--``, ``–``, ``—``) and spacing vary between files. :func:`parse_label` maps a string
to the value on the dimension's own scale:

* content: Likert 1–5 (the written point);
* style: Likert 1–3 (written as 1 / 3 / 5 -> 1 / 2 / 3);
* reasonableness: binary (written as 1 / 5 -> 0 / 1).

Both the point and the wording must be known and must agree; anything else raises
:class:`UnknownLabel`. A bare point (``"3"``) is accepted when it is a point of the written scale.
An empty cell is a missing label (``None``).
"""

from __future__ import annotations

import re

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

_LABEL_RE = re.compile(r"^\s*(\d+)\s*(?::\s*(.*?))?\s*$", re.S)
_DASHES = re.compile(r"\s*[-‐‑‒–—―]+\s*")


class UnknownLabel(ValueError):
    """A score string that is not one of the known labels of its dimension."""


def normalize_wording(text: str) -> str:
    """Lower-case, every run of dashes -> ``" - "``, whitespace collapsed."""
    text = _DASHES.sub(" - ", text.strip().lower())
    return " ".join(text.split())


def parse_label(raw: str | None, dimension: str) -> float | None:
    """The value of ``raw`` on ``dimension``'s scale; ``None`` for an empty cell."""
    if raw is None or not raw.strip():
        return None
    vocab = _VOCAB.get(dimension)
    if vocab is None:
        raise ValueError(f"unknown UPHELD dimension {dimension!r}")
    known = "; ".join(f'"{p}: {w}"' for p, (w, _) in vocab.items())
    m = _LABEL_RE.match(raw)
    if not m:
        raise UnknownLabel(
            f"{raw!r} is not a label of the form '<point>: <wording>'; known {dimension} labels: {known}"
        )
    point = int(m.group(1))
    if point not in vocab:
        raise UnknownLabel(
            f"{raw!r}: point {point} is not on the written {dimension} scale; known labels: {known}"
        )
    wording, value = vocab[point]
    if m.group(2) is not None and normalize_wording(m.group(2)) != wording:
        raise UnknownLabel(
            f"{raw!r}: the wording does not match point {point} of {dimension} ({vocab[point][0]!r}); "
            f"known labels: {known}"
        )
    return value
