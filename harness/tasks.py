"""Typed task definitions, prompt templates and the task registry.

A task says *what* is judged and *how* it is scored against humans: which dataset (builder +
configs), which level (turn / dialogue) and quality dimension, which prompt template per
language, which scoring method an LLM judge uses (a :class:`~harness.scorers.Scorer`: P(Yes), a
written score on a scale, MEDAL's JSON issues, ... — each owns its parameters, range and parsing)
and which method an embedding judge uses, and which correlation metrics are reported. Task
definitions live in the ``tasks/`` package (one sub-package per task family, next to its
``evaluate`` module folder) or in any installed package, and register themselves in :data:`TASKS`
when the registry is first queried (entry-point group ``dialeval_harness.tasks``).
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import plugins
from harness.jsontypes import JSONObject
from harness.languages import LANGUAGES, SPEAKER_TAGS
from harness.registry import Registry
from harness.scorers import SCORERS, PYes, Scorer
from harness.types import ChatMessage, GenerationConfig, Request

LEVELS = ("turn", "dialogue")
EMBEDDING_METHODS = ("context_response_cosine", "adjacent_turn_cosine")
#: ``TaskSpec.configs == (ANY_CONFIG,)``: every config of the dataset whose rows are at the task's
#: input level (any common-schema dataset, e.g. CPDScore over UPHELD or an imported ComperDial).
ANY_CONFIG = "*"
#: Aggregation levels a task may add correlations at (``TaskSpec.levels``, ComperDial Tables 4–5).
AGGREGATION_LEVELS = ("dialogue", "system")

# Placeholders a template may use, per level.
LEVEL_FIELDS = {
    "turn": {"context", "response", "last_utterance", "conversation", "reference"},
    "dialogue": {"dialogue", "conversation"},
}
# Text that marks a placeholder the template author forgot to turn into a field.
_UNFILLED = re.compile(
    r"\{[A-Za-z_][A-Za-z0-9_ ]*\}|<(?:dialogue|response|conversation|context|score)>|\[Dialogue Context\]"
)


@dataclass(frozen=True)
class PromptTemplate:
    """A prompt as data: where it comes from, its language and version, and a content hash."""

    name: str
    user: str
    source: str
    language: str = "en"
    version: str = "1"
    system: str | None = None

    def placeholders(self) -> set[str]:
        names: set[str] = set()
        for part in (self.system or "", self.user):
            names |= {f for _, f, _, _ in string.Formatter().parse(part) if f}
        return names

    def render(self, fields: Mapping[str, str]) -> tuple[ChatMessage, ...]:
        missing = self.placeholders() - set(fields)
        if missing:
            raise KeyError(f"template {self.name!r} needs field(s) {sorted(missing)}")
        msgs = []
        if self.system:
            msgs.append(ChatMessage("system", self.system.format(**fields)))
        msgs.append(ChatMessage("user", self.user.format(**fields)))
        return tuple(msgs)

    @property
    def hash(self) -> str:
        h = hashlib.sha256()
        for part in (self.name, self.version, self.language, self.system or "", self.user):
            h.update(part.encode("utf-8") + b"\x00")
        return h.hexdigest()[:16]

    def describe(self) -> dict[str, str]:
        return {
            "name": self.name,
            "source": self.source,
            "language": self.language,
            "version": self.version,
            "hash": self.hash,
        }


@dataclass(frozen=True)
class TaskSpec:
    name: str
    description: str
    builder: str  # dataset builder name (dataset_builders registry)
    configs: tuple[str, ...]  # dataset configs that belong to the task (those present are used)
    level: str
    dimension: str
    languages: tuple[str, ...]
    templates: Mapping[str, PromptTemplate]  # language code -> template
    # How an LLM judge scores: a registered scoring method with its parameters (harness.scorers).
    scorer: Scorer = field(default_factory=PYes)
    embedding_method: str = "context_response_cosine"
    metrics: tuple[str, ...] = ("pearson", "spearman")
    generation: GenerationConfig = field(
        default_factory=lambda: GenerationConfig(temperature=0.0, max_tokens=1)
    )
    group: str | None = None
    evaluate_dir: str | None = None  # the folder of the task's `evaluate` module, relative to the repo root
    citation: str = ""
    # Generation budget of reasoning judges (spec option reasoning=true), e.g. MEDAL §5.3.1: 32,768.
    reasoning_max_tokens: int | None = None
    # A multi-call / multi-step protocol an LLM judge runs instead of one request per item
    # ("module:function", called as function(judge, task, items) -> list[Verdict]; CPDScore: three
    # seeded calls averaged, the two-step dialogue score). Other judge kinds score the items as usual.
    procedure: str | None = None
    # Rows loaded from the dataset -> the task's items ("module:function", called as
    # function(task, rows) -> items), e.g. turns grouped into dialogues; rows are read at
    # ``input_level`` (default: ``level``).
    prepare: str | None = None
    input_level: str | None = None
    # Extra correlation levels over the samples (means per (system, dialogue_id) / per system):
    # "dialogue", "system" (ComperDial §6.2–6.3, footnotes 9 and 11).
    levels: tuple[str, ...] = ()
    # The meta-metrics to compute (names in harness.meta.registry.META_METRICS, e.g. "spearman",
    # "alt_test", a plug-in's); empty: the defaults (harness.meta.builtin.default_metric_names).
    meta_metrics: tuple[str, ...] = ()

    @property
    def row_level(self) -> str:
        """Level of the dataset rows the task reads (``input_level``, else ``level``)."""
        return self.input_level or self.level

    @property
    def any_config(self) -> bool:
        return tuple(self.configs) == (ANY_CONFIG,)

    # -- what the scorer decides (read-only views, so callers need not know the method) -------------
    @property
    def scoring(self) -> str:
        """The scoring method's registry name (``p_yes``, ``parse_score``, ...)."""
        return self.scorer.name

    @property
    def issue_labels(self) -> tuple[str, ...]:
        """Binary labels the judge writes that humans labelled too (meta-evaluated as classification)."""
        return tuple(self.scorer.issue_labels)

    @property
    def judged_labels(self) -> tuple[str, ...]:
        """Every label the judge writes besides the score."""
        return tuple(self.scorer.judged_labels)

    @property
    def label_names(self) -> Mapping[str, str]:
        """Short display names of the judged labels in reports, e.g. MEDAL Table 1 abbreviations ("!Int")."""
        return self.scorer.label_names

    # -- prompts --------------------------------------------------------------------------------
    def template_for(self, language: str) -> PromptTemplate:
        try:
            return self.templates[language]
        except KeyError:
            raise KeyError(f"task {self.name!r} has no prompt template for language {language!r}") from None

    def fields(self, item: Mapping[str, Any]) -> dict[str, str]:
        if self.level == "turn":
            ctx = [t["text"] for t in item["context"]]
            return {
                "context": "\n".join(ctx),
                "conversation": "\n".join(f"{t['role']}: {t['text']}" for t in item["context"]),
                "response": item["response"],
                "reference": item.get("reference") or "",
                "last_utterance": ctx[-1] if ctx else "",
            }
        turns = item["turns"]
        return {
            "dialogue": "\n".join(
                f"{SPEAKER_TAGS.get(t['role'], '[' + t['role'] + ']')} {t['text']}" for t in turns
            ),
            "conversation": "\n".join(f"{t['role']}: {t['text']}" for t in turns),
        }

    def missing_inputs(self, item: Mapping[str, Any]) -> list[str]:
        """Item fields the task's template needs but the item leaves empty (e.g. no reference)."""
        tpl = self.templates.get(item.get("language", ""))
        needed = tpl.placeholders() if tpl is not None else set()
        out = []
        if "reference" in needed and not str(item.get("reference") or "").strip():
            out.append("reference")
        if "response" in needed and not str(item.get("response") or "").strip():
            out.append("response")
        return out

    def human_rating(self, item: Mapping[str, Any]) -> float | None:
        """The human score the task correlates with: the per-item mean of the task dimension's
        labels (``aggregates``) when the item carries several dimensions, else ``rating``."""
        for agg in item.get("aggregates") or []:
            if agg.get("dimension") == self.dimension and agg.get("mean") is not None:
                return float(agg["mean"])
        rating = item.get("rating")
        return None if rating is None else float(rating)

    def build_request(self, item: Mapping[str, Any], config: GenerationConfig | None = None) -> Request:
        tpl = self.template_for(item["language"])
        return Request(
            messages=tpl.render(self.fields(item)),
            config=config or self.generation,
            **self.scorer.request_fields(),  # label choices, a JSON schema, a continuation to score
        )

    def describe(self) -> JSONObject:
        return {
            "description": self.description,
            "builder": self.builder,
            "configs": list(self.configs),
            "level": self.level,
            "dimension": self.dimension,
            "languages": list(self.languages),
            "scoring": self.scorer.name,
            "scorer": {"name": self.scorer.name, **self.scorer.params()},
            **self.scorer.describe(),  # labels / score_range / continuation / issue_labels, ...
            "embedding_method": self.embedding_method,
            "metrics": list(self.metrics),
            "templates": {lang: {**t.describe()} for lang, t in sorted(self.templates.items())},
            "evaluate_dir": self.evaluate_dir,
            **{k: v for k, v in (("procedure", self.procedure), ("prepare", self.prepare)) if v},
            **({"input_level": self.input_level} if self.input_level else {}),
            **({"levels": list(self.levels)} if self.levels else {}),
            **({"meta_metrics": list(self.meta_metrics)} if self.meta_metrics else {}),
        }


