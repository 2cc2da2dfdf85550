"""Distillation data: instruction examples from the MEDAL judge's automatic labels.

The MEDAL pipeline publishes every generated dialogue with its judge's verdict (config
``auto_labels``: common-schema dialogue records whose ``labels`` carry annotator ``judge:<model>``
for the 8 MEDAL issues + ``other`` + ``overall``; :func:`dataset_builders.medal_pipeline.publish.dialogue_record`).
:func:`distillation_examples` turns each labelled dialogue into one instruction example: the prompt
is the MEDAL Table 11 dialogue-evaluation prompt (:data:`tasks.medal.templates.MEDAL_DIALOGUE_EVALUATION`,
rendered exactly as the ``medal`` task renders it at evaluation time) and the target is the
verdict in the Table 11 JSON format (``{"uninterpretable": {"label": 0, "comment": ""}, ...,
"overall_quality_rating": {"label": 4, "comment": "..."}}``) — what a student model must produce.

A dialogue the judge did not label completely (any of the 10 labels None, e.g. a parse failure) is
skipped and counted, as is a record without judge labels; nothing is dropped silently.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from dataset_builders.medal_labels import (
    MEDAL_ISSUES,
    MEDAL_OTHER,
    MEDAL_OVERALL,
    MEDAL_OVERALL_KEY,
    MEDAL_OVERALL_RANGE,
)
from finetune.data.selfsup import ExampleList

JUDGE_PREFIX = "judge:"
#: The Table 11 keys in output order, and the label dimension each one holds.
TARGET_KEYS: tuple[tuple[str, str], ...] = (
    *((k, k) for k in (*MEDAL_ISSUES, MEDAL_OTHER)),
    (MEDAL_OVERALL_KEY, MEDAL_OVERALL),
)


@dataclass
class InstructionExample:
    """One supervised instruction-tuning example: chat prompt (system + user) -> target text."""

    id: str
    language: str
    source_id: str  # the dialogue
    system: str | None
    prompt: str  # the user message
    target: str  # the assistant message to learn
    template: str  # prompt template name
    template_hash: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def level(self) -> str:
        return "dialogue"

    def messages(self, *, with_target: bool = True) -> list[dict[str, str]]:
        """Chat messages (``role``/``content``) for a chat template."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        out.append({"role": "user", "content": self.prompt})
        if with_target:
            out.append({"role": "assistant", "content": self.target})
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DistillReport:
    read: int = 0
    kept: int = 0
    skipped_missing_labels: int = 0  # some judge label is None (e.g. the verdict did not parse)
    skipped_no_judge: int = 0  # no judge:* labels at all
    skipped_no_turns: int = 0
    skipped_invalid_labels: int = 0  # an issue label not 0/1 or an overall outside 1-5
    missing_by_dimension: dict[str, int] = field(default_factory=dict)
    skipped_ids: dict[str, list[str]] = field(default_factory=dict)
    annotators: dict[str, int] = field(default_factory=dict)  # judge annotator -> dialogues kept
    languages: dict[str, int] = field(default_factory=dict)
    template: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def target_json(labels: Mapping[str, float | int], comments: Mapping[str, str] | None = None) -> str:
    """The Table 11 verdict for ``labels`` (dimension -> value, ``overall`` 1-5), laid out as the
    prompt shows it (one key per line). Issue comments are kept only for label 1 (Table 11: "only
    include a comment if the label is 1"); the overall comment always."""
    comments = comments or {}
    lines = []
    for key, dim in TARGET_KEYS:
        value = labels[dim]
        value = int(value) if float(value).is_integer() else float(value)
        comment = comments.get(key) or comments.get(dim) or ""
        if dim != MEDAL_OVERALL and value != 1:
            comment = ""
        lines.append(
            f'  "{key}": {{ "label": {value}, "comment": {json.dumps(comment, ensure_ascii=False)} }}'
        )
    return "{\n" + ",\n".join(lines) + "\n}"


