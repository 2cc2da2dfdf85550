"""``harness report``: compare one or more run directories in a Markdown + self-contained HTML report.

Sections (see docs/reports.md): runs, leaderboard, per-language correlations (MEDAL Fig. 4 /
Table 6), issue detection F1 with the human ceiling (MEDAL Fig. 5) and issue-rate heatmaps per
chatbot × language / dimension from the per-sample labels (MEDAL Fig. 2 / Fig. 9); human ceilings,
the alt-test, judge panels and translation QA (``qa.json`` directories of ``harness datasets qa``)
from :mod:`harness.report.meta` (docs/meta-evaluation.md).

The table builders (:func:`leaderboard_table`, :func:`correlation_table`, :func:`issue_metrics_table`,
:func:`issue_rate_table`, :func:`issue_dimension_table`, :func:`overall_score_table`) return
DataFrames and are usable on their own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.meta.metric import Entries, KeyedEntry, MetaMetric, MetricKey, find
from harness.meta.registry import lookup, table_metrics
from harness.report import figures as figs
from harness.report.figures import (  # noqa: F401  (re-exported: per-sample tables, formatting)
    Doc,
    _num,
    dataset_label,
    fmt_count,
    fmt_entry,
    fmt_value,
    issue_dimension_table,
    issue_rate_table,
    label_frame,
    overall_score_table,
    slug,
)
from harness.run.document import RESULTS_FILE, SAMPLES_FILE, MetricEntry, Results, TaskInfo, load_results

DEFAULT_TITLE = "dialeval-harness report"
F1_NAMES = ("f1_pos", "f1_neg", "precision", "recall", "accuracy", "predicted_positive", "reference_positive")


@dataclass
class LoadedRun:
    path: Path
    results: Results  # the typed document (harness.run.load_results)
    samples: pd.DataFrame | None
    label: str = ""

    @property
    def run_id(self) -> str:
        return self.results.run.id or self.path.name

    @property
    def judge(self) -> str:
        return self.results.judge.spec or "?"

    def task_results(self, task: str) -> dict[str, Entries]:
        return self.results.task_results(task)

    def task_info(self, task: str) -> TaskInfo:
        return self.results.tasks.get(task) or TaskInfo()

    def issue_labels(self, task: str) -> list[str]:
        return list(self.task_info(task).issue_labels)

    def label_names(self, task: str) -> dict[str, str]:
        """Short display names of the task's labels (e.g. MEDAL Table 1 abbreviations), if recorded."""
        return dict(self.task_info(task).label_names)


def _label_names(runs: list[LoadedRun], task: str) -> dict[str, str]:
    """Display names of ``task``'s labels: those its runs recorded, else (runs written before
    results.json recorded them) those of the registered task of that name, if any."""
    names: dict[str, str] = {}
    for r in runs:
        names |= r.label_names(task)
    if not names:
        from harness.tasks import all_tasks

        registered = all_tasks().get(task)
        names = dict(registered.label_names) if registered is not None else {}
    return names


@dataclass
class ReportResult:
    markdown: Path
    html: Path | None
    figures: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_run(path: str | Path) -> LoadedRun:
    """Read ``results.json`` (the typed reader: 1.x files are migrated, every field validated) and
    ``samples.parquet`` when present, of one run directory."""
    p = Path(path)
    rj = p if p.suffix == ".json" and p.is_file() else p / RESULTS_FILE
    if not rj.is_file():
        raise ValueError(f"{p}: no {RESULTS_FILE} here — not a run directory written by `harness run`")
    results = load_results(rj)  # a ResultsError (a ValueError) names the file and the field
    sp = rj.parent / SAMPLES_FILE
    return LoadedRun(rj.parent, results, pd.read_parquet(sp) if sp.is_file() else None)


def _label_runs(runs: list[LoadedRun]) -> None:
    counts = Counter(r.judge for r in runs)
    for r in runs:
        r.label = r.judge if counts[r.judge] == 1 else f"{r.judge} [{r.run_id}]"


# -- tables from results.json -------------------------------------------------------------------
def _tasks(runs: list[LoadedRun]) -> list[str]:
    return list(dict.fromkeys(t for r in runs for t in r.results.results))


