"""Runs that stop early: a backend that keeps failing (after its retries, on any executor), or a stop
signal (Ctrl-C, SIGTERM, SIGHUP: :mod:`harness.interrupt`), ends the run with the items judged so far
written out and ``results.json`` marked incomplete — never a results file that silently covers
fewer items than were asked for.

``results["incomplete"]`` says why (the error, or the signal), how far it got (items scored /
unscored, per task) and how to resume (rerun the same command: every finished request is in the
request cache, so the rerun sends only the missing ones). :class:`RunIncomplete` carries the written
output to the caller (the CLI prints what there is and exits with :data:`EXIT_INCOMPLETE`);
:class:`RunInterrupted`, for a signal, carries the exit status of that signal too (130 for SIGINT,
143 for SIGTERM, 129 for SIGHUP).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from harness.interrupt import STOP_SIGNALS, exit_status, signal_name
from harness.types import BackendError

if TYPE_CHECKING:
    from harness.jsontypes import JSON
    from harness.run.runner import RunOutput

#: exit status of a CLI command whose run ended incomplete (2 stays "bad input / nothing run")
EXIT_INCOMPLETE = 3


class RunIncomplete(BackendError):
    """A run ended early; ``output`` holds the partial results it wrote (``results["incomplete"]``)."""

    def __init__(self, message: str, output: RunOutput) -> None:
        super().__init__(message)
        self.output = output


class RunInterrupted(RunIncomplete):
    """A stop signal ended the run; ``exit_status`` is the status the command exits with."""

    def __init__(self, message: str, output: RunOutput, signum: int) -> None:
        super().__init__(message, output)
        self.signum = signum
        self.exit_status = exit_status(signum)


def stop_failure(signum: int, task: str, item: int) -> dict[str, str | int]:
    """What stopped a run that received ``signum`` before item ``item`` of ``task``."""
    return {"task": task, "item": item, "error": f"stopped by {signal_name(signum)}", "signal": int(signum)}


def incomplete_marker(
    failure: Mapping[str, object], totals: Mapping[str, int], scored: Mapping[str, int]
) -> dict[str, JSON]:
    """The ``incomplete`` entry of results.json. ``failure``: what stopped the run (``task``,
    ``item``, ``error`` and, for a stop signal, ``signal``; :func:`stop_failure`)."""
    signum, task, item = failure.get("signal"), failure["task"], failure["item"]
    if not isinstance(task, str) or not isinstance(item, int) or not isinstance(signum, int | None):
        raise TypeError(f"a run's failure names its task, item and signal number; got {dict(failure)!r}")
    n_total, n_scored = sum(totals.values()), sum(scored.values())
    return {
        **({"signal": signal_name(signum)} if signum is not None else {}),
        "reason": str(failure["error"]),
        "stopped_at": {"task": task, "item": item},
        "n_items_total": n_total,
        "n_items_scored": n_scored,
        "n_items_unscored": n_total - n_scored,
        "by_task": {t: {"total": totals[t], "scored": scored.get(t, 0)} for t in totals},
        "resume": "rerun the same command: finished requests are in the request cache, only the rest are sent",
    }


def incomplete_error(output: RunOutput) -> RunIncomplete:
    """The exception that hands an incomplete run's output to the caller: :class:`RunInterrupted`
    when a signal stopped it, else :class:`RunIncomplete`."""
    inc = output.incomplete
    message = incomplete_message(output.results, output.output_dir)
    if inc is not None and inc.get("signal"):
        signum = next(s for s in STOP_SIGNALS if s.name == inc["signal"])
        return RunInterrupted(message, output, int(signum))
    return RunIncomplete(message, output)


def incomplete_message(results: Mapping[str, object], out_dir: str | Path) -> str:
    """What a user reads about an incomplete run: how far it got, what was kept, how to finish."""
    inc = results["incomplete"]
    if not isinstance(inc, Mapping):
        raise ValueError(f"the results of {out_dir} are not marked incomplete")
    if inc.get("signal"):
        return (
            f"{inc['reason']}: {inc['n_items_scored']} of {inc['n_items_total']} items scored. Kept: results.json "
            f"(marked incomplete) and samples.parquet in {out_dir}, every finished request in the request "
            "cache; rerun the same command to finish (only the unfinished requests are sent)."
        )
    return (
        f"run incomplete: {inc['n_items_scored']} of {inc['n_items_total']} items scored, then {inc['reason']}. "
        f"Partial results (marked incomplete) in {out_dir}; rerun the same command to finish "
        "(finished requests come from the cache)."
    )
