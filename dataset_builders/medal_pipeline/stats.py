"""Statistics of the generated MEDAL dialogue pool (Mendonça, Lavie and Trancoso, App. C.4, Table 2)
and the issue heatmaps of the automatic labels (Fig. 2 / Fig. 9).

* :func:`language_statistics` — per language (and ``all``): dialogues, average turns, average
  utterance length (all / user / chatbot) and MTLD (McCarthy and Jarvis, 2010), as in Table 2.
  Utterance length is counted in characters for Chinese (and Japanese), in whitespace words
  otherwise; the ``all`` row leaves the length out when the units are mixed, as Table 2 does.
* :func:`issue_rates` / :func:`overall_means` — % of dialogues with each MEDAL issue (and with
  ``any`` issue) and the mean overall score, per chatbot × language.
* :func:`issue_heatmap` (chatbot × language, % with at least one issue, mean overall per chatbot)
  and :func:`issue_type_heatmap` (chatbot or language × issue, languages pooled: Fig. 2 / Fig. 9),
  drawn with :func:`harness.report.figures.rate_heatmap`.
* :func:`statistics_markdown` / :func:`statistics_json` — the same for the dataset card.

MTLD (footnote 11): the paper ran python ``lexical_diversity`` on spaCy lemmas (jieba tokens for
Chinese). spaCy models are not available offline, so this module uses, as a documented deviation,
``lexical_diversity``'s own English lemma list (``lex_div.flemmatize``) for English, plain
lower-cased, punctuation-free tokens (``lex_div.tokenize``) for the other Latin-script languages
(no lemmatisation: MTLD is somewhat higher than with lemmas), jieba words for Chinese and single
characters for Japanese. The MTLD value itself is the exact ``lex_div.mtld`` algorithm (threshold
0.72, minimum factor length 10) computed incrementally (:func:`mtld`); it is unstable below
about :data:`MTLD_MIN_TOKENS` tokens (``mtld_reliable`` in the statistics) but is reported anyway.
"""

from __future__ import annotations

import logging
import math
import string
import unicodedata
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from dataset_builders.medal_labels import ISSUE_ABBREVIATIONS, MEDAL_ISSUES, MEDAL_LANGUAGES
from dataset_builders.medal_pipeline.types import AutoLabel, Dialogue

#: Languages whose utterance length is counted in characters (Table 2: Chinese).
CHARACTER_LANGUAGES = ("zh", "ja")
#: Below this many tokens MTLD is unstable (McCarthy and Jarvis recommend at least 100).
MTLD_MIN_TOKENS = 100
MTLD_THRESHOLD = 0.72
MTLD_MIN_FACTOR = 10
ANY_ISSUE = "any"
USER_ROLE = "user"
CHATBOT_ROLE = "assistant"
ALL = "all"


# -- tokenisation ---------------------------------------------------------------------------------
def base_language(language: str) -> str:
    """``zh-CN`` / ``zh_Hans`` / ``ZH`` → ``zh``."""
    return (language or "").strip().lower().replace("_", "-").split("-")[0]


def length_unit(language: str) -> str:
    return "characters" if base_language(language) in CHARACTER_LANGUAGES else "words"


def utterance_length(text: str, language: str) -> int:
    """Characters other than whitespace for Chinese/Japanese, whitespace-separated words otherwise."""
    if length_unit(language) == "characters":
        return sum(1 for c in text if not c.isspace())
    return len(text.split())


def _is_punct(c: str) -> bool:
    return c in string.punctuation or unicodedata.category(c).startswith("P")


def _is_noise_token(tok: str) -> bool:
    """Whitespace, punctuation or symbols only (jieba returns those as tokens)."""
    return all(c.isspace() or _is_punct(c) or unicodedata.category(c).startswith("S") for c in tok)


def _strip_punctuation(text: str) -> str:
    """Remove punctuation as ``lex_div.tokenize`` does for ASCII (``don't`` → ``dont``), extended to
    Unicode punctuation (curly quotes, «», ¿¡, ...); non-ASCII dashes become spaces (``a—b``)."""
    out = []
    for c in text:
        if c in string.punctuation:
            continue
        cat = unicodedata.category(c)
        if cat == "Pd":
            out.append(" ")
        elif not cat.startswith("P"):
            out.append(c)
    return "".join(out)


@cache
def _lex_div():
    with warnings.catch_warnings():  # lexical_diversity imports the deprecated pkg_resources
        warnings.simplefilter("ignore")
        from lexical_diversity import lex_div

    return lex_div