def runs_table(runs: list[LoadedRun]) -> pd.DataFrame:
    rows = []
    for r in runs:
        res, h = r.results, r.results.harness
        ds = [dataset_label(d, task) for task, d in res.datasets.items()]
        n_items = res.run.n_items
        if n_items is None and r.samples is not None:
            n_items = len(r.samples)
        sha = str(h.git_sha or "")[:8] + ("-dirty" if h.git_dirty else "")
        tasks = res.run.tasks or list(res.results)
        version = " ".join(x for x in (str(h.version or ""), sha) if x) or "—"
        failures = fmt_count(sum(res.parse_failures.values()))
        ds_text = "; ".join(dict.fromkeys(ds)) or "—"
        rows.append([r.run_id, r.judge, ", ".join(tasks), ds_text, fmt_count(n_items), failures, version])
    return pd.DataFrame(
        rows, columns=["run", "judge", "tasks", "dataset", "items", "parse failures", "harness"]
    )


def _issue_key(group: str, statistic: str) -> MetricKey:
    return MetricKey(metric="issue_detection", group=group, params={"statistic": statistic})


def _pooled_key(method: str) -> MetricKey:
    return MetricKey(metric="pooled_correlation", params={"method": method})


#: leaderboard column -> the entry of "all" it shows
_LEADERBOARD_KEYS: dict[str, MetricKey] = {
    "spearman": MetricKey(metric="spearman"),
    "pearson": MetricKey(metric="pearson"),
    "macro_f1_pos": _issue_key("macro", "f1_pos"),
    "macro_f1_neg": _issue_key("macro", "f1_neg"),
    "spearman_pooled": _pooled_key("spearman"),
    "pearson_pooled": _pooled_key("pearson"),
}


def _extra_columns(runs: list[LoadedRun]) -> list[MetaMetric]:
    """Table metrics of the runs besides Spearman and Pearson (Kendall, a plug-in's), in run order."""
    found = {m.name: m for r in runs for t in r.results.tasks for m in r.results.table_metrics(t)}
    return [m for n, m in found.items() if n not in _LEADERBOARD_KEYS]


def leaderboard_table(runs: list[LoadedRun]) -> pd.DataFrame:
    """One row per (run, task): entries of the "all" correlations, macro F1 and pooled correlations,
    sorted by Spearman (desc, missing last) within each task; ``best`` marks each task's top row."""
    rows = []
    for task in _tasks(runs):
        for r in runs:
            allr = r.task_results(task).get("all")
            if allr is None:
                continue
            sp = _num((find(allr, _LEADERBOARD_KEYS["spearman"]) or MetricEntry()).value)
            n = next((e.n for e in allr.values() if e.n is not None), None)
            row: dict[str, object] = {"task": task, "judge": r.label, "run": r.run_id, "n": n}
            row |= {k: find(allr, key) for k, key in _LEADERBOARD_KEYS.items()}
            row |= {m.name: find(allr, m.key()) for m in _extra_columns(runs)}
            row["parse_failures"] = r.results.parse_failures.get(task)
            rows.append(row | {"_key": -sp if sp is not None else math.inf})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    order = {t: i for i, t in enumerate(_tasks(runs))}
    df = df.assign(_t=df["task"].map(order)).sort_values(["_t", "_key"], kind="stable")
    df["best"] = False
    for _, idx in df.groupby("task").groups.items():
        top = df.loc[idx].iloc[0]
        if top["_key"] != math.inf:
            df.loc[top.name, "best"] = True
    return df.drop(columns=["_t", "_key"]).reset_index(drop=True)


def correlation_table(runs: list[LoadedRun], task: str, metric: str = "spearman") -> pd.DataFrame:
    """Rows = judges, columns = languages + "avg" (mean over languages) + "Combined" (all languages
    pooled, when the run has ``pooled_correlation`` for the method); cells are result entries or None."""
    langs = list(dict.fromkeys(k for r in runs for k in r.task_results(task) if k != "all"))
    key, pooled_key = MetricKey(metric=metric), _pooled_key(metric)
    pooled = any(find(r.task_results(task).get("all"), pooled_key) for r in runs)
    cols = langs + ["avg"] + (["Combined"] if pooled else [])
    data = {}
    for r in runs:
        tr = r.task_results(task)
        if not tr:
            continue
        allr = tr.get("all") or {}
        row: dict[str, KeyedEntry | None] = {lang: find(tr.get(lang), key) for lang in langs}
        row["avg"] = find(allr, key)
        if pooled:
            row["Combined"] = find(allr, pooled_key)
        data[r.label] = row
    return pd.DataFrame.from_dict(data, orient="index", columns=cols).astype(object)


