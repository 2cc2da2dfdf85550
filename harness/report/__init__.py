"""Reports from results: :mod:`~harness.report.build` (``harness report``: tables, Markdown + HTML),
:mod:`~harness.report.figures` (figures and document rendering), :mod:`~harness.report.datasets`
(agreement tables and diffs of built dataset versions, ``harness datasets show|diff``)."""

from harness.report.build import (
    build_report,
    correlation_table,
    issue_metrics_table,
    leaderboard_table,
    load_run,
)

__all__ = ["build_report", "correlation_table", "issue_metrics_table", "leaderboard_table", "load_run"]
