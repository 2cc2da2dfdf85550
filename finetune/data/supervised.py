"""Supervised evaluator training data from human-labelled common-schema records.

:func:`supervised_examples` turns turn-level (``context`` + ``response``, e.g. UPHELD) or
dialogue-level (``turns``) records into :class:`~finetune.data.selfsup.Example` objects whose label
is the record's mean human rating on one dimension, normalised to [0, 1] with the dimension's scale
(``(mean - min) / (max - min)``), or binarised at a threshold on that normalised scale. The mean is
the record's per-dimension aggregate (``aggregates[].mean``), else the mean of its individual
labels on the dimension, else its headline ``rating`` when the dimension is the headline one. A
record with none of these is skipped and counted.

:func:`split_by_dialogue` splits any examples (or dialogues) into train and test so that no
dialogue is in both, and records the split (dialogue ids) for the build manifest.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from finetune.data.selfsup import Example, ExampleList, rng_for
from harness.data.schema import Dimension


@dataclass
class SupervisedReport:
    dimension: str
    scale: tuple[float, float]
    threshold: float | None
    read: int = 0
    kept: int = 0
    skipped_no_rating: int = 0
    skipped_ids: list[str] = field(default_factory=list)
    levels: dict[str, int] = field(default_factory=dict)
    languages: dict[str, int] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)  # binarised: "0"/"1" -> count

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def known_dimensions() -> dict[str, Dimension]:
    """Dimension tables of the harness's builders, by name (UPHELD, MEDAL, demo)."""
    from dataset_builders.demo import DemoBuilder
    from dataset_builders.medal import MEDAL_DIMENSIONS
    from dataset_builders.upheld.labels import DIMENSIONS as UPHELD_DIMENSIONS

    out: dict[str, Dimension] = {}
    for d in (*UPHELD_DIMENSIONS, *MEDAL_DIMENSIONS, *DemoBuilder.dimensions):
        out.setdefault(d.name, d)
    return out


def _resolve_dimension(dimension: str | Dimension, dimensions: Iterable[Dimension] | None) -> Dimension:
    if isinstance(dimension, Dimension):
        return dimension
    table = {d.name: d for d in dimensions} if dimensions is not None else known_dimensions()
    if dimension not in table:
        raise ValueError(
            f"unknown dimension {dimension!r} ({', '.join(sorted(table))} known); pass a Dimension or "
            "dimensions= (e.g. [Dimension.from_dict(d) for d in manifest['dimensions']])"
        )
    return table[dimension]


def mean_rating(record: Mapping[str, Any], dimension: str) -> tuple[float | None, int]:
    """(mean human rating of ``record`` on ``dimension``, number of labels behind it)."""
    for agg in record.get("aggregates") or []:
        if agg.get("dimension") == dimension and agg.get("mean") is not None:
            return float(agg["mean"]), int(agg.get("n") or 0)
    values = [
        float(lab["value"])
        for lab in record.get("labels") or []
        if lab.get("dimension") == dimension and lab.get("value") is not None
    ]
    if values:
        return sum(values) / len(values), len(values)
    if record.get("dimension") == dimension and record.get("rating") is not None:
        return float(record["rating"]), 0
    return None, 0


