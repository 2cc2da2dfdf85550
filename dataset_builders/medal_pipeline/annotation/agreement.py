"""What is computed from imported MEDAL annotations: agreement (App. E.1, Tables 4/5) and records.

Agreement, per language with at least two annotators and per label (the eight issues of Table 1
and ``overall``):

* Table 4: **percent exact agreement** for the issues and **adjacent agreement** (``|a - b| <= 1``,
  Liu et al., 2025) for ``overall`` (its exact agreement is reported too);
* Table 5: **Krippendorff's alpha**, ``nominal`` for the binary issues and ``interval`` for
  ``overall``. The paper does not name the level it used for ``overall``; interval treats the
  1–5 rating as the numeric scale that is averaged everywhere else (``rating`` = mean of the
  overall labels), whereas ordinal distances would depend on how often each score was used.

The statistics are :mod:`harness.meta.agreement`'s (pairwise percent agreement averaged over items;
alpha from ``krippendorff.alpha``). ``n_items`` counts the dialogues with at least two non-missing
labels. A statistic that is undefined (no pairable item; alpha when only one value occurs) is
``None``. Languages with a single annotator get no agreement and are listed as such, as the paper
does for German and Spanish.

:func:`benchmark_records` turns the annotations into the dialogue-level common-schema records of
the ``benchmark`` config. Everything here is re-exported by
:mod:`dataset_builders.medal_pipeline.annotation.sheets`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dataset_builders.aggregate import aggregates_for
from dataset_builders.medal import MEDAL_DIMENSIONS
from dataset_builders.medal_labels import ISSUE_ABBREVIATIONS, MEDAL_ISSUES, MEDAL_LANGUAGES, MEDAL_OVERALL
from harness.meta.agreement import adjacent_agreement, krippendorff_alpha, percent_agreement

if TYPE_CHECKING:
    from dataset_builders.medal_pipeline.annotation.imports import AnnotationSet
    from dataset_builders.medal_pipeline.types import Dialogue

#: Krippendorff level of measurement per label (see the module docstring for ``overall``).
ISSUE_ALPHA_LEVEL = "nominal"
OVERALL_ALPHA_LEVEL = "interval"
ADJACENT_TOLERANCE = 1
_DIMENSIONS: tuple[str, ...] = (*MEDAL_ISSUES, MEDAL_OVERALL)
_HEADER_NAMES = {**ISSUE_ABBREVIATIONS, MEDAL_OVERALL: "Overall"}


def language_order(languages: Iterable[str]) -> list[str]:
    """The paper's language order (zh, en, de, fr, pt, es), then any other language alphabetically."""
    rank = {lang: i for i, lang in enumerate(MEDAL_LANGUAGES)}
    return sorted(set(languages), key=lambda lang: (rank.get(lang, len(rank)), lang))


def seed_field(seeds: Mapping[str, Any] | None, seed_id: str, name: str) -> str | None:
    """``seeds[seed_id].<name>`` (attribute or key), ``None`` when absent."""
    seed = (seeds or {}).get(seed_id)
    value = seed.get(name) if isinstance(seed, Mapping) else getattr(seed, name, None)
    return value if isinstance(value, str) else None


