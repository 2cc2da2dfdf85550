"""Scoring methods of LLM judges as registered objects (:class:`~harness.scorers.base.Scorer`).

A task names its method with an instance, e.g. ``TaskSpec(..., scorer=ParseScore(range=(0, 100)))``;
the LLM judge asks it what to request and how to read the response. Built in:

========================  =====================================================================
``p_yes``                 :class:`PYes` — P(Yes) from label log-probs (xDial-Eval §4)
``expected_score``        :class:`ExpectedScore` — probability-weighted 1-5 digit score (G-Eval)
``parse_yes_no``          :class:`ParseYesNo` — written yes/no verdict (UPHELD App. H)
``parse_likert``          :class:`ParseLikert` — written integer Likert verdict (UPHELD App. H)
``parse_score``           :class:`ParseScore` — a score on any scale written in free text (MEEP)
``gptscore``              :class:`GPTScore` — log-prob of a word in an echoed continuation
``issues_json``           :class:`IssuesJSON` — JSON issue labels + overall score (MEDAL)
========================  =====================================================================

:data:`SCORERS` maps names to classes (``harness ls scorers``); a plug-in adds a scorer class
through the entry-point group ``dialeval_harness.scorers``, and :func:`make_scorer` builds one by
name from parameters (``make_scorer("parse_score", range=[1, 3], integer=True)``).
"""

from __future__ import annotations

from harness import plugins
from harness.registry import Registry
from harness.scorers.base import Scorer, ScorerOutput, range_problems, response_extra
from harness.scorers.issues import IssuesJSON
from harness.scorers.logprob import ExpectedScore, GPTScore, PYes
from harness.scorers.written import ParseLikert, ParseScore, ParseYesNo

BUILTIN_SCORERS: tuple[type[Scorer], ...] = (
    PYes,
    ExpectedScore,
    ParseYesNo,
    ParseLikert,
    ParseScore,
    GPTScore,
    IssuesJSON,
)


def _is_scorer_class(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, Scorer) and bool(obj.name)


SCORERS: Registry[type[Scorer]] = Registry(
    "scoring method",
    plugins.SCORERS_GROUP,
    accepts=_is_scorer_class,
    builtins=lambda: BUILTIN_SCORERS,
    summary=lambda cls: cls.summary,
)


def register_scorer(cls: type[Scorer]) -> type[Scorer]:
    """Register a :class:`Scorer` subclass under its ``name`` (usable as a class decorator)."""
    if not _is_scorer_class(cls):
        raise TypeError(f"register_scorer expects a Scorer subclass with a name, got {cls!r}")
    return SCORERS.register(cls)


def make_scorer(name: str, **params: object) -> Scorer:
    """The scorer registered as ``name`` with ``params`` (JSON / YAML values: lists become tuples)."""
    return SCORERS.get(name).from_params(params)


__all__ = [
    "BUILTIN_SCORERS",
    "SCORERS",
    "ExpectedScore",
    "GPTScore",
    "IssuesJSON",
    "PYes",
    "ParseLikert",
    "ParseScore",
    "ParseYesNo",
    "ScorerOutput",
    "Scorer",
    "make_scorer",
    "range_problems",
    "register_scorer",
    "response_extra",
]
