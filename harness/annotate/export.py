"""A project's labels as an immutable dataset version in the common schema (``harness annotate export``).

Every item with at least one label becomes a record of its source config (same config names, ids,
texts and common-schema metadata as the source dataset, so the source's tasks run on it; columns a
source has beyond the common schema are not carried): ``labels`` holds every
annotator's label of every dimension of the form, ``aggregates`` the per-dimension aggregates
(``n``, ``mean``, ``aggregate`` = sum / sum of maxima, ``majority`` = the unique mode, UPHELD's
agreement bucket), ``rating`` the mean of the headline dimension and ``dimension`` its name. Items
nobody labelled (unassigned so far, or only skipped) are left out and counted in the manifest.

The version is registered through :meth:`harness.data.registry.DatasetRegistry.register` (staging
folder, checksums, refused when it exists): a README.md card (YAML configs, so ``load_dataset``
reads it; counts, agreement tables, the guideline used) and a build manifest (the dimension table,
the source dataset, the project, its agreement).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from harness.annotate.form import Form, dimensions_of
from harness.annotate.status import DimensionAgreement, agreement
from harness.annotate.store import Project
from harness.data.layout import CARD_NAME, MANIFEST_NAME, data_file
from harness.data.registry import DatasetRegistry, RegisteredVersion
from harness.data.schema import FEATURES_BY_LEVEL, Dimension, dimension_table, validate_records
from harness.meta.agreement import agreement_bucket, winning_label
from harness.provenance import utc_now

BUILDER = "annotate"
BUILDER_VERSION = "1.0.0"


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote: records per config, labels, annotators, items left out."""

    version: RegisteredVersion
    records: dict[str, int]
    labels: int
    annotators: list[str]
    unlabelled: int


def aggregates(labels: Sequence[dict[str, object]], dims: Sequence[Dimension]) -> list[dict[str, object]]:
    """One aggregate per dimension that has at least one label (in form order)."""
    out: list[dict[str, object]] = []
    for d in dims:
        values = [float(x["value"]) for x in labels if x["dimension"] == d.name and x["value"] is not None]  # type: ignore[arg-type]
        if not values:
            continue
        n = len(values)
        out.append(
            {
                "dimension": d.name,
                "n": n,
                "mean": sum(values) / n,
                "aggregate": sum(values) / (d.max * n) if d.max else None,
                "majority": winning_label(values),
                "agreement": agreement_bucket(values),
            }
        )
    return out


def records(project: Project) -> tuple[dict[str, list[dict[str, object]]], int, int]:
    """(config -> common-schema records, number of labels, items left out) of the labelled items."""
    form = project.form
    labels = project.labels()
    labels = labels[labels["value"].notna()]
    by_item: dict[str, list[dict[str, object]]] = {}
    for key, annotator, dim, value in zip(
        labels["item_id"], labels["annotator"], labels["dimension"], labels["value"], strict=True
    ):
        by_item.setdefault(key, []).append(
            {"annotator": annotator, "dimension": dim, "value": float(value), "raw": f"{float(value):g}"}
        )
    dims = _form_dimensions(project)
    columns = set(FEATURES_BY_LEVEL[form.level])  # the common schema: a source's extra columns stay behind
    out: dict[str, list[dict[str, object]]] = {c: [] for c in form.configs}
    left_out = 0
    for key, config, record in project.records():
        labs = by_item.get(key)
        if not labs:
            left_out += 1
            continue
        labs.sort(key=lambda x: (form.dimensions.index(str(x["dimension"])), str(x["annotator"])))
        aggs = aggregates(labs, dims)
        headline = next((a["mean"] for a in aggs if a["dimension"] == form.headline_dimension), None)
        out[config].append(
            {
                **{k: v for k, v in record.items() if k in columns},
                "dimension": form.headline_dimension,
                "rating": headline,
                "labels": labs,
                "aggregates": aggs,
            }
        )
    return {c: rs for c, rs in out.items() if rs}, int(len(labels)), left_out