def _clean(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _dimension_stats(triples: list[tuple[str, str, float | None]], dimension: str) -> dict[str, Any]:
    level = OVERALL_ALPHA_LEVEL if dimension == MEDAL_OVERALL else ISSUE_ALPHA_LEVEL
    out: dict[str, Any] = {
        "n_items": 0,
        "percent_agreement": None,
        "alpha": None,
        "alpha_level": level,
        "alpha_n_items": 0,
    }
    if dimension == MEDAL_OVERALL:
        out.update(adjacent_agreement=None, adjacent_tolerance=ADJACENT_TOLERANCE)
    if triples:
        exact = percent_agreement(triples)
        alpha = krippendorff_alpha(triples, level)
        out.update(
            n_items=exact.n_items,
            percent_agreement=_clean(exact.value),
            alpha=_clean(alpha.value),
            alpha_n_items=alpha.n_items,
        )
        if dimension == MEDAL_OVERALL:
            out["adjacent_agreement"] = _clean(adjacent_agreement(triples, ADJACENT_TOLERANCE).value)
    out["table4"] = out["adjacent_agreement"] if dimension == MEDAL_OVERALL else out["percent_agreement"]
    out["table4_metric"] = "adjacent" if dimension == MEDAL_OVERALL else "exact"
    return out


def agreement_tables(ann: AnnotationSet, languages: Sequence[str] | None = None) -> dict[str, Any]:
    """Agreement per language and label, JSON-friendly.

    Returns ``{"dimensions", "alpha_levels", "adjacent_tolerance", "languages", "average"}`` where
    ``languages[lang]`` is ``{"annotators", "n_annotators", "agreement": bool, "note",
    "dimensions": {label: stats} | None}``; ``stats`` holds ``n_items``, ``percent_agreement``
    (exact), ``adjacent_agreement`` (``overall`` only), ``alpha``, ``alpha_level``,
    ``alpha_n_items`` and ``table4`` (the Table 4 figure: exact for issues, adjacent for overall).
    ``average[label]`` is the mean ``table4`` / ``alpha`` over the languages with agreement, and
    ``average["all"]`` the mean ``table4`` over languages and labels (§5.2: "over 89% ...").
    ``languages`` defaults to every annotated language, in the paper's order.
    """
    langs = language_order(ann.annotators) if languages is None else list(languages)
    by_lang_dim: dict[tuple[str, str], list[tuple[str, str, float | None]]] = {}
    for dialogue_id, annotator, dimension, value, _raw in ann.labels:
        key = (ann.language_of.get(dialogue_id, ""), dimension)
        by_lang_dim.setdefault(key, []).append((dialogue_id, annotator, value))
    table: dict[str, Any] = {}
    for lang in langs:
        annotators = list(ann.annotators.get(lang, []))
        entry: dict[str, Any] = {"annotators": annotators, "n_annotators": len(annotators)}
        if len(annotators) < 2:
            note = "single annotator: no agreement" if annotators else "no annotations"
            table[lang] = {**entry, "agreement": False, "note": note, "dimensions": None}
            continue
        dims = {dim: _dimension_stats(by_lang_dim.get((lang, dim), []), dim) for dim in _DIMENSIONS}
        table[lang] = {**entry, "agreement": True, "note": "", "dimensions": dims}
    average: dict[str, Any] = {}
    every: list[float] = []
    for dim in _DIMENSIONS:
        t4 = [v["dimensions"][dim]["table4"] for v in table.values() if v["agreement"]]
        al = [v["dimensions"][dim]["alpha"] for v in table.values() if v["agreement"]]
        t4 = [x for x in t4 if x is not None]
        al = [x for x in al if x is not None]
        every += t4
        average[dim] = {
            "table4": sum(t4) / len(t4) if t4 else None,
            "alpha": sum(al) / len(al) if al else None,
        }
    average["all"] = {"table4": sum(every) / len(every) if every else None}
    return {
        "dimensions": list(_DIMENSIONS),
        "alpha_levels": {
            d: OVERALL_ALPHA_LEVEL if d == MEDAL_OVERALL else ISSUE_ALPHA_LEVEL for d in _DIMENSIONS
        },
        "adjacent_tolerance": ADJACENT_TOLERANCE,
        "languages": table,
        "average": average,
    }


def _fmt(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def agreement_markdown(tables: dict[str, Any]) -> list[str]:
    """Markdown lines of the Table 4 (percent / adjacent agreement) and Table 5 (alpha) layouts.

    Rows are the languages with at least two annotators, columns ``!Int !Safe !Emp !Com Rep !Coh
    !Rel !Fac Overall``; a closing line names the languages without agreement. Join with ``"\\n"``.
    """
    dims = tables["dimensions"]
    head = "| Language | " + " | ".join(_HEADER_NAMES.get(d, d) for d in dims) + " |"
    rule = "|---|" + "---:|" * len(dims)
    rows = [(lang, v) for lang, v in tables["languages"].items() if v["agreement"]]
    lines: list[str] = []
    captions = (
        (
            "table4",
            2,
            f"Table 4: percent exact agreement (issues) and adjacent agreement, |a - b| <= "
            f"{tables['adjacent_tolerance']} (overall), between annotators.",
        ),
        (
            "alpha",
            4,
            "Table 5: Krippendorff's alpha ("
            + ", ".join(
                sorted(
                    {
                        f"{lvl} for {'overall' if d == MEDAL_OVERALL else 'issues'}"
                        for d, lvl in tables["alpha_levels"].items()
                    }
                )
            )
            + ").",
        ),
    )
    for key, digits, caption in captions:
        lines += [head, rule]
        for lang, v in rows:
            cells = [_fmt(v["dimensions"][d][key], digits) for d in dims]
            lines.append(f"| {lang.upper()} | " + " | ".join(cells) + " |")
        lines += ["", caption, ""]
    without = [
        f"{lang.upper()} ({v['note']})" for lang, v in tables["languages"].items() if not v["agreement"]
    ]
    if without:
        lines.append("No inter-annotator agreement for: " + ", ".join(without) + ".")
    else:
        lines.pop()
    return lines


# -- benchmark records -----------------------------------------------------------------------------


def benchmark_records(
    dialogues: Sequence[Dialogue],
    ann: AnnotationSet,
    *,
    seeds: Mapping[str, Any] | None = None,
    dataset: str = "benchmark",
) -> list[dict[str, Any]]:
    """One dialogue-level common-schema record per annotated dialogue, in ``dialogues`` order.

    ``labels`` holds every annotator's labels (sorted by annotator, then label order), ``rating``
    is the mean of the overall labels, ``aggregates`` come from
    :func:`dataset_builders.aggregate.aggregates_for` over :data:`MEDAL_DIMENSIONS`; ``system`` is
    the chatbot's role name. Raises ``ValueError`` for labels of a dialogue not in ``dialogues``.
    """
    by_dialogue: dict[str, list[dict[str, Any]]] = {}
    order = {dim: i for i, dim in enumerate(_DIMENSIONS)}
    for did, annotator, dim, value, raw in sorted(
        ann.labels, key=lambda r: (r[0], r[1], order.get(r[2], 99))
    ):
        by_dialogue.setdefault(did, []).append(
            {
                "annotator": annotator,
                "dimension": dim,
                "value": None if value is None else float(value),
                "raw": raw,
            }
        )
    known = {d.id for d in dialogues}
    stray = sorted(set(by_dialogue) - known)
    if stray:
        raise ValueError(f"{len(stray)} annotated dialogue(s) are not among the given dialogues: {stray[:5]}")
    records = []
    for d in dialogues:
        labels = by_dialogue.get(d.id)
        if not labels:
            continue
        overall = [
            lab["value"] for lab in labels if lab["dimension"] == MEDAL_OVERALL and lab["value"] is not None
        ]
        records.append(
            {
                "id": d.id,
                "item_id": d.id,
                "dataset": dataset,
                "language": d.language,
                "level": "dialogue",
                "dialogue_id": d.id,
                "system": d.chatbot,
                "scene": seed_field(seeds, d.seed_id, "scene"),
                "persona": seed_field(seeds, d.seed_id, "persona"),
                "turns": d.messages(),
                "rating": sum(overall) / len(overall) if overall else None,
                "dimension": MEDAL_OVERALL,
                "labels": labels,
                "aggregates": aggregates_for(labels, MEDAL_DIMENSIONS),
            }
        )
    return records
