"""The YAML column mapping of the generic importer (:mod:`dataset_builders.importer.generic`), as pydantic
models: a bad mapping is a :class:`MappingError` naming the mapping file and the key. The format is
documented in ``dataset_builders/importer/mappings/README.md``."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.data.schema import Dimension

MAPPINGS_DIR = Path(__file__).resolve().parent / "mappings"
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
Role = Literal["user", "assistant"]
_LANG_RE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
#: Default speaker -> role map of ``roles: prefixed`` (matched case-insensitively).
DEFAULT_SPEAKERS: dict[str, Role] = {
    **dict.fromkeys(("user", "human", "h", "usr", "a", "person a", "speaker a"), "user"),
    **dict.fromkeys(
        ("assistant", "bot", "chatbot", "model", "system", "sys", "c", "b", "person b"), "assistant"
    ),
}


#: Source formats by file suffix (``format:`` overrides it).
FORMAT_BY_SUFFIX = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "json", ".parquet": "parquet"}
#: Keys of the rows an utterance layout builds (``dataset_builders.importer.utterances``).
UTTERANCE_CONTEXT, UTTERANCE_RESPONSE, UTTERANCE_TURNS = "__context__", "__response__", "__turns__"
UTTERANCE_LANGUAGE = "__language__"


class MappingError(ValueError):
    """The YAML mapping is invalid; the message names the mapping file and the key."""


# -- the mapping (pydantic models) ---------------------------------------------------------------


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _column_shorthand(data: Any) -> Any:
    return {"column": data} if isinstance(data, str) else data


def _listify(v: Any) -> Any:
    return [v] if isinstance(v, str) else v


class FieldSpec(_Spec):
    """A string field: ``{column: X}`` (or just ``X``), ``{template: "{a}-{b}"}`` (``{__row__}`` and
    ``{__file__}`` are the row number and file stem) or ``{value: constant}``; ``pattern`` keeps the
    first regex group (or the whole match) of the result."""

    column: str | None = None
    template: str | None = None
    value: str | None = None
    pattern: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return _column_shorthand(data)

    @model_validator(mode="after")
    def _check(self) -> FieldSpec:
        if sum(x is not None for x in (self.column, self.template, self.value)) != 1:
            raise ValueError("give exactly one of 'column', 'template' or 'value'")
        try:
            re.compile(self.pattern or "")
        except re.error as e:
            raise ValueError(f"invalid regular expression {self.pattern!r}: {e}") from None
        return self

    def columns(self) -> list[str]:
        found = re.findall(r"\{([^{}]+)\}", self.template or "")
        return [self.column] if self.column else [c for c in found if c not in ("__row__", "__file__")]


class TextSpec(_Spec):
    """A list of utterances (turn-level ``context``, dialogue-level ``turns``)."""

    column: str
    format: Literal["auto", "newline", "json", "list"] = "auto"
    separator: str = "\n"
    roles: Literal["alternate_from_end", "alternate_from_start", "prefixed"] | None = None
    speakers: dict[str, Role] = Field(default_factory=lambda: dict(DEFAULT_SPEAKERS))
    speaker_key: str = "speaker"
    text_key: str = "text"

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return _column_shorthand(data)

    @field_validator("speakers")
    @classmethod
    def _fold(cls, v: dict[str, str]) -> dict[str, str]:
        return {k.strip().casefold(): r for k, r in v.items()}


class LabelSpec(_Spec):
    """Wide labels: one ``column`` (a number, or a list = one label per annotator) or ``columns``
    (globs over the header, one annotator per column)."""

    dimension: str
    column: str | None = None
    columns: list[str] | None = None
    annotator: str | None = None
    annotator_from: Literal["column", "column_suffix"] = "column"
    value_map: dict[str, float] | None = None
    required: bool = False
    _list = field_validator("columns", mode="before")(classmethod(lambda cls, v: _listify(v)))

    @model_validator(mode="after")
    def _check(self) -> LabelSpec:
        if (self.column is None) == (self.columns is None):
            raise ValueError("give exactly one of 'column' or 'columns'")
        return self


class LongLabelSpec(_Spec):
    """Long labels: one row per (item, annotator[, dimension]) label, grouped by the record id."""

    annotator_column: str
    value_column: str
    dimension_column: str | None = None
    dimension: str | None = None
    dimension_map: dict[str, str | None] = Field(default_factory=dict)  # null = ignore that aspect
    value_map: dict[str, float] | None = None

    @model_validator(mode="after")
    def _check(self) -> LongLabelSpec:
        if (self.dimension_column is None) == (self.dimension is None):
            raise ValueError("give exactly one of 'dimension_column' or 'dimension'")
        return self


class TextVariantSpec(_Spec):
    """One text column of an utterance file and the language it is written in: a code or a
    ``{file.NAME}`` group of the config's ``file_pattern`` (``{file.src}``, ``{file.tgt}``)."""

    column: str
    language: str
    id_suffix: str = ""  # appended to the record id (e.g. "-bt" for a back-translation)
    metadata: bool = True  # the file's metadata columns describe this text (false for the original)