def issue_metrics_table(runs: list[LoadedRun], task: str, language: str = "all") -> pd.DataFrame:
    """Long table (judge × dimension) of the issue-detection metrics of ``language`` ("all" =
    MEDAL's Combined), with the human ceiling F1s and McNemar's test (judge vs human)."""
    rows = []
    for r in runs:
        dims = r.issue_labels(task)
        res = r.task_results(task).get(language) or {}
        for d in dims:
            hc = find(res, _issue_key(d, "human_ceiling")) or MetricEntry()
            mc = find(res, _issue_key(d, "mcnemar")) or MetricEntry()
            row: dict[str, object] = {"judge": r.label, "dimension": d}
            row |= {name: _num((find(res, _issue_key(d, name)) or MetricEntry()).value) for name in F1_NAMES}
            row["f1_pos_ci"] = (find(res, _issue_key(d, "f1_pos")) or MetricEntry()).ci
            f1_pos = hc.attr("f1_pos")
            row["human_f1_pos"] = _num(f1_pos if f1_pos is not None else hc.value)
            row["human_f1_neg"] = _num(hc.attr("f1_neg"))
            row["mcnemar_p"] = _num(mc.value)
            row["mcnemar_significant"] = mc.attr("significant")
            rows.append(row)
    return pd.DataFrame(rows)


# -- sections ------------------------------------------------------------------------------------
def runs_section(doc: Doc, runs: list[LoadedRun]) -> None:
    doc.h(2, "Runs")
    df = runs_table(runs)
    doc.table(list(df.columns), df.values.tolist())


def leaderboard_section(doc: Doc, runs: list[LoadedRun]) -> None:
    doc.h(2, "Leaderboard")
    df = leaderboard_table(runs)
    if df.empty:
        doc.p('No run has overall ("all") results.')
        return
    doc.p(
        'Overall results per task ("all": the mean over languages; pooled: all languages pooled, '
        "MEDAL's Combined), sorted by Spearman; ★ marks each task's best judge. 95% CIs in brackets."
    )
    optional = [
        ("macro_f1_pos", "macro F1+"),
        ("macro_f1_neg", "macro F1-"),
        ("spearman_pooled", "pooled Spearman"),
        ("pearson_pooled", "pooled Pearson"),
        *((m.name, m.header()) for m in _extra_columns(runs)),
    ]
    optional = [(k, h) for k, h in optional if k in df and df[k].notna().any()]
    headers = (
        ["", "task", "judge", "Spearman", "Pearson"] + [h for _, h in optional] + ["n", "parse failures"]
    )
    rows = []
    for _, r in df.iterrows():
        cells = [fmt_entry(r[k]) for k in ("spearman", "pearson", *(k for k, _ in optional))]
        rows.append(
            [
                "★" if r["best"] else "",
                r["task"],
                r["judge"],
                *cells,
                fmt_count(r["n"]),
                fmt_count(r["parse_failures"]),
            ]
        )
    doc.table(headers, rows, bold_rows=[i for i, b in enumerate(df["best"]) if b])


def _task_metrics(runs: list[LoadedRun], task: str) -> list[MetaMetric]:
    """The per-language table metrics of ``task`` over the runs (registry declarations), the
    headline metric first."""
    by_name = {m.name: m for r in runs for m in r.results.table_metrics(task)}
    ms = list(by_name.values()) or table_metrics(["spearman", "pearson"])
    return sorted(ms, key=lambda m: m.name != "spearman")


def language_section(doc: Doc, runs: list[LoadedRun], out: Path) -> list[Path]:
    doc.h(2, "Per-language correlations")
    doc.p(
        "Rows are judges, columns languages; avg = mean over languages, Combined = all languages pooled "
        "(MEDAL Fig. 4 / Table 6). * p < 0.05 where the run reports a p-value."
    )
    made = []
    for task in _tasks(runs):
        doc.h(3, task)
        metrics = _task_metrics(runs, task)
        for mm in metrics:
            tbl = correlation_table(runs, task, mm.name)
            if tbl.empty or tbl.isna().all().all():
                continue
            better = {True: " (higher is better)", False: " (lower is better)", None: ""}[mm.higher_is_better]
            doc.p(f"{mm.header()} per language{better if not mm.is_correlation else ''}:")
            doc.table(
                ["judge"] + list(tbl.columns),
                [[j] + [fmt_entry(e) for e in row] for j, row in zip(tbl.index, tbl.values, strict=True)],
            )
        names = [m.name for m in metrics]
        metric = "spearman" if "spearman" in names else names[0]
        tbl = correlation_table(runs, task, metric)
        if tbl.empty or tbl.isna().all().all():
            continue
        path = out / "figures" / f"corr_{metric}_{slug(task)}.png"
        entries = {
            j: dict(zip(tbl.columns, row, strict=True)) for j, row in zip(tbl.index, tbl.values, strict=True)
        }
        figs.correlation_bars(
            entries, list(tbl.columns), path, f"{task}: {metric} per language", ylabel=lookup(metric).header()
        )
        doc.figure(f"figures/{path.name}", f"{task}: {metric} correlation with humans per language and judge")
        made.append(path)
    return made


