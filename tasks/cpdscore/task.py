"""CPDScore as ``harness run`` tasks (ComperDial App. B): the protocol an LLM judge runs for the
``cpdscore-*`` tasks, the grouping of turn-level rows into dialogues, and the reproduction entry
point that ``harness reproduce upheld`` uses (the same code path as the tasks).

* Turn tasks ``cpdscore-{s,d}-{ref,noref}``: CPDS-Simple / -Detail with or without the reference,
  ``n_calls`` seeded calls averaged (spec option ``n_calls=``, default 3; seeds ``seed .. seed+n-1``
  with ``seed`` the spec's ``seed=`` or the run's ``--seed``); temperature 1.0 unless the spec sets
  one (the paper gives none); unparseable calls are counted and left out of the mean, an item with
  no parsed call is ``None`` (``parse_error``), never 0.
* Dialogue tasks ``cpdscore-dial`` (dialogue-level configs, e.g. ComperDial's ``comperdial-dial``)
  and ``cpdscore-dial-turns`` (turn-level configs grouped into dialogues per (dialogue_id, system),
  e.g. UPHELD): CPDS-Dial, step 1 = CPDS-D without reference (the GPT-4 setting of §6.3) on every
  assistant turn, step 2 = the B.3 prompt; the score is the mean "Final Score" (the ``-intermediate``
  tasks score the "Overall Dialogue Turn Score" of the same calls, Table 5's "intermediate").
  From a dialogue-level item, step 1 scores every assistant turn with the turns before it as context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.cache import CachedBackend, RequestCache
from harness.judges.base import Judge, Verdict
from harness.options import check_option
from harness.tasks import TaskSpec
from harness.types import Response, Usage
from tasks.cpdscore.prompts import ALL_PROMPTS, DIALOGUE, NOTES, PromptTemplate
from tasks.cpdscore.scoring import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    CPDScorer,
    DialogueScore,
    TurnScore,
    correlate_dialogue_levels,
    correlate_levels,
    dialogue_frame,
    turn_frame,
)

DEFAULT_CALLS = 3


@dataclass(frozen=True)
class Protocol:
    """What a ``cpdscore-*`` task runs: ``kind`` turn | dialogue | grouped, the step-1 (or turn)
    prompt variant, and for dialogue kinds which step-2 output is the score."""

    kind: str
    variant: str = "detail"
    with_reference: bool = False
    output: str = "final"  # final | intermediate


PROTOCOLS: dict[str, Protocol] = {
    **{
        f"cpdscore-{v[0]}-{'ref' if r else 'noref'}": Protocol("turn", v, r)
        for v in ("simple", "detail")
        for r in (True, False)
    },
    "cpdscore-dial": Protocol("dialogue"),
    "cpdscore-dial-intermediate": Protocol("dialogue", output="intermediate"),
    "cpdscore-dial-turns": Protocol("grouped"),
    "cpdscore-dial-turns-intermediate": Protocol("grouped", output="intermediate"),
}


class _Metered(CachedBackend):
    """The judge's cached backend, keeping the last batch of responses (usage per item)."""

    def __init__(self, cached: CachedBackend) -> None:
        super().__init__(cached.backend, cached.cache)
        self.last: list[Response] = []

    def generate(self, requests, on_result=None):
        self.last = super().generate(requests, on_result)
        return self.last


def _usage(responses: Sequence[Response]) -> Usage:
    return sum((r.usage for r in responses if not r.cached), Usage())