class AnnotationJoinSpec(_Spec):
    """Human annotations kept in another file, joined to the dialogues of an utterance file.

    ``files`` is a glob under the source directory; ``{file.NAME}`` is replaced by the groups of the
    config's ``file_pattern`` (``**/{file.dataset}_eval.json``). ``align: order``: the k-th dialogue
    of the utterance file is the k-th annotation record (records without a ``skip_without`` value
    are not counted); ``align: key``: ``key`` (a field template over the annotation record) equals
    the dialogue id. ``check`` names the annotation field that must equal the last utterance (the
    response), so that a shifted alignment is an error, never silent."""

    files: str
    format: Literal["csv", "tsv", "jsonl", "json", "parquet"] | None = None
    align: Literal["order", "key"] = "order"
    key: str | None = None
    skip_without: list[str] = Field(default_factory=list)
    check: str | None = None
    check_column: str = "SEG"  # the utterance column ``check`` is compared with
    required: bool = True
    _list = field_validator("skip_without", mode="before")(classmethod(lambda cls, v: _listify(v)))

    @model_validator(mode="after")
    def _check(self) -> AnnotationJoinSpec:
        if self.align == "key" and not self.key:
            raise ValueError("align: key needs 'key' (a template over the annotation record)")
        return self


class UtteranceSpec(_Spec):
    """Files with one row per utterance (the CHANEL unified format of DSTC11 Track 4): rows are
    grouped into dialogues by ``uid`` (``pattern`` names the groups ``dialogue`` and ``turn``) and
    ordered by turn; a turn-level record rates the ``last`` utterance of each dialogue (or, with
    ``every``, each utterance after the first) with the preceding ones as context; a dialogue-level
    record holds all of them. Each entry of ``texts`` is one language version of the utterances."""

    uid: str = "UID"
    pattern: str = r"^(?P<dialogue>.+)-(?P<turn>[0-9]+)$"
    speaker: str | None = None
    texts: list[TextVariantSpec] = Field(min_length=1)
    response: Literal["last", "every"] = "last"
    metadata: list[str] = Field(default_factory=list)  # globs of columns kept as item metadata
    ignore: list[str] = Field(default_factory=list)  # globs of columns read and deliberately unused
    _list = field_validator("metadata", "ignore", mode="before")(classmethod(lambda cls, v: _listify(v)))

    @model_validator(mode="after")
    def _check(self) -> UtteranceSpec:
        try:
            rx = re.compile(self.pattern)
        except re.error as e:
            raise ValueError(f"invalid regular expression {self.pattern!r}: {e}") from None
        if not {"dialogue", "turn"} <= set(rx.groupindex):
            raise ValueError(f"pattern {self.pattern!r} needs the named groups 'dialogue' and 'turn'")
        return self