_ISSUE_VALUES = ("f1_neg", "precision", "recall", "accuracy")
_ISSUE_COUNTS = ("predicted_positive", "reference_positive")
_ISSUE_HEADERS = ["issue", "judge", "F1+", "F1-", "precision", "recall", "accuracy", "pred. +", "ref. +"]
_ISSUE_HEADERS.append("McNemar p")


def issue_section(doc: Doc, runs: list[LoadedRun], out: Path) -> list[Path]:
    tasks = [t for t in _tasks(runs) if any(r.issue_labels(t) for r in runs)]
    if not tasks:
        return []
    doc.h(2, "Issue detection")
    doc.p(
        "Classification of each binary issue against the human labels on all languages pooled "
        "(MEDAL Fig. 5, Figs. 12–13). human = one annotator set scored against the other (the ceiling). "
        "McNemar p: judge vs human annotations, * significant at 0.05."
    )
    made = []
    for task in tasks:
        tbl = issue_metrics_table(runs, task)
        if tbl.empty:
            continue
        doc.h(3, task)
        names = _label_names(runs, task)
        path = out / "figures" / f"issues_f1_{slug(task)}.png"
        figs.issue_f1_bars(
            tbl, {d: names.get(d, d) for d in tbl["dimension"]}, path, f"{task}: issue detection"
        )
        doc.figure(
            f"figures/{path.name}", f"{task}: F1+ / F1- per issue and judge; black line = human ceiling"
        )
        made.append(path)
        rows = []
        for dim, sub in tbl.groupby("dimension", sort=False):
            for _, r in sub.iterrows():
                ci = r["f1_pos_ci"] if isinstance(r["f1_pos_ci"], list) else None
                f1p = fmt_entry(MetricEntry(value=_num(r["f1_pos"]), ci=ci), star=False)
                rows.append(
                    [
                        names.get(dim, dim),
                        r["judge"],
                        f1p,
                        *[fmt_value(r[k]) for k in _ISSUE_VALUES],
                        *[fmt_count(r[k]) for k in _ISSUE_COUNTS],
                        fmt_value(r["mcnemar_p"]) + ("*" if r["mcnemar_significant"] else ""),
                    ]
                )
            h = sub.iloc[0]
            if _num(h["human_f1_pos"]) is not None or _num(h["human_f1_neg"]) is not None:
                ceiling = [fmt_value(h["human_f1_pos"]), fmt_value(h["human_f1_neg"])]
                rows.append([names.get(dim, dim), "human (ceiling)", *ceiling] + ["—"] * 6)
        doc.table(_ISSUE_HEADERS, rows)
    return made


def _heatmaps(
    doc: Doc,
    s: pd.DataFrame,
    dims: list[str],
    source: str,
    who: str,
    stem: str,
    out: Path,
    names: dict[str, str],
) -> list[Path]:
    """Chatbot × language (≥1 issue), chatbot × issue (+ mean overall) and language × issue heatmaps."""
    specs = []
    if "system" in s.columns and s["system"].notna().any():
        specs.append(
            (
                "rate",
                issue_rate_table(s, dims, source=source),
                "dialogues with ≥1 issue (%)",
                "% of dialogues with at least one issue, chatbot × language",
                {"xlabel": "language"},
            )
        )
        specs.append(
            (
                "dims",
                issue_dimension_table(s, dims, source=source).rename(columns=names),
                "issues flagged (%)",
                "% of dialogues per issue and mean overall score, per chatbot",
                {"overall": overall_score_table(s, source=source), "xlabel": "issue"},
            )
        )
    specs.append(
        (
            "languages",
            issue_dimension_table(s, dims, index="language", source=source).rename(columns=names),
            "issues per language (%)",
            "% of dialogues per issue, per language",
            {"xlabel": "issue", "ylabel": "language"},
        )
    )
    made = []
    for suffix, tbl, title, caption, kw in specs:
        if tbl.empty:
            continue
        path = out / "figures" / f"{stem}_{suffix}.png"
        made.append(figs.rate_heatmap(tbl, path, f"{who}: {title}", **kw))
        doc.figure(f"figures/{path.name}", f"{who}: {caption}")
        if suffix == "rate":
            body = [
                [i] + [fmt_value(v, 1) for v in row] for i, row in zip(tbl.index, tbl.values, strict=True)
            ]
            doc.table(["chatbot"] + list(tbl.columns), body)
    return made