@cache
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


def mtld_tokens(texts: Iterable[str] | str, language: str) -> list[str]:
    """The MTLD token stream of ``texts`` (one language), in order.

    Chinese: jieba words (``jieba.lcut``) without whitespace/punctuation tokens, Latin letters
    lower-cased; Japanese: single characters (no punctuation); English: ``lex_div.flemmatize``
    lemmas; other languages: ``lex_div.tokenize`` tokens (lower-cased, punctuation removed).
    """
    if isinstance(texts, str):
        texts = [texts]
    lang = base_language(language)
    tokens: list[str] = []
    for text in texts:
        if not text:
            continue
        if lang == "zh":
            tokens += [t.lower() for t in _jieba().lcut(text) if not _is_noise_token(t)]
        elif lang == "ja":
            tokens += [c for c in text if not _is_noise_token(c)]
        else:
            clean = _strip_punctuation(text)
            words = _lex_div().flemmatize(clean) if lang == "en" else _lex_div().tokenize(clean)
            tokens += [t for t in words if t]
    return tokens


def _mtld_pass(tokens: Sequence[str]) -> float:
    factor = 0.0
    factor_lengths = 0
    types: set[str] = set()
    n = 0
    last = len(tokens) - 1
    for i, tok in enumerate(tokens):
        types.add(tok)
        n += 1
        ttr = len(types) / n
        if i == last:
            factor += (1 - ttr) / (1 - MTLD_THRESHOLD)
            factor_lengths += n
        elif ttr < MTLD_THRESHOLD and n >= MTLD_MIN_FACTOR:
            factor += 1
            factor_lengths += n
            types = set()
            n = 0
    return factor_lengths / factor if factor != 0 else 0


def mtld(tokens: Sequence[str]) -> float:
    """``lexical_diversity.lex_div.mtld(tokens)`` (forward and backward passes averaged), computed
    in linear time (the library re-counts the types of the current factor at every token)."""
    tokens = list(tokens)
    return (_mtld_pass(tokens) + _mtld_pass(tokens[::-1])) / 2


# -- Table 2 --------------------------------------------------------------------------------------
def language_order(languages: Iterable[str]) -> list[str]:
    """MEDAL's language order (zh, en, de, fr, pt, es) first, the rest alphabetically."""
    langs = set(languages)
    known = [lang for lang in MEDAL_LANGUAGES if lang in langs]
    return known + sorted(langs - set(known))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def language_statistics(dialogues: Sequence[Dialogue]) -> dict[str, dict[str, Any]]:
    """Table 2 per language plus ``all`` (first key).

    Per language: ``dialogues``, ``avg_turns`` (utterances per dialogue), ``utterances``,
    ``avg_utterance_length`` / ``avg_user_utterance_length`` / ``avg_chatbot_utterance_length``
    (means over utterances, in ``unit``), ``mtld`` over the concatenated token stream of all
    utterances of the language (dialogue order), ``mtld_tokens`` and ``mtld_reliable``
    (≥ :data:`MTLD_MIN_TOKENS` tokens). ``all``: lengths only when every language has the same
    unit (else None, unit ``mixed``, and the word-unit languages' means under ``word_languages``,
    cf. "23.4 words" in App. C.4); MTLD only when there is a single language. Every dialogue given
    is counted (filter out unfinished or malformed ones before).
    """
    by_lang: dict[str, list[Dialogue]] = defaultdict(list)
    for d in dialogues:
        by_lang[d.language].append(d)
    per: dict[str, dict[str, Any]] = {}
    lengths: dict[str, dict[str, list[int]]] = {}
    for lang in language_order(by_lang):
        ds = by_lang[lang]
        lens: dict[str, list[int]] = {"all": [], USER_ROLE: [], CHATBOT_ROLE: []}
        for d in ds:
            for t in d.turns:
                n = utterance_length(t.text, lang)
                lens["all"].append(n)
                if t.role in lens:
                    lens[t.role].append(n)
        lengths[lang] = lens
        tokens = mtld_tokens((t.text for d in ds for t in d.turns), lang)
        per[lang] = {
            "dialogues": len(ds),
            "utterances": len(lens["all"]),
            "avg_turns": len(lens["all"]) / len(ds),
            "avg_utterance_length": _mean(lens["all"]),
            "avg_user_utterance_length": _mean(lens[USER_ROLE]),
            "avg_chatbot_utterance_length": _mean(lens[CHATBOT_ROLE]),
            "unit": length_unit(lang),
            "mtld": mtld(tokens),
            "mtld_tokens": len(tokens),
            "mtld_reliable": len(tokens) >= MTLD_MIN_TOKENS,
        }

    def pooled(langs: Sequence[str]) -> dict[str, float | None]:
        return {
            "avg_utterance_length": _mean([x for lang in langs for x in lengths[lang]["all"]]),
            "avg_user_utterance_length": _mean([x for lang in langs for x in lengths[lang][USER_ROLE]]),
            "avg_chatbot_utterance_length": _mean([x for lang in langs for x in lengths[lang][CHATBOT_ROLE]]),
        }

    units = {per[lang]["unit"] for lang in per}
    n_dial = sum(s["dialogues"] for s in per.values())
    n_utt = sum(s["utterances"] for s in per.values())
    single = next(iter(per.values())) if len(per) == 1 else None
    total: dict[str, Any] = {
        "dialogues": n_dial,
        "utterances": n_utt,
        "avg_turns": n_utt / n_dial if n_dial else None,
    }
    if len(units) <= 1:
        total |= pooled(list(per))
        total["unit"] = next(iter(units)) if units else None
    else:
        total |= dict.fromkeys(pooled([]), None)
        total["unit"] = "mixed"
        total["word_languages"] = pooled([lang for lang in per if per[lang]["unit"] == "words"])
    total["mtld"] = single["mtld"] if single else None
    total["mtld_tokens"] = single["mtld_tokens"] if single else sum(s["mtld_tokens"] for s in per.values())
    total["mtld_reliable"] = single["mtld_reliable"] if single else None
    return {ALL: total} | per


