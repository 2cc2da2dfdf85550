"""A judge run's scores of a project's items (``--judge-run`` / ``--surrogate-run``): read from the
run's ``samples.parquet`` and matched to the items by config and record id."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def judge_scores(run_dir: Path, task: str | None) -> tuple[str, pd.DataFrame]:
    """(task, frame of ``dataset``, ``id``, ``language``, ``score``) of a judge run's samples for
    ``task`` (the run's only task when None). A folder without samples, or a run that did not judge
    the task, is an error naming the run and the way forward."""
    from harness.run.samples import SAMPLES_FILE

    path = Path(run_dir)
    path = path / SAMPLES_FILE if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} holds no {SAMPLES_FILE}; pass the output folder of a `harness run`"
        )
    frame = pd.read_parquet(path, columns=["task", "dataset", "id", "language", "score"])
    tasks = sorted(frame["task"].unique())
    if task is None:
        if len(tasks) != 1:
            raise ValueError(
                f"the run {run_dir} judged {len(tasks)} tasks ({', '.join(tasks) or 'none'}); "
                "name the project's task with --task"
            )
        task = tasks[0]
    elif task not in tasks:
        raise ValueError(
            f"the run {run_dir} did not judge task {task!r} (its tasks: {', '.join(tasks) or 'none'})"
        )
    out = frame[frame["task"] == task].drop(columns="task")
    out = out.assign(score=pd.to_numeric(out["score"], errors="coerce"))
    return str(task), out.drop_duplicates(subset=["dataset", "id"], keep="first")


def scores_for(
    run_dir: Path, task: str | None, keys: list[tuple[str, str]]
) -> tuple[str, list[float | None]]:
    """The run's score of each (config, record id) in ``keys`` (None where it has none or its
    verdict did not parse)."""
    name, frame = judge_scores(run_dir, task)
    lookup = {
        (str(d), str(i)): (float(s) if pd.notna(s) else None)
        for d, i, s in zip(frame["dataset"], frame["id"], frame["score"], strict=True)
    }
    return name, [lookup.get(k) for k in keys]