def load_hook(path: str) -> Any:
    """The object a ``"module:attr"`` hook string names (``TaskSpec.procedure`` / ``prepare``), imported
    on first use, so the core never imports a task family itself."""
    import importlib

    module, sep, attr = str(path).partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"hook {path!r} must look like 'package.module:function'")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"hook {path!r} cannot be loaded: {e}") from e


# -- registry ------------------------------------------------------------------------------------
#: task name -> spec (:class:`harness.registry.Registry`; entry-point group ``dialeval_harness.tasks``)
TASKS: Registry[TaskSpec] = Registry(
    "task", plugins.TASKS_GROUP, accepts=lambda t: isinstance(t, TaskSpec), summary=lambda t: t.description
)


def register_task(spec: TaskSpec) -> TaskSpec:
    """Register a task. The same spec again is a no-op; another spec with a taken name is a
    :class:`~harness.registry.DuplicateError` naming both plug-ins."""
    if not isinstance(spec, TaskSpec):
        raise TypeError(f"register_task expects a TaskSpec, got {spec!r}")
    return TASKS.register(spec)


def discover() -> None:
    """Call every installed task-family plug-in's registrar once (entry-point group
    ``dialeval_harness.tasks``, :mod:`harness.plugins`): the ``tasks`` package imports each of
    its family sub-packages, which register their specs with :func:`register_task`."""
    TASKS.discover()


