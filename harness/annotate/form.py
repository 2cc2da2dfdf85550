"""The annotation form of a project: one control per labelled dimension, and the guideline beside it.

The form is generated, never written by hand: the controls come from the dataset's dimension table
(:class:`harness.data.schema.Dimension`, recorded in the build manifest by every builder) and, when a
task is given, from the task's label schema (its headline ``dimension`` and the binary
``issue_labels`` humans annotate, e.g. MEDAL's eight Table 1 issues). The guideline is the task's own
instruction where it has one (MEDAL's Table 11 system prompt, which is the guideline MEDAL's
annotators were given) or the question its prompt asks (xDial-Eval, UPHELD, ComperDial), followed by
the definition of every dimension on the form, as the dataset's dimension table words it.

Scales become controls: a ``binary`` dimension is a toggle (one letter key), a ``likert`` dimension
one button per integer point (digit keys), a ``continuous`` dimension a slider with anchor points
at the integers of a short range.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq

from harness.data.layout import MANIFEST_NAME, data_file
from harness.data.schema import Dimension, dimension_table
from harness.tasks import TaskSpec

Kind = Literal["binary", "likert", "continuous"]
Level = Literal["turn", "dialogue"]
#: longest continuous range that still gets one anchor point (and digit key) per integer
_MAX_ANCHORS = 11


class FormError(ValueError):
    """The dataset and task cannot make an annotation form (no dimension table, a dimension the
    dataset does not define, configs of two levels)."""


@dataclass(frozen=True)
class Field:
    """One control of the annotation form."""

    dimension: str
    kind: Kind
    min: float
    max: float
    points: tuple[tuple[float, str], ...]  # (value, wording) of each scale point
    definition: str
    keys: tuple[str, ...]  # digits, one per point; binary: one letter that toggles the issue
    source: str = ""

    @property
    def _dimension(self) -> Dimension:
        return Dimension(self.dimension, self.definition, self.kind, self.min, self.max)

    def problem(self, value: float) -> str | None:
        """Why ``value`` is not on this field's scale (None when it is)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{value!r} is not a number on the scale of {self.dimension!r}"
        return self._dimension.problem(float(value))

    def to_json(self) -> dict[str, object]:
        point_keys = self.keys if len(self.keys) == len(self.points) else ("",) * len(self.points)
        if self.kind == "binary" and self.keys:
            point_keys = ("", self.keys[0])  # the letter toggles the issue on (1) and off (0)
        return {
            "dimension": self.dimension,
            "kind": self.kind,
            "min": self.min,
            "max": self.max,
            "points": [
                {"value": v, "label": label, "key": k}
                for (v, label), k in zip(self.points, point_keys, strict=True)
            ],
            "definition": self.definition,
            "keys": list(self.keys),
            "source": self.source,
        }


@dataclass(frozen=True)
class Form:
    """The form every annotator of a project fills in, item after item."""

    task: str | None
    dataset: str
    level: Level
    guideline: str  # Markdown
    fields: tuple[Field, ...]
    configs: tuple[str, ...] = ()  # the dataset configs the project's items come from
    headline: str = ""  # the dimension whose mean is a record's ``rating`` ("" = the first field)

    def field(self, dimension: str) -> Field:
        for f in self.fields:
            if f.dimension == dimension:
                return f
        raise KeyError(
            f"unknown dimension {dimension!r}; this form has {', '.join(f.dimension for f in self.fields)}"
        )

    @property
    def dimensions(self) -> tuple[str, ...]:
        return tuple(f.dimension for f in self.fields)

    @property
    def headline_dimension(self) -> str:
        """The dimension whose mean over annotators is an exported record's ``rating``."""
        return self.headline or self.fields[0].dimension

    def to_json(self) -> dict[str, object]:
        return {
            "task": self.task,
            "dataset": self.dataset,
            "level": self.level,
            "guideline": self.guideline,
            "fields": [f.to_json() for f in self.fields],
        }

    def to_record(self) -> str:
        """The form as JSON text (what a project stores, so it never changes under a project)."""
        return json.dumps(
            {**self.to_json(), "configs": list(self.configs), "headline": self.headline}, ensure_ascii=False
        )

    @classmethod
    def from_record(cls, text: str) -> Form:
        data = json.loads(text)
        fields = tuple(
            Field(
                dimension=f["dimension"],
                kind=f["kind"],
                min=float(f["min"]),
                max=float(f["max"]),
                points=tuple((float(p["value"]), str(p["label"])) for p in f["points"]),
                definition=f["definition"],
                keys=tuple(f["keys"]),
                source=f.get("source", ""),
            )
            for f in data["fields"]
        )
        return cls(
            task=data["task"],
            dataset=data["dataset"],
            level=data["level"],
            guideline=data["guideline"],
            fields=fields,
            configs=tuple(data.get("configs", ())),
            headline=data.get("headline", ""),
        )