# -- issue rates (Fig. 2 / Fig. 9) ----------------------------------------------------------------
def _issue_values(label: AutoLabel) -> dict[str, int | None]:
    """0/1/None per MEDAL issue plus ``any`` (1 if some issue is 1, 0 if all are 0, else None)."""
    vals: dict[str, int | None] = {}
    for issue in MEDAL_ISSUES:
        v = label.labels.get(issue)
        vals[issue] = None if v is None else int(v == 1)
    known = [v for v in vals.values() if v is not None]
    if 1 in known:
        vals[ANY_ISSUE] = 1
    elif len(known) == len(MEDAL_ISSUES):
        vals[ANY_ISSUE] = 0
    else:
        vals[ANY_ISSUE] = None
    return vals


RATE_COLUMNS = ["chatbot", "language", "issue", "rate", "n"]


def _rate_rows(pairs: Iterable[tuple[tuple[str, str], AutoLabel]]) -> list[dict[str, Any]]:
    counts: dict[tuple[str, str], dict[str, list[int]]] = {}
    for key, label in pairs:
        slot = counts.setdefault(key, {i: [0, 0] for i in (*MEDAL_ISSUES, ANY_ISSUE)})
        for issue, v in _issue_values(label).items():
            if v is not None:
                slot[issue][0] += v
                slot[issue][1] += 1
    rows = []
    for (chatbot, language), slot in counts.items():
        for issue, (pos, n) in slot.items():
            rate = 100.0 * pos / n if n else math.nan
            rows.append({"chatbot": chatbot, "language": language, "issue": issue, "rate": rate, "n": n})
    return rows


def _sorted_frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    if df.empty:
        return df
    lang_rank = {lang: i for i, lang in enumerate(language_order(set(df["language"]) - {ALL}))}
    lang_rank[ALL] = len(lang_rank)
    df["_l"] = df["language"].map(lang_rank)
    if "issue" in df:
        issue_rank = {x: i for i, x in enumerate((*MEDAL_ISSUES, ANY_ISSUE))}
        df["_i"] = df["issue"].map(issue_rank)
        keys = ["chatbot", "_l", "_i"]
    else:
        keys = ["chatbot", "_l"]
    df = df.sort_values(keys, kind="stable").drop(columns=[c for c in ("_l", "_i") if c in df])
    return df.reset_index(drop=True)


def _labelled(dialogues: Sequence[Dialogue], labels: Mapping[str, AutoLabel]):
    for d in dialogues:
        label = labels.get(d.id)
        if label is not None:
            yield d, label


