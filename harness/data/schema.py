"""The common schema of dialogue-evaluation data, used by every builder and every task.

Two record kinds, one per evaluation level, both written with explicit :class:`datasets.Features`
so the Arrow schema is identical on every build, and both validated on write with pydantic
(:func:`validate_records`): a bad record is an error naming the file, the row and the field.

Turn level (:data:`TURN_FEATURES`): the quality of one ``response`` given its ``context``.

================  =====================================  ==========================================
column            type                                   meaning
================  =====================================  ==========================================
``id``            string                                 unique row id within the config
``item_id``       string                                 shared by the rows of one item (e.g. the
                                                         translations of an xDial-Eval item, or the
                                                         candidate responses to one UPHELD turn)
``dataset``       string                                 config name
``language``      string                                 ISO 639 code (``en``, ``zh``, ``pt-BR`` ...)
``level``         string                                 ``"turn"``
``dialogue_id``   string | null                          the conversation the item comes from
``system``        string | null                          the chatbot / model that produced the
                                                         response (``null`` when unknown)
``scene``         string | null                          context fields: scene description ...
``persona``       string | null                          ... and user persona, where the source has
``context``       list of {role, text}                   dialogue history, oldest first
``response``      string                                 the rated response
``response_role`` string | null                          who speaks ``response``; null = ``assistant``
                                                         (UPHELD also withholds ``user`` turns)
``reference``     string | null                          a reference response (e.g. the human
                                                         continuation), when the benchmark has one
``rating``        float64 | null                         headline label: the mean over annotators of
                                                         the headline dimension
``dimension``     string                                 the headline dimension
``labels``        list of {annotator, dimension,         every individual human label; ``value`` on
                  value, raw}                            the dimension's scale, ``raw`` as written in
                                                         the source (``null`` value = missing label)
``aggregates``    list of {dimension, n, mean,           per-dimension aggregates over annotators:
                  aggregate, majority, agreement}        ``aggregate`` = sum / sum of maxima
                                                         (UPHELD App. E.1), ``majority`` = winning
                                                         label (unique mode), ``agreement`` = bucket
                                                         full / majority / plurality / none / single
================  =====================================  ==========================================

Dialogue level (:data:`DIALOGUE_FEATURES`): the same minus the four turn-only columns (context,
response, response_role, reference),
plus ``turns`` (list of {role, text}, the whole dialogue).

Roles are ``"user"`` (the human) and ``"assistant"`` (the chatbot).

Every builder declares its :class:`Dimension` table (name, definition, scale); labels are checked
against it, and it is written to the build manifest and the dataset card.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from datasets import Features, List, Value
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.jsontypes import JSONObject

ROLES: tuple[str, ...] = ("user", "assistant")
LEVELS: tuple[str, ...] = ("turn", "dialogue")
AGREEMENT_BUCKETS: tuple[str, ...] = ("full", "majority", "plurality", "none", "single")
Scale = Literal["binary", "likert", "continuous"]

_MESSAGE = {"role": Value("string"), "text": Value("string")}
_LABEL = {
    "annotator": Value("string"),
    "dimension": Value("string"),
    "value": Value("float64"),
    "raw": Value("string"),
}
_AGGREGATE = {
    "dimension": Value("string"),
    "n": Value("int32"),
    "mean": Value("float64"),
    "aggregate": Value("float64"),
    "majority": Value("float64"),
    "agreement": Value("string"),
}
_COMMON_HEAD = {
    "id": Value("string"),
    "item_id": Value("string"),
    "dataset": Value("string"),
    "language": Value("string"),
    "level": Value("string"),
    "dialogue_id": Value("string"),
    "system": Value("string"),
    "scene": Value("string"),
    "persona": Value("string"),
}
_COMMON_TAIL = {
    "rating": Value("float64"),
    "dimension": Value("string"),
    "labels": List(_LABEL),
    "aggregates": List(_AGGREGATE),
}

#: Features of turn-level configs.
TURN_FEATURES = Features(
    {
        **_COMMON_HEAD,
        "context": List(_MESSAGE),
        "response": Value("string"),
        "response_role": Value("string"),
        "reference": Value("string"),
        **_COMMON_TAIL,
    }
)
#: Features of dialogue-level configs.
DIALOGUE_FEATURES = Features({**_COMMON_HEAD, "turns": List(_MESSAGE), **_COMMON_TAIL})
FEATURES_BY_LEVEL: dict[str, Features] = {"turn": TURN_FEATURES, "dialogue": DIALOGUE_FEATURES}

#: One-line description of every column (the dataset cards print these).
COLUMN_DOCS: dict[str, str] = {
    "id": "unique row id within the config",
    "item_id": "shared by the rows of one item (translations, or candidate responses to one turn)",
    "dataset": "config name",
    "language": "ISO 639 language code",
    "level": "`turn` or `dialogue`",
    "dialogue_id": "the conversation the item comes from (null if unknown)",
    "system": "chatbot / model that produced the rated text (null if unknown)",
    "scene": "scene description of the conversation, if any",
    "persona": "user persona, if any",
    "context": "dialogue history, list of {role, text}, oldest first",
    "response": "the rated response",
    "response_role": "speaker of the response (null = assistant)",
    "reference": "reference response (e.g. the human continuation), if any",
    "turns": "the whole dialogue, list of {role, text}",
    "rating": "headline label: mean over annotators of the headline dimension",
    "dimension": "the headline dimension",
    "labels": "every individual label: {annotator, dimension, value (null = missing), raw}",
    "aggregates": "per dimension: {n, mean, aggregate = sum/sum of maxima, majority = winning label, agreement bucket}",
}

#: Columns a record may omit (they default to null / empty).
OPTIONAL_FIELDS: dict[str, list[object] | None] = {
    "dialogue_id": None,
    "system": None,
    "scene": None,
    "persona": None,
    "reference": None,
    "response_role": None,
    "rating": None,
    "labels": [],
    "aggregates": [],
}


# -- dimensions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dimension:
    """One rated quality aspect: its definition and scale.

    ``scale`` is ``binary`` (values 0/1), ``likert`` (integers ``min``..``max``) or ``continuous``
    (any real in [``min``, ``max``]). ``labels`` names the scale points (value -> wording).
    """

    name: str
    definition: str
    scale: Scale
    min: float
    max: float
    labels: dict[float, str] = field(default_factory=dict)
    source: str = ""  # where the definition comes from (paper, section)

    def __post_init__(self) -> None:
        if self.scale not in ("binary", "likert", "continuous"):
            raise ValueError(f"dimension {self.name!r}: unknown scale {self.scale!r}")
        if self.scale == "binary" and (self.min, self.max) != (0, 1):
            raise ValueError(f"dimension {self.name!r}: a binary scale is 0..1")
        if not self.min < self.max:
            raise ValueError(f"dimension {self.name!r}: min must be below max")

    @property
    def scale_text(self) -> str:
        if self.scale == "binary":
            return "binary (0/1)"
        if self.scale == "likert":
            return f"Likert {self.min:g}–{self.max:g}"
        return f"continuous [{self.min:g}, {self.max:g}]"

    def problem(self, value: float) -> str | None:
        """Why ``value`` is not on this scale (None when it is)."""
        if not math.isfinite(value):
            return f"{value!r} is not a finite number"
        if value < self.min or value > self.max:
            return f"{value:g} is outside the {self.scale_text} scale of {self.name!r}"
        if self.scale in ("binary", "likert") and value != int(value):
            return f"{value:g} is not an integer point of the {self.scale_text} scale of {self.name!r}"
        return None

    def to_dict(self) -> JSONObject:
        out: JSONObject = asdict(self)
        out["labels"] = {f"{k:g}": v for k, v in self.labels.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Dimension:
        data = dict(data)
        data["labels"] = {float(k): str(v) for k, v in (data.get("labels") or {}).items()}
        return cls(**data)


def dimension_table(dimensions: Iterable[Dimension]) -> str:
    """The dimension table as Markdown (name, scale, definition)."""
    rows = ["| dimension | scale | definition |", "|---|---|---|"]
    for d in dimensions:
        points = "; ".join(f"{k:g} = {v}" for k, v in sorted(d.labels.items()))
        scale = d.scale_text + (f" ({points})" if points else "")
        rows.append(f"| `{d.name}` | {scale} | {d.definition.replace('|', '/')} |")
    return "\n".join(rows)


# -- record validation (pydantic) ----------------------------------------------------------------

_LANG_RE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Message(_Model):
    role: Literal["user", "assistant"]
    text: str

    @field_validator("text")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("empty utterance")
        return v


class Label(_Model):
    annotator: str = Field(min_length=1)
    dimension: str = Field(min_length=1)
    value: float | None
    raw: str | None = None


class Aggregate(_Model):
    dimension: str = Field(min_length=1)
    n: int | None = Field(default=None, ge=0)
    mean: float | None = None
    aggregate: float | None = None
    majority: float | None = None
    agreement: Literal["full", "majority", "plurality", "none", "single"] | None = None


class _Record(_Model):
    id: str = Field(min_length=1)
    item_id: str = Field(min_length=1)
    dataset: str = Field(min_length=1)
    language: str
    level: Literal["turn", "dialogue"]
    dialogue_id: str | None = None
    system: str | None = None
    scene: str | None = None
    persona: str | None = None
    rating: float | None = None
    dimension: str = Field(min_length=1)
    labels: list[Label] = []
    aggregates: list[Aggregate] = []

    @field_validator("language")
    @classmethod
    def _language(cls, v: str) -> str:
        if not _LANG_RE.match(v):
            raise ValueError(f"{v!r} is not an ISO 639 language code (e.g. 'en', 'zh', 'pt-BR')")
        return v

    @field_validator("rating")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"{v!r} is not a finite number")
        return v


class TurnRecord(_Record):
    context: list[Message]
    response: str
    response_role: Literal["user", "assistant"] | None = None
    reference: str | None = None

    @field_validator("response")
    @classmethod
    def _response(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("empty response")
        return v


class DialogueRecord(_Record):
    turns: list[Message]

    @model_validator(mode="after")
    def _has_turns(self) -> DialogueRecord:
        if not self.turns:
            raise ValueError("a dialogue needs at least one turn")
        return self


RECORD_MODELS: dict[str, type[_Record]] = {"turn": TurnRecord, "dialogue": DialogueRecord}


class SchemaError(ValueError):
    """A record does not fit the common schema; names the file, row, record id and field."""

    def __init__(self, file: str, row: int, record_id: str | None, column: str, problem: str) -> None:
        self.file, self.row, self.record_id, self.column, self.problem = file, row, record_id, column, problem
        rid = f" (id {record_id!r})" if record_id else ""
        super().__init__(f"{file}, record {row}{rid}, field {column!r}: {problem}")


def complete(record: dict[str, Any], level: str | None = None) -> dict[str, Any]:
    """The record with the optional columns of its level filled in (null / empty)."""
    out = dict(record)
    features = FEATURES_BY_LEVEL.get(level or str(out.get("level")), TURN_FEATURES)
    for k, default in OPTIONAL_FIELDS.items():
        if k in features and k not in out:
            out[k] = list(default) if isinstance(default, list) else default
    return out


def validate_record(
    record: dict[str, Any],
    level: str,
    dimensions: dict[str, Dimension] | None = None,
    *,
    file: str = "<records>",
    row: int = 1,
) -> dict[str, Any]:
    """Validate one record (after :func:`complete`); return it. Raises :class:`SchemaError`."""
    if level not in RECORD_MODELS:
        raise ValueError(f"unknown level {level!r}; expected one of {LEVELS}")
    rid = record.get("id") if isinstance(record.get("id"), str) else None
    try:
        RECORD_MODELS[level].model_validate(record)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "<record>"
        raise SchemaError(file, row, rid, loc, err["msg"]) from None
    if record["level"] != level:
        raise SchemaError(file, row, rid, "level", f"{record['level']!r} in a {level}-level config")
    if dimensions is not None:
        if record["dimension"] not in dimensions:
            raise SchemaError(file, row, rid, "dimension", _unknown_dim(record["dimension"], dimensions))
        for i, lab in enumerate(record["labels"]):
            dim = dimensions.get(lab["dimension"])
            if dim is None:
                raise SchemaError(
                    file, row, rid, f"labels.{i}.dimension", _unknown_dim(lab["dimension"], dimensions)
                )
            if lab["value"] is not None and (p := dim.problem(lab["value"])):
                raise SchemaError(file, row, rid, f"labels.{i}.value", p)
        for i, agg in enumerate(record["aggregates"]):
            if agg["dimension"] not in dimensions:
                raise SchemaError(
                    file, row, rid, f"aggregates.{i}.dimension", _unknown_dim(agg["dimension"], dimensions)
                )
    return record


def validate_records(
    records: Sequence[dict[str, Any]],
    level: str,
    dimensions: Sequence[Dimension] | dict[str, Dimension] | None = None,
    *,
    file: str = "<records>",
    seen: dict[str, int] | None = None,
    start: int = 1,
) -> list[dict[str, Any]]:
    """Complete and validate every record; duplicate ids are an error too. A config validated chunk
    by chunk passes the same ``seen`` (id -> record number) to every call and ``start`` = the number
    of the chunk's first record."""
    dims = (
        dimensions if isinstance(dimensions, dict) or dimensions is None else {d.name: d for d in dimensions}
    )
    out: list[dict[str, Any]] = []
    seen = {} if seen is None else seen
    for i, rec in enumerate(records, start=start):
        rec = validate_record(complete(rec, level), level, dims, file=file, row=i)
        if rec["id"] in seen:
            raise SchemaError(
                file, i, rec["id"], "id", f"duplicate id (first used by record {seen[rec['id']]})"
            )
        seen[rec["id"]] = i
        out.append(rec)
    return out


