"""Versioned ``results.json`` and per-sample ``samples.parquet``.

``results.json`` (schema :data:`SCHEMA_VERSION`)::

    {
      "schema_version": "1.0",
      "results": {task: {language: {metric: {value, ci, n, n_datasets, parse_failures,
                                             per_dataset: {dataset: {value, p_value, ci, n, ...}}}},
                         "all": {metric: {value, ci, n, n_languages, parse_failures}}}},
      # tasks with issue labels (MEDAL) also have, per language and in "all" (= all languages
      # pooled, MEDAL's "Combined"): "<dim>/<f1_pos|f1_neg|precision|recall|accuracy|
      # predicted_positive|reference_positive>", "<dim>/human_ceiling", "<dim>/mcnemar",
      # "macro/f1_pos", "macro/f1_neg", and in "all" "pearson_pooled" / "spearman_pooled";
      # "label_parse_failures": {task: {dim: n}}.
      # Added within 1.1 (readers ignore what they do not know): tasks with TaskSpec.levels get
      # "<dialogue|system>/<metric>" per language (ComperDial Tables 4-5); tasks whose items carry
      # annotator labels get "soft/<expected_abs_error|expected_sq_error|cross_entropy>",
      # "ceiling_loao/<metric>", "ceiling_split_half/<metric>", "high_agreement/<metric>" per
      # language and the sections "human_labels": {task: notes} and "alt_test": {task: {epsilon,
      # q, scale, scoring, environments: {"<dataset>/<lang>": {omega, rho, passed, annotators:
      # {id: {n, rho, p_value, rejected, skipped}}}}}}; a panel: judge adds "panel": {members,
      # vote, quorum, tasks: {task: {members, panel, alpha, alpha_rank, error_correlation,
      # leave_one_out, alt_test}}}.
      # "executor": {kind, and for ray: workers, gpus_per_worker, cpus_per_worker, shard_size,
      # max_retries, cluster: {ray_version, address, resources, nodes}, pools: [{role, spec,
      # resources_per_worker, workers: [{worker, node_ip, hostname, pid, gpu_ids, requests, shards,
      # seconds, retries, replaced, setup_s, load_seconds}]}]} (harness.executors);
      # a run that stopped early has "incomplete": {reason, stopped_at, n_items_total,
      # n_items_scored, n_items_unscored, by_task, resume} (harness.run.partial).
      "harness": {version, git_sha, git_dirty}, "run": {...}, "judge": {...},
      "datasets": {task: {...}}, "tasks": {task: {...}}, "usage": {...}, "cache": {...},
      "timings": {...}, "environment": {...}
    }

``samples.parquet`` has one row per judged item (ids, language, prompt hash, raw output, score,
parse status, human rating, ...) and loads with ``load_dataset("parquet", data_files=...)``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = "1.1"
RESULTS_FILE = "results.json"
SAMPLES_FILE = "samples.parquet"

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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def write_results(
    output_dir: str | Path, results: dict[str, Any], samples: pd.DataFrame
) -> tuple[Path, Path]:
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(
        samples.reindex(columns=SAMPLE_SCHEMA.names), schema=SAMPLE_SCHEMA, preserve_index=False
    )
    samples_path = out / SAMPLES_FILE
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".samples.", suffix=".parquet")
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, samples_path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return write_results_json(out, results), samples_path


def write_results_json(output_dir: str | Path, results: dict[str, Any]) -> Path:
    """Write ``results.json`` atomically (NaN and infinities become null)."""
    results_path = Path(output_dir) / RESULTS_FILE
    payload = json.dumps(_json_safe(results), indent=2, ensure_ascii=False, allow_nan=False)
    _atomic_write_bytes(results_path, payload.encode("utf-8"))
    return results_path


def load_results(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS_FILE
    data = json.loads(p.read_text(encoding="utf-8"))
    ver = str(data.get("schema_version", ""))
    if ver.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise ValueError(
            f"{p}: results schema version {ver!r} is not readable by this harness ({SCHEMA_VERSION})"
        )
    return data


def format_metric(m: dict[str, Any] | None) -> str:
    if not m or m.get("value") is None:
        return "—"
    s = f"{m['value']:+.3f}"
    ci = m.get("ci")
    if ci and ci[0] is not None and ci[1] is not None:
        s += f" [{ci[0]:+.2f},{ci[1]:+.2f}]"
    return s


def results_tables(results: dict[str, Any]):
    """One rich Table per task: languages × metrics, with the overall average last."""
    from rich.table import Table

    tables = []
    for task, by_lang in results["results"].items():
        metrics = list(results["tasks"][task]["metrics"])
        t = Table(title=f"{task} — judge {results['judge']['spec']}", title_justify="left")
        t.add_column("lang")
        t.add_column("n", justify="right")
        t.add_column("sets", justify="right")
        for m in metrics:
            t.add_column(f"{m} [95% CI]", justify="right", no_wrap=True)
        t.add_column("fail", justify="right")
        langs = [lang for lang in by_lang if lang != "all"]
        for lang in langs:
            row = by_lang[lang]
            first = row[metrics[0]]
            t.add_row(
                lang,
                str(first["n"]),
                str(first["n_datasets"]),
                *[format_metric(row[m]) for m in metrics],
                str(first["parse_failures"]),
            )
        if "all" in by_lang:
            row = by_lang["all"]
            first = row[metrics[0]]
            t.add_section()
            t.add_row(
                "avg",
                str(first["n"]),
                f"{first['n_languages']}L",
                *[format_metric(row[m]) for m in metrics],
                str(first["parse_failures"]),
                style="bold",
            )
        tables.append(t)
    return tables


ISSUE_COLUMNS = ("f1_pos", "f1_neg", "precision", "recall", "accuracy", "predicted_positive")


def issue_tables(results: dict[str, Any]):
    """One rich Table per issue-label task (MEDAL): dimension × F1+/F1−/P/R/Acc/#pred, pooled over
    languages, with the human ceiling and McNemar's p."""
    from rich.table import Table

    tables = []
    for task, info in results.get("tasks", {}).items():
        dims = info.get("issue_labels") or []
        pooled = results["results"].get(task, {}).get("all", {})
        if not dims or not pooled:
            continue
        t = Table(
            title=f"{task} issue detection (all languages pooled) — judge {results['judge']['spec']}",
            title_justify="left",
        )
        t.add_column("dimension")
        for c in ("F1+", "F1−", "precision", "recall", "accuracy", "#pred", "human F1+", "McNemar p", "fail"):
            t.add_column(c, justify="right")
        fails = results.get("label_parse_failures", {}).get(task, {})
        for d in [*dims, "macro"]:

            def val(name: str, fmt: str = "{:.3f}", d=d, pooled=pooled) -> str:
                v = (pooled.get(f"{d}/{name}") or {}).get("value")
                return "—" if v is None else fmt.format(v)

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