def issue_rates(
    dialogues: Sequence[Dialogue], labels: Mapping[str, AutoLabel], *, pool_languages: bool = False
) -> pd.DataFrame:
    """Long table (chatbot, language, issue, rate, n): ``rate`` = % of the chatbot's dialogues in
    that language with the issue, among the ``n`` whose label for it is not None; ``issue`` is
    each MEDAL issue and ``any`` (at least one issue; unknown when some label is None and none is
    1). Dialogues without an entry in ``labels`` are left out. ``pool_languages``: one row group
    per chatbot with language ``all``."""
    pairs = (
        ((d.chatbot, ALL if pool_languages else d.language), label)
        for d, label in _labelled(dialogues, labels)
    )
    return _sorted_frame(_rate_rows(pairs), RATE_COLUMNS)


def overall_means(
    dialogues: Sequence[Dialogue], labels: Mapping[str, AutoLabel], *, pool_languages: bool = False
) -> pd.DataFrame:
    """Long table (chatbot, language, overall, n): mean automatic overall score (1–5) over the ``n``
    labelled dialogues whose overall score parsed."""
    acc: dict[tuple[str, str], list[float]] = defaultdict(list)
    for d, label in _labelled(dialogues, labels):
        if label.overall is not None:
            acc[(d.chatbot, ALL if pool_languages else d.language)].append(float(label.overall))
    rows = [
        {"chatbot": c, "language": lang, "overall": sum(v) / len(v), "n": len(v)}
        for (c, lang), v in acc.items()
    ]
    return _sorted_frame(rows, ["chatbot", "language", "overall", "n"])


def _overall_by(dialogues, labels, key: str) -> pd.Series:
    acc: dict[str, list[float]] = defaultdict(list)
    for d, label in _labelled(dialogues, labels):
        if label.overall is not None:
            acc[getattr(d, key)].append(float(label.overall))
    return pd.Series({k: sum(v) / len(v) for k, v in acc.items()}, dtype=float)


def any_issue_table(rates: pd.DataFrame) -> pd.DataFrame:
    """chatbot × language table of the ``any`` rate (languages in MEDAL order)."""
    sub = rates[rates["issue"] == ANY_ISSUE]
    table = sub.pivot(index="chatbot", columns="language", values="rate")
    table = table.reindex(columns=[c for c in language_order(table.columns) if c != ALL])
    table.columns.name = None
    return table.sort_index()


def issue_heatmap(
    dialogues: Sequence[Dialogue],
    labels: Mapping[str, AutoLabel],
    path: Path,
    title: str = "Dialogues with at least one detected issue (%)",
) -> Path:
    """Heatmap chatbot × language of the % of dialogues with at least one issue, with the mean
    overall score per chatbot (all languages) beside it."""
    from harness.report.figures import rate_heatmap

    table = any_issue_table(issue_rates(dialogues, labels))
    overall = _overall_by(dialogues, labels, "chatbot")
    return rate_heatmap(table, Path(path), title, overall=overall, xlabel="language", ylabel="chatbot")


def issue_type_table(rates: pd.DataFrame, by: str = "chatbot") -> pd.DataFrame:
    """``by`` (chatbot or language) × issue abbreviation: % of dialogues with each issue, pooled
    over the other key (weighted by ``n``)."""
    sub = rates[rates["issue"].isin(MEDAL_ISSUES)].copy()
    sub["pos"] = sub["rate"].fillna(0.0) * sub["n"] / 100.0
    g = sub.groupby([by, "issue"], sort=False)[["pos", "n"]].sum()
    pct = (100.0 * g["pos"] / g["n"].where(g["n"] > 0)).unstack("issue")
    pct = pct.reindex(columns=[i for i in MEDAL_ISSUES])
    pct.columns = [ISSUE_ABBREVIATIONS.get(i, i) for i in pct.columns]
    rows = language_order(pct.index) if by == "language" else sorted(pct.index)
    pct = pct.reindex(rows)
    pct.index.name = by
    return pct


def issue_type_heatmap(
    dialogues: Sequence[Dialogue],
    labels: Mapping[str, AutoLabel],
    path: Path,
    title: str = "Detected issues (%)",
    by: str = "chatbot",
) -> Path:
    """Heatmap ``by`` × issue (Table 1 abbreviations), all languages (``by="chatbot"``, MEDAL
    Fig. 2) or all chatbots (``by="language"``, Fig. 9) pooled, with the mean overall per row."""
    from harness.report.figures import rate_heatmap

    if by not in ("chatbot", "language"):
        raise ValueError(f"by must be 'chatbot' or 'language', not {by!r}")
    rates = issue_rates(dialogues, labels)
    table = issue_type_table(rates, by)
    overall = _overall_by(dialogues, labels, by)
    return rate_heatmap(table, Path(path), title, overall=overall, xlabel="issue", ylabel=by)