def scorer_for(judge: Judge, variant: str, with_reference: bool, task: TaskSpec | None = None) -> CPDScorer:
    """A :class:`CPDScorer` on the judge's backend and request cache: ``n_calls`` from the spec option
    (default 3), temperature / max_tokens from the spec's decoding, else the task's (1.0 / 256), seeds
    from the spec's ``seed=`` or the judge's run seed."""
    cached = getattr(judge, "cached", None)
    if not isinstance(cached, CachedBackend):
        raise ValueError(
            f"CPDScore needs a generative judge (hf, vllm, openai, replay), not {judge.spec.kind!r}"
        )
    spec = judge.spec
    gen = task.generation if task is not None else None
    temperature = spec.decoding.get("temperature", gen.temperature if gen else DEFAULT_TEMPERATURE)
    max_tokens = spec.decoding.get("max_tokens", gen.max_tokens if gen else DEFAULT_MAX_TOKENS)
    seed = spec.decoding.get("seed")
    seed = int(seed if seed is not None else (judge.seed or 0))
    n_calls = check_option(
        f"cpdscore judge {spec.raw!r}",
        "n_calls",
        spec.options.get("n_calls", DEFAULT_CALLS),
        int,
        lo=1,
        hi=100,
    )
    return CPDScorer(_Metered(cached), variant, with_reference, n_calls, temperature, seed, max_tokens)


# -- items -> records ---------------------------------------------------------------------------
def _missing(item: Mapping[str, Any], with_reference: bool) -> list[str]:
    out = [] if str(item.get("response") or "").strip() else ["response"]
    if with_reference and not str(item.get("reference") or "").strip():
        out.append("reference")
    return out


