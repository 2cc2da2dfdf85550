"""The run overview page's data, from ``results.json`` alone: provenance, the task × language ×
metric table (CIs, per-dataset values, p-values), parse failures, aggregation levels, and the
meta-evaluation sections the run has (human ceilings and soft labels, the alternative annotator test
with ω and its verdict per environment and ρ_j per annotator, judge panels, issue detection). The
section rows are those of ``harness report`` (:mod:`harness.report.meta`), so both show the same
numbers.
"""

from __future__ import annotations

import json

from harness.meta.metric import MetricEntry, MetricKey, find
from harness.report.figures import dataset_label, fmt_count, fmt_entry, fmt_value
from harness.report.meta import (
    ALT_HEADERS,
    ANN_HEADERS,
    HUMAN_HEADERS,
    PANEL_HEADERS,
    PANEL_SUMMARY_HEADERS,
    all_alt_rows,
    human_rows,
    level_headers,
    level_rows,
    panel_rows,
)
from harness.run.document import TaskInfo
from harness.view.data import Payload, RunFiles

ISSUE_KEYS = ("f1_pos", "f1_neg", "precision", "recall", "accuracy", "predicted_positive", "human_ceiling")
ISSUE_HEADERS = [
    "dimension",
    "F1+",
    "F1−",
    "precision",
    "recall",
    "accuracy",
    "#pred +",
    "human F1+",
    "McNemar p",
]


def _prov(name: str, value: object, detail: object = None) -> Payload:
    return {"name": name, "value": "—" if value in (None, "") else str(value), "detail": detail}


def provenance(run: RunFiles) -> list[Payload]:
    res = run.results
    r, h, j = res.get("run") or {}, res.get("harness") or {}, res.get("judge") or {}
    sha = str(h.get("git_sha") or "")[:12] + (" (dirty)" if h.get("git_dirty") else "")
    datasets = res.get("datasets") or {}
    ds_text = "; ".join(dict.fromkeys(dataset_label(d, t) for t, d in datasets.items())) or None
    usage = res.get("usage") or {}
    cache = res.get("cache") or {}
    timings = res.get("timings") or {}
    env = res.get("environment") or {}
    libs = env.get("libraries") or {}
    out = [
        _prov("run", run.run_id, {"path": str(run.path), **{k: r.get(k) for k in ("command", "created_at")}}),
        _prov("judge", run.judge, j.get("method")),
        _prov("judge identity", _identity_line(j.get("identity")), j.get("identity")),
        _prov("decoding", _decoding_line(j.get("decoding")), j.get("decoding")),
        _prov("dataset", ds_text, datasets),
        _prov("harness", " ".join(x for x in (str(h.get("version") or ""), sha) if x)),
        _prov("items", fmt_count(r.get("n_items")), {k: r.get(k) for k in ("limit", "languages", "tasks")}),
        _prov(
            "statistics",
            f"seed {r.get('seed')}, {r.get('n_bootstrap')} bootstrap resamples, "
            f"{r.get('confidence_level')} confidence"
            if r.get("n_bootstrap") is not None
            else None,
        ),
        _prov(
            "usage",
            f"{usage.get('prompt_tokens', 0):,} prompt + {usage.get('completion_tokens', 0):,} completion tokens; "
            f"cache {cache.get('hits', 0):,} hits / {cache.get('misses', 0):,} misses",
            {"usage": usage, "cache": cache},
        ),
        _prov("time", f"{timings['total_s']:.1f} s" if "total_s" in timings else None, timings),
        _prov(
            "environment",
            ", ".join(f"{k} {v}" for k, v in (("python", env.get("python")), *libs.items()) if v) or None,
            {"environment": env, "executor": res.get("executor")},
        ),
    ]
    return out


def _identity_line(identity: object) -> str | None:
    if not isinstance(identity, dict):
        return None
    if "routes" in identity:
        return "; ".join(f"{k} → {_identity_line(v)}" for k, v in (identity.get("routes") or {}).items())
    if "members" in identity and isinstance(identity["members"], list | dict):
        members = identity["members"]
        vals = members.values() if isinstance(members, dict) else members
        return " + ".join(str(_identity_line(m)) for m in vals)
    keys = ("backend", "model", "revision", "engine", "adapter", "quantisation")
    return " ".join(str(identity[k]) for k in keys if identity.get(k)) or json.dumps(identity)[:200]


def _decoding_line(decoding: object) -> str | None:
    if not isinstance(decoding, dict):
        return None
    vals = {json.dumps(v, sort_keys=True) for v in decoding.values() if v}
    if not vals:
        return "none (not a generative judge)"
    if len(vals) == 1:
        d = json.loads(vals.pop())
        return ", ".join(f"{k}={v}" for k, v in d.items() if v is not None)
    return f"{len(vals)} settings (per task)"