def heatmap_section(doc: Doc, runs: list[LoadedRun], out: Path, warnings: list[str]) -> list[Path]:
    tasks = [t for t in _tasks(runs) if any(r.issue_labels(t) for r in runs)]
    if not tasks:
        return []
    doc.h(2, "Issue rates per chatbot and language")
    doc.p(
        "From samples.parquet (MEDAL Figs. 2 and 9): the judge's labels, parse failures excluded; the humans' "
        "labels as the mean over annotators of each annotator's rate."
    )
    made = []
    for task in tasks:
        doc.h(3, task)
        human: list[pd.DataFrame] = []
        for i, r in enumerate(runs):
            dims = r.issue_labels(task)
            if not dims or r.samples is None:
                continue
            s = r.samples[r.samples["task"] == task]
            if "system" not in s.columns or s["system"].isna().all():
                warnings.append(
                    f"{r.path}: no chatbot (system) in samples; chatbot heatmaps of {task} skipped"
                )
            if "human_labels" in s.columns:
                human.append(s[s["human_labels"].notna()])
            if "judge_labels" not in s.columns or s["judge_labels"].isna().all():
                warnings.append(
                    f"{r.path}: no judge_labels in samples (older run?); heatmaps of {task} skipped"
                )
                continue
            _, excluded = label_frame(s, dims, "judge")
            made += _heatmaps(
                doc,
                s,
                dims,
                "judge",
                r.label,
                f"issues_{i + 1:02d}-{slug(r.label)}_{slug(task)}",
                out,
                _label_names(runs, task),
            )
            doc.p(f"{r.label}: {excluded} of {len(s)} dialogues excluded (parse failure or no labels).")
        hs = pd.concat(human) if human else pd.DataFrame()
        if not hs.empty:
            dims = next(r.issue_labels(task) for r in runs if r.issue_labels(task))
            key = [c for c in ("dataset", "language", "item_id") if c in hs.columns]
            hs = hs.drop_duplicates(subset=key) if key else hs
            made += _heatmaps(
                doc,
                hs,
                dims,
                "human",
                "human annotators",
                f"human_{slug(task)}",
                out,
                _label_names(runs, task),
            )
    return made


# -- report ----------------------------------------------------------------------------------------
def build_report(
    run_dirs: Sequence[str | Path], output_dir: str | Path, title: str | None = None, html: bool = True
) -> ReportResult:
    """Write ``report.md``, ``report.html`` (unless ``html=False``) and ``figures/*.png``."""
    if not run_dirs:
        raise ValueError("no run directories given")
    from harness.report.meta import load_qa, meta_sections, qa_section

    qas = [
        (Path(p), q)
        for p in run_dirs
        if not (Path(p) / RESULTS_FILE).is_file() and (q := load_qa(p)) is not None
    ]
    runs = [load_run(p) for p in run_dirs if Path(p) not in {q for q, _ in qas}]
    _label_runs(runs)
    out = Path(output_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    doc = Doc(title or DEFAULT_TITLE)
    warnings: list[str] = []
    for r in runs:
        if r.samples is None:
            warnings.append(f"{r.path}: no {SAMPLES_FILE}; per-sample heatmaps skipped for this run")
    figures: list[Path] = []
    if runs:
        runs_section(doc, runs)
        leaderboard_section(doc, runs)
        figures += language_section(doc, runs, out)
        figures += issue_section(doc, runs, out)
        figures += heatmap_section(doc, runs, out, warnings)
        figures += meta_sections(doc, runs, out)  # ceilings, alt-test, panels
    figures += qa_section(doc, qas, out)  # translation QA (qa.json of harness datasets qa)
    if warnings:
        doc.h(2, "Warnings")
        doc.bullets(warnings)
    md = out / "report.md"
    md.write_text(doc.to_markdown(), encoding="utf-8")
    html_path = None
    if html:
        html_path = out / "report.html"
        html_path.write_text(doc.to_html(out), encoding="utf-8")
    return ReportResult(markdown=md, html=html_path, figures=figures, warnings=warnings)