# -- building a form ------------------------------------------------------------------------------


def read_manifest(dataset_dir: Path) -> dict[str, object]:
    path = Path(dataset_dir) / MANIFEST_NAME
    if not path.is_file():
        raise FormError(f"{dataset_dir} has no {MANIFEST_NAME}, so it is not a built dataset")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise FormError(f"{path}: not a JSON object")
    return data


def dimensions_of(dataset_dir: Path) -> dict[str, Dimension]:
    """The dataset's dimension table (name -> :class:`Dimension`), in the builder's order."""
    manifest = read_manifest(dataset_dir)
    dims = manifest.get("dimensions") or []
    if not isinstance(dims, list) or not dims:
        raise FormError(
            f"{Path(dataset_dir) / MANIFEST_NAME} records no dimension table, so no annotation form can be "
            "made; rebuild the dataset with a builder that declares its dimensions"
        )
    return {d["name"]: Dimension.from_dict(d) for d in dims}


def select_configs(dataset_dir: Path, task: TaskSpec | None, config: str | None) -> tuple[list[str], Level]:
    """The configs a project annotates and their level: ``config`` if given, else the task's
    configs present in the dataset (every config at the task's level for a task over any config),
    else every config; all of one level."""
    manifest = read_manifest(dataset_dir)
    entries = manifest.get("configs") or {}
    assert isinstance(entries, dict)
    levels = {name: str(e.get("level")) for name, e in entries.items()}
    if config is not None:
        if config not in levels:
            raise FormError(
                f"the dataset at {dataset_dir} has no config {config!r}; configs: {', '.join(levels) or 'none'}"
            )
        chosen = [config]
    elif task is not None:
        if task.any_config:
            chosen = [c for c, lv in levels.items() if lv == task.row_level]
        else:
            chosen = [c for c in task.configs if c in levels]
        if not chosen:
            raise FormError(
                f"task {task.name!r} reads none of this dataset's configs ({', '.join(levels) or 'none'}); "
                "pass --config to choose one"
            )
    else:
        chosen = list(levels)
    if task is not None and any(levels[c] != task.row_level for c in chosen):
        bad = [c for c in chosen if levels[c] != task.row_level]
        raise FormError(
            f"config(s) {', '.join(bad)} hold {levels[bad[0]]}-level rows but task {task.name!r} reads "
            f"{task.row_level}-level rows"
        )
    found = {levels[c] for c in chosen}
    if len(found) != 1:
        raise FormError(
            f"the dataset's configs hold rows of two levels ({', '.join(f'{c}: {levels[c]}' for c in chosen)}); "
            "pass --config (or --task) to annotate one level"
        )
    level = found.pop()
    if level not in ("turn", "dialogue"):
        raise FormError(f"config {chosen[0]!r} has level {level!r}; expected turn or dialogue")
    return chosen, level  # type: ignore[return-value]


def labelled_dimensions(dataset_dir: Path, configs: Iterable[str]) -> tuple[list[str], list[str]]:
    """Dimensions the configs' rows use: (their headline ``dimension`` values, every label's)."""
    headlines: list[str] = []
    labelled: list[str] = []
    for c in configs:
        table = pq.read_table(Path(dataset_dir) / data_file(c), columns=["dimension", "labels"])
        for name in table.column("dimension").unique().to_pylist():
            if name and name not in headlines:
                headlines.append(name)
        labels = table.column("labels").combine_chunks().flatten()
        for name in labels.field("dimension").unique().to_pylist():
            if name and name not in labelled:
                labelled.append(name)
    return headlines, labelled