def all_tasks() -> dict[str, TaskSpec]:
    return TASKS.entries()


def groups() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in all_tasks().values():
        if t.group:
            out.setdefault(t.group, []).append(t.name)
    return out


def get_task(name: str) -> TaskSpec:
    tasks = all_tasks()
    if name not in tasks:
        raise KeyError(
            f"unknown task {name!r}; known tasks: {', '.join(tasks)}; groups: {', '.join(groups())}"
        )
    return tasks[name]


def resolve_tasks(names: Iterable[str]) -> list[TaskSpec]:
    """Expand comma-separated names and groups into task specs (order kept, no repeats)."""
    tasks, grp = all_tasks(), groups()
    out: list[TaskSpec] = []
    for raw in names:
        for name in (n.strip() for n in str(raw).split(",")):
            if not name:
                continue
            members = grp.get(name, [name]) if name not in tasks else [name]
            for m in members:
                spec = get_task(m)
                if spec not in out:
                    out.append(spec)
    if not out:
        raise ValueError("no task given")
    return out


def validate(specs: Iterable[TaskSpec] | None = None, repo_root: Path | None = None) -> list[str]:
    """Check task definitions; returns a list of problems (empty = valid)."""
    from harness.data.builders import list_builders

    problems: list[str] = []
    specs = list(specs) if specs is not None else list(all_tasks().values())
    names = {s.name for s in specs}
    builders = set(list_builders())
    for s in specs:
        where = f"task {s.name!r}"
        if s.group and s.group in names:
            problems.append(f"{where}: group name {s.group!r} collides with a task id")
        if s.level not in LEVELS:
            problems.append(f"{where}: level {s.level!r} not in {LEVELS}")
            continue
        problems += [f"{where}: {p}" for p in _scorer_problems(s)]
        if s.embedding_method not in EMBEDDING_METHODS:
            problems.append(f"{where}: embedding_method {s.embedding_method!r} not in {EMBEDDING_METHODS}")
        if s.builder not in builders:
            problems.append(f"{where}: dataset builder {s.builder!r} is not registered ({sorted(builders)})")
        if not s.languages:
            problems.append(f"{where}: declares no languages")
        if not s.configs:
            problems.append(f"{where}: declares no dataset configs")
        if ANY_CONFIG in s.configs and len(s.configs) > 1:
            problems.append(f"{where}: configs {ANY_CONFIG!r} (every config) cannot be combined with names")
        if s.input_level is not None and s.input_level not in LEVELS:
            problems.append(f"{where}: input_level {s.input_level!r} not in {LEVELS}")
        if s.input_level not in (None, s.level) and not s.prepare:
            problems.append(f"{where}: input_level {s.input_level!r} differs from level but no prepare hook")
        bad_levels = [x for x in s.levels if x not in AGGREGATION_LEVELS]
        if bad_levels:
            problems.append(f"{where}: levels {bad_levels} not in {AGGREGATION_LEVELS}")
        problems += [f"{where}: {p}" for p in _meta_metric_problems(s)]
        for hook in (s.procedure, s.prepare):
            if hook is not None:
                try:
                    load_hook(hook)
                except ValueError as e:
                    problems.append(f"{where}: {e}")
        for lang in s.languages:
            if lang not in LANGUAGES:
                problems.append(f"{where}: unknown language code {lang!r}")
            if lang not in s.templates:
                problems.append(f"{where}: missing prompt template for language {lang!r}")
        for lang, tpl in s.templates.items():
            if lang not in s.languages:
                problems.append(f"{where}: template for {lang!r}, which is not among the task's languages")
            allowed = LEVEL_FIELDS[s.level]
            unknown = tpl.placeholders() - allowed
            if unknown:
                problems.append(
                    f"{where}: template {tpl.name!r} ({lang}) uses unknown placeholder(s) {sorted(unknown)}"
                )
            if not tpl.placeholders():
                problems.append(
                    f"{where}: template {tpl.name!r} ({lang}) has no placeholder: the item never reaches the judge"
                )
            problems += [
                f"{where}: template {tpl.name!r} ({lang}) {p}" for p in unfilled_placeholders(tpl, s.level)
            ]
        if s.evaluate_dir and repo_root is not None:
            mod_dir = repo_root / s.evaluate_dir
            if not (mod_dir / f"{mod_dir.name}.py").is_file():
                problems.append(f"{where}: evaluate module {mod_dir}/{mod_dir.name}.py not found")
    return problems


