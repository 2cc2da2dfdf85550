"""CPDScore (ComperDial, Wakaki et al. 2024, §4 and App. B): LLM-judged humanness scores.

* Turn level: CPDScore-Simple (reads the ``overall - x`` line) and CPDScore-Detail (reads
  ``- Humanness: x``), each with or without the gold reference response (App. B.1.2-B.2.3).
* CPDS-Dialogue (§4, App. B.3): step 1 scores every turn with CPDS-S/D; step 2 puts those turn
  scores and the dialogue's responses into the B.3 prompt, which asks for an intermediate
  "Overall Dialogue Turn Score", a multi-turn "Dialogue Interaction Score" and a "Final Score"
  (the intermediate result adjusted up or down). Intermediate (Table 5) and final are both kept.
* Each score is the mean over ``n_calls`` calls (three in the paper, §4 / footnote 10). No
  temperature is given: default 1.0 with seeds ``seed, seed+1, ...`` (distinct cached requests).
  Unparseable calls are counted, raw text kept, left out of the mean (none parsed -> None).
* Pearson / Spearman / Kendall (:func:`harness.meta.correlation.correlation`) at turn, dialogue (mean of its
  turn scores, §6.3) and system level (mean of its turn scores, footnote 9; of its dialogue
  scores for CPDS-Dial, footnote 11). All calls go through a :class:`CachedBackend`, one
  ``generate()`` per step over all items.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from harness.backends.base import create_backend
from harness.cache import CachedBackend, RequestCache
from harness.meta.correlation import METHODS, correlation
from harness.spec import JudgeSpec, parse_spec
from harness.types import ChatMessage, GenerationConfig, Request
from tasks.cpdscore.prompts import ALL_PROMPTS, DIALOGUE, DIALOGUE_KEYS, NOTES, TURN_PROMPTS, PromptTemplate

VARIANTS = ("simple", "detail")
SPEAKERS = {"user": "Person A", "assistant": "Person B"}
DEFAULT_TEMPERATURE = 1.0
DEFAULT_MAX_TOKENS = 256
SCORE_RANGE = (1.0, 5.0)

# -- score parsing ------------------------------------------------------------------------------

_NUM = r"(\d+(?:\.\d+)?)"
_DENOM = rf"(?:\s*(?:/|out\s+of)\s*{_NUM})?"
_OPEN = r"[\s*#>`\"'(\[]*"
_GENERIC = (
    re.compile(rf"\b(?:score|rating)\b\**\s*(?:[:=\-–—]|is)?\s*\**\s*{_NUM}{_DENOM}", re.I),
    re.compile(rf"\*\*\s*{_NUM}{_DENOM}\s*\*\*"),
    re.compile(rf"{_NUM}\s*(?:/|out\s+of)\s*{_NUM}", re.I),
    re.compile(rf"^{_OPEN}{_NUM}{_DENOM}[\s.*`\"')\]]*$"),
    re.compile(rf"^{_OPEN}{_NUM}{_DENOM}(?=\s*$|\s*\n|\.\s*(?:$|\n)|\s*[,;(\-–—]|\*)"),
)


def _key_pattern(key: str) -> re.Pattern[str]:
    words = r"\s+".join(key.split())  # a regex fragment; spaces match any whitespace
    return re.compile(
        rf"\b{words}\b(?:\s+(?:score|quality|rating))?\**\s*(?:[:=\-–—]\s*)?\**\s*{_NUM}{_DENOM}", re.I
    )


def _value(match: re.Match[str], lo: float, hi: float) -> float | None:
    value, *denom = match.groups()  # every group is a number: the score, then an optional "/N"
    if denom and denom[0] is not None and float(denom[0]) != hi:
        return None  # "4/10" on a 1-5 scale is not a 1-5 score
    return float(value) if lo <= float(value) <= hi else None


def parse_score(
    text: str | None, lo: float = 1.0, hi: float = 5.0, key: str | None = None, fallback: bool = True
) -> float | None:
    """The score in ``text``, or None (absent or outside [lo, hi]; never 0).

    With ``key`` (the evaluation-form line the prompt asks for, e.g. ``"overall"``,
    ``"humanness"``, ``"final score"``; a case-insensitive regex fragment), the last ``key - x`` /
    ``key: x`` / ``**key**: x`` match wins, and an out-of-range value there is None (no guessing
    from other numbers). Without a keyed match and with ``fallback``, the first of ``Score: x``,
    ``**x**``, ``x/5``, a bare number, a leading number (``"4\\n\\nThe response ..."``) that
    occurs, at its last occurrence.
    """
    if not text or not text.strip():
        return None
    patterns = ([_key_pattern(key)] if key else []) + (list(_GENERIC) if fallback or not key else [])
    for pat in patterns:
        if matches := list(pat.finditer(text.strip())):
            return _value(matches[-1], lo, hi)
    return None


# -- results -----------------------------------------------------------------------------------


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


@dataclass
class TurnScore:
    """One turn's CPDS-S/D result; ``score`` is the mean over the parsed calls (None if none)."""

    id: str
    dialogue_id: str | None
    system: str | None
    human: float | None
    scores: list[float | None]  # one per call; None = parse failure
    raw: list[str]
    prompt_hash: str
    cached: int = 0  # calls served from the request cache
    score: float | None = field(init=False)
    n_parsed: int = field(init=False)
    parse_failures: int = field(init=False)

    def __post_init__(self) -> None:
        self.score = _mean(self.scores)
        self.n_parsed = sum(s is not None for s in self.scores)
        self.parse_failures = len(self.scores) - self.n_parsed

    to_dict = asdict