def _judge_labels(record: Mapping[str, Any], annotator: str | None) -> tuple[str | None, dict[str, Any]]:
    by_annotator: dict[str, dict[str, Any]] = {}
    for lab in record.get("labels") or []:
        who = lab.get("annotator") or ""
        if who.startswith(JUDGE_PREFIX) and (annotator is None or who == annotator):
            by_annotator.setdefault(who, {})[lab.get("dimension")] = lab.get("value")
    if not by_annotator:
        return None, {}
    if len(by_annotator) > 1:
        raise ValueError(
            f"record {record.get('id')!r} has labels of several judges ({', '.join(sorted(by_annotator))}); "
            "pass annotator= to choose one"
        )
    return next(iter(by_annotator.items()))


def distillation_examples(
    auto_labels_records: Iterable[Mapping[str, Any]],
    *,
    annotator: str | None = None,
    with_comments: bool = True,
) -> ExampleList:
    """One :class:`InstructionExample` per dialogue with a complete judge verdict.

    ``auto_labels_records``: MEDAL ``auto_labels`` (or ``curated``) records, e.g.
    ``datasets.load_dataset(dir, "auto_labels", split="test")``. ``annotator``: use only this
    judge (``judge:<model>``); by default the record's single judge. ``with_comments``: put the
    judge's comments (``judge_comments``) into the target. Returns the examples with a
    :class:`DistillReport` as ``.report``."""
    from tasks.medal import MEDAL_TASK
    from tasks.medal.templates import MEDAL_DIALOGUE_EVALUATION as template

    report = DistillReport(template=template.describe())
    out: list[InstructionExample] = []
    missing: Counter[str] = Counter()
    annotators: Counter[str] = Counter()
    languages: Counter[str] = Counter()
    seen: set[str] = set()
    for rec in auto_labels_records:
        report.read += 1
        rid = str(rec.get("id"))
        if rid in seen:
            raise ValueError(f"duplicate record id {rid!r}")
        seen.add(rid)
        who, labels = _judge_labels(rec, annotator)
        if who is None:
            report.skipped_no_judge += 1
            report.skipped_ids.setdefault("no_judge", []).append(rid)
            continue
        absent = [dim for _, dim in TARGET_KEYS if not _is_number(labels.get(dim))]
        if absent:
            report.skipped_missing_labels += 1
            report.skipped_ids.setdefault("missing_labels", []).append(rid)
            missing.update(absent)
            continue
        bad = [
            dim
            for _, dim in TARGET_KEYS
            if not (
                MEDAL_OVERALL_RANGE[0] <= labels[dim] <= MEDAL_OVERALL_RANGE[1]
                if dim == MEDAL_OVERALL
                else labels[dim] in (0, 1)
            )
        ]
        if bad:
            report.skipped_invalid_labels += 1
            report.skipped_ids.setdefault("invalid_labels", []).append(rid)
            continue
        turns = list(rec.get("turns") or [])
        if not turns:
            report.skipped_no_turns += 1
            report.skipped_ids.setdefault("no_turns", []).append(rid)
            continue
        comments = {}
        if with_comments and rec.get("judge_comments"):
            try:
                comments = json.loads(rec["judge_comments"])
            except (TypeError, ValueError):
                comments = {}
        messages = template.render(MEDAL_TASK.fields({"turns": turns}))
        system = next((m.content for m in messages if m.role == "system"), None)
        user = next(m.content for m in messages if m.role == "user")
        out.append(
            InstructionExample(
                id=rid,
                language=rec.get("language") or "en",
                source_id=rec.get("dialogue_id") or rid,
                system=system,
                prompt=user,
                target=target_json(labels, comments if isinstance(comments, dict) else {}),
                template=template.name,
                template_hash=template.hash,
                meta={
                    "annotator": who,
                    "labels": {dim: labels[dim] for _, dim in TARGET_KEYS},
                    "system": rec.get("system"),
                    "dataset": rec.get("dataset"),
                },
            )
        )
        annotators[who] += 1
        languages[out[-1].language] += 1
        report.kept += 1
    report.missing_by_dimension = dict(sorted(missing.items()))
    report.annotators = dict(sorted(annotators.items()))
    report.languages = dict(sorted(languages.items()))
    return ExampleList(out, report)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