def supervised_examples(
    records: Iterable[Mapping[str, Any]],
    dimension: str | Dimension,
    *,
    threshold: float | None = None,
    dimensions: Iterable[Dimension] | None = None,
) -> ExampleList:
    """Examples labelled with the normalised mean human rating on ``dimension``.

    ``dimension``: a :class:`Dimension` or its name, looked up in ``dimensions`` (e.g. the build
    manifest's table) or else in :func:`known_dimensions`. ``threshold`` (in [0, 1], on the
    normalised scale): label = 1 if the normalised mean >= threshold else 0. The returned list
    carries a :class:`SupervisedReport` as ``.report``."""
    dim = _resolve_dimension(dimension, dimensions)
    if threshold is not None and not (0.0 <= threshold <= 1.0):
        raise ValueError(f"threshold is on the normalised [0, 1] scale; got {threshold!r}")
    report = SupervisedReport(dimension=dim.name, scale=(dim.min, dim.max), threshold=threshold)
    out: list[Example] = []
    seen: set[str] = set()
    for rec in records:
        report.read += 1
        rid = str(rec.get("id"))
        if rid in seen:
            raise ValueError(f"duplicate record id {rid!r}")
        seen.add(rid)
        mean, n = mean_rating(rec, dim.name)
        if mean is None or not math.isfinite(mean):
            report.skipped_no_rating += 1
            report.skipped_ids.append(rid)
            continue
        if p := _outside(dim, mean):
            raise ValueError(f"record {rid!r}: mean {dim.name} rating {mean:g}: {p}")
        norm = (mean - dim.min) / (dim.max - dim.min)
        label: int | float = norm if threshold is None else int(norm >= threshold)
        level = rec.get("level") or ("turn" if "response" in rec else "dialogue")
        meta = {
            "dimension": dim.name,
            "mean": mean,
            "n": n,
            "scale": [dim.min, dim.max],
            "item_id": rec.get("item_id"),
            "system": rec.get("system"),
            "dataset": rec.get("dataset"),
        }
        source_id = rec.get("dialogue_id") or rec.get("item_id") or rid
        if level == "turn":
            context = list(rec.get("context") or [])
            out.append(
                Example(
                    id=rid,
                    language=rec["language"],
                    level="turn",
                    context=[m["text"] for m in context],
                    response=rec["response"],
                    turns=None,
                    label=label,
                    kind="human",
                    source_id=str(source_id),
                    roles=[*(m["role"] for m in context), rec.get("response_role") or "assistant"],
                    reference=rec.get("reference"),
                    meta=meta,
                )
            )
        elif level == "dialogue":
            turns = list(rec.get("turns") or [])
            out.append(
                Example(
                    id=rid,
                    language=rec["language"],
                    level="dialogue",
                    context=[],
                    response=None,
                    turns=[m["text"] for m in turns],
                    label=label,
                    kind="human",
                    source_id=str(source_id),
                    roles=[m["role"] for m in turns],
                    meta=meta,
                )
            )
        else:
            raise ValueError(f"record {rid!r}: unknown level {level!r}")
        report.kept += 1
    report.levels = dict(Counter(e.level for e in out))
    report.languages = dict(sorted(Counter(e.language for e in out).items()))
    if threshold is not None:
        report.labels = {str(k): v for k, v in sorted(Counter(e.label for e in out).items())}
    return ExampleList(out, report)


def _outside(dim: Dimension, mean: float) -> str | None:
    """A mean of Likert/binary points may lie between points; it must lie within the scale."""
    if mean < dim.min or mean > dim.max:
        return f"outside the {dim.scale_text} scale"
    return None


# -- splitting -------------------------------------------------------------------------------------


class DialogueSplit(tuple):
    """``(train, test)`` (unpacks as a tuple) plus the split record: ``.manifest`` (seed, fraction,
    the dialogue ids of each side) for the build manifest."""

    train: list[Any]
    test: list[Any]
    manifest: dict[str, Any]

    def __new__(cls, train: list[Any], test: list[Any], manifest: dict[str, Any]) -> DialogueSplit:
        obj = super().__new__(cls, (train, test))
        obj.train, obj.test, obj.manifest = train, test, manifest
        return obj


def _dialogue_of(x: Any) -> str:
    sid = getattr(x, "source_id", None)
    if sid is None and isinstance(x, Mapping):
        sid = x.get("source_id") or x.get("dialogue_id") or x.get("id")
    if sid is None:
        sid = getattr(x, "id", None)  # a SourceDialogue
    if sid is None:
        raise ValueError(f"cannot tell the dialogue of {x!r} (no source_id / id)")
    return str(sid)


def split_by_dialogue(examples: Sequence[Any], test_fraction: float, seed: int) -> DialogueSplit:
    """Split ``examples`` (Examples, InstructionExamples, SourceDialogues or records) into
    ``(train, test)`` by dialogue: every example of a dialogue (``source_id``) lands on the same
    side. ``round(test_fraction * dialogues)`` dialogues go to test (at least one and at most all
    but one when there are two or more dialogues and 0 < test_fraction < 1). The order of the
    examples is kept within each side. Deterministic for a seed."""
    if not 0.0 <= test_fraction <= 1.0:
        raise ValueError(f"test_fraction must be in [0, 1], got {test_fraction!r}")
    dialogues = sorted({_dialogue_of(x) for x in examples})
    n = len(dialogues)
    n_test = round(test_fraction * n)
    if n >= 2 and 0.0 < test_fraction < 1.0:
        n_test = min(max(n_test, 1), n - 1)
    order = list(dialogues)
    rng_for(seed, "split").shuffle(order)
    test_ids = set(order[:n_test])
    train = [x for x in examples if _dialogue_of(x) not in test_ids]
    test = [x for x in examples if _dialogue_of(x) in test_ids]
    manifest = {
        "by": "dialogue (source_id)",
        "seed": seed,
        "test_fraction": test_fraction,
        "dialogues": {"train": n - n_test, "test": n_test},
        "examples": {"train": len(train), "test": len(test)},
        "train_dialogues": sorted(set(dialogues) - test_ids),
        "test_dialogues": sorted(test_ids),
    }
    return DialogueSplit(train, test, manifest)