def _form_dimensions(project: Project) -> list[Dimension]:
    """The dimension table of the form's fields: the source dataset's definitions where it is
    still there, else the form's own (a project outlives the dataset folder it was made from)."""
    source: dict[str, Dimension] = {}
    try:
        source = dimensions_of(Path(project.meta["dataset_dir"]))
    except (OSError, ValueError):
        pass
    out = []
    for f in project.form.fields:
        known = source.get(f.dimension)
        out.append(
            known
            if known is not None
            else Dimension(f.dimension, f.definition, f.kind, f.min, f.max, dict(f.points), f.source)
        )
    return out


def export(
    project: Project,
    ref: str,
    *,
    registry: DatasetRegistry | None = None,
    n_bootstrap: int = 200,
    seed: int = 0,
) -> ExportSummary:
    """Register the project's labels as ``NAME@X.Y.Z`` (``ref``; a bare NAME = its next minor version)."""
    from harness.data.registry import split_ref

    reg = registry or DatasetRegistry()
    name, version = split_ref(ref)
    version = version or reg.next_version(name)
    by_config, n_labels, left_out = records(project)
    if not by_config:
        raise ValueError(
            f"project {project.name!r} has no label yet, so there is nothing to export; annotate first "
            f"(`harness annotate status {project.name}` shows the progress)"
        )
    dims = _form_dimensions(project)
    form = project.form
    agree = agreement(project, n_bootstrap=n_bootstrap, seed=seed)
    labelled = project.labels()
    annotators = sorted(set(labelled.loc[labelled["value"].notna(), "annotator"].astype(str)))

    def write(staging: Path, release: dict[str, object]) -> None:
        staging.mkdir(parents=True)
        entries: dict[str, dict[str, object]] = {}
        for config, recs in by_config.items():
            checked = validate_records(recs, form.level, dims, file=f"{name}/{data_file(config)}")
            target = staging / data_file(config)
            target.parent.mkdir(parents=True, exist_ok=True)
            features = FEATURES_BY_LEVEL[form.level]
            table = pa.Table.from_pylist(checked, schema=features.arrow_schema)
            pq.write_table(table, target, compression="zstd")
            entries[config] = {
                "level": form.level,
                "data_file": data_file(config),
                "rows": len(checked),
                "instances": len({r["item_id"] for r in checked}),
                "expected_instances": None,
                "expected_rows": None,
                "languages": sorted({str(r["language"]) for r in checked}),
                "annotators": annotators,
            }
        fingerprint = _fingerprint(staging, list(entries))
        manifest = {
            "release": release,
            "builder": {"name": BUILDER, "version": BUILDER_VERSION},
            "created_at": utc_now(),
            "fingerprint": fingerprint,
            "options": {"project": project.name, "task": form.task, "source_dataset": form.dataset},
            "inputs": [  # per config: the project's labels (sha256 of the Parquet file they became)
                {
                    "config": c,
                    "file": str(project.path),
                    "source": f"annotation project {project.name} on {form.dataset}",
                    "sha256": hashlib.sha256((staging / data_file(c)).read_bytes()).hexdigest(),
                    "dataset_dir": project.meta.get("dataset_dir"),
                }
                for c in entries
            ],
            "configs": entries,
            "dimensions": [d.to_dict() for d in dims],
            "skipped": {"count": 0, "rows": []},
            "odd_cells": {},
            "warnings": [f"{left_out} item(s) of the project have no label yet and are left out"]
            if left_out
            else [],
            "annotation": {
                "project": project.name,
                "task": form.task,
                "headline": form.headline_dimension,
                "annotators": annotators,
                "labels": n_labels,
                "unlabelled_items": left_out,
                "select": project.meta.get("select"),
                "per_item": int(project.meta.get("per_item", "1")),
                "agreement": [a.to_json() for a in agree],
                "guideline": form.guideline,
            },
        }
        (staging / MANIFEST_NAME).write_text(
            json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8"
        )
        (staging / CARD_NAME).write_text(
            card(name, version, project, entries, dims, agree, n_labels, left_out, annotators), "utf-8"
        )

    rv = reg.register(name, version, write)
    return ExportSummary(rv, {c: len(rs) for c, rs in by_config.items()}, n_labels, annotators, left_out)


def _fingerprint(staging: Path, configs: list[str]) -> str:
    h = hashlib.sha256()
    for c in sorted(configs):
        h.update(c.encode() + b"\x00" + hashlib.sha256((staging / data_file(c)).read_bytes()).digest())
    return h.hexdigest()