def task_tables(run: RunFiles) -> list[Payload]:
    """Per task: the languages × table-metric rows (the metrics' headers and directions from the
    registry), with the per-dataset values, and the task's notes."""
    doc = run.document
    out: list[Payload] = []
    for task, by_lang in doc.results.items():
        info = doc.tasks.get(task) or TaskInfo()
        columns = doc.table_metrics(task)
        keys = [m.key() for m in columns]
        rows = []
        for lang, entries in by_lang.items():
            found = [find(entries, k) for k in keys]
            first = next((e for e in found if e is not None), MetricEntry())
            per_ds = sorted({d for e in found if e is not None for d in (e.per_dataset or {})})

            def at(e: MetricEntry | None, d: str) -> MetricEntry | None:
                return (e.per_dataset or {}).get(d) if e is not None else None

            rows.append(
                {
                    "lang": lang,
                    "n": fmt_count(first.n),
                    "sets": f"{first.n_languages} lang." if lang == "all" else fmt_count(first.n_datasets),
                    "cells": [fmt_entry(e) for e in found],
                    "values": [e.value if e is not None else None for e in found],
                    "parse_failures": fmt_count(first.parse_failures),
                    "per_dataset": [
                        [
                            d,
                            fmt_count((at(found[0], d) or MetricEntry()).n),
                            *(fmt_entry(at(e, d)) for e in found),
                        ]
                        for d in per_ds
                    ],
                }
            )
        ds = doc.datasets.get(task)
        notes = list(ds.warnings) if ds is not None else []
        if ds is not None and ds.missing_configs:
            notes.append(f"configs missing from the dataset: {', '.join(ds.missing_configs)}")
        if doc.human_labels.get(task):
            notes += _notes(doc.human_labels[task])
        out.append(
            {
                "task": task,
                "description": info.description,
                "level": info.level,
                "levels": info.levels,
                "dimension": info.dimension,
                "scoring": info.scoring,
                "metrics": [m.name for m in columns],
                "keys": [k.model_dump(mode="json") for k in keys],
                "higher_is_better": [m.higher_is_better for m in columns],
                "headers": ["lang", "n", "datasets", *(m.header() for m in columns), "parse failures"],
                "rows": rows,
                "parse_failures": doc.parse_failures.get(task),
                "label_parse_failures": doc.label_parse_failures.get(task),
                "issue_labels": info.issue_labels,
                "dataset": dataset_label(ds, task) if ds is not None else None,
                "notes": notes,
            }
        )
    return out


def _notes(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return [f"{k}: {v}" for k, v in value.items() if not isinstance(v, dict | list)]
    return []


def _section(key: str, title: str, note: str, headers: list[str], rows: list[list[str]]) -> Payload:
    return {"key": key, "title": title, "note": note, "headers": headers, "rows": rows}


def issue_rows(run: RunFiles, task: str) -> list[list[str]]:
    """Per issue label and ``macro``: the pooled ("all") issue-detection statistics."""
    doc = run.document
    pooled = doc.task_results(task).get("all")
    info = doc.tasks.get(task) or TaskInfo()
    rows = []
    for d in [*info.issue_labels, "macro"]:

        def val(name: str, d: str = d, digits: int = 3) -> str:
            key = MetricKey(metric="issue_detection", group=d, params={"statistic": name})
            return fmt_value((find(pooled, key) or MetricEntry()).value, digits)

        rows.append([d, *(val(k) for k in ISSUE_KEYS), val("mcnemar", digits=4)])
    return rows


def sections(run: RunFiles) -> list[Payload]:
    out = []
    if rows := level_rows(run.document):
        out.append(
            _section(
                "levels",
                "Turn, dialogue and system level",
                "Correlations of the item scores and of their means per (system, dialogue) and per system "
                "(ComperDial Tables 4–5).",
                level_headers(run.document),
                rows,
            )
        )
    if rows := human_rows(run.document):
        out.append(
            _section(
                "ceilings",
                "Human ceilings and soft labels",
                "The judge's headline correlation next to one annotator against the rest (LOAO) and the "
                "split-half ceiling; the judge on high-agreement items; errors against the annotators' "
                "label distribution.",
                HUMAN_HEADERS,
                rows,
            )
        )
    summary, per = all_alt_rows(run.document)
    if summary:
        out.append(
            _section(
                "alt_test",
                "Can this judge replace an annotator? (alt-test)",
                "Calderon et al. 2025: ω = share of annotators the judge beats (after Benjamini–Yekutieli); "
                "the judge passes when ω ≥ 0.5.",
                ALT_HEADERS,
                summary,
            )
        )
    if per:
        out.append(
            _section(
                "alt_test_annotators",
                "alt-test per annotator",
                "ρ_j = the judge's advantage probability against annotator j; bars below.",
                ANN_HEADERS,
                per,
            )
        )
    members, psum = panel_rows(run.document)
    if members:
        out.append(
            _section(
                "panel",
                "Judge panel",
                "Krippendorff's α among the judges, mean error correlation ρ̄, effective number of judges.",
                PANEL_SUMMARY_HEADERS,
                psum,
            )
        )
        out.append(
            _section("panel_members", "Panel members (leave-one-judge-out)", "", PANEL_HEADERS, members)
        )
    for task in run.tasks:
        if run.task_info(task).get("issue_labels"):
            out.append(
                _section(
                    f"issues_{task}",
                    f"Issue detection — {task} (all languages pooled)",
                    "MEDAL Fig. 5: per issue against the human labels; human F1+ = one annotator set against "
                    "the other.",
                    ISSUE_HEADERS,
                    issue_rows(run, task),
                )
            )
    return out


def overview(run: RunFiles) -> Payload:
    res = run.results
    notes = []
    if inc := res.get("incomplete"):
        notes.append(
            f"incomplete run: {inc.get('reason')} — {inc.get('n_items_scored')} of {inc.get('n_items_total')} "
            f"items scored; {inc.get('resume') or 'rerun the same command to finish it'}"
        )
    if run.samples is None:
        notes.append("no samples.parquet: the samples browser and the plots are not available for this run")
    return {
        **run.summary(),
        "provenance": provenance(run),
        "task_tables": task_tables(run),
        "sections": sections(run),
        "notes": notes,
    }