class DimensionSpec(_Spec):
    name: str = Field(pattern=_NAME)
    definition: str = ""
    scale: Literal["binary", "likert", "continuous"]
    min: float | None = None
    max: float | None = None
    labels: dict[float, str] = Field(default_factory=dict)
    source: str = ""

    def to_dimension(self) -> Dimension:
        lo, hi = (0.0, 1.0) if self.scale == "binary" else (self.min, self.max)
        if lo is None or hi is None:
            raise ValueError(f"dimension {self.name!r}: a {self.scale} scale needs 'min' and 'max'")
        return Dimension(self.name, self.definition, self.scale, lo, hi, dict(self.labels), self.source)


class ConfigSpec(_Spec):
    name: str = Field(pattern=_NAME)
    level: Literal["turn", "dialogue"]
    title: str | None = None
    files: list[str]
    format: Literal["csv", "tsv", "jsonl", "json", "parquet"] | None = None
    encoding: str | None = None
    language: str | None = None
    language_column: str | None = None
    file_pattern: str | None = None  # regex over the file name; named groups -> {file.NAME}
    utterances: UtteranceSpec | None = None
    annotations: AnnotationJoinSpec | None = None
    id: FieldSpec
    item_id: FieldSpec | None = None
    dialogue_id: FieldSpec | None = None
    system: FieldSpec | None = None
    scene: FieldSpec | None = None
    persona: FieldSpec | None = None
    context: TextSpec | None = None
    response: FieldSpec | None = None
    reference: FieldSpec | None = None
    turns: TextSpec | None = None
    labels: list[LabelSpec] = Field(default_factory=list)
    long_labels: LongLabelSpec | None = None
    value_map: dict[str, float] = Field(default_factory=dict)
    headline: str | None = None
    expected_instances: int | None = None
    _list = field_validator("files", mode="before")(classmethod(lambda cls, v: _listify(v)))

    @model_validator(mode="after")
    def _check(self) -> ConfigSpec:
        if self.utterances is not None:
            self._utterance_defaults()
        elif (self.language is None) == (self.language_column is None):
            raise ValueError("give exactly one of 'language' or 'language_column'")
        if self.annotations is not None and self.utterances is None:
            raise ValueError("'annotations' (a joined annotation file) needs 'utterances'")
        if self.annotations is not None and self.utterances and self.utterances.response == "every":
            raise ValueError("'annotations' rate one response per dialogue: use utterances.response: last")
        if self.file_pattern is not None:
            try:
                re.compile(self.file_pattern)
            except re.error as e:
                raise ValueError(f"invalid regular expression {self.file_pattern!r}: {e}") from None
        if self.language is not None and not _LANG_RE.match(self.language):
            raise ValueError(f"language {self.language!r} is not an ISO 639 code (e.g. 'en', 'pt-BR')")
        turn_keys = (self.context, self.response, self.reference)
        if self.level == "turn" and (self.response is None or self.turns is not None):
            raise ValueError("a turn-level config needs 'response' (and 'context'), not 'turns'")
        if self.level == "dialogue" and (self.turns is None or any(k is not None for k in turn_keys)):
            raise ValueError("a dialogue-level config needs 'turns', not 'context'/'response'/'reference'")
        if not self.labels and self.long_labels is None:
            raise ValueError("give 'labels' (wide) and/or 'long_labels' (long)")
        return self

    def _utterance_defaults(self) -> None:
        """An utterance layout builds context / response / turns and the language itself."""
        if self.language is not None or self.language_column is not None:
            raise ValueError("with 'utterances' the language comes from 'utterances.texts', not 'language'")
        if any(x is not None for x in (self.context, self.response, self.turns)):
            raise ValueError("with 'utterances' the importer builds 'context'/'response'/'turns' itself")
        self.language_column = UTTERANCE_LANGUAGE
        if self.level == "turn":
            self.context = TextSpec(column=UTTERANCE_CONTEXT, format="list", roles="prefixed")
            self.response = FieldSpec(column=UTTERANCE_RESPONSE)
        else:
            self.turns = TextSpec(column=UTTERANCE_TURNS, format="list", roles="prefixed")

    def columns(self) -> list[str]:
        """Every source column the config names (a missing one is a header error)."""
        keys = (self.id, self.item_id, self.dialogue_id, self.system, self.scene, self.persona, self.response)
        out = [c for f in (*keys, self.reference) if f for c in f.columns()]
        out += [x.column for x in (self.context, self.turns) if x] + [self.language_column or ""]
        out += [lab.column or "" for lab in self.labels]
        if ll := self.long_labels:
            out += [ll.annotator_column, ll.value_column, ll.dimension_column or ""]
        return [c for c in dict.fromkeys(out) if c and not c.startswith("__")]  # "__x__": built columns

    def label_dimensions(self) -> list[str]:
        dims = [lab.dimension for lab in self.labels]
        if ll := self.long_labels:
            dims += [ll.dimension] if ll.dimension else [d for d in ll.dimension_map.values() if d]
        return list(dict.fromkeys(dims))