def dialogue_turns(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Step-1 turn records of a dialogue-level item: every assistant turn after the first
    utterance, with the turns before it as context."""
    turns = list(item.get("turns") or [])
    out = []
    for k, t in enumerate(turns):
        if k > 0 and t.get("role") == "assistant" and str(t.get("text") or "").strip():
            out.append(
                {
                    "id": f"{item.get('id')}#t{k}",
                    "context": turns[:k],
                    "response": t["text"],
                    "dialogue_id": item.get("dialogue_id"),
                    "system": item.get("system"),
                    "persona": item.get("persona"),
                    "rating": None,
                }
            )
    return out


def group_turns(task: TaskSpec, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``prepare`` hook of ``cpdscore-dial-turns``: turn rows -> one dialogue item per
    (dataset, language, dialogue_id, system), first-seen order. Human score = mean of the turns'
    human ratings (ComperDial App. C.1.2: without a dialogue-level label, the mean of the turn labels);
    ``turns`` (for non-LLM judges) = the last turn's context followed by its response."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for i, r in enumerate(rows):
        if r.get("dialogue_id") is None:
            raise ValueError(
                f"task {task.name!r}: row {r.get('id', i)!r} (config {r.get('dataset')!r}) has no dialogue_id; "
                "CPDS-Dial groups turns by it — use a dataset whose turn rows carry dialogue_id, or a turn task"
            )
        groups.setdefault(
            (r.get("dataset"), r.get("language"), r["dialogue_id"], r.get("system")), []
        ).append(r)
    out = []
    for (ds, lang, did, system), recs in groups.items():
        humans = [h for h in (task.human_rating(r) for r in recs) if h is not None]
        last = recs[-1]
        out.append(
            {
                "id": f"{did}::{system}",
                "item_id": str(did),
                "dataset": ds,
                "language": lang,
                "level": "dialogue",
                "dialogue_id": did,
                "system": system,
                "persona": last.get("persona"),
                "scene": last.get("scene"),
                "turns": [
                    *last.get("context", []),
                    {"role": last.get("response_role") or "assistant", "text": last.get("response") or ""},
                ],
                "turn_records": list(recs),
                "rating": sum(humans) / len(humans) if humans else None,
                "dimension": last.get("dimension"),
                "labels": [],
                "aggregates": [],
            }
        )
    return out


# -- scoring -----------------------------------------------------------------------------------
def turn_scores(
    sc: CPDScorer, items: Sequence[Mapping[str, Any]]
) -> tuple[list[TurnScore | None], list[Usage]]:
    """CPDS-S/D per item (None for an item without a response / reference), one generate() call."""
    ok = [i for i, it in enumerate(items) if not _missing(it, sc.with_reference)]
    scores = sc.score_turns([items[i] for i in ok]) if ok else []
    # the scorer's backend is the recording wrapper above, which keeps the last responses
    n, last = sc.n_calls, sc.cached.last if ok else []  # type: ignore[attr-defined]
    out: list[TurnScore | None] = [None] * len(items)
    usage = [Usage() for _ in items]
    for j, i in enumerate(ok):
        out[i], usage[i] = scores[j], _usage(last[j * n : (j + 1) * n])
    return out, usage


def dialogue_scores(sc: CPDScorer, dialogues: Sequence[Mapping[str, Any]]) -> list[DialogueScore | None]:
    """CPDS-Dial per dialogue (``turns``: the step-1 turn records); None when it has none."""
    ok = [i for i, d in enumerate(dialogues) if d["turns"]]
    scored = sc.score_dialogues([dialogues[i] for i in ok]) if ok else []
    out: list[DialogueScore | None] = [None] * len(dialogues)
    for j, i in enumerate(ok):
        out[i] = scored[j]
    return out


def _dialogues(items: Sequence[Mapping[str, Any]], grouped: bool) -> list[dict[str, Any]]:
    return [
        {
            "turns": list(it.get("turn_records") or []) if grouped else dialogue_turns(it),
            "dialogue_id": it.get("dialogue_id") or it.get("id"),
            "system": it.get("system"),
            "rating": it.get("rating"),
        }
        for it in items
    ]


def _raw(texts: Sequence[str]) -> str:
    return "\n".join(f"[call {k}] {t}" for k, t in enumerate(texts, 1))


def score_items(judge: Judge, task: TaskSpec, items: Sequence[Mapping[str, Any]]) -> list[Verdict]:
    """The ``procedure`` of every ``cpdscore-*`` task: verdicts for ``items`` with ``judge``."""
    proto = PROTOCOLS.get(task.name)
    if proto is None:
        raise ValueError(f"task {task.name!r} is not a CPDScore task ({', '.join(PROTOCOLS)})")
    sc = scorer_for(judge, proto.variant, proto.with_reference, task)
    seeds = [sc.seed + k for k in range(sc.n_calls)]
    if proto.kind == "turn":
        scores, usage = turn_scores(sc, items)
        out = []
        for it, s, u in zip(items, scores, usage, strict=True):
            if s is None:
                out.append(
                    Verdict(
                        None,
                        "invalid_item",
                        "",
                        "",
                        detail=f"empty {', '.join(_missing(it, proto.with_reference))}",
                    )
                )
                continue
            extra = {
                "calls": s.scores,
                "seeds": seeds,
                "prompt": sc.prompt.name,
                "prompt_sha256": sc.prompt.sha256,
            }
            status, detail = (
                ("ok", "") if s.score is not None else ("parse_error", "no call gave a score in 1-5")
            )
            detail = detail or (
                f"{s.parse_failures} of {sc.n_calls} calls unparseable" if s.parse_failures else ""
            )
            out.append(
                Verdict(
                    s.score,
                    status,
                    _raw(s.raw),
                    s.prompt_hash,
                    detail=detail,
                    usage=u,
                    cached=s.cached == sc.n_calls,
                    extra=extra,
                )
            )
        judge.usage = judge.usage + sum(usage, Usage())
        return out
    dials = _dialogues(items, grouped=proto.kind == "grouped")
    scored = dialogue_scores(sc, dials)
    out = []
    for d, ds in zip(dials, scored, strict=True):
        if ds is None:
            out.append(Verdict(None, "invalid_item", "", "", detail="no assistant turn to score (step 1)"))
            continue
        value = ds.score if proto.output == "final" else ds.intermediate
        key = "Final Score" if proto.output == "final" else "Overall Dialogue Turn Score"
        extra = {
            "final": ds.score,
            "intermediate": ds.intermediate,
            "interaction": ds.interaction,
            "turn_mean": ds.turn_mean,
            "finals": ds.finals,
            "intermediates": ds.intermediates,
            "seeds": seeds,
            "step1": sc.name,
            "step1_failures": sum(t.parse_failures for t in ds.turns),
            "n_turns": len(d["turns"]),
            "prompt": DIALOGUE.name,
            "prompt_sha256": DIALOGUE.sha256,
        }
        status = "ok" if value is not None else "parse_error"
        out.append(
            Verdict(
                value,
                status,
                _raw(ds.raw),
                ds.prompt_hash,
                extra=extra,
                detail="" if value is not None else f"no step-2 call gave a {key} in 1-5",
            )
        )
    return out


# -- the reproduction path (``harness reproduce upheld --cpdscore-judge``) ----------------------
def _counts(prompt: PromptTemplate, items: Sequence[Any], n_calls: int) -> dict[str, Any]:
    return {
        "prompt": prompt.name,
        "prompt_sha256": prompt.sha256,
        "n_items": len(items),
        "unscored_items": sum(x.score is None for x in items),
        "parse_failures": sum(x.parse_failures for x in items),
        "calls": len(items) * n_calls,
    }


def reproduce_cpdscore(
    records: Sequence[Mapping[str, Any]],
    judge_spec: str,
    cache: RequestCache,
    n_calls: int = DEFAULT_CALLS,
    seed: int = 0,
    dialogue: bool = True,
) -> dict[str, Any]:
    """Every turn task (CPDS-S/D ± reference) and CPDS-Dial over the grouped turns on top of each,
    with the ``cpdscore-*`` tasks' code, as ``results[variant][level][method] = {value, p_value, n}``
    (the layout of :func:`tasks.cpdscore.scoring.run_cpdscore`)."""
    import dataclasses

    from harness.judges import load_judge
    from harness.spec import parse_spec

    js = parse_spec(judge_spec)
    js = dataclasses.replace(js, options={**js.options, "n_calls": n_calls})
    judge = load_judge(js, cache, seed=seed)
    try:
        base = scorer_for(judge, "detail", False)
        out: dict[str, Any] = {
            "method": "CPDScore (ComperDial, Wakaki et al. 2024) via the cpdscore-* tasks (tasks/cpdscore/task.py)",
            "judge": judge_spec,
            "judge_identity": base.cached.identity(),
            "n_calls": n_calls,
            "seeds": [base.seed + k for k in range(n_calls)],
            "decoding": base.config.replace(seed=None).to_dict(),
            "prompts": {name: p.info() for name, p in ALL_PROMPTS.items()},
            "prompt_notes": list(NOTES),
            "results": {},
        }
        groups = group_turns(_HUMAN_TASK, records) if dialogue else []
        for variant in ("simple", "detail"):
            for with_ref in (True, False):
                sc = scorer_for(judge, variant, with_ref)
                scored, _ = turn_scores(sc, records)
                ts = [s for s in scored if s is not None]
                out["results"][sc.name] = {
                    **correlate_levels(turn_frame(ts)),
                    **_counts(sc.prompt, ts, n_calls),
                }
                if dialogue:
                    ds = [d for d in dialogue_scores(sc, _dialogues(groups, grouped=True)) if d is not None]
                    out["results"][f"cpds-dial[{sc.name}]"] = {
                        **correlate_dialogue_levels(dialogue_frame(ds, "score")),
                        "intermediate": correlate_dialogue_levels(dialogue_frame(ds, "intermediate")),
                        "step1": sc.name,
                        **_counts(DIALOGUE, ds, n_calls),
                    }
    finally:
        judge.close()
    return out


# A task stand-in for group_turns outside a run: the human score of a turn row is its ``rating``.
_HUMAN_TASK = TaskSpec(
    name="cpdscore-dial-turns",
    description="",
    builder="upheld",
    configs=("*",),
    level="dialogue",
    dimension="overall",
    languages=("en",),
    templates={},
)