def _unknown_dim(name: str, dims: dict[str, Dimension]) -> str:
    return f"unknown dimension {name!r}; this dataset defines {', '.join(sorted(dims)) or 'none'}"


# -- errors a builder raises on bad source data -------------------------------------------------


class DataValidationError(ValueError):
    """A source record failed validation. The message always names the file, the row and the column.

    ``row`` is a 1-based data-row number (the header is not counted; for JSONL sources it is the
    line number) or ``"header"`` when a column is missing from the header. ``row_label`` and
    ``column_label`` only change the wording ("row"/"line", "column"/"field").
    """

    def __init__(
        self,
        file: str | os.PathLike[str],
        row: int | str,
        column: str,
        problem: str,
        *,
        row_label: str = "row",
        column_label: str = "column",
    ) -> None:
        # bytes that were not UTF-8 (kept as surrogates while reading) are shown as \xNN, so the
        # message prints and the manifest that lists a skipped row can be written
        self.file = _printable(str(file))
        self.row = row
        self.column = _printable(str(column))
        self.problem = _printable(str(problem))
        column, problem = self.column, self.problem
        if row == "header":
            where = "header row" if row_label == "row" else "header"
        elif row_label == "row":
            where = f"row {row} (data rows are 1-based, header excluded)"
        else:
            where = f"{row_label} {row}"
        super().__init__(f"{self.file}, {where}, {column_label} {column!r}: {problem}")

    def __reduce__(self):  # keep picklable despite the keyword-only arguments
        return (_rebuild_validation_error, (self.file, self.row, self.column, self.problem, self.args[0]))


def _printable(text: str) -> str:
    """``text`` with lone surrogates (undecodable bytes read with ``surrogateescape``) as ``\\xNN``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _rebuild_validation_error(file, row, column, problem, message):
    err = DataValidationError.__new__(DataValidationError)
    ValueError.__init__(err, message)
    err.file, err.row, err.column, err.problem = file, row, column, problem
    return err


class SourceUnavailableError(FileNotFoundError):
    """The source data could not be found or fetched (e.g. no network for the default source).

    A :class:`FileNotFoundError` so that callers handling missing inputs handle this too.
    """
