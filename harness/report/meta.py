"""Meta-evaluation beyond one correlation, as tables (rows shared by the CLI's rich tables and the
report's Markdown/HTML) and figures: human ceilings and soft labels, the alternative annotator test
(ω per judge with its verdict, ρ_j per annotator), judge panels (α, error correlation, effective
judges, leave-one-judge-out) and translation QA per language (``qa.json`` of ``harness datasets qa``).
The figures are drawn by :mod:`harness.report.meta_figures`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.meta.metric import Level, MetricKey, find
from harness.meta.registry import lookup
from harness.report.figures import Doc, fmt_entry, fmt_value, slug
from harness.report.meta_figures import (
    alt_test_figure,
    ceiling_figure,
    error_heatmap,
    qa_figure,
    short_name,
)
from harness.run.document import AltEnvironment, AltTest, ErrorCorrelation, PanelVote, Results

if TYPE_CHECKING:
    from rich.table import Table

    from harness.report.build import LoadedRun

QA_FILE = "qa.json"
SOFT_STATISTICS = ("expected_abs_error", "expected_sq_error", "cross_entropy")


def human_keys(method: str) -> list[MetricKey]:
    """The keys of the human-reference columns for a correlation method: LOAO and split-half
    ceilings (``human_ceilings``), the high-agreement correlation (``high_agreement``)."""
    return [
        MetricKey(metric="human_ceilings", params={"estimator": "loao", "method": method}),
        MetricKey(metric="human_ceilings", params={"estimator": "split_half", "method": method}),
        MetricKey(metric="high_agreement", params={"method": method}),
    ]


SOFT_KEYS = tuple(MetricKey(metric="soft_labels", params={"statistic": s}) for s in SOFT_STATISTICS)
HUMAN_HEADERS = [
    "task",
    "lang",
    "judge (headline metric)",
    "one annotator vs rest (LOAO)",
    "ceiling (split-half, S–B)",
    "judge on high-agreement items",
    "E|s−E[h]|",
    "E[(s−h)²]",
    "cross-entropy",
]
ALT_HEADERS = [
    "task",
    "judge",
    "environment",
    "ω",
    "ρ",
    "verdict",
    "annotators tested",
    "ε",
    "scale / scoring",
]
ANN_HEADERS = ["task", "judge", "environment", "annotator", "n", "ρ_j", "p", "judge wins (BY)"]
PANEL_HEADERS = [
    "task",
    "judge",
    "metric (all)",
    "failures",
    "Δ metric without it",
    "ρ̄ without",
    "n_eff without",
]
QA_HEADERS = [
    "lang",
    "segments",
    "BLEU",
    "chrF",
    "BERTScore",
    "adequacy",
    "CometKiwi",
    "similarity",
    "flagged items",
]


# -- rows ---------------------------------------------------------------------------------------
def human_rows(results: Results, label: str | None = None) -> list[list[str]]:
    """Per task × language: the judge's headline correlation next to the human ceilings, the
    high-agreement correlation and the soft-label errors."""
    rows = []
    for task in results.human_labels:
        m = results.headline_metric(task)
        by_lang = results.task_results(task)
        for lang, entries in by_lang.items():
            keys = human_keys(m)
            if not any(find(entries, k) for k in keys) or (lang == "all" and len(by_lang) == 2):
                continue  # "all" repeats a single language
            rows.append(
                [
                    task,
                    lang,
                    fmt_entry(find(entries, MetricKey(metric=m))),
                    *(fmt_entry(find(entries, k), star=False) for k in keys),
                    *(fmt_entry(find(entries, k), star=False) for k in SOFT_KEYS),
                ]
            )
    return rows


def _level_methods(results: Results) -> list[str]:
    return list(dict.fromkeys(m for info in results.tasks.values() if info.levels for m in info.metrics))


def level_rows(results: Results, methods: list[str] | None = None) -> list[list[str]]:
    """Per task with aggregation levels (ComperDial Tables 4–5): the item-level and the dialogue- /
    system-level correlations per language (columns: :func:`level_headers`; ``methods`` default to
    the run's)."""
    rows = []
    methods = _level_methods(results) if methods is None else methods
    for task, info in results.tasks.items():
        levels = info.levels
        if not levels:
            continue
        by_lang = results.task_results(task)
        for lang, entries in by_lang.items():
            if lang == "all" and len(by_lang) == 2:
                continue
            for level in ["item", *levels]:
                keys = [_level_key(level, m) for m in methods]
                found = [find(entries, k) for k in keys]
                if any(found):
                    n = next((e.n for e in found if e is not None), None)
                    rows.append([task, lang, level, str(n), *(fmt_entry(e) for e in found)])
    return rows


def _level_key(level: str, method: str) -> MetricKey:
    """A correlation at the item level is the method's own metric; at the dialogue / system level
    it is ``<level>_correlation`` with the method as parameter."""
    if level == Level.ITEM:
        return MetricKey(metric=method)
    return MetricKey(metric=f"{level}_correlation", level=Level(level), params={"method": method})


def level_headers(results: Results, methods: list[str] | None = None) -> list[str]:
    """Column headers of :func:`level_rows`: the correlations' labels from the meta-metric registry."""
    methods = _level_methods(results) if methods is None else methods
    return ["task", "lang", "level", "n", *(lookup(m).header() for m in methods)]


def _verdict(r: AltEnvironment) -> str:
    if r.skipped:
        return "not tested: " + str(r.skipped)
    return "passes (can replace)" if r.passed else "fails"


def alt_rows(alt: AltTest, task: str, judge: str) -> tuple[list[list[str]], list[list[str]]]:
    """(summary rows per environment, per-annotator rows) of one alt-test result."""
    if alt.skipped and not alt.environments:
        return [
            [
                task,
                judge,
                "—",
                "—",
                "—",
                "not tested: " + str(alt.skipped),
                "0",
                str(alt.epsilon),
                "—",
            ]
        ], []
    summary, per = [], []
    for env, r in alt.environments.items():
        tested = [a for a in r.annotators.values() if not a.skipped]
        summary.append(
            [
                task,
                judge,
                env,
                fmt_value(r.omega, 2),
                fmt_value(r.rho, 2),
                _verdict(r),
                f"{len(tested)} of {len(r.annotators)}",
                f"{alt.epsilon:g}" if alt.epsilon is not None else "—",
                f"{alt.scale} / {alt.scoring}",
            ]
        )
        for ann, a in r.annotators.items():
            win = "—" if a.skipped else ("yes" if a.rejected else "no")
            per.append(
                [
                    task,
                    judge,
                    env,
                    ann,
                    str(a.n),
                    fmt_value(a.rho, 3),
                    fmt_value(a.p_value, 4) if a.p_value is not None else (a.skipped or "—"),
                    win,
                ]
            )
    return summary, per


def all_alt_rows(results: Results) -> tuple[list[list[str]], list[list[str]]]:
    judge = results.judge.spec or "?"
    summary: list[list[str]] = []
    per: list[list[str]] = []
    for task, alt in results.alt_test.items():
        s, p = alt_rows(alt, task, judge)
        summary += s
        per += p
    for task, info in (results.panel.tasks if results.panel is not None else {}).items():
        for member, alt in info.alt_test.items():
            if member != "panel":  # the panel's own test is the run's alt_test above
                s, p = alt_rows(alt, task, member)
                summary += s
                per += p
    return summary, per


def panel_rows(results: Results) -> tuple[list[list[str]], list[list[str]]]:
    """(per-member rows, per-task summary rows: α, α on ranks, ρ̄, effective judges)."""
    members, summary = [], []
    for task, info in (results.panel.tasks if results.panel is not None else {}).items():
        m = results.headline_metric(task)
        loo = info.leave_one_out if isinstance(info.leave_one_out, dict) else {}
        for name, mem in info.members.items():
            lo = loo.get(name) or {}
            members.append(
                [
                    task,
                    name,
                    fmt_entry((mem.results.get("all") or {}).get(m)),
                    str(mem.failures),
                    fmt_value(lo.get(f"delta_{m}")),
                    fmt_value(lo.get("mean_error_correlation")),
                    fmt_value(lo.get("effective_judges"), 2),
                ]
            )
        p = info.panel or PanelVote()
        members.append(
            [
                task,
                f"panel (vote={p.vote}, quorum {p.quorum})",
                fmt_entry((p.results.get("all") or {}).get(m)),
                str(p.failures),
                "",
                "",
                "",
            ]
        )
        ec = info.error_correlation or ErrorCorrelation()
        summary.append(
            [
                task,
                str(ec.n_judges),
                fmt_value(info.alpha.value if info.alpha is not None else None),
                fmt_value(info.alpha_rank.value if info.alpha_rank is not None else None),
                fmt_value(ec.mean),
                fmt_value(ec.effective_judges, 2),
                str(info.n_items),
            ]
        )
    return members, summary


PANEL_SUMMARY_HEADERS = [
    "task",
    "judges",
    "α (values)",
    "α (ranks)",
    "mean error corr. ρ̄",
    "effective judges",
    "items",
]


def qa_rows(qa: Mapping[str, Any]) -> list[list[str]]:
    """Table 2-style rows: one per language, then the average."""
    src = qa.get("source_language", "en").upper()
    rows = []
    for lang, r in list((qa.get("languages") or {}).items()) + [("avg", qa.get("average") or {})]:
        name = "Avg" if lang == "avg" else f"{src}-{lang.upper()}"
        rows.append(
            [
                name,
                str(r.get("n_segments", "—")),
                fmt_value(r.get("bleu"), 2),
                fmt_value(r.get("chrf"), 2),
                fmt_value(r.get("bertscore_f1")),
                fmt_value(r.get("adequacy"), 2),
                fmt_value(r.get("cometkiwi")),
                fmt_value(r.get("similarity")),
                str(r.get("flagged_items", "—")),
            ]
        )
    return rows


# -- CLI ----------------------------------------------------------------------------------------
def rich_tables(results: Results) -> list[Table]:
    """rich Tables of a run's ceilings / soft labels, alt-test and panel sections (empty if none)."""
    from rich.table import Table
    from rich.text import Text

    def table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
        # Text cells: judge specs ("panel:[hf:a]+[hf:b]") print as written on any console
        t = Table(title=Text(title), title_justify="left")
        for h in headers:
            left = h in ("task", "lang", "judge", "environment", "annotator", "verdict")
            t.add_column(Text(h), justify="left" if left else "right")
        for r in rows:
            t.add_row(*(Text(str(c)) for c in r))
        return t

    out = []
    if rows := level_rows(results):
        out.append(
            table("turn / dialogue / system level (ComperDial Tables 4–5)", level_headers(results), rows)
        )
    if rows := human_rows(results):
        out.append(table("human ceilings and soft labels (headline metric)", HUMAN_HEADERS, rows))
    summary, per = all_alt_rows(results)
    judge = results.judge.spec or "?"
    per = [r for r in per if r[1] == judge]  # the members' per-annotator rows are in `harness report`
    if per:
        out.append(
            table(
                "alt-test per annotator (judge vs the left-out annotator, Calderon et al. 2025)",
                ANN_HEADERS,
                per,
            )
        )
    if summary:
        short = [
            [*r[:5], "not tested (see below)" if r[5].startswith("not tested") else r[5], *r[6:]]
            for r in summary
        ]
        out.append(table("alt-test: winning rate ω (passes when ω ≥ 0.5)", ALT_HEADERS, short))
    members, psum = panel_rows(results)
    if members:
        out.append(table("panel members (leave-one-judge-out)", PANEL_HEADERS, members))
        out.append(table("panel agreement and independence", PANEL_SUMMARY_HEADERS, psum))
    return out


def alt_notes(results: Results) -> list[str]:
    """One line per environment the alt-test could not test, and per warning (the CLI prints them)."""
    summary, _ = all_alt_rows(results)
    lines = [f"alt-test {r[0]} / {r[1]} / {r[2]}: {r[5]}" for r in summary if r[5].startswith("not tested")]
    for task, alt in results.alt_test.items():
        for env, e in alt.environments.items():
            lines += [f"alt-test {task} / {env}: warning: {w}" for w in e.warnings]
    return lines


# -- report sections ------------------------------------------------------------------------------
def meta_sections(doc: Doc, runs: Sequence[LoadedRun], out: Path) -> list[Path]:
    """The report's ceilings, alt-test and panel sections over ``runs`` (LoadedRun objects)."""
    made: list[Path] = []
    methods = list(dict.fromkeys(m for r in runs for m in _level_methods(r.results)))
    levels = [(r, row) for r in runs for row in level_rows(r.results, methods)]
    if levels:
        doc.h(2, "Turn, dialogue and system level")
        doc.p(
            "Correlations of the item scores and of their means per (system, dialogue) and per system "
            "(ComperDial Tables 4–5; the judge's means skip parse failures)."
        )
        doc.table(
            ["task", "lang", "judge", *level_headers(levels[0][0].results, methods)[2:]],
            [[row[0], row[1], r.label, *row[2:]] for r, row in levels],
        )
    human = [(r, row) for r in runs for row in human_rows(r.results)]
    if human:
        doc.h(2, "Human ceilings and soft labels")
        doc.p(
            "The judge's headline correlation next to what humans reach: one annotator against the mean of the "
            "others (LOAO), and sqrt of the Spearman–Brown split-half reliability of the mean rating (the most a "
            "noise-free judge can reach); the judge on items whose annotators agree (full/majority); expected "
            "errors against the annotators' label distribution."
        )
        doc.table(
            ["task", "lang", "judge", *HUMAN_HEADERS[2:]],
            [[row[0], row[1], r.label, *row[2:]] for r, row in human],
        )
        path = out / "figures" / "ceilings.png"
        made.append(
            ceiling_figure(
                [(f"{short_name(r.label)}\n{row[0]} {row[1]}", row[2:5]) for r, row in human], path
            )
        )
        doc.figure(
            f"figures/{path.name}",
            "the judge's headline correlation next to the human LOAO value and the split-half ceiling",
        )
    alts = [(r, *all_alt_rows(r.results)) for r in runs]
    if any(s for _, s, _ in alts):
        doc.h(2, "Can this judge replace an annotator? (alt-test)")
        doc.p(
            "Alternative annotator test (Calderon, Reichart & Dror, 2025): leave one annotator out; the judge wins "
            "against that annotator when it agrees with the remaining annotators better, by a one-sided paired "
            "t-test against the margin ε with Benjamini–Yekutieli FDR control. ω = share of annotators the judge "
            "beats; the judge can replace the annotators when ω ≥ 0.5. ρ = average advantage probability."
        )
        doc.table(ALT_HEADERS, [s for _, ss, _ in alts for s in ss])
        for i, (r, _, per) in enumerate(alts):
            if per:
                path = out / "figures" / f"alt_test_{i + 1:02d}-{slug(r.label)}.png"
                made.append(alt_test_figure(per, path, f"{r.label}: advantage probability ρ_j per annotator"))
                doc.figure(
                    f"figures/{path.name}", f"{r.label}: ρ_j per annotator (filled = judge wins after BY)"
                )
        doc.table(ANN_HEADERS, [p for _, _, per in alts for p in per])
    panels = [(r, *panel_rows(r.results)) for r in runs if r.results.panel is not None]
    if panels:
        doc.h(2, "Judge panels")
        doc.p(
            "Per member and for the panel: the headline correlation; Krippendorff's α among the judges (on their "
            "[0, 1]-normalised values and on their ranks); ρ̄ = mean pairwise correlation of the judges' errors "
            "(residuals given the human rating); effective number of independent judges k / (1 + (k − 1) ρ̄); "
            "leave-one-judge-out: the change of the panel's metric without each member and ρ̄ / n_eff without it."
        )
        for i, (r, members, summary) in enumerate(panels):
            doc.h(3, r.label)
            doc.table(PANEL_SUMMARY_HEADERS, summary)
            doc.table(PANEL_HEADERS, members)
            panel_tasks = r.results.panel.tasks if r.results.panel is not None else {}
            for task, info in panel_tasks.items():
                pairs = info.error_correlation.pairs if info.error_correlation is not None else {}
                if pairs:
                    path = out / "figures" / f"panel_errors_{i + 1:02d}-{slug(task)}.png"
                    made.append(error_heatmap(pairs, path, f"{task}: judges' error correlation"))
                    doc.figure(f"figures/{path.name}", f"{r.label} on {task}: pairwise error correlations")
    return made


def qa_section(doc: Doc, qas: Sequence[tuple[Path, Mapping[str, Any]]], out: Path) -> list[Path]:
    made: list[Path] = []
    if not qas:
        return made
    doc.h(2, "Translation QA")
    doc.p(
        "xDial-Eval §3.2 / Table 2: source vs translation per language — BLEU / chrF / BERTScore of the "
        "back-translation against the source, LLM adequacy (App. A Table 6 prompt, 1–5), CometKiwi QE, "
        "cross-lingual cosine of source and translation; flagged = items with an outlier segment."
    )
    for i, (path, qa) in enumerate(qas):
        ds = qa.get("dataset") or {}
        doc.h(3, f"{ds.get('ref') or path.name}")
        doc.table(QA_HEADERS, qa_rows(qa))
        fig = out / "figures" / f"qa_{i + 1:02d}-{slug(str(ds.get('ref') or path.name))}.png"
        made.append(qa_figure(qa, fig))
        doc.figure(f"figures/{fig.name}", f"{ds.get('ref')}: translation quality per language")
        doc.bullets([f"{k}: {v}" for k, v in (qa.get("methods") or {}).items()])
    return made


def load_qa(path: str | Path) -> dict[str, Any] | None:
    p = Path(path)
    f = p if p.suffix == ".json" else p / QA_FILE
    if f.name == QA_FILE and f.is_file():
        return json.loads(f.read_text(encoding="utf-8"))
    return None