def _source_license(project: Project) -> str | None:
    card_path = Path(project.meta.get("dataset_dir", "")) / CARD_NAME
    try:
        text = card_path.read_text(encoding="utf-8")
        meta = yaml.safe_load(text.split("---", 2)[1]) if text.startswith("---") else {}
    except (OSError, IndexError, yaml.YAMLError):
        return None
    value = (meta or {}).get("license")
    return str(value) if value else None


def _cell(value: float | None) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _demoted(markdown: str) -> str:
    """``markdown`` with its headings one level down (outside fenced blocks), to sit in a section."""
    out, fenced = [], False
    for line in markdown.strip().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        out.append("#" + line if line.startswith("#") and not fenced else line)
    return "\n".join(out)


def agreement_markdown(agree: Sequence[DimensionAgreement]) -> str:
    """The agreement tables as Markdown: per dimension α, exact and adjacent agreement; κ per pair."""
    rows = [
        "| dimension | items | Krippendorff's α | percent agreement | adjacent agreement (±1) |",
        "|---|---:|---|---|---|",
    ]
    for a in agree:
        rows.append(
            f"| `{a.dimension}` | {a.n_items} | {a.alpha.text()} ({a.alpha_level}) | {a.percent.text()} | "
            f"{a.adjacent.text() if a.adjacent else '—'} |"
        )
    pairs = [(a, p, s) for a in agree for p, s in a.kappa.items()]
    if pairs:
        rows += ["", "| dimension | annotators | shared items | Cohen's κ |", "|---|---|---:|---|"]
        for a, (x, y), s in pairs:
            weights = f" ({a.kappa_weights})" if a.kappa_weights else ""
            rows.append(f"| `{a.dimension}` | {x} – {y} | {s.n} | {s.text()}{weights} |")
    return "\n".join(rows)


def card(
    name: str,
    version: str,
    project: Project,
    entries: dict[str, dict[str, object]],
    dims: Sequence[Dimension],
    agree: Sequence[DimensionAgreement],
    n_labels: int,
    left_out: int,
    annotators: Sequence[str],
) -> str:
    """The dataset card: YAML configs for ``load_dataset``, then counts, agreement and the guideline."""
    form: Form = project.form
    languages = sorted({lang for e in entries.values() for lang in e["languages"]})  # type: ignore[attr-defined]
    front: dict[str, object] = {
        "pretty_name": f"{name} (human labels from annotation project {project.name})",
        **({"license": lic} if (lic := _source_license(project)) else {}),
        "language": languages,
        "tags": ["dialogue-evaluation", "human-annotation"],
        "configs": [
            {"config_name": c, "data_files": [{"split": "test", "path": data_file(c)}]} for c in entries
        ],
    }
    counts = ["| config | level | records | languages |", "|---|---|---:|---|"]
    for c, e in entries.items():
        counts.append(f"| `{c}` | {e['level']} | {e['rows']} | {', '.join(e['languages'])} |")  # type: ignore[arg-type]
    guideline = _demoted(form.guideline)
    parts = [
        "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---",
        f"# {name} {version}",
        f"Human labels collected with `harness annotate` in project `{project.name}` on `{form.dataset}`"
        + (f" for task `{form.task}`" if form.task else "")
        + f": {n_labels} labels by {len(annotators)} annotator(s) ({', '.join(annotators)}), each item "
        f"assigned to {project.meta.get('per_item')} annotator(s), items chosen by {project.meta.get('select')} "
        f"selection. `rating` is the mean of `{form.headline_dimension}` over the annotators; `labels` "
        "holds every annotator's label; `aggregates` the per-dimension aggregates."
        + (f" {left_out} item(s) of the project had no label yet and are not included." if left_out else ""),
        "## Configs\n\n" + "\n".join(counts),
        "## Dimensions\n\n" + dimension_table(dims),
        "## Inter-annotator agreement\n\nOver the items labelled by at least two annotators; 95% "
        "percentile-bootstrap intervals over items.\n\n" + agreement_markdown(agree),
        "## Guideline used\n\n" + guideline,
    ]
    return "\n\n".join(parts) + "\n"
