"""The MEDAL pipeline's annotation step through ``harness annotate`` instead of CSV sheets.

Two ways in, both set in the pipeline config's ``annotation`` section:

* ``project: NAME`` (with ``annotators`` and ``per_item``): a run that finds no project of that name
  creates it over the curated dialogues (config ``curated``, the ``medal`` task's form: the eight
  Table 1 issues as toggles and ``overall`` 1–5, the Table 11 guideline beside them, blind);
  ``harness annotate serve NAME --new-tokens`` prints the annotators' addresses. Once they are done,
  the next run imports the project's labels (:func:`from_project`) and publishes config ``benchmark``.
* ``labels_from: NAME@X.Y.Z``: the labels of a project exported with ``harness annotate export``
  (a registered dataset version; :func:`from_version`).

Either gives the :class:`~dataset_builders.medal_pipeline.annotation.imports.AnnotationSet` the CSV
import gives, so agreement (Tables 4–5) and the ``benchmark`` records are computed the same way.
An unfinished project is an error unless ``allow_partial`` is set (as a partial sheet is).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import pyarrow.parquet as pq

from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_OVERALL
from dataset_builders.medal_pipeline.annotation.imports import AnnotationSet
from harness.annotate.store import Project, project_path
from harness.data.layout import data_file

#: the task whose label schema and guideline the project's form shows
TASK = "medal"
CONFIG = "curated"
_DIMENSIONS = (*MEDAL_ISSUES, MEDAL_OVERALL)
#: one label row: (dialogue id, language, annotator, dimension, value or None, comment)
Row = tuple[str, str, str, str, float | None, str]


def project_file(name: str, directory: Path | None) -> Path:
    return project_path(name, directory)


def create_project(
    name: str,
    directory: Path | None,
    publish_dir: Path,
    work: Path,
    *,
    annotators: list[str],
    per_item: int,
    seed: int,
    pipeline_name: str,
) -> Project:
    """Create the project over the curated dialogues of ``publish_dir`` (built as a small dataset in
    ``work/annotation-dataset`` with the ``medal`` builder, config ``curated`` only)."""
    from dataset_builders.medal_pipeline import publish
    from harness.data.builders import build_dataset

    source, built = work / "annotation-source", work / "annotation-dataset"
    for stale in (source, built):
        shutil.rmtree(stale, ignore_errors=True)
    source.mkdir(parents=True)
    for file in (publish.PIPELINE_FILE, f"{CONFIG}.jsonl"):
        shutil.copy2(publish_dir / file, source / file)
    build_dataset("medal", source, built, show_progress=False)
    return Project.create(
        project_file(name, directory),
        name=name,
        dataset_ref=f"{pipeline_name}:{CONFIG} ({built})",
        dataset_dir=built,
        config=CONFIG,
        task=TASK,
        annotators=annotators,
        per_item=per_item,
        languages=None,
        select="random",
        judge_run=None,
        seed=seed,
    )


def annotation_set(
    rows: Iterable[Row], expected: Mapping[str, str], source: Path, *, uncovered: int
) -> AnnotationSet:
    """The labels as an :class:`AnnotationSet` (the shape the CSV import gives); a dialogue that is
    not among the curated ones (``expected``: dialogue id -> language) is an error naming it."""
    ann = AnnotationSet(files=[source], uncovered=uncovered)
    per_lang: dict[str, dict[str, set[str]]] = {}
    for did, lang, annotator, dim, value, comment in rows:
        if did not in expected:
            raise ValueError(
                f"{source}: dialogue {did!r} is not among the {len(expected)} curated dialogues of this run; "
                "the project was made for another curation (start a new project)"
            )
        if dim not in _DIMENSIONS:
            continue
        ann.language_of[did] = lang
        ann.labels.append((did, annotator, dim, value, "" if value is None else f"{value:g}"))
        ann.missing += value is None
        per_lang.setdefault(lang, {}).setdefault(annotator, set()).add(did)
        if comment:
            ann.comments[(did, annotator)] = comment
    for lang, by_annotator in sorted(per_lang.items()):
        ann.annotators[lang] = sorted(by_annotator)
        ann.coverage[lang] = {a: len(ds) for a, ds in sorted(by_annotator.items())}
    return ann


def from_project(path: Path, expected: Mapping[str, str], *, allow_partial: bool) -> AnnotationSet | None:
    """The labels of the project at ``path`` (None while it has none). Unfinished queues, skipped
    items or missing labels are an error unless ``allow_partial``."""
    project = Project.open(path)
    try:
        labels = project.labels()
        if labels.empty:
            return None
        progress = {a: project.progress(a) for a in project.annotators()}
        open_items = sum(p.total - p.done for p in progress.values())
        skipped = int(labels.loc[labels["skipped"], "item_id"].nunique()) if "skipped" in labels else 0
        missing = int(labels["value"].isna().sum())
        if not allow_partial and (open_items or missing):
            done = sum(p.done for p in progress.values())
            total = sum(p.total for p in progress.values())
            raise ValueError(
                f"annotation project {project.name!r} ({path}) is not finished: {done} of {total} assigned "
                f"items submitted, {skipped} skipped, {missing} missing label(s) "
                f"(`harness annotate status {project.name}`); finish it or set annotation.allow_partial: true"
            )
        rows: list[Row] = [
            (
                str(r.record_id),
                str(r.language),
                str(r.annotator),
                str(r.dimension),
                None if r.value != r.value else float(r.value),
                str(r.flag or ""),
            )
            for r in labels.itertuples(index=False)
        ]
        return annotation_set(rows, expected, path, uncovered=open_items)
    finally:
        project.close()


def from_version(ref: str, expected: Mapping[str, str], *, registry: Path | None = None) -> AnnotationSet:
    """The labels of a registered version exported by ``harness annotate export`` (every config)."""
    from harness.data.registry import DatasetRegistry

    rv = DatasetRegistry(registry).resolve(ref)
    rows: list[Row] = []
    for config in rv.configs:
        table = pq.read_table(rv.path / data_file(config), columns=["id", "language", "labels"])
        for did, lang, labels in zip(
            *(table.column(c).to_pylist() for c in ("id", "language", "labels")), strict=True
        ):
            for lab in labels or []:
                value = lab["value"]
                rows.append(
                    (
                        did,
                        lang,
                        lab["annotator"],
                        lab["dimension"],
                        None if value is None else float(value),
                        "",
                    )
                )
    if not rows:
        raise ValueError(f"{rv.ref} ({rv.path}) holds no label to import")
    return annotation_set(rows, expected, rv.path, uncovered=0)
