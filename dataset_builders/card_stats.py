"""Per-config statistics for dataset cards: rows, languages, systems, label distributions,
inter-annotator agreement (via :mod:`harness.meta.agreement`) and sample rows."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from datasets import List, Value

from harness.data.schema import Dimension

if TYPE_CHECKING:
    from dataset_builders.records import ConfigData


def label_type(feat: Any) -> str:
    if isinstance(feat, Value):
        return str(feat.dtype)
    if isinstance(feat, List):
        inner = feat.feature
        if isinstance(inner, dict):
            return "list of {" + ", ".join(inner) + "}"
        return f"list of {label_type(inner)}"
    return type(feat).__name__


def _truncate(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def label_frame(records: Sequence[dict[str, Any]]):
    """Long-format labels (item = row id, annotator, value, dimension, language, system)."""
    import pandas as pd

    rows = [
        {
            "item": r["id"],
            "annotator": lab["annotator"],
            "value": lab["value"],
            "dimension": lab["dimension"],
            "language": r["language"],
            "system": r.get("system") or "-",
        }
        for r in records
        for lab in r.get("labels") or []
    ]
    return pd.DataFrame(rows, columns=["item", "annotator", "value", "dimension", "language", "system"])


def agreement_rows(
    records: Sequence[dict[str, Any]], dimensions: Sequence[Dimension], by: Sequence[str] = ()
):
    """:func:`harness.meta.agreement.agreement_table` over the records' labels (None when there are none)."""
    from harness.meta.agreement import ALPHA_LEVEL, agreement_table

    frame = label_frame(records)
    if frame.empty or frame["value"].notna().sum() == 0:
        return None
    levels = {d.name: ALPHA_LEVEL[d.scale] for d in dimensions}
    return agreement_table(frame, by=list(by), dimension_levels=levels)


def _fmt(x: Any) -> str:
    try:
        return "—" if x is None or x != x else f"{float(x):.3f}"
    except (TypeError, ValueError):
        return str(x)


def config_statistics(c: ConfigData, dimensions: Sequence[Dimension]) -> list[str]:
    from dataset_builders.records import ConfigSummary

    if c.summary is None:  # not built yet (the build fills it as it writes)
        c.summary = ConfigSummary()
        c.summary.add(c.records, c.level)
    s = c.summary
    per_lang = s.per_language
    vals = list(s.ratings.values())
    out = [
        f"- rows: {c.rows} ({c.instances} items × {len(per_lang)} language(s))",
        "- rows per language: " + ", ".join(f"{lang} {per_lang[lang]}" for lang in c.languages),
    ]
    systems = s.systems
    if systems:
        out.append("- rows per system: " + ", ".join(f"{k} {n}" for k, n in sorted(systems.items())))
    if vals:
        out.append(
            f"- rating (headline, per item): mean {sum(vals) / len(vals):.3f}, min {min(vals):g}, max {max(vals):g}"
        )
    if c.level not in ("turn", "dialogue"):
        pass
    elif c.level == "turn" and s.rows:
        out.append(f"- context utterances per row: mean {s.utterances / c.rows:.2f}")
    elif s.rows:
        out.append(f"- utterances per dialogue: mean {s.utterances / c.rows:.2f}")
    out.append("")

    labels = [lab for r in s.labelled for lab in r["labels"]]
    if labels:
        out += [
            "Label distribution (individual labels; value: count):",
            "",
            "| dimension | labels | missing | distribution |",
            "|---|---:|---:|---|",
        ]
        for d in dimensions:
            mine = [lab["value"] for lab in labels if lab["dimension"] == d.name]
            if not mine:
                continue
            dist = Counter(v for v in mine if v is not None)
            text = ", ".join(f"{k:g}: {n}" for k, n in sorted(dist.items()))
            out.append(f"| `{d.name}` | {len(mine) - mine.count(None)} | {mine.count(None)} | {text} |")
        out.append("")
        table = agreement_rows(s.labelled, dimensions)
        if table is not None:
            out += [
                "Inter-annotator agreement (percent = exact pairwise agreement, adjacent = |a−b| ≤ 1, α = "
                "Krippendorff (nominal for binary, ordinal for Likert, interval for continuous), κ = Cohen "
                "(mean over annotator pairs) and Fleiss; buckets per UPHELD App. J):",
                "",
                "| dimension | items | percent | adjacent | α | Cohen κ | Fleiss κ | full | majority | plurality | none |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for _, row in table.iterrows():
                out.append(
                    f"| `{row['dimension']}` | {row['n_items']} | {_fmt(row['percent_agreement'])} | "
                    f"{_fmt(row['adjacent_agreement'])} | {_fmt(row['alpha'])} | {_fmt(row['cohen_mean'])} | "
                    f"{_fmt(row['fleiss_kappa'])} | {row['bucket_full']} | {row['bucket_majority']} | "
                    f"{row['bucket_plurality']} | {row['bucket_none']} |"
                )
            out.append("")

    sample_lang = "en" if "en" in per_lang else (c.languages[0] if c.languages else None)
    samples = s.first_rows.get(sample_lang, [])[:2] if sample_lang is not None else []
    if samples:
        out += ["Sample rows (long texts truncated, first labels only):", "", "```json"]
        for r in samples:
            row = dict(r)
            for key in ("context", "turns"):
                if key in row:
                    msgs = row[key]
                    shown = [{"role": m["role"], "text": _truncate(m["text"], 100)} for m in msgs[-4:]]
                    if len(msgs) > 4:
                        shown.insert(0, {"role": "…", "text": f"({len(msgs) - 4} earlier utterances)"})
                    row[key] = shown
            for key in ("response", "reference"):
                if row.get(key):
                    row[key] = _truncate(row[key])
            if len(row.get("labels") or []) > 3:
                row["labels"] = row["labels"][:3] + [f"… {len(r['labels']) - 3} more"]
            out.append(json.dumps(row, ensure_ascii=False))
        out += ["```", ""]
    return out