# -- card ---------------------------------------------------------------------------------------
def _fmt(x: Any, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}"
    return f"{x:.{digits}f}"


def _lang_name(lang: str) -> str:
    return "All" if lang == ALL else lang.upper()


def statistics_markdown(
    stats: Mapping[str, Mapping[str, Any]], rates: pd.DataFrame | None = None
) -> list[str]:
    """Markdown lines: a Table 2 style table (language, dialogues, avg turns, avg utterance length
    all / user / chatbot with its unit, MTLD), then the % of dialogues with at least one issue per
    chatbot × language and the % per issue per chatbot (languages pooled) when ``rates`` is given."""
    lines = [
        "| Language | Dialogues | Avg. turns | Avg. utt. length | User utt. length | Chatbot utt. length | MTLD |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for lang, s in stats.items():
        unit = s.get("unit")
        suffix = f" {'chars' if unit == 'characters' else unit}" if unit in ("characters", "words") else ""
        lines.append(
            f"| {_lang_name(lang)} | {_fmt(s.get('dialogues'))} | {_fmt(s.get('avg_turns'), 2)} | "
            f"{_fmt(s.get('avg_utterance_length'))}{suffix if s.get('avg_utterance_length') is not None else ''} | "
            f"{_fmt(s.get('avg_user_utterance_length'))} | {_fmt(s.get('avg_chatbot_utterance_length'))} | "
            f"{_fmt(s.get('mtld'))}{'' if s.get('mtld_reliable', True) in (True, None) else ' †'} |"
        )
    lines += [
        "",
        "Utterance length in characters for Chinese, in words otherwise (the All row omits it when "
        "units are mixed). MTLD over each language's token stream (jieba words for Chinese, "
        "lexical_diversity lemmas for English, lower-cased tokens otherwise); † fewer than "
        f"{MTLD_MIN_TOKENS} tokens.",
    ]
    wl = (stats.get(ALL) or {}).get("word_languages")
    if wl and wl.get("avg_user_utterance_length") is not None:
        lines += [
            "",
            f"Word-unit languages only: {_fmt(wl['avg_utterance_length'])} words per utterance "
            f"(user {_fmt(wl['avg_user_utterance_length'])}, chatbot "
            f"{_fmt(wl['avg_chatbot_utterance_length'])}).",
        ]
    if rates is not None and not rates.empty:
        table = any_issue_table(rates)
        langs = list(table.columns)
        lines += [
            "",
            "Dialogues with at least one automatically detected issue (%), per chatbot and language:",
            "",
            "| Chatbot | " + " | ".join(_lang_name(x) for x in langs) + " |",
            "|---|" + "---:|" * len(langs),
        ]
        for chatbot, row in table.iterrows():
            lines.append(f"| {chatbot} | " + " | ".join(_fmt(row[x]) for x in langs) + " |")
        types = issue_type_table(rates, "chatbot")
        lines += [
            "",
            "Dialogues with each issue (%), per chatbot (languages pooled):",
            "",
            "| Chatbot | " + " | ".join(types.columns) + " |",
            "|---|" + "---:|" * len(types.columns),
        ]
        for chatbot, row in types.iterrows():
            lines.append(f"| {chatbot} | " + " | ".join(_fmt(row[x]) for x in types.columns) + " |")
    return lines


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, str | bytes):  # numpy scalar
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def statistics_json(
    stats: Mapping[str, Mapping[str, Any]],
    rates: pd.DataFrame | None = None,
    overall: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """JSON-friendly ``{languages, issue_rates, overall_means}`` (tables as lists of records, NaN →
    None)."""
    return {
        "languages": _jsonable(stats),
        "issue_rates": _jsonable(rates.to_dict("records")) if rates is not None else None,
        "overall_means": _jsonable(overall.to_dict("records")) if overall is not None else None,
    }


def compute_statistics(
    dialogues: Sequence[Dialogue], labels: Mapping[str, AutoLabel] | None = None
) -> dict[str, Any]:
    """:func:`statistics_json` of :func:`language_statistics`, :func:`issue_rates` and
    :func:`overall_means` in one call (the last two only with ``labels``)."""
    stats = language_statistics(dialogues)
    if labels is None:
        return statistics_json(stats)
    return statistics_json(stats, issue_rates(dialogues, labels), overall_means(dialogues, labels))
