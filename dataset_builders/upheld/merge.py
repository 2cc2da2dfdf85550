"""Merge the rows of UPHELD's per-annotator files into one record per (turn, model) item.

Texts (chat history, Option A, Option B) should be identical across the annotators of an item;
where they differ after whitespace normalisation, the variant most annotators saw is kept (ties:
the lowest-numbered annotator) and the conflict is listed in the manifest with who saw what.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from dataset_builders.aggregate import aggregates_for, mean_of
from dataset_builders.records import ConfigData, SourceFile
from dataset_builders.upheld.labels import DIMENSIONS
from harness.data.schema import DataValidationError

if TYPE_CHECKING:
    from dataset_builders.upheld.builder import UpheldBuilder

_MAX_LISTED = 20


def _annotator_number(name: str) -> int:
    return int(name.rsplit("_", 1)[1])


def _norm(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(f"{m['role']}: {' '.join(m['text'].split())}" for m in value)
    return " ".join(str(value).split())


def _natural(text: str) -> tuple:
    import re

    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p)


def merge_items(
    builder: UpheldBuilder, src: SourceFile, rows: list[dict[str, Any]], warnings: list[str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    items: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        items.setdefault((r["item"], r["system"] or ""), []).append(r)

    conflicts: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    n_missing = 0
    too_few = 0
    for (item, system), group in sorted(items.items(), key=lambda kv: (_natural(kv[0][0]), kv[0][1])):
        group.sort(key=lambda r: _annotator_number(r["annotator"]))
        if len(group) < builder.min_annotators:
            first = group[0]
            builder.invalid(
                DataValidationError(
                    first["file"],
                    first["row"],
                    "annotators",
                    f"item {item!r} (model {system or '-'}) has {len(group)} annotator(s) "
                    f"({', '.join(r['annotator'] for r in group)}), fewer than min_annotators={builder.min_annotators}",
                )
            )
            too_few += 1
            continue
        texts: dict[str, Any] = {}
        for field in ("context", "reference", "response"):
            variants: dict[str, list[dict[str, Any]]] = {}
            for r in group:
                variants.setdefault(_norm(r["texts"][field]), []).append(r)
            chosen = max(variants.values(), key=len)  # max keeps the first (lowest annotator) on ties
            texts[field] = chosen[0]["texts"][field]
            if len(variants) > 1:
                conflicts.append(
                    {
                        "item": item,
                        "system": system or None,
                        "field": field,
                        "kept": [r["annotator"] for r in chosen],
                        "other_variants": [
                            {"annotators": [r["annotator"] for r in v], "chars": len(k)}
                            for k, v in variants.items()
                            if v is not chosen
                        ],
                    }
                )
        labels = [lab for r in group for lab in r["labels"]]
        n_missing += sum(lab["value"] is None for lab in labels)
        aggregates = aggregates_for(labels, DIMENSIONS)
        context = texts["context"]
        records.append(
            {
                "id": f"{item}::{system}" if system else item,
                "item_id": item,
                "dataset": src.config,
                "language": "en",
                "level": "turn",
                "dialogue_id": item.rsplit("-", 1)[0] if "-" in item else item,
                "system": system or None,
                "context": context,
                "response": texts["response"],
                "response_role": ("assistant" if context[-1]["role"] == "user" else "user")
                if context
                else "user",
                "reference": texts["reference"],
                "rating": mean_of(aggregates, "content"),
                "dimension": "content",
                "labels": labels,
                "aggregates": aggregates,
            }
        )

    if conflicts:
        listed = "; ".join(
            f"{c['item']}/{c['system'] or '-'} {c['field']} (kept the text of {', '.join(c['kept'])})"
            for c in conflicts[:_MAX_LISTED]
        )
        warnings.append(
            f"upheld/{src.config}: {len(conflicts)} item field(s) differ between annotators after whitespace "
            f"normalisation; the majority variant is kept: {listed}"
        )
    if n_missing:
        warnings.append(
            f"upheld/{src.config}: {n_missing} empty or unreadable label cell(s) kept as missing labels (value null)"
        )
    per_item = Counter(len({lab["annotator"] for lab in r["labels"]}) for r in records)
    short = sum(n for k, n in per_item.items() if k < 5)
    if short:
        warnings.append(
            f"upheld/{src.config}: {short} item(s) have fewer than 5 annotators "
            f"({', '.join(f'{n} with {k}' for k, n in sorted(per_item.items()) if k < 5)})"
        )
    n_labels = sum(lab["value"] is not None for r in records for lab in r["labels"])
    families = Counter(_family(r["dialogue_id"]) for r in {r["dialogue_id"]: r for r in records}.values())
    counts = {
        "items": len(records),
        "turn_ids": len({r["item_id"] for r in records}),
        "conversations": len({r["dialogue_id"] for r in records}),
        "conversation_id_families": dict(sorted(families.items())),
        "distinct_opening_utterances": len(
            {" ".join(r["context"][0]["text"].split()) for r in records if r["context"]}
        ),
        "label_sets": len(rows),
        "labels": n_labels,
        "missing_labels": n_missing,
        "annotators_per_item": {str(k): n for k, n in sorted(per_item.items())},
        "items_per_system": dict(sorted(Counter(r["system"] or "-" for r in records).items())),
        "response_roles": dict(Counter(r["response_role"] for r in records)),
        "items_below_min_annotators": too_few,
    }
    return records, {"counts": counts, "text_conflicts": conflicts}


def _family(dialogue_id: str) -> str:
    head = dialogue_id.split("-", 1)[0].split("_", 1)[0]
    return "numeric" if head.isdigit() else head


__all__ = ["ConfigData", "merge_items"]
