"""Running judges over tasks: :mod:`~harness.run.runner` (``harness run``: items → judge →
meta-evaluation), :mod:`~harness.run.results` (results.json + samples.parquet, written as the run
goes), :mod:`~harness.run.document` (the typed results document, its JSON Schema and the reader
:func:`load_results`), :mod:`~harness.run.records` (typed items and sample rows),
:mod:`~harness.run.stability` (repeated runs, MEDAL App. D).

``harness.run.load_results(path)`` returns a run's results as :class:`~harness.run.document.Results`
(1.x files are migrated); ``harness.run.iter_samples(path)`` yields its samples as
:class:`~harness.run.records.SampleRow` objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what __getattr__ imports on first use, for type checkers
    from harness.run.document import SCHEMA_VERSION, MetricEntry, Results, ResultsError, load_results
    from harness.run.records import DialogueItem, SampleRow, TurnItem
    from harness.run.samples import iter_samples

_EXPORTS = {
    "load_results": "harness.run.document",
    "Results": "harness.run.document",
    "MetricEntry": "harness.run.document",
    "ResultsError": "harness.run.document",
    "SCHEMA_VERSION": "harness.run.document",
    "SampleRow": "harness.run.records",
    "TurnItem": "harness.run.records",
    "DialogueItem": "harness.run.records",
    "iter_samples": "harness.run.samples",
}
__all__ = [
    "DialogueItem",
    "MetricEntry",
    "Results",
    "ResultsError",
    "SCHEMA_VERSION",
    "SampleRow",
    "TurnItem",
    "iter_samples",
    "load_results",
]


def __getattr__(name: str) -> object:  # imported on first use: ``import harness.run`` stays light
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'harness.run' has no attribute {name!r}")
