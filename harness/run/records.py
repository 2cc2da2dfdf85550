"""Typed records of a run: the item a judge sees (turn or dialogue) and the sample row it becomes.

* :class:`TurnItem` / :class:`DialogueItem` — a dataset row as ``harness run`` reads it: the common
  record schema of :mod:`harness.data.schema` (messages, labels, aggregates, rating...) plus any
  extra columns a builder adds (kept as they are). :func:`check_item` validates one on read and
  names the dataset, config, row and field of a bad one.
* :class:`SampleRow` — one row of ``samples.parquet`` (its columns are :data:`~harness.run.results.
  SAMPLE_SCHEMA`); :func:`check_sample_row` validates one on write. JSON-typed columns (``extra``,
  ``human_labels``, ``judge_labels``, ``human_distribution``) must hold JSON objects.

The JSON Schemas generated from these models ship in ``harness/run/schemas/`` (see
:mod:`harness.run.document`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.data.schema import DialogueRecord, TurnRecord


class TurnItem(TurnRecord):
    """A turn-level item: ``context`` (messages, oldest first) and the rated ``response``."""

    model_config = ConfigDict(extra="allow", strict=True, title="TurnItem")


class DialogueItem(DialogueRecord):
    """A dialogue-level item: the whole dialogue in ``turns``."""

    model_config = ConfigDict(extra="allow", strict=True, title="DialogueItem")


ITEM_MODELS: dict[str, type[TurnItem] | type[DialogueItem]] = {"turn": TurnItem, "dialogue": DialogueItem}


class ItemError(ValueError):
    """An item read for a run does not fit the record schema."""


def check_item(row: Mapping[str, object], level: str, where: str, number: int) -> None:
    """Validate a dataset row read for a ``level`` task (rows without a ``level`` column are taken to
    be at the task's level); raise :class:`ItemError` naming ``where`` (dataset and config), the row
    number, its id and the field."""
    model = ITEM_MODELS.get(level)
    if model is None:
        return
    data = dict(row)
    if data.get("level") is None:
        data["level"] = level
    for k in ("labels", "aggregates"):
        if data.get(k) is None:
            data[k] = []
    try:
        model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "<row>"
        rid = row.get("id")
        raise ItemError(
            f"{where}, row {number}{f' (id {rid!r})' if rid else ''}, field {loc!r}: {err['msg']} — "
            "rebuild the dataset with its builder (harness datasets build) or fix the row"
        ) from None


JSON_COLUMNS = ("extra", "human_labels", "judge_labels", "human_distribution")


class SampleRow(BaseModel):
    """One judged item in ``samples.parquet``."""

    model_config = ConfigDict(extra="forbid", title="SampleRow")

    run_id: str = Field(description="the run's id (results.json run.id)")
    task: str
    dataset: str = Field(description="the dataset config the item comes from")
    language: str
    id: str = Field(description="row id within the config")
    item_id: str = Field(description="shared by the rows of one item (its translations, ...)")
    judge: str = Field(description="the judge spec (secrets redacted)")
    prompt_hash: str | None = Field(default=None, description="hash of the rendered prompt(s)")
    raw_output: str | None = Field(
        default=None, description="the judge's raw text, kept on a parse failure too"
    )
    score: float | None = Field(default=None, description="null when the verdict did not parse (never 0)")
    parse_status: str = Field(description="'ok' or why the verdict has no score")
    parse_detail: str | None = None
    human_rating: float | None = None
    cached: bool = False
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    extra: str | None = Field(default=None, description="JSON object: e.g. label log-probs, panel members")
    system: str | None = Field(default=None, description="the rated chatbot")
    human_labels: str | None = Field(default=None, description="JSON {dimension: {annotator: value}}")
    judge_labels: str | None = Field(
        default=None, description="JSON {dimension: 0|1|null} (multi-label judges)"
    )
    dialogue_id: str | None = None
    human_dimension: str | None = Field(default=None, description="the dimension the human rating is of")
    human_distribution: str | None = Field(default=None, description="JSON {label: share} of the annotators")

    @field_validator("score", "human_rating")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"{v!r} is not a finite number (a missing value is null)")
        return v

    @field_validator(*JSON_COLUMNS)
    @classmethod
    def _json_object(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                obj = json.loads(v)
            except ValueError as e:
                raise ValueError(f"not JSON: {e}") from None
            if not isinstance(obj, dict):
                raise ValueError(f"a JSON object expected, got {type(obj).__name__}")
        return v


class SampleError(ValueError):
    """A sample row does not fit :class:`SampleRow`."""


def check_sample_row(row: Mapping[str, object]) -> None:
    """Validate one sample row before it is written (a NaN score is a missing one)."""
    data = dict(row)
    for k in ("score", "human_rating"):
        if isinstance(v := data.get(k), float) and math.isnan(v):
            data[k] = None
    try:
        SampleRow.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "<row>"
        raise SampleError(
            f"sample of task {row.get('task')!r}, item {row.get('id')!r}: field {loc!r}: {err['msg']}"
        ) from None