@dataclass
class DialogueScore:
    """One dialogue's CPDS-Dial result: per-call step-2 scores and their means; ``adjustment`` =
    final - intermediate (the step-2 +/-); ``turn_mean`` = mean of the step-1 turn scores."""

    dialogue_id: str | None
    system: str | None
    human: float | None
    finals: list[float | None]  # "Final Score" per call
    intermediates: list[float | None]  # "Overall Dialogue Turn Score" per call
    interactions: list[float | None]  # "Dialogue Interaction Score" per call
    raw: list[str]
    prompt_hash: str
    turns: list[TurnScore] = field(default_factory=list)  # step 1
    score: float | None = field(init=False)
    intermediate: float | None = field(init=False)
    interaction: float | None = field(init=False)
    adjustment: float | None = field(init=False)
    turn_mean: float | None = field(init=False)
    n_parsed: int = field(init=False)
    parse_failures: int = field(init=False)

    def __post_init__(self) -> None:
        self.score, self.intermediate = _mean(self.finals), _mean(self.intermediates)
        self.interaction, self.turn_mean = _mean(self.interactions), _mean(t.score for t in self.turns)
        self.adjustment = (
            self.score - self.intermediate
            if self.score is not None and self.intermediate is not None
            else None
        )
        self.n_parsed = sum(s is not None for s in self.finals)
        self.parse_failures = len(self.finals) - self.n_parsed

    to_dict = asdict


# -- the scorer --------------------------------------------------------------------------------


def _rid(record: Mapping[str, Any], index: int) -> str:
    return str(record.get("id") or f"#{index}")


def render_history(context: Sequence[Mapping[str, Any]]) -> str:
    """Context turns, one per line: ``Person A: ...`` (user) / ``Person B: ...`` (assistant)."""
    lines = []
    for m in context:
        role = m.get("role", "user")
        lines.append(f"{SPEAKERS.get(role, role)}: {m.get('text', m.get('content', ''))}")
    return "\n".join(lines)


def _fmt(score: float | None) -> str:
    return "N/A" if score is None else f"{round(score, 2):g}"


