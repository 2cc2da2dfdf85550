"""Training examples as table rows: the Arrow features of the two example tables (self-supervised /
supervised pairs, instruction examples) with their column docs, and the conversion of example
objects to rows with field checks (:class:`TrainingDataError` names the example and field)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from datasets import Features, List, Value

from finetune.data.distill import InstructionExample
from finetune.data.selfsup import KINDS, LEVELS, Example
from finetune.data.sources import language_problem

_MESSAGE = {"role": Value("string"), "text": Value("string")}
#: Columns of a config of :class:`Example` rows.
EXAMPLE_FEATURES = Features(
    {
        "id": Value("string"),
        "language": Value("string"),
        "level": Value("string"),
        "kind": Value("string"),
        "label": Value("float64"),
        "source_id": Value("string"),
        "context": List(_MESSAGE),
        "response": Value("string"),
        "response_role": Value("string"),
        "turns": List(_MESSAGE),
        "reference": Value("string"),
        "meta": Value("string"),
    }
)
EXAMPLE_DOCS = {
    "id": "unique example id",
    "language": "ISO 639 language code",
    "level": "`turn` (context + response) or `dialogue` (turns)",
    "kind": "positive, random / hard (turn-level negatives), shuffle / replace (dialogue-level negatives), human",
    "label": "1 = positive / 0 = negative; human labels: normalised mean rating in [0, 1] (or 0/1)",
    "source_id": "the dialogue the example comes from (train/test never share one)",
    "context": "turn level: previous utterances, list of {role, text}, oldest first (empty at dialogue level)",
    "response": "turn level: the response to judge (null at dialogue level)",
    "response_role": "turn level: speaker of the response",
    "turns": "dialogue level: the whole dialogue, list of {role, text} (empty at turn level)",
    "reference": "a reference response, where the source has one (e.g. UPHELD)",
    "meta": "JSON: how the example was made (position, pair, source of a negative's text, rating details)",
}
#: Columns of a config of :class:`InstructionExample` rows.
INSTRUCTION_FEATURES = Features(
    {
        "id": Value("string"),
        "language": Value("string"),
        "level": Value("string"),
        "source_id": Value("string"),
        "system": Value("string"),
        "prompt": Value("string"),
        "target": Value("string"),
        "template": Value("string"),
        "template_hash": Value("string"),
        "meta": Value("string"),
    }
)
INSTRUCTION_DOCS = {
    "id": "unique example id",
    "language": "ISO 639 language code of the dialogue",
    "level": "`dialogue`",
    "source_id": "the dialogue the example comes from",
    "system": "system message of the prompt",
    "prompt": "user message of the prompt",
    "target": "the assistant message to learn (the judge's verdict as Table 11 JSON)",
    "template": "prompt template name",
    "template_hash": "prompt template content hash",
    "meta": "JSON: annotator (judge) and the label values",
}


class TrainingDataError(ValueError):
    """Examples that cannot be written (bad field, duplicate id, mixed example types)."""


# -- rows ------------------------------------------------------------------------------------------


def _json(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, default=_jsonable)


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _messages(texts: Sequence[str], roles: Sequence[str | None] | None) -> list[dict[str, Any]]:
    roles = list(roles) if roles is not None else [None] * len(texts)
    return [{"role": r, "text": t} for t, r in zip(texts, roles, strict=True)]


def _example_row(e: Example, where: str) -> dict[str, Any]:
    def bad(problem: str) -> TrainingDataError:
        return TrainingDataError(f"{where}: example {e.id!r}: {problem}")

    if not isinstance(e.id, str) or not e.id:
        raise TrainingDataError(f"{where}: an example has no id ({e!r:.200})")
    if p := language_problem(e.language):
        raise bad(p)
    if e.level not in LEVELS:
        raise bad(f"level {e.level!r} is not one of {LEVELS}")
    if e.kind not in KINDS:
        raise bad(f"kind {e.kind!r} is not one of {tuple(KINDS)}")
    if isinstance(e.label, bool) or not isinstance(e.label, int | float) or not math.isfinite(e.label):
        raise bad(f"label {e.label!r} is not a finite number")
    if not isinstance(e.source_id, str) or not e.source_id:
        raise bad("no source_id")
    if e.level == "turn":
        if not isinstance(e.response, str) or not e.response.strip():
            raise bad("a turn-level example needs a response")
        n = len(e.context) + 1
        if e.roles is not None and len(e.roles) != n:
            raise bad(f"{len(e.roles)} roles for {len(e.context)} context utterances + the response")
        roles = list(e.roles) if e.roles is not None else [None] * n
        context, response_role, turns = _messages(e.context, roles[:-1]), roles[-1], []
    else:
        if not e.turns:
            raise bad("a dialogue-level example needs turns")
        if e.roles is not None and len(e.roles) != len(e.turns):
            raise bad(f"{len(e.roles)} roles for {len(e.turns)} turns")
        context, response_role, turns = [], None, _messages(e.turns, e.roles)
    return {
        "id": e.id,
        "language": e.language,
        "level": e.level,
        "kind": e.kind,
        "label": float(e.label),
        "source_id": e.source_id,
        "context": context,
        "response": e.response if e.level == "turn" else None,
        "response_role": response_role,
        "turns": turns,
        "reference": e.reference,
        "meta": _json(e.meta or {}),
    }


def _instruction_row(e: InstructionExample, where: str) -> dict[str, Any]:
    if not isinstance(e.id, str) or not e.id:
        raise TrainingDataError(f"{where}: an instruction example has no id")
    if p := language_problem(e.language):
        raise TrainingDataError(f"{where}: example {e.id!r}: {p}")
    for name in ("prompt", "target"):
        if not isinstance(getattr(e, name), str) or not getattr(e, name).strip():
            raise TrainingDataError(f"{where}: example {e.id!r}: empty {name}")
    row = {k: getattr(e, k) for k in INSTRUCTION_FEATURES if k not in ("level", "meta")}
    return {**row, "level": e.level, "meta": _json(e.meta or {})}


def _example_type(items: Sequence[Any], where: str) -> str:
    kinds = {type(x) for x in items}
    if kinds == {Example}:
        return "example"
    if kinds == {InstructionExample}:
        return "instruction"
    names = ", ".join(sorted(k.__name__ for k in kinds)) or "nothing"
    raise TrainingDataError(f"{where}: expected only Example or only InstructionExample objects, got {names}")


def _rows(items: Sequence[Any], config: str, etype: str) -> list[dict[str, Any]]:
    to_row = _example_row if etype == "example" else _instruction_row
    rows, seen = [], set()
    for x in items:
        row = to_row(x, config)
        if row["id"] in seen:
            raise TrainingDataError(f"{config}: duplicate example id {row['id']!r}")
        seen.add(row["id"])
        rows.append(row)
    return rows


def _config_summary(items: Sequence[Any], etype: str) -> dict[str, Any]:
    out: dict[str, Any] = {"example_type": etype, "dialogues": len({x.source_id for x in items})}
    if etype == "example":
        binary = all(isinstance(x.label, int) and not isinstance(x.label, bool) for x in items)
        out["label_type"] = "binary" if binary else "continuous"
        out["kinds"] = dict(sorted(Counter(x.kind for x in items).items()))
        out["levels"] = dict(sorted(Counter(x.level for x in items).items()))
        if binary:
            out["labels"] = {str(k): v for k, v in sorted(Counter(x.label for x in items).items())}
        else:
            vals = [float(x.label) for x in items]
            out["label_mean"] = sum(vals) / len(vals) if vals else None
    else:
        out["templates"] = dict(sorted(Counter(f"{x.template}#{x.template_hash}" for x in items).items()))
    return out


def _licenses(obj: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if k == "license" and isinstance(v, str) and v:
                found.add(v)
            else:
                found |= _licenses(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            found |= _licenses(v)
    return found
