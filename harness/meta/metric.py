"""The meta-metric abstraction: what a statistic of judge vs humans declares and computes.

A :class:`MetaMetric` is one registered statistic (``pearson``, ``alt_test``, a plug-in's pairwise
accuracy, ...). It declares

* ``needs`` — what the samples must carry (:class:`Need`: judge scores, human ratings, per-annotator
  labels, binary issue labels, system / dialogue ids, several judges);
* ``level`` — the unit it correlates (:class:`Level`: the task's items, dialogues or systems);
* ``description``, ``label`` (a column header), ``higher_is_better``, ``value_range``, ``digits``;
* ``aggregation`` — how the per-dataset values become a language's and the languages' ``all``
  (:class:`Aggregation`);
* ``table_column`` — whether it writes one entry per language under its own name, so it is a column
  of the per-task tables (terminal, report, viewer, published card); the other metrics write
  several entries told apart by a group and parameters (``system_correlation`` with
  ``{"method": "spearman"}``) or a section of ``results.json`` (``section``: ``alt_test``,
  ``panel``, ``human_labels``).

Every entry carries its :class:`MetricKey`: the metric's name, the level, a group (an issue
dimension, ``macro``; none for most) and parameters (``{"method": "spearman"}``,
``{"statistic": "f1_pos"}``). Its :attr:`MetricKey.label` (``system_correlation(spearman)``) keys
the entries of a language; readers look entries up by building the key, never by parsing a label.

:meth:`MetaMetric.compute` gets a :class:`MetaContext` (one task's samples, the task, the bootstrap
settings, what the judge exposes) and returns a :class:`MetaOutput`: entries per language
(:class:`KeyedEntry`: key, value, CI, n, notes) and, for section metrics, the section's content.
The statistics functions of :mod:`harness.meta` return plain mappings under their own names;
:meth:`MetaMetric.output` types them once, each name turned into a key by
:meth:`MetaMetric.entry_key`. Metrics that share work (the correlations share bootstrap resamples)
implement :meth:`compute_together`.

The registry (:data:`harness.meta.registry.META_METRICS`, entry-point group
``dialeval_harness.meta_metrics``) holds the core's statistics (:mod:`harness.meta.builtin`) and every
plug-in's; ``harness ls metrics`` lists them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.jsontypes import JSON
from harness.meta.panel_vote import PanelView

if TYPE_CHECKING:
    from harness.tasks import TaskSpec


class Level(StrEnum):
    """The unit a meta-metric compares judge and humans on."""

    ITEM = "item"  # the task's own items: turns or dialogues
    DIALOGUE = "dialogue"
    SYSTEM = "system"


class MetricEntry(BaseModel):
    """One statistic: a correlation (``value``, ``p_value``, ``ci``), a rate, an error, a test..."""

    model_config = ConfigDict(extra="allow")

    value: float | None = None
    ci: list[float | None] | None = Field(default=None, description="[low, high] percentile bootstrap CI")
    n: int | None = Field(default=None, description="items the statistic is computed on")
    p_value: float | None = None
    parse_failures: int | None = Field(default=None, description="items left out: the verdict did not parse")
    n_total: int | None = None
    n_datasets: int | None = Field(default=None, description="datasets averaged (per-language entries)")
    n_languages: int | None = Field(default=None, description="languages averaged ('all' entries)")
    per_dataset: dict[str, MetricEntry] | None = None

    @field_validator("value", "p_value", mode="after")
    @classmethod
    def _nan_is_none(cls, v: float | None) -> float | None:
        """An undefined statistic (NaN, ±inf) is None, as results.json writes it."""
        return None if v is None or not math.isfinite(v) else v

    @field_validator("ci", mode="after")
    @classmethod
    def _ci_nan_is_none(cls, v: list[float | None] | None) -> list[float | None] | None:
        return None if v is None else [None if x is None or not math.isfinite(x) else x for x in v]

    def attr(self, name: str) -> object:
        """A field of the entry, declared or not (e.g. a McNemar entry's ``significant``), or None."""
        return getattr(self, name, None)


class MetricKey(BaseModel):
    """What an entry measures: the registered meta-metric, the level it compares judge and humans
    on, a group (an issue dimension, ``macro``; None for most) and parameters (e.g. the correlation
    ``method``, the classification ``statistic``)."""

    model_config = ConfigDict(frozen=True)

    metric: str = Field(description="the registered meta-metric (harness ls metrics)")
    level: Level = Field(default=Level.ITEM, description="item, dialogue or system")
    group: str | None = Field(default=None, description="e.g. the issue dimension, 'macro'; null: none")
    params: dict[str, str] = Field(default={}, description="e.g. {'method': 'spearman'}")

    @property
    def label(self) -> str:
        """Stable, human-readable and unique within a language: ``pearson``,
        ``system_correlation(spearman)``, ``issue_detection(repetitive,f1_pos)`` (the group, then
        the parameter values in the order of their names)."""
        inner = [x for x in (self.group, *(self.params[k] for k in sorted(self.params))) if x]
        return f"{self.metric}({','.join(inner)})" if inner else self.metric


class KeyedEntry(MetricEntry):
    """An entry of ``results[task][language]``: its :class:`MetricKey` fields and the statistic."""

    metric: str
    level: Level = Level.ITEM
    group: str | None = None
    params: dict[str, str] = {}

    @property
    def key(self) -> MetricKey:
        return MetricKey(metric=self.metric, level=self.level, group=self.group, params=self.params)

    @classmethod
    def make(cls, key: MetricKey, entry: Mapping[str, object]) -> KeyedEntry:
        """A statistic (a plain mapping, as the statistics functions return it) under ``key``."""
        clash = sorted(set(entry) & set(MetricKey.model_fields))
        if clash:
            raise ValueError(f"entry {key.label!r}: fields {clash} are the key's; rename them")
        return cls.model_validate({**key.model_dump(), **entry})


#: one language's (or "all"'s) entries, by :attr:`MetricKey.label`
Entries = dict[str, KeyedEntry]
#: language (or "all") -> entries
LanguageEntries = dict[str, Entries]


def find(entries: Mapping[str, KeyedEntry] | None, key: MetricKey) -> KeyedEntry | None:
    """The entry of ``key`` among one language's entries, or None."""
    return None if entries is None else entries.get(key.label)


def select(entries: Mapping[str, KeyedEntry] | None, metric: str, **match: str | None) -> list[KeyedEntry]:
    """The entries of ``metric`` whose group / parameters equal ``match`` (``group=...`` matches the
    group, any other name a parameter), in their order."""
    out = []
    for e in (entries or {}).values():
        if e.metric != metric:
            continue
        if all((e.group if k == "group" else e.params.get(k)) == v for k, v in match.items()):
            out.append(e)
    return out


class Need(StrEnum):
    """What a meta-metric needs in the samples."""

    JUDGE_SCORES = "judge scores"
    HUMAN_RATINGS = "human ratings"
    ANNOTATOR_LABELS = "per-annotator labels"
    ISSUE_LABELS = "binary issue labels"
    GROUP_IDS = "system / dialogue ids"
    SEVERAL_JUDGES = "several judges (a panel)"


class Aggregation(StrEnum):
    """How per-(dataset, language) values become a language's value and ``all``."""

    MEAN = "mean over datasets, then over languages (paired bootstrap)"
    POOLED = "pooled over languages"
    PER_GROUP = "per dataset × language, no average"
    NONE = "one value per task"


@dataclass(frozen=True)
class MetaSettings:
    """Settings of a meta-evaluation (``harness run`` options)."""

    n_bootstrap: int = 1000
    confidence: float = 0.95
    seed: int = 0
    alt_epsilon: float = 0.15
    alt_q: float = 0.05
    alt_scale: str = "auto"
    #: annotator-level statistics (soft labels, ceilings, alt-test) where items carry labels
    annotator_level: bool = True


@dataclass
class MetaContext:
    """One task's samples and what the meta-metrics may use besides them.

    ``samples`` has one row per judged item with ``score`` and ``human`` (the human rating) and the
    other sample columns; ``methods`` are the correlation methods the task asked for (parameters of
    the metrics built on correlations); ``dimensions`` the dataset's dimension table (name -> scale,
    min, max, ...); ``complete`` is False for a run that stopped early."""

    task: TaskSpec
    samples: pd.DataFrame
    settings: MetaSettings = field(default_factory=MetaSettings)
    methods: tuple[str, ...] = ("pearson", "spearman")
    judge_range: tuple[float, float] | None = None
    panel: PanelView | None = None
    dimensions: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    complete: bool = True
    _memo: dict[str, object] = field(default_factory=dict, repr=False)

    def shared(self, key: str, compute: Callable[[], object]) -> object:
        """``compute()`` once per context: work several metrics share (e.g. the annotator frame)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def annotator_labels(self) -> pd.DataFrame:
        """Long frame of the annotators' labels (empty without them or when turned off)."""
        from harness.meta.soft_labels import annotator_frame

        def frame() -> pd.DataFrame:
            s = self.samples
            if not self.settings.annotator_level or "human_labels" not in s or s["human_labels"].isna().all():
                return pd.DataFrame()
            return annotator_frame(s)

        out = self.shared("annotator_labels", frame)
        assert isinstance(out, pd.DataFrame)
        return out

    def has(self, need: Need) -> bool:
        s = self.samples
        if need is Need.JUDGE_SCORES:
            return "score" in s
        if need is Need.HUMAN_RATINGS:
            return "human" in s
        if need is Need.ANNOTATOR_LABELS:
            return not self.annotator_labels().empty
        if need is Need.ISSUE_LABELS:
            return bool(self.task.issue_labels)
        if need is Need.GROUP_IDS:
            return any(c in s and s[c].notna().any() for c in ("system", "dialogue_id"))
        if need is Need.SEVERAL_JUDGES:
            return self.panel is not None and self.complete
        raise ValueError(f"unknown need {need!r}")


@dataclass
class MetaOutput:
    """What a meta-metric computed: entries per language and, for a section metric, the section."""

    entries: LanguageEntries = field(default_factory=dict)
    section: JSON = None

    @classmethod
    def from_dicts(
        cls,
        by_language: Mapping[str, Mapping[str, Mapping[str, object]]],
        key: Callable[[str], MetricKey] | None = None,
    ) -> MetaOutput:
        """Entries given as plain mappings under the statistics' own names (what the statistics
        functions return), typed once: ``key`` turns a name into its :class:`MetricKey` (default:
        the name is the metric's, e.g. a plug-in writing ``{lang: {"my_metric": {...}}}``)."""
        to_key = key or (lambda name: MetricKey(metric=name))
        out: LanguageEntries = {}
        for lang, entries in by_language.items():
            keyed: Entries = {}
            for name, e in entries.items():
                entry = KeyedEntry.make(to_key(str(name)), e)
                label = entry.key.label
                if label in keyed:
                    raise ValueError(f"{lang}: two entries have the key {label!r} (the second is {name!r})")
                keyed[label] = entry
            out[str(lang)] = keyed
        return cls(out)


class MetaMetric:
    """A registered meta-metric. Subclasses set the class attributes (or pass them to ``__init__``
    for parametrised families) and implement :meth:`compute`."""

    name: str = ""
    description: str = ""
    label: str = ""
    needs: frozenset[Need] = frozenset({Need.JUDGE_SCORES, Need.HUMAN_RATINGS})
    level: Level = Level.ITEM
    higher_is_better: bool | None = True
    value_range: tuple[float, float] | None = (-1.0, 1.0)
    aggregation: Aggregation = Aggregation.MEAN
    digits: int = 3
    table_column: bool = False
    #: the results.json section a section metric writes (``alt_test``, ``panel``, ``human_labels``)
    section: str | None = None
    #: correlation-style metrics: their name is also a method the other metrics take as a parameter
    is_correlation: ClassVar[bool] = False

    def header(self) -> str:
        return self.label or self.name

    def applies(self, ctx: MetaContext) -> bool:
        """Whether the samples carry what the metric needs."""
        return all(ctx.has(n) for n in self.needs)

    def entry_key(self, name: str) -> MetricKey | None:
        """The key of an entry the statistics behind this metric write under ``name``, or None
        when the name is not one of this metric's. Default: the metric's own name, at its level.
        Metrics that write several entries (per method, per issue dimension) override it."""
        return MetricKey(metric=self.name, level=self.level) if name == self.name else None

    def key(self, group: str | None = None, **params: str) -> MetricKey:
        """The key of one of this metric's entries (e.g. ``key(method="spearman")``)."""
        return MetricKey(metric=self.name, level=self.level, group=group, params=params)

    def output(self, by_language: Mapping[str, Mapping[str, Mapping[str, object]]]) -> MetaOutput:
        """The statistics' plain mappings (``{lang: {name: entry}}``) as this metric's typed entries."""
        return MetaOutput.from_dicts(by_language, self._key_of)

    def _key_of(self, name: str) -> MetricKey:
        key = self.entry_key(name)
        if key is None:
            raise ValueError(f"meta-metric {self.name!r} does not write entries named {name!r}")
        return key

    def compute(self, ctx: MetaContext) -> MetaOutput:
        raise NotImplementedError(f"meta-metric {self.name!r} does not implement compute()")

    @classmethod
    def compute_together(cls, metrics: Sequence[MetaMetric], ctx: MetaContext) -> MetaOutput:
        """Several metrics of this class on one context (override to share work); the default
        computes them one by one and merges their entries."""
        out = MetaOutput()
        for m in metrics:
            merge_entries(out.entries, m.compute(ctx).entries)
        return out

    # -- paired comparison of two judges (``harness view`` compare) ------------------------------
    def replicates(self, judge: np.ndarray, human: np.ndarray, idx: np.ndarray) -> np.ndarray | None:
        """The statistic on each bootstrap resample (rows of ``idx`` index the items), or None when
        the metric cannot be compared item by item. ``judge`` and ``human`` are aligned float arrays."""
        return None

    def statistic(self, judge: np.ndarray, human: np.ndarray) -> float | None:
        """The point value on aligned arrays, or None when not comparable item by item."""
        return None

    @property
    def comparable(self) -> bool:
        return type(self).replicates is not MetaMetric.replicates

    def summary(self) -> str:
        parts = [self.description]
        if self.higher_is_better is not None:
            parts.append("higher is better" if self.higher_is_better else "lower is better")
        if self.value_range is not None:
            lo, hi = self.value_range
            parts.append(f"range [{_num(lo)}, {_num(hi)}]")
        return "; ".join(p for p in parts if p)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))


class UnknownMetric(MetaMetric):
    """A metric a results.json names that no installed package registers (read-only views)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.table_column = True
        self.higher_is_better = None
        self.value_range = None


def _num(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:g}"


def merge_entries(into: LanguageEntries, more: LanguageEntries) -> None:
    for lang, entries in more.items():
        into.setdefault(lang, {}).update(entries)