class MappingSpec(_Spec):
    """A column mapping from a benchmark's released files into the common schema (see
    ``dataset_builders/importer/mappings/README.md``). Load one with :meth:`load`."""

    name: str = Field(pattern=_NAME)
    version: str = "1.0.0"
    pretty_name: str = ""
    license: str = "unknown"
    citation: str = ""
    homepage: str = ""
    description: str = ""
    source_layout: str = ""  # where the file layout was taken from (shown on the card)
    tags: list[str] = Field(default_factory=lambda: ["dialogue-evaluation"])
    encoding: str = "utf-8"
    dimensions: list[DimensionSpec] = Field(min_length=1)
    configs: list[ConfigSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> MappingSpec:
        dims = {d.name for d in self.dimensions if d.to_dimension()}
        if len({c.name for c in self.configs}) != len(self.configs):
            raise ValueError(f"config names must be unique, got {[c.name for c in self.configs]}")
        for i, c in enumerate(self.configs):
            used = c.label_dimensions()
            if c.headline is None and not used:
                raise ValueError(
                    f"key configs[{i}] ({c.name}).headline: set it (no label dimension is fixed)"
                )
            c.headline = c.headline or used[0]
            for d in [*used, c.headline]:
                if d not in dims:
                    raise ValueError(
                        f"key configs[{i}] ({c.name}): dimension {d!r} of its labels/headline is not "
                        f"declared under 'dimensions' ({', '.join(sorted(dims))})"
                    )
        return self

    @classmethod
    def load(cls, mapping: str | os.PathLike[str] | dict[str, Any]) -> tuple[MappingSpec, str]:
        """Parse a mapping given as a dict, a YAML path or a shipped mapping name; returns the spec
        and where it came from. Raises :class:`MappingError` naming the file and the key."""
        data, where = mapping, "<mapping dict>"
        if not isinstance(mapping, dict):
            path = Path(mapping).expanduser()
            if not path.is_file() and (MAPPINGS_DIR / f"{mapping}.yaml").is_file():
                path = MAPPINGS_DIR / f"{mapping}.yaml"
            if not path.is_file():
                known = ", ".join(sorted(p.stem for p in MAPPINGS_DIR.glob("*.yaml")))
                raise MappingError(
                    f"mapping {str(mapping)!r} is neither a YAML file nor a shipped mapping ({known})"
                )
            where = str(path)
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (yaml.YAMLError, UnicodeDecodeError) as e:
                raise MappingError(f"{where}: not valid YAML: {e}") from None
            if not isinstance(data, dict):
                raise MappingError(f"{where}: expected a YAML mapping at the top level")
        try:
            return cls.model_validate(data), where
        except ValidationError as exc:
            problems = [
                (f"key {_loc(err['loc'], data)}: " if err["loc"] else "")
                + err["msg"].removeprefix("Value error, ")
                for err in exc.errors()[:5]
            ]
            raise MappingError(f"{where}: invalid mapping: " + "; ".join(problems)) from None


def _loc(loc: tuple[Any, ...], data: Any) -> str:
    """``configs[0] (turn).labels[1].dimension`` from a pydantic error location."""
    out, node = "", data
    for part in loc:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
            out += f"[{part}]" + (f" ({node['name']})" if isinstance(node, dict) and "name" in node else "")
        elif not str(part).startswith("function-"):
            out += ("." if out else "") + str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return out
