"""The one place the viewer reads run directories: ``results.json`` through the typed reader
:func:`harness.run.load_results` (1.x files migrated, every field validated) and the paths of
``samples.parquet`` and of the optional ``items.parquet`` (the transcripts a run carries with it,
written by ``harness runs publish --with-transcripts``). Everything else in :mod:`harness.view` asks
this module: :attr:`RunFiles.document` is the typed document, :attr:`RunFiles.results` its JSON form
(what the page is sent). The sample Parquet columns
are those of :class:`harness.run.records.SampleRow`.

A *runs folder* (``runs/``) is any directory without a ``results.json`` of its own: every sub-folder
(two levels deep at most) that has one is a run. ``hub:org/name[@revision]`` is a run published with
``harness runs publish``, downloaded once into the Hugging Face cache.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from harness.run.document import RESULTS_FILE, SAMPLES_FILE, Results, load_results

#: a JSON object the viewer sends to the page (its values are what json.dumps takes)
Payload: TypeAlias = dict[str, object]

ITEMS_FILE = "items.parquet"
HUB_PREFIX = "hub:"
_KEY = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class RunFiles:
    """One run directory as the viewer sees it."""

    path: Path
    document: Results
    samples: Path | None
    items: Path | None
    key: str = ""
    results: dict[str, Any] = field(init=False)  # the JSON form, as the page reads it

    def __post_init__(self) -> None:
        self.results = self.document.to_json_dict()

    @property
    def run_id(self) -> str:
        return self.document.run.id or self.path.name

    @property
    def judge(self) -> str:
        return self.document.judge.spec or "?"

    @property
    def tasks(self) -> list[str]:
        return list(self.document.results)

    def task_info(self, task: str) -> Payload:
        info = self.document.tasks.get(task)
        return info.model_dump(mode="json") if info is not None else {}

    def dataset_info(self, task: str) -> Payload:
        info = self.document.datasets.get(task)
        return info.model_dump(mode="json") if info is not None else {}

    def summary(self) -> Payload:
        run = self.document.run
        return {
            "key": self.key,
            "run_id": self.run_id,
            "judge": self.judge,
            "tasks": self.tasks,
            "n_items": run.n_items,
            "created_at": run.created_at,
            "path": str(self.path),
            "has_samples": self.samples is not None,
            "incomplete": self.document.incomplete is not None,
        }


def is_run_dir(path: Path) -> bool:
    return (path / RESULTS_FILE).is_file()


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories named by ``paths``: a run directory itself, or every run below a runs folder
    (sorted by name). An argument that holds no run is an error naming it."""
    found: list[Path] = []
    for raw in paths:
        if str(raw).startswith(HUB_PREFIX):
            found.append(download(str(raw)))
            continue
        p = Path(raw).expanduser()
        if p.is_file() and p.name == RESULTS_FILE:
            p = p.parent
        if not p.exists():
            raise FileNotFoundError(f"{p}: no such run directory or runs folder")
        if is_run_dir(p):
            found.append(p)
            continue
        if not p.is_dir():
            raise ValueError(f"{p}: not a run directory (a folder with {RESULTS_FILE}) nor a runs folder")
        below = sorted(
            f.parent
            for pattern in (f"*/{RESULTS_FILE}", f"*/*/{RESULTS_FILE}")
            for f in p.glob(pattern)
            if not any(part.startswith(".") for part in f.parent.relative_to(p).parts)
        )
        if not below:
            raise ValueError(
                f"{p}: no {RESULTS_FILE} in it or in its sub-folders: give a run directory written by "
                "`harness run` (runs/<id>-...) or the folder that holds such runs"
            )
        found += below
    unique = list(dict.fromkeys(d.resolve() for d in found))
    if not unique:
        raise ValueError("no run directories given")
    return unique


def download(ref: str) -> Path:
    """The local copy of a published run ``hub:org/name[@revision]`` (``huggingface_hub``'s cache)."""
    repo, _, revision = ref[len(HUB_PREFIX) :].partition("@")
    if repo.count("/") != 1:
        raise ValueError(f"{ref}: expected hub:namespace/name[@revision]")
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(
            repo,
            repo_type="dataset",
            revision=revision or None,
            allow_patterns=[RESULTS_FILE, SAMPLES_FILE, ITEMS_FILE, "README.md"],
        )
    except Exception as e:  # noqa: BLE001 - offline, unknown repo, no access: one message
        raise FileNotFoundError(
            f"{ref}: could not download the published run ({type(e).__name__}: {' '.join(str(e).split())[:300]})"
        ) from None
    p = Path(path)
    if not is_run_dir(p):
        raise ValueError(
            f"{ref}: the repository has no {RESULTS_FILE}; it is not a run published by `harness runs publish`"
        )
    return p


def read_run(path: str | Path) -> RunFiles:
    """``results.json`` of a run directory (schema-checked) and the paths of its Parquet files."""
    p = Path(path)
    document = load_results(p)  # ResultsError (a ValueError) names the file and the field
    samples = p / SAMPLES_FILE
    items = p / ITEMS_FILE
    return RunFiles(
        path=p,
        document=document,
        samples=samples if samples.is_file() else None,
        items=items if items.is_file() else None,
    )


def read_runs(paths: Iterable[str | Path]) -> list[RunFiles]:
    """Every run under ``paths`` with a unique URL key (the run id; ``-2``, ``-3`` ... on clashes)."""
    runs = [read_run(p) for p in discover(paths)]
    seen: Counter[str] = Counter()
    for r in runs:
        base = _KEY.sub("-", r.run_id).strip("-") or "run"
        seen[base] += 1
        r.key = base if seen[base] == 1 else f"{base}-{seen[base]}"
    return runs