def _probe_fields(level: str) -> dict[str, str]:
    return {name: f"\x00{name}\x00" for name in LEVEL_FIELDS[level]}


def unfilled_placeholders(tpl: PromptTemplate, level: str) -> list[str]:
    """Render ``tpl`` with probe values for every field of ``level``: report placeholders that
    stay unfilled (``{name}`` left by a bad escape, ``<dialogue>`` / ``[Dialogue Context]`` copied
    from a paper) and fields a template uses that the level cannot fill."""
    allowed = LEVEL_FIELDS[level]
    if tpl.placeholders() - allowed:
        return []  # reported as unknown placeholders already
    try:
        msgs = tpl.render(_probe_fields(level))
    except (KeyError, ValueError, IndexError) as e:
        return [f"does not render: {e}"]
    out = []
    for m in msgs:
        text = re.sub(r"\x00[a-z_]+\x00", "", m.content)
        for hit in sorted(set(_UNFILLED.findall(text))):
            out.append(f"leaves placeholder {hit!r} unfilled in its {m.role} message")
    return out


def _meta_metric_problems(s: TaskSpec) -> list[str]:
    """Meta-metric names (``meta_metrics``, and ``metrics``: correlation methods) that no installed
    package registers."""
    from harness.meta.registry import META_METRICS

    problems = []
    unknown = [n for n in (*s.meta_metrics, *s.metrics) if n not in META_METRICS]
    if unknown:
        problems.append(f"meta-metric(s) {unknown} are not registered (harness ls metrics lists them)")
    not_corr = [n for n in s.metrics if n in META_METRICS and not META_METRICS.get(n).is_correlation]
    if not_corr:
        problems.append(f"metrics {not_corr} are not correlation methods; name them in meta_metrics")
    return problems


def _scorer_problems(s: TaskSpec) -> list[str]:
    if not isinstance(s.scorer, Scorer):
        return [f"scorer {s.scorer!r} is not a harness.scorers.Scorer"]
    out = []
    registered = SCORERS.entries().get(s.scorer.name)
    if registered is not type(s.scorer):
        out.append(
            f"scoring method {s.scorer.name!r} ({type(s.scorer).__qualname__}) is not registered; register the "
            "class (entry-point group dialeval_harness.scorers, or harness.scorers.register_scorer)"
        )
    return out + list(s.scorer.problems(s))