class CPDScorer:
    """CPDScore with one prompt variant. ``judge`` is a spec string (``openai:gpt-4-turbo``,
    ``hf:...``), a :class:`JudgeSpec`, or a ready :class:`CachedBackend`. ``cache`` (for spec
    judges): a :class:`RequestCache`, a SQLite path, or None for the harness default cache.
    ``temperature`` / ``max_tokens`` default to the spec's decoding overrides, else 1.0 / 256."""

    def __init__(
        self,
        judge: str | JudgeSpec | CachedBackend,
        variant: str = "detail",
        with_reference: bool = False,
        n_calls: int = 3,
        temperature: float | None = None,
        seed: int = 0,
        max_tokens: int | None = None,
        dialogue_max_tokens: int | None = None,
        cache: RequestCache | str | os.PathLike[str] | None = None,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown CPDScore variant {variant!r}; expected one of {VARIANTS}")
        if n_calls < 1:
            raise ValueError(f"n_calls must be >= 1, got {n_calls}")
        self.variant, self.with_reference = variant, bool(with_reference)
        self.n_calls, self.seed = n_calls, seed
        self.prompt: PromptTemplate = TURN_PROMPTS[(variant, self.with_reference)]
        self._owned: list[Any] = []
        decoding: dict[str, Any] = {}
        if isinstance(judge, CachedBackend):
            self.cached = judge
        else:
            spec = parse_spec(judge) if isinstance(judge, str) else judge
            if spec.kind == "embed":
                raise ValueError("CPDScore needs a generative judge (hf, vllm, openai, replay), not 'embed'")
            self._owned.append(backend := create_backend(spec))
            if not isinstance(cache, RequestCache):
                self._owned.append(cache := RequestCache(cache))
            self.cached = CachedBackend(backend, cache)
            decoding = {k: v for k, v in spec.decoding.items() if k != "seed"}
        decoding["temperature"] = (
            temperature if temperature is not None else decoding.get("temperature", DEFAULT_TEMPERATURE)
        )
        decoding["max_tokens"] = int(max_tokens or decoding.get("max_tokens", DEFAULT_MAX_TOKENS))
        self.config = GenerationConfig().replace(**decoding)
        self.dialogue_config = self.config.replace(
            max_tokens=int(dialogue_max_tokens or decoding["max_tokens"])
        )

    def variant_of(self, variant: str, with_reference: bool) -> CPDScorer:
        """Another variant sharing this scorer's backend, cache and decoding (not owned by it)."""
        other = CPDScorer(self.cached, variant, with_reference, self.n_calls, seed=self.seed)
        other.config, other.dialogue_config = self.config, self.dialogue_config
        return other

    @property
    def name(self) -> str:
        return f"cpds-{self.variant[0]}-{'ref' if self.with_reference else 'noref'}"

    def close(self) -> None:
        while self._owned:
            self._owned.pop(0).close()

    def __enter__(self) -> CPDScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ------------------------------------------------------------------------------
    def _calls(self, text: str, config: GenerationConfig) -> list[Request]:
        msgs = (ChatMessage("user", text),)
        return [Request(msgs, config.replace(seed=self.seed + k)) for k in range(self.n_calls)]

    def turn_prompt(self, record: Mapping[str, Any], index: int = 0) -> str:
        rid = _rid(record, index)
        response = record.get("response")
        if not isinstance(response, str) or not response.strip():
            raise ValueError(f"record {rid!r} has no response to score")
        values = {
            "history": render_history(record.get("context") or []),
            "response": response,
            "fact": record.get("fact") or record.get("persona") or "None",
        }
        if self.with_reference:
            ref = record.get("reference")
            if not isinstance(ref, str) or not ref.strip():
                raise ValueError(
                    f"record {rid!r} has no reference response; CPDScore-{self.variant.capitalize()} with "
                    "reference needs one (use with_reference=False)"
                )
            values["reference"] = ref
        return self.prompt.render(**values)

    def turn_requests(self, records: Sequence[Mapping[str, Any]]) -> list[Request]:
        return [q for i, r in enumerate(records) for q in self._calls(self.turn_prompt(r, i), self.config)]

    def dialogue_prompt(self, turns: Sequence[Mapping[str, Any]], scores: Sequence[TurnScore]) -> str:
        sfmt, rfmt = DIALOGUE.line_formats
        lines = [sfmt.format(i=k, score=_fmt(s.score)) for k, s in enumerate(scores, 1)]
        resps = [rfmt.format(i=k, response=t["response"]) for k, t in enumerate(turns, 1)]
        return DIALOGUE.render(turn_scores="\n".join(lines), responses="\n".join(resps))

    # -- scoring -------------------------------------------------------------------------------
    def score_turns(self, records: Iterable[Mapping[str, Any]]) -> list[TurnScore]:
        """CPDS-S/D for every record (one batched generate call for all records x n_calls)."""
        records = list(records)
        requests = self.turn_requests(records)
        responses, n, out = self.cached.generate(requests), self.n_calls, []
        for i, rec in enumerate(records):
            chunk = responses[i * n : (i + 1) * n]
            texts, rating = [r.text for r in chunk], rec.get("rating")
            scores = [parse_score(t, *SCORE_RANGE, key=self.prompt.score_key) for t in texts]
            human = float(rating) if rating is not None else None
            meta = (_rid(rec, i), rec.get("dialogue_id"), rec.get("system"), human)
            out.append(
                TurnScore(*meta, scores, texts, requests[i * n].prompt_hash(), sum(r.cached for r in chunk))
            )
        return out

    def score_dialogues(self, dialogues: Iterable[Any]) -> list[DialogueScore]:
        """CPDS-Dialogue. Each dialogue: a mapping with ``turns`` (turn records, in order) and
        optional ``rating`` / ``dialogue_id`` / ``system``, or a plain list of turn records (see
        :func:`group_dialogues`). Step 1 and step 2 are one generate call each."""
        dials = [_as_dialogue(d, i) for i, d in enumerate(dialogues)]
        step1 = self.score_turns([t for d in dials for t in d["turns"]])
        per_dial, pos = [], 0
        for d in dials:
            per_dial.append(step1[pos : pos + len(d["turns"])])
            pos += len(d["turns"])
        prompts = [self.dialogue_prompt(d["turns"], ts) for d, ts in zip(dials, per_dial, strict=True)]
        requests = [q for p in prompts for q in self._calls(p, self.dialogue_config)]
        responses, n, out = self.cached.generate(requests), self.n_calls, []
        for j, d in enumerate(dials):
            texts = [r.text for r in responses[j * n : (j + 1) * n]]
            parsed = {
                k: [parse_score(t, *SCORE_RANGE, key=key, fallback=False) for t in texts]
                for k, key in DIALOGUE_KEYS.items()
            }
            meta = (d["dialogue_id"], d["system"], d["rating"])
            steps = (parsed["final"], parsed["intermediate"], parsed["interaction"])
            out.append(DialogueScore(*meta, *steps, texts, requests[j * n].prompt_hash(), per_dial[j]))
        return out


def _as_dialogue(d: Any, index: int) -> dict[str, Any]:
    turns = list(d["turns"]) if isinstance(d, Mapping) else list(d)
    if not turns:
        raise ValueError(f"dialogue #{index} has no turns")
    if any("response" not in t for t in turns):
        raise ValueError(
            f"dialogue #{index}: CPDS-Dialogue needs turn records (context + response per turn), "
            "not a list of {role, text} utterances"
        )
    meta = d if isinstance(d, Mapping) else {}
    rating = meta.get("rating")
    if rating is None:  # App. C.1.2: without a dialogue-level label, the mean of the turn labels
        rating = _mean(t.get("rating") for t in turns)
    did, system = (
        meta.get("dialogue_id", turns[0].get("dialogue_id")),
        meta.get("system", turns[0].get("system")),
    )
    return {"turns": turns, "dialogue_id": did, "system": system, "rating": _mean([rating])}


def group_dialogues(
    records: Iterable[Mapping[str, Any]], ratings: Mapping[tuple[str | None, str | None], float] | None = None
) -> list[dict[str, Any]]:
    """Turn records -> dialogues, one per (dialogue_id, system) in first-seen order (ComperDial's
    1,485 dialogues = 15 conversations x 99 systems). ``ratings``: dialogue-level human scores by
    (dialogue_id, system); missing -> mean of the turn ratings."""
    groups: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
    for i, r in enumerate(records):
        if r.get("dialogue_id") is None:
            raise ValueError(f"record {_rid(r, i)!r} has no dialogue_id; CPDS-Dialogue groups turns by it")
        groups.setdefault((r["dialogue_id"], r.get("system")), []).append(r)
    ratings = ratings or {}
    return [
        {"dialogue_id": k[0], "system": k[1], "turns": turns, "rating": ratings.get(k)}
        for k, turns in groups.items()
    ]


# -- correlations ------------------------------------------------------------------------------


def _clean(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def _num(xs: Iterable[Any]) -> list[float]:
    return [math.nan if x is None else float(x) for x in xs]


def _corr3(score: Any, human: Any) -> dict[str, dict[str, Any]]:
    f = pd.DataFrame({"score": score, "human": human}).dropna()
    ests = {m: correlation(f["score"].to_numpy(), f["human"].to_numpy(), m) for m in METHODS}
    return {m: {"value": _clean(e.value), "p_value": _clean(e.p_value), "n": e.n} for m, e in ests.items()}


def _by(df: pd.DataFrame, keys: list[str], hcol: str = "human") -> dict[str, dict[str, Any]]:
    g = df.dropna(subset=keys).groupby(keys, sort=True)
    return _corr3(g["score"].mean(), g[hcol].mean())  # pandas means skip NaN (parse failures)


def turn_frame(
    scores: Sequence[TurnScore], dialogue_ratings: Mapping[tuple[str | None, str | None], float] | None = None
) -> pd.DataFrame:
    """Columns id, dialogue_id, system, score (NaN = no parsed call), human; plus
    ``dialogue_human`` when dialogue-level human ratings by (dialogue_id, system) are given."""
    df = pd.DataFrame({k: [getattr(s, k) for s in scores] for k in ("id", "dialogue_id", "system")})
    df["score"], df["human"] = _num(s.score for s in scores), _num(s.human for s in scores)
    if dialogue_ratings is not None:
        df["dialogue_human"] = _num(dialogue_ratings.get((s.dialogue_id, s.system)) for s in scores)
    return df


def dialogue_frame(scores: Sequence[DialogueScore], which: str = "score") -> pd.DataFrame:
    """CPDS-Dial results as dialogue_id, system, score (``which``: score | intermediate |
    interaction | turn_mean), human."""
    df = pd.DataFrame({k: [getattr(d, k) for d in scores] for k in ("dialogue_id", "system")})
    df["score"], df["human"] = _num(getattr(d, which) for d in scores), _num(d.human for d in scores)
    return df


def correlate_levels(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """Turn-based scores vs humans at three levels: turn (rows with a parsed score), dialogue
    (mean turn score per (system, dialogue_id) vs the mean turn rating, or ``dialogue_human`` when
    present, §6.3) and system (mean turn score vs mean turn rating per system, footnote 9). Judge
    means skip parse failures; human means use every rated turn."""
    df = frame.copy()
    for c in ("score", "human", "dialogue_human"):
        if c in df:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    return {
        "turn": _corr3(df["score"], df["human"]),
        "dialogue": _by(
            df, ["system", "dialogue_id"], "dialogue_human" if "dialogue_human" in df else "human"
        ),
        "system": _by(df, ["system"]),
    }


def correlate_dialogue_levels(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """Dialogue-level scores (CPDS-Dial) vs humans: per dialogue, and per system as the mean of
    its dialogue scores (footnote 11)."""
    df = frame.assign(score=pd.to_numeric(frame["score"]), human=pd.to_numeric(frame["human"]))
    return {"dialogue": _corr3(df["score"], df["human"]), "system": _by(df, ["system"])}


# -- runner ------------------------------------------------------------------------------------


def run_cpdscore(
    records: Iterable[Mapping[str, Any]],
    judge_spec: str | JudgeSpec | CachedBackend,
    variants: Sequence[str] = ("simple", "detail"),
    with_reference: Sequence[bool] = (True, False),
    dialogue: bool = True,
    n_calls: int = 3,
    temperature: float | None = None,
    seed: int = 0,
    max_tokens: int | None = None,
    dialogue_max_tokens: int | None = None,
    cache: RequestCache | str | os.PathLike[str] | None = None,
    dialogue_ratings: Mapping[tuple[str | None, str | None], float] | None = None,
) -> dict[str, Any]:
    """Every variant x reference setting (and CPDS-Dial on top of each when ``dialogue``), as a
    results.json-ready dict: ``results[variant][level][method] = {value, p_value, n}`` plus
    parse-failure counts and prompt hashes. ``dialogue_ratings``: dialogue-level human scores by
    (dialogue_id, system) (Table 5); without them dialogue-level humans are turn-rating means."""
    records = list(records)
    args = (n_calls, temperature, seed, max_tokens, dialogue_max_tokens, cache)
    base = CPDScorer(judge_spec, variants[0], with_reference[0], *args)
    out: dict[str, Any] = {
        "method": "CPDScore (ComperDial, Wakaki et al. 2024)",
        "judge": None if isinstance(judge_spec, CachedBackend) else str(judge_spec),
        "judge_identity": base.cached.identity(),
        "n_calls": n_calls,
        "seeds": [seed + k for k in range(n_calls)],
        "decoding": base.config.replace(seed=None).to_dict(),
        "prompts": {name: p.info() for name, p in ALL_PROMPTS.items()},
        "prompt_notes": list(NOTES),
        "results": {},
    }
    try:
        for variant in variants:
            for with_ref in with_reference:
                sc = base.variant_of(variant, with_ref)
                ts = sc.score_turns(records)
                out["results"][sc.name] = {
                    **correlate_levels(turn_frame(ts, dialogue_ratings)),
                    **_counts(sc.prompt, ts, n_calls),
                }
                if dialogue:
                    ds = sc.score_dialogues(group_dialogues(records, dialogue_ratings))
                    out["results"][f"cpds-dial[{sc.name}]"] = {
                        **correlate_dialogue_levels(dialogue_frame(ds, "score")),
                        "intermediate": correlate_dialogue_levels(dialogue_frame(ds, "intermediate")),
                        "step1": sc.name,
                        **_counts(DIALOGUE, ds, n_calls),
                    }
    finally:
        base.close()
    return out


def _counts(prompt: PromptTemplate, items: Sequence[Any], n_calls: int) -> dict[str, Any]:
    return {
        "prompt": prompt.name,
        "prompt_sha256": prompt.sha256,
        "n_items": len(items),
        "unscored_items": sum(x.score is None for x in items),
        "parse_failures": sum(x.parse_failures for x in items),
        "calls": len(items) * n_calls,
    }
