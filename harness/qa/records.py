"""The records of a translation QA run (``qa.json`` and the ``translation_qa`` column), typed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypedDict


class Misaligned(TypedDict):
    """A row whose translation has another number of utterances than its source."""

    row_id: object  # the row's ``id`` as the dataset holds it
    item_id: str
    language: str
    reason: str
    config: NotRequired[str]


class LanguageQA(TypedDict):
    """One row of the Table 2-style table: a language (or a config's language)."""

    n_segments: int
    n_items: int
    bleu: float | None
    chrf: float | None
    bertscore_f1: float | None
    adequacy: float | None
    adequacy_failures: int | None
    cometkiwi: float | None
    similarity: float | None
    flagged_segments: int
    flagged_items: int
    misaligned_items: int


class AverageQA(TypedDict):
    """The table's average row: mean scores over languages, summed counts."""

    bleu: float | None
    chrf: float | None
    bertscore_f1: float | None
    adequacy: float | None
    cometkiwi: float | None
    similarity: float | None
    n_segments: int
    flagged_segments: int
    flagged_items: int
    misaligned_items: int


class CheckedDataset(TypedDict):
    ref: str
    path: str
    fingerprint: object  # the manifest's fingerprint (a hex string; absent in hand-made directories)


class QADocument(TypedDict):
    """``qa.json``. ``methods``: per method, what ran (its provenance) or why it was skipped."""

    kind: str
    schema_version: str
    dataset: CheckedDataset
    source_language: str
    settings: dict[str, object]
    languages: dict[str, LanguageQA]
    average: AverageQA
    per_config: dict[str, dict[str, LanguageQA]]
    flags: dict[str, int]
    methods: dict[str, Mapping[str, object] | str]
    misaligned: list[Misaligned]
    warnings: list[str]
    outlier_rule: str
    new_version: NotRequired[str | None]


class RowQA(TypedDict):
    """A row's ``translation_qa`` value: checked segments, the lowest score per method
    (``<method>_min``), the flag reasons."""

    checked_segments: int
    reasons: list[str]
    adequacy_min: NotRequired[float | None]
    similarity_min: NotRequired[float | None]
    chrf_min: NotRequired[float | None]
    bertscore_f1_min: NotRequired[float | None]
    cometkiwi_min: NotRequired[float | None]
