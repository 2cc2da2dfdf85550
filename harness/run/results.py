"""Writing ``results.json`` and ``samples.parquet``, and the run's console tables.

``results.json`` is a typed document (schema :data:`SCHEMA_VERSION`; models, migration of 1.x
files and the typed reader :func:`load_results` in :mod:`harness.run.document`; the JSON Schema
ships as ``harness/run/schemas/results.schema.json``)::

    {
      "schema_version": "3.0",
      # every entry comes from a registered meta-metric (harness ls metrics) and carries its
      # structured key: metric, level (item | dialogue | system), group (an issue dimension,
      # "macro", or null) and params ({"method": "spearman"}, {"statistic": "f1_pos"}, ...);
      # a language's entries are keyed by the key's label (MetricKey.label)
      "results": {task: {language: {label: {metric, level, group, params,
                                            value, ci, n, n_datasets, parse_failures,
                                            per_dataset: {dataset: {value, p_value, ci, n, ...}}}},
                         "all": {label: {metric, level, group, params,
                                         value, ci, n, n_languages, parse_failures}}}},
      # e.g. "pearson": {"metric": "pearson", "level": "item", "group": null, "params": {}, ...},
      # "system_correlation(spearman)": {"metric": "system_correlation", "level": "system",
      # "group": null, "params": {"method": "spearman"}, ...}; the core's metrics and their
      # groups / parameters: harness.meta.builtin. Issue-label tasks (MEDAL) have
      # issue_detection per label and "macro" ({"statistic": f1_pos | f1_neg | precision | recall |
      # accuracy | predicted_positive | reference_positive | human_ceiling | mcnemar}) and, in
      # "all", pooled_correlation ({"method"}); "label_parse_failures": {task: {dim: n}}.
      # Tasks whose items carry annotator labels get soft_labels ({"statistic"}), human_ceilings
      # ({"estimator": loao | split_half, "method"}), high_agreement ({"method"}) and the sections
      # "human_labels": {task: notes} and
      # "alt_test": {task: {epsilon, q, scale, scoring, environments: {"<dataset>/<lang>": {omega,
      # rho, passed, annotators: {id: {n, rho, p_value, rejected, skipped}}}}}}; a panel: judge adds
      # "panel": {members, vote, quorum, tasks: {task: {members, panel, alpha, alpha_rank,
      # error_correlation, leave_one_out, alt_test}}} (members' correlations keyed by method).
      # "executor": {kind, and for ray: workers, gpus_per_worker, cpus_per_worker, shard_size,
      # max_retries, cluster: {ray_version, address, resources, nodes}, pools: [{role, spec,
      # resources_per_worker, workers: [{worker, node_ip, hostname, pid, gpu_ids, requests, shards,
      # seconds, retries, replaced, setup_s, load_seconds}]}]} (harness.executors);
      # a run that stopped early has "incomplete": {reason, stopped_at, n_items_total,
      # n_items_scored, n_items_unscored, by_task, resume} (harness.run.partial).
      "samples": {file: "samples.parquet", rows, row_groups, format: "parquet"},
      "harness": {version, git_sha, git_dirty}, "run": {...}, "judge": {...},
      "datasets": {task: {...}}, "tasks": {task: {..., "metrics": [correlation methods],
                                               "meta_metrics": [names computed]}},
      "usage": {...}, "cache": {...},
      "timings": {..., "samples_io_s"}, "environment": {...}
    }

``samples.parquet`` has one row per judged item (ids, language, prompt hash, raw output, score,
parse status, human rating, ...; :class:`harness.run.records.SampleRow`), is written in row groups as
the run goes (:mod:`harness.run.samples`) and loads with ``load_dataset("parquet", data_files=...)``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, overload

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness import interrupt
from harness.meta.metric import KeyedEntry, MetricKey, find
from harness.run.document import (  # noqa: F401  (re-exported: the typed reader and the names)
    RESULTS_FILE,
    SAMPLES_FILE,
    SCHEMA_VERSION,
    MetricEntry,
    Results,
    load_results,
    samples_info,
    validate_results,
)

if TYPE_CHECKING:
    from rich.table import Table

    from harness.jsontypes import JSON, JSONObject

SAMPLE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("task", pa.string()),
        ("dataset", pa.string()),
        ("language", pa.string()),
        ("id", pa.string()),
        ("item_id", pa.string()),
        ("judge", pa.string()),
        ("prompt_hash", pa.string()),
        ("raw_output", pa.string()),
        ("score", pa.float64()),
        ("parse_status", pa.string()),
        ("parse_detail", pa.string()),
        ("human_rating", pa.float64()),
        ("cached", pa.bool_()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("extra", pa.string()),  # JSON: e.g. label log-probs
        # 1.1: the rated chatbot, every human label ({dimension: {annotator: value}}) and, for
        # multi-label judges (MEDAL), the judge's labels ({dimension: 0|1|null}); all JSON.
        ("system", pa.string()),
        ("human_labels", pa.string()),
        ("judge_labels", pa.string()),
        # added within 1.1: the conversation, the dimension the human rating comes from and the
        # annotators' label distribution of it ({label: share}, JSON).
        ("dialogue_id", pa.string()),
        ("human_dimension", pa.string()),
        ("human_distribution", pa.string()),
    ]
)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``path`` through a temporary file renamed into place. The temporary name carries its
    owner (:func:`harness.interrupt.temp_name`): a hard stop removes it, and one left by a killed
    writer (kill -9) is swept by the next write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    interrupt.sweep(path.parent, f".{path.name}.*")
    with interrupt.tracked(path.parent / interrupt.temp_name(f".{path.name}.")) as tmp:
        tmp.write_bytes(data)
        os.replace(tmp, path)


@overload
def _json_safe(obj: Mapping[str, object]) -> JSONObject: ...
@overload
def _json_safe(obj: object) -> JSON: ...
def _json_safe(obj: object) -> JSON:
    """``obj`` as JSON values: NaN and infinities as None (JSON has neither), mappings as dicts,
    tuples as lists, NumPy scalars as Python numbers; anything else is a TypeError naming its type."""
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, Mapping):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return _json_safe(obj.item())
    raise TypeError(f"a {type(obj).__name__} is not a JSON value: {obj!r:.80}")


def write_results(
    output_dir: str | Path, results: Mapping[str, object], samples: pd.DataFrame
) -> tuple[Path, Path]:
    """Write a whole run at once: the samples (rows checked against :class:`SampleRow`), then the
    results document with its ``samples`` section (validated). ``harness run`` streams its samples
    instead (:class:`harness.run.samples.SampleWriter`) and ends with :func:`write_results_json`."""
    from harness.run.records import check_sample_row

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = samples.reindex(columns=SAMPLE_SCHEMA.names)
    for row in frame.to_dict("records"):
        check_sample_row(row)
    table = pa.Table.from_pandas(frame, schema=SAMPLE_SCHEMA, preserve_index=False)
    samples_path = out / SAMPLES_FILE
    with interrupt.tracked(out / interrupt.temp_name(".samples.", ".parquet")) as tmp:
        pq.write_table(table, tmp)
        os.replace(tmp, samples_path)
    return write_results_json(out, {**results, "samples": samples_info(samples_path)}), samples_path


def write_results_json(output_dir: str | Path, results: Mapping[str, object]) -> Path:
    """Validate the document (:class:`Results`) and write ``results.json`` atomically (NaN and
    infinities become null). A document that does not validate is an error, never a file."""
    results_path = Path(output_dir) / RESULTS_FILE
    doc = _json_safe(results)
    validate_results(doc, str(results_path))
    payload = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
    _atomic_write_bytes(results_path, payload.encode("utf-8"))
    return results_path


def write_document(output_dir: str | Path, document: Results) -> JSONObject:
    """Write a typed document as ``results.json`` atomically (NaN and infinities become null), as
    it was built: the fields it was given, no defaults added. Returns the JSON written."""
    results_path = Path(output_dir) / RESULTS_FILE
    doc = _json_safe(document.model_dump(mode="json", exclude_unset=True))
    payload = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
    _atomic_write_bytes(results_path, payload.encode("utf-8"))
    return doc


def format_metric(m: MetricEntry | None) -> str:
    if m is None or m.value is None:
        return "—"
    s = f"{m.value:+.3f}"
    ci = m.ci
    if ci and ci[0] is not None and ci[1] is not None:
        s += f" [{ci[0]:+.2f},{ci[1]:+.2f}]"
    return s


def _count(x: int | None) -> str:
    return "—" if x is None else str(x)


def results_tables(results: Results) -> list[Table]:
    """One rich Table per task: languages × metrics, with the overall average last."""
    from rich.table import Table

    tables = []
    for task, by_lang in results.results.items():
        columns = results.table_metrics(task)
        keys = [m.key() for m in columns] or [MetricKey(metric="pearson"), MetricKey(metric="spearman")]
        t = Table(title=f"{task} — judge {results.judge.spec}", title_justify="left")
        t.add_column("lang")
        t.add_column("n", justify="right")
        t.add_column("sets", justify="right")
        for m in columns:
            t.add_column(f"{m.header()} [95% CI]", justify="right", no_wrap=True)
        t.add_column("fail", justify="right")
        for lang, row in by_lang.items():
            if lang == "all":
                continue
            first = find(row, keys[0]) or MetricEntry()
            t.add_row(
                lang,
                _count(first.n),
                _count(first.n_datasets),
                *[format_metric(find(row, k)) for k in keys],
                _count(first.parse_failures),
            )
        if "all" in by_lang:
            row = by_lang["all"]
            first = find(row, keys[0]) or MetricEntry()
            t.add_section()
            t.add_row(
                "avg",
                _count(first.n),
                f"{_count(first.n_languages)}L",
                *[format_metric(find(row, k)) for k in keys],
                _count(first.parse_failures),
                style="bold",
            )
        tables.append(t)
    return tables


ISSUE_COLUMNS = ("f1_pos", "f1_neg", "precision", "recall", "accuracy", "predicted_positive")


def issue_tables(results: Results) -> list[Table]:
    """One rich Table per issue-label task (MEDAL): dimension × F1+/F1−/P/R/Acc/#pred, pooled over
    languages, with the human ceiling and McNemar's p."""
    from rich.table import Table

    tables = []
    for task, info in results.tasks.items():
        dims = info.issue_labels
        pooled = results.task_results(task).get("all") or {}
        if not dims or not pooled:
            continue
        t = Table(
            title=f"{task} issue detection (all languages pooled) — judge {results.judge.spec}",
            title_justify="left",
        )
        t.add_column("dimension")
        for c in ("F1+", "F1−", "precision", "recall", "accuracy", "#pred", "human F1+", "McNemar p", "fail"):
            t.add_column(c, justify="right")
        fails = results.label_parse_failures.get(task, {})
        for d in [*dims, "macro"]:

            def val(
                name: str, fmt: str = "{:.3f}", d: str = d, pooled: Mapping[str, KeyedEntry] = pooled
            ) -> str:
                e = find(pooled, MetricKey(metric="issue_detection", group=d, params={"statistic": name}))
                return "—" if e is None or e.value is None else fmt.format(e.value)

            t.add_row(
                d,
                *(val(c) for c in ISSUE_COLUMNS[:5]),
                val("predicted_positive", "{:.1f}"),
                val("human_ceiling"),
                val("mcnemar", "{:.3g}"),
                str(fails.get(d, "")),
                style="bold" if d == "macro" else None,
            )
        tables.append(t)
    return tables