def form_for(dataset_dir: Path, task: TaskSpec | None, config: str | None, *, dataset: str = "") -> Form:
    """The annotation form of a project over ``dataset_dir`` (a built or registered dataset).

    With a task: its issue labels (binary) and its headline dimension, in that order; without:
    every dimension the rows carry, in the order of the dataset's dimension table. A dimension the
    dataset's table does not define is a :class:`FormError`."""
    dataset_dir = Path(dataset_dir)
    table = dimensions_of(dataset_dir)
    configs, level = select_configs(dataset_dir, task, config)
    if task is not None:
        wanted = [*task.issue_labels, *([task.dimension] if task.dimension not in task.issue_labels else [])]
        missing = [d for d in wanted if d not in table]
        if missing:
            raise FormError(
                f"task {task.name!r} labels {', '.join(missing)}, which the dataset at {dataset_dir} does not "
                f"define (its dimensions: {', '.join(table)}); choose a task of this dataset"
            )
        headline = task.dimension
    else:
        headlines, labelled = labelled_dimensions(dataset_dir, configs)
        used = {*headlines, *labelled}
        wanted = [d for d in table if d in used] or list(table)
        headline = next((d for d in headlines if d in wanted), wanted[0])
    dims = [table[d] for d in wanted]
    fields = _fields(dims)
    name = dataset or dataset_dir.name
    return Form(
        task=task.name if task is not None else None,
        dataset=name,
        level=level,
        guideline=guideline(dims, task, name),
        fields=fields,
        configs=tuple(configs),
        headline=headline,
    )


def _fields(dims: Sequence[Dimension]) -> tuple[Field, ...]:
    letters = _toggle_letters([d.name for d in dims if d.scale == "binary"])
    out = []
    for d in dims:
        if d.scale == "binary":
            points: tuple[tuple[float, str], ...] = (
                (0.0, d.labels.get(0.0, "no")),
                (1.0, d.labels.get(1.0, "yes")),
            )
            keys: tuple[str, ...] = (letters[d.name],)
        elif d.scale == "likert" or (d.max - d.min <= _MAX_ANCHORS - 1 and float(d.min).is_integer()):
            values = [float(v) for v in range(int(d.min), int(d.max) + 1)]
            points = tuple((v, d.labels.get(v, f"{v:g}")) for v in values)
            keys = tuple(f"{v:g}"[-1] for v in values) if len(values) <= 10 else ()
        else:
            points = (
                (float(d.min), d.labels.get(d.min, f"{d.min:g}")),
                (float(d.max), d.labels.get(d.max, f"{d.max:g}")),
            )
            keys = ()
        out.append(Field(d.name, d.scale, float(d.min), float(d.max), points, d.definition, keys, d.source))
    return tuple(out)


#: keys the annotator page keeps for itself: s = skip, u = undo, f = flag (Enter submits)
PAGE_KEYS: tuple[str, ...] = ("s", "u", "f")


def _toggle_letters(names: Sequence[str]) -> dict[str, str]:
    """One distinct letter per binary dimension: the first letter of its name not taken yet (of the
    words after a prefix such as ``lacks_``), else the first free letter of the alphabet. The page's
    own keys (:data:`PAGE_KEYS`: skip, undo, flag) are never given to a dimension."""
    taken: set[str] = set(PAGE_KEYS)
    out: dict[str, str] = {}
    for name in names:
        words = [w for w in name.lower().split("_") if w]
        candidates = (
            [w[0] for w in reversed(words)] + [c for w in words for c in w] + list(string.ascii_lowercase)
        )
        letter = next(c for c in candidates if c in string.ascii_lowercase and c not in taken)
        taken.add(letter)
        out[name] = letter
    return out


def _unescape(text: str) -> str:
    """A prompt template's literal text (``{{`` / ``}}`` are ``str.format`` escapes)."""
    return text.replace("{{", "{").replace("}}", "}")


def guideline(dims: Sequence[Dimension], task: TaskSpec | None, dataset: str) -> str:
    """The guideline shown beside every item (Markdown)."""
    parts = [f"# Annotation guideline: {task.name if task else dataset}"]
    if task is not None:
        parts.append(task.description)
        tpl = task.templates.get("en") or next(iter(task.templates.values()), None)
        if tpl is not None and tpl.system:
            parts.append(f"## Instructions\n\n{_unescape(tpl.system).strip()}\n\n*Source: {tpl.source}.*")
        elif tpl is not None:
            question = tpl.user
            for placeholder in sorted(tpl.placeholders()):
                question = question.replace("{" + placeholder + "}", f"[{placeholder}]")
            parts.append(
                "## The question\n\nThe judges are asked (the item's text stands in the brackets):\n\n"
                + "```text\n"
                + _unescape(question).strip()
                + f"\n```\n\n*Source: {tpl.source}.*"
            )
    parts.append("## Labels\n\n" + dimension_table(dims))
    sources = sorted({d.source for d in dims if d.source})
    if sources:
        parts.append("Definitions from: " + "; ".join(sources) + ".")
    return "\n\n".join(parts) + "\n"
