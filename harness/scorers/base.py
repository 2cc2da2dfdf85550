"""The scorer interface: how an LLM judge turns a backend response into a score for a task.

A :class:`Scorer` is a frozen dataclass whose fields are its parameters (a task holds one:
``TaskSpec(scorer=ParseScore(range=(0, 100)))``). It owns everything that depends on the scoring
method and nothing else:

* what the request asks for — label ``choices`` to score, a ``json_schema`` for guided decoding,
  a ``continuation`` whose log-probs are read (:meth:`Scorer.request_fields`), and decoding it needs
  (:meth:`Scorer.generation`, e.g. token log-probs);
* how a response becomes a score (:meth:`Scorer.score` -> :class:`ScorerOutput`: a
  :class:`~harness.parsing.score.ParsedScore` and what the sample keeps in ``extra``), using the parsers
  of :mod:`harness.parsing`; a failure is ``None`` with a status, never 0;
* the fixed range of its scores (:meth:`Scorer.score_range`; ``mean:`` / ``panel:`` normalise by it)
  and the labels it writes besides the score (:attr:`Scorer.issue_labels`, meta-evaluated as
  classification);
* what results record about it (:meth:`Scorer.describe`, :meth:`Scorer.params`).

Scorers are registered by name (:data:`harness.scorers.SCORERS`); a plug-in adds one through the
entry-point group ``dialeval_harness.scorers``.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, TypedDict

from harness.jsontypes import JSON, JSONObject
from harness.parsing.score import ParsedScore
from harness.types import GenerationConfig, Response

if TYPE_CHECKING:
    from harness.tasks import TaskSpec


@dataclass
class ScorerOutput:
    """A scorer's result for one response: the score (or ``None`` + status) and the sample's ``extra``."""

    score: ParsedScore
    extra: JSONObject = field(default_factory=dict)


class RequestFields(TypedDict, total=False):
    """What a scoring method adds to a :class:`~harness.types.Request` (absent = not set)."""

    choices: tuple[str, ...]
    json_schema: JSONObject
    continuation: str


@dataclass(frozen=True)
class Scorer(ABC):
    """Base class of scoring methods (see the module docstring). Subclasses are frozen dataclasses
    whose fields are the parameters, set ``name`` and ``summary``, and implement :meth:`score`."""

    #: the registry name (``TaskSpec.scoring``, ``harness ls scorers``, results' ``scoring``)
    name: ClassVar[str] = ""
    #: one line for ``harness ls scorers``
    summary: ClassVar[str] = ""
    #: the scale's kind, for robustness reports: ``probability`` (scores in [0, 1]), ``likert``,
    #: ``score_range`` (a declared range) or ``""`` (no fixed scale: the observed maximum is used)
    scale: ClassVar[str] = "score_range"
    #: binary labels the judge writes that humans labelled too (meta-evaluated as classification);
    #: a scorer that writes labels makes this a dataclass field
    issue_labels: ClassVar[tuple[str, ...]] = ()
    #: short display names of the judged labels in reports (e.g. MEDAL's ``!Int``)
    label_names: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def __post_init__(self) -> None:
        problems = self.check()
        if problems:
            raise ValueError(f"scoring {self.name!r}: " + "; ".join(problems))

    # -- parameters -----------------------------------------------------------------------------------
    def check(self) -> list[str]:
        """Problems with the parameters (empty = valid); a scorer with problems cannot be made."""
        return []

    def problems(self, task: TaskSpec) -> list[str]:
        """Problems of this scorer on ``task`` (reported by ``harness validate``)."""
        return []

    def params(self) -> JSONObject:
        """The parameters as JSON values (tuples as lists)."""
        return {f.name: _json(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Scorer:
        """A scorer from JSON / YAML parameters (lists become tuples); unknown keys are an error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise ValueError(f"scoring {cls.name!r}: unknown parameter(s) {unknown}; known: {sorted(known)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in params.items()})

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{self.name}({args})"

    # -- the request ----------------------------------------------------------------------------------
    def request_fields(self) -> RequestFields:
        """Fields of the :class:`~harness.types.Request` besides messages and config: ``choices``,
        ``json_schema``, ``continuation`` (absent = not set)."""
        return {}

    def generation(self, config: GenerationConfig) -> GenerationConfig:
        """The decoding config this scorer needs, from the judge's (default: unchanged)."""
        return config

    # -- the response ---------------------------------------------------------------------------------
    @abstractmethod
    def score(self, resp: Response, item: Mapping[str, object]) -> ScorerOutput:
        """The score of ``resp`` (the answer to ``item``'s request)."""

    def score_range(self) -> tuple[float, float] | None:
        """The fixed (lo, hi) interval of every ``ok`` score, or None (e.g. a log-prob)."""
        return None

    @property
    def judged_labels(self) -> tuple[str, ...]:
        """Every label the judge writes besides the score."""
        return tuple(self.issue_labels)

    def describe(self) -> JSONObject:
        """What ``results.json`` records about the method under the task, besides ``scoring`` (its name)
        and ``scorer`` (name + :meth:`params`)."""
        return {}


def response_extra(resp: Response) -> JSONObject:
    """What a sample keeps of a label- or text-scored response: the label log-probs, and how the
    backend carried a system message when the chat template had no system role."""
    logprobs = resp.choice_logprobs
    extra: JSONObject = {"choice_logprobs": None if logprobs is None else {**logprobs}}
    if resp.raw and resp.raw.get("system_role"):
        extra["system_role"] = resp.raw["system_role"]
    return extra


def range_problems(rng: object, what: str = "range") -> list[str]:
    """``rng`` must be a (lo, hi) pair of numbers with lo < hi."""
    pair = list(rng) if isinstance(rng, Iterable) else []
    try:
        if len(pair) == 2 and float(pair[0]) < float(pair[1]):
            return []
    except (TypeError, ValueError):
        pass
    return [f"{what} must be (lo, hi) with lo < hi, got {rng!r}"]


def _json(value: object) -> JSON:
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"scorer parameter value {value!r} is not a JSON value")
