"""Pairwise judging: position bias and self-consistency of a judge comparing two conversations.

Every pair (x, y) is shown in both orders — x first ("AB") and y first ("BA") — through the
request cache. :func:`position_consistency` maps the answers back to x / y / tie and counts
flips (the preferred conversation changes with the order), the share of decisive answers that
pick the first-shown option (position bias; binomial test against 0.5) and MEDAL App. C.5's
rule (x wins if preferred in both orders, loses if y is preferred in both, tie otherwise).
:func:`self_consistency` measures agreement of k sampled answers. See ``docs/robustness.md``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from scipy import stats

from harness.cache import CachedBackend, RequestCache
from harness.executors import ExecutorConfig, executor_scope
from harness.jsontypes import JSONObject
from harness.provenance import environment, harness_info, redact
from harness.robustness.records import (
    MedalC5,
    Pair,
    PairAnswer,
    PairSide,
    PositionConsistency,
    SelfConsistency,
)
from harness.spec import BACKEND_KINDS, JudgeSpec, parse_spec
from harness.tasks import PromptTemplate
from harness.types import GenerationConfig, Request, Response

SCHEMA_VERSION = "1.0"
JUDGE_ONLY_OPTIONS = ("reasoning",)

DEFAULT_PAIRWISE_TEMPLATE = PromptTemplate(
    name="pairwise-naturalness",
    source="dialeval-harness (MEDAL App. C.5 protocol; prompt not published)",
    language="en",
    version="1",
    user=(
        "You will compare two conversations between a user and a chatbot.\n\n"
        "Conversation A:\n{first}\n\n"
        "Conversation B:\n{second}\n\n"
        "Which conversation is more natural and more culturally appropriate for its language and "
        "setting? Judge the chatbot's turns. Answer with exactly one word: A, B or Tie."
    ),
)
DEFAULT_GENERATION = GenerationConfig(temperature=0.0, max_tokens=16)


# -- parsing -------------------------------------------------------------------------------------
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_STRIP = " \t\r\n*_`\"'“”‘’()[]{}.,:;!-–—"
_TIE_WORDS = {"tie", "equal", "draw", "same", "neither", "both", "tied", "equally"}
_KEYWORD = re.compile(
    r"(?i:answer|verdict|choice|winner|preference|preferred|better)\s*(?i:is|would be)?\s*[:：=\-]?\s*"
    r"[*_`\"'“(\[]*\s*(?:(?i:conversation|option)\s+)?(?P<c>[AB]|(?i:tie))\b"
)
_LEADING = re.compile(
    r"^[\s*_`\"'“(\[]*(?P<c>[AB])(?:[*_`\"'”)\]]*\s*(?:$|[.:,;!\-–—\n)])|\s+(?i:is|was|because|seems|feels|sounds)\b)"
)
_IS_BETTER = re.compile(
    r"(?i:conversation|option)\s+(?P<c>[AB])\s+(?i:is|was|seems|feels)\s+(?i:more|better|preferable|preferred)\b"
)
_MENTION = re.compile(r"(?i:conversation|option)\s+(?P<c>[AB])\b")
_TIE = re.compile(r"(?i)\b(tie|equal(?:ly)?|draw|no preference|neither is better)\b")


def parse_choice(text: str | None) -> str | None:
    """``"A"``, ``"B"``, ``"tie"`` or None (unparseable) from a judge's written answer."""
    if not text:
        return None
    t = _THINK.sub("", text).strip()
    bare = t.strip(_STRIP)
    if bare in ("A", "B", "a", "b"):
        return bare.upper()
    if bare.lower() in _TIE_WORDS:
        return "tie"
    hits = list(_KEYWORD.finditer(t))
    if hits:
        c = hits[-1].group("c")
        return "tie" if c.lower() == "tie" else c
    m = _LEADING.match(t) or _IS_BETTER.search(t)
    if m:
        return m.group("c")
    mentions = {m.group("c") for m in _MENTION.finditer(t)}
    if len(mentions) == 1:
        return mentions.pop()
    if _TIE.search(t):
        return "tie"
    return None


def choose_by_logprobs(logprobs: Mapping[str, float | None] | None) -> str | None:
    """The most probable label (``"A"``, ``"B"`` or ``"tie"``) of a reply's label log-probs.

    A label without a log-prob (outside a server's top log-probs) is less probable than any label
    that has one; no label with a log-prob, or two labels equally probable: None (counted as a
    parse failure, never guessed)."""
    present = {c: v for c, v in (logprobs or {}).items() if v is not None and math.isfinite(v)}
    if not present:
        return None
    best = max(present.values())
    top = [c for c, v in present.items() if v == best]
    return _norm(top[0]) if len(top) == 1 else None


def _check_choices(choices: Sequence[str]) -> tuple[str, ...]:
    labels = tuple(str(c) for c in choices)
    try:
        norm = [_norm(c) for c in labels]
    except ValueError as e:
        raise ValueError(f"pairwise choices: {e}") from None
    if len(set(norm)) != len(norm) or not {"A", "B"} <= set(norm):
        raise ValueError(f"pairwise choices must name A and B once each (and Tie at most once), got {labels}")
    return labels


# -- statistics ----------------------------------------------------------------------------------
def _norm(c: str | None) -> str | None:
    if c is None:
        return None
    s = str(c).strip()
    if s.upper() in ("A", "B"):
        return s.upper()
    if s.lower() == "tie":
        return "tie"
    raise ValueError(f"unknown pairwise choice {c!r}; expected 'A', 'B', 'tie' or None")


def _winner(choice: str | None, x_first: bool) -> str | None:
    if choice is None or choice == "tie":
        return choice
    return ("x" if choice == "A" else "y") if x_first else ("y" if choice == "A" else "x")


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def position_consistency(
    order_ab: Sequence[str | None], order_ba: Sequence[str | None]
) -> PositionConsistency:
    """Consistency of a judge's choices under swapped order (see the module docstring).

    ``order_ab[i]``: the choice for pair i with x shown first ("A" = first shown, "B" = second,
    "tie", None = parse failure); ``order_ba[i]``: with y shown first. Pairs with a parse failure
    in either order are left out of consistency and win/tie/loss; position bias uses every
    decisive (A/B) answer that parsed."""
    if len(order_ab) != len(order_ba):
        raise ValueError(f"order_ab and order_ba differ in length: {len(order_ab)} vs {len(order_ba)}")
    ab = [_norm(c) for c in order_ab]
    ba = [_norm(c) for c in order_ba]
    wins = [(_winner(a, True), _winner(b, False)) for a, b in zip(ab, ba, strict=True)]
    valid = [(a, b) for a, b in wins if a is not None and b is not None]
    consistent = sum(a == b for a, b in valid)
    n = len(valid)
    medal = Counter(
        "win" if (a, b) == ("x", "x") else "loss" if (a, b) == ("y", "y") else "tie" for a, b in valid
    )
    answers = [c for c in ab + ba if c is not None]
    decisive = [c for c in answers if c in ("A", "B")]
    first = sum(c == "A" for c in decisive)
    binom = stats.binomtest(first, len(decisive), 0.5) if decisive else None
    return {
        "n": len(ab),
        "n_valid": n,
        "parse_failures": len(ab) - n,
        "parse_failures_ab": sum(c is None for c in ab),
        "parse_failures_ba": sum(c is None for c in ba),
        "consistent": consistent,
        "flips": n - consistent,
        "consistency_rate": _rate(consistent, n),
        "flip_rate": _rate(n - consistent, n),
        "n_decisive": len(decisive),
        "first_position": first,
        "first_position_rate": _rate(first, len(decisive)),
        "tie_answers": sum(c == "tie" for c in answers),
        "binomtest_p": float(binom.pvalue) if binom is not None else None,
        "medal_c5": _medal_c5(medal, n),
    }


def _medal_c5(medal: Counter[str], n: int) -> MedalC5:
    return {
        "win": medal.get("win", 0),
        "tie": medal.get("tie", 0),
        "loss": medal.get("loss", 0),
        "win_rate": _rate(medal.get("win", 0), n),
        "tie_rate": _rate(medal.get("tie", 0), n),
        "loss_rate": _rate(medal.get("loss", 0), n),
    }


def self_consistency(samples: Sequence[Sequence[str | None]]) -> SelfConsistency:
    """Agreement of k repeated answers per unit: the mean over units (with >= 2 parsed answers) of
    the share of agreeing answer pairs, and of the majority answer's share of the parsed answers."""
    agree, major, unanimous = [], [], 0
    failures = total = 0
    for answers in samples:
        total += len(answers)
        ok = [a for a in answers if a is not None]
        failures += len(answers) - len(ok)
        if len(ok) < 2:
            continue
        combos = list(itertools.combinations(ok, 2))
        agree.append(sum(a == b for a, b in combos) / len(combos))
        top = Counter(ok).most_common(1)[0][1]
        major.append(top / len(ok))
        unanimous += top == len(ok)
    return {
        "n_units": len(samples),
        "n_scored": len(agree),
        "n_answers": total,
        "parse_failures": failures,
        "mean_pairwise_agreement": sum(agree) / len(agree) if agree else None,
        "mean_majority_share": sum(major) / len(major) if major else None,
        "unanimous_rate": _rate(unanimous, len(agree)),
    }


# -- pair files ----------------------------------------------------------------------------------
def _check_side(path: Path, line: int, key: str, value: object) -> PairSide:
    from harness.data.schema import DataValidationError

    def bad(problem: str) -> DataValidationError:
        return DataValidationError(path, line, key, problem, row_label="line", column_label="field")

    if isinstance(value, str):
        if not value.strip():
            raise bad("empty text")
        return value
    if not isinstance(value, list) or not value:
        raise bad(f"must be a non-empty text or a list of {{role, text}} turns, got {type(value).__name__}")
    for i, t in enumerate(value):
        if (
            not isinstance(t, dict)
            or t.get("role") not in ("user", "assistant")
            or not isinstance(t.get("text"), str)
        ):
            raise bad(f"turn {i} must be {{'role': 'user'|'assistant', 'text': str}}, got {t!r}"[:300])
    return [{"role": str(t["role"]), "text": str(t["text"])} for t in value]


def load_pairs(path: str | Path) -> list[Pair]:
    """Read a JSON Lines pair file ({id, a, b, language?} per line); errors name file, line, field."""
    from harness.data.schema import DataValidationError
    from harness.languages import language as lookup_language

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"pair file not found: {p}")
    pairs: list[Pair] = []
    seen: dict[str, int] = {}
    for line, text in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue

        def bad(fld: str, problem: str, line: int = line) -> DataValidationError:
            return DataValidationError(p, line, fld, problem, row_label="line", column_label="field")

        try:
            rec = json.loads(text)
        except json.JSONDecodeError as e:
            raise bad("<json>", f"invalid JSON: {e}") from e
        if not isinstance(rec, dict):
            raise bad("<json>", f"each line must be a JSON object, got {type(rec).__name__}")
        for key in ("id", "a", "b"):
            if key not in rec or rec[key] is None:
                raise bad(key, "missing")
        pid = str(rec["id"])
        if pid in seen:
            raise bad("id", f"duplicate id {pid!r} (first on line {seen[pid]})")
        seen[pid] = line
        lang = rec.get("language")
        if lang is not None:
            try:
                lang = lookup_language(str(lang)).code
            except KeyError as e:
                raise bad("language", str(e.args[0])) from e
        pairs.append(
            {
                "id": pid,
                "a": _check_side(p, line, "a", rec["a"]),
                "b": _check_side(p, line, "b", rec["b"]),
                "language": lang,
            }
        )
    if not pairs:
        raise ValueError(f"{p}: no pairs")
    return pairs


def _answer(
    pid: str,
    language: str | None,
    order: str,
    repeat: int,
    c: str | None,
    resp: Response,
    prompt_hash: str,
    by_logprobs: bool,
) -> PairAnswer:
    winner = _winner(c, order == "AB")
    if by_logprobs:  # the label log-probs the answer was chosen by, before the prompt hash
        return {
            "id": pid,
            "language": language,
            "order": order,
            "repeat": repeat,
            "choice": c,
            "winner": winner,
            "raw": resp.text,
            "choice_logprobs": resp.choice_logprobs,
            "prompt_hash": prompt_hash,
            "cached": resp.cached,
        }
    return {
        "id": pid,
        "language": language,
        "order": order,
        "repeat": repeat,
        "choice": c,
        "winner": winner,
        "raw": resp.text,
        "prompt_hash": prompt_hash,
        "cached": resp.cached,
    }


def render_side(side: str | Sequence[Mapping[str, str]]) -> str:
    if isinstance(side, str):
        return side
    names = {"user": "User", "assistant": "Chatbot"}
    return "\n".join(f"{names.get(t['role'], t['role'])}: {t['text']}" for t in side)


# -- runner --------------------------------------------------------------------------------------
@dataclass
class PairwiseReport:
    judge: str
    repeats: int
    results: dict[str, PositionConsistency]  # language | "all"
    answers: list[PairAnswer]
    self_consistency: SelfConsistency | None = None
    warnings: list[str] = field(default_factory=list)
    provenance: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        from harness.run.results import _json_safe

        return _json_safe(
            {
                "schema_version": SCHEMA_VERSION,
                "kind": "pairwise_position_consistency",
                "judge": self.judge,
                "repeats": self.repeats,
                "results": self.results,
                "self_consistency": self.self_consistency,
                "warnings": self.warnings,
                "provenance": self.provenance,
                "answers": self.answers,
            }
        )

    def to_markdown(self) -> str:
        f = _fmt
        lines = [
            f"# Pairwise position consistency — judge `{self.judge}`",
            "",
            f"Each pair judged in both orders{f', {self.repeats} samples each' if self.repeats > 1 else ''}. "
            "MEDAL App. C.5: x wins if preferred in both orders, loses if y is, tie otherwise.",
            "",
            "| lang | n | fail | flips | flip rate | first-position rate | binomial p | win / tie / loss |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for lang, r in self.results.items():
            m = r["medal_c5"]
            lines.append(
                f"| {lang} | {r['n']} | {r['parse_failures']} | {r['flips']} | {f(r['flip_rate'], '.0%')} | "
                f"{f(r['first_position_rate'], '.0%')} | {f(r['binomtest_p'], '.3g')} | {m['win']} / {m['tie']} / {m['loss']} |"
            )
        if self.self_consistency:
            s = self.self_consistency
            lines += [
                "",
                f"Self-consistency over {s['n_scored']} (pair, order) units: mean pairwise agreement "
                f"{f(s['mean_pairwise_agreement'])}, mean majority share {f(s['mean_majority_share'])}, "
                f"unanimous {f(s['unanimous_rate'], '.0%')}.",
            ]
        lines += [f"\n> warning: {w}" for w in self.warnings]
        return "\n".join(lines) + "\n"

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        from harness.run.results import _atomic_write_bytes

        out = Path(out_dir)
        paths = {"json": out / "pairwise.json", "markdown": out / "pairwise.md"}
        payload = json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False)
        _atomic_write_bytes(paths["json"], payload.encode("utf-8"))
        _atomic_write_bytes(paths["markdown"], self.to_markdown().encode("utf-8"))
        return paths


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def run_pairwise(
    judge_spec: str | JudgeSpec,
    pairs: Sequence[Pair],
    cache: RequestCache | None = None,
    template: PromptTemplate = DEFAULT_PAIRWISE_TEMPLATE,
    seed: int = 0,
    repeats: int = 1,
    batch_size: int = 32,
    executor: ExecutorConfig | None = None,
    choices: Sequence[str] | None = None,
) -> PairwiseReport:
    """Ask the judge which of each pair's conversations is better, in both orders (× ``repeats``).

    Greedy by default (``temperature=0``, ``max_tokens=16``; spec ``key=value`` overrides apply).
    ``choices`` (e.g. ``("A", "B", "Tie")``): nothing is parsed; each label's log-prob as the start
    of the reply is scored (``Request.choices``, one generated token) and the most probable label
    is the answer (:func:`choose_by_logprobs`), for judges whose written answers do not parse.
    ``repeats > 1`` draws k samples per order with seeds ``seed .. seed+k-1`` at the spec's
    temperature, for :func:`self_consistency`. ``executor`` (default local) runs the requests on Ray
    workers (``batch_size`` per worker shard)."""
    from harness.backends.base import create_backend

    if repeats < 1 or batch_size < 1:
        raise ValueError(f"repeats and batch_size must be >= 1, got {repeats} and {batch_size}")
    js = parse_spec(judge_spec) if isinstance(judge_spec, str) else judge_spec
    llm_kinds = BACKEND_KINDS.names()  # hf, vllm, openai, replay and any plug-in backend
    if js.kind not in llm_kinds:
        raise ValueError(
            f"pairwise judging needs a generative judge ({', '.join(llm_kinds)}), not {js.kind!r}"
        )
    if not {"first", "second"} <= template.placeholders():
        raise ValueError(f"pairwise template {template.name!r} needs the fields {{first}} and {{second}}")
    pairs = list(pairs)
    ids = [str(p["id"]) for p in pairs]
    if len(set(ids)) != len(ids):
        raise ValueError("pair ids must be unique")
    labels = _check_choices(choices) if choices is not None else None
    cache = cache if cache is not None else RequestCache(enabled=False)
    base = js.generation_config(DEFAULT_GENERATION)
    if labels is not None:
        base = base.replace(max_tokens=1)
    warns = []
    if repeats > 1 and base.greedy:
        warns.append("repeats > 1 with temperature 0: samples differ only by backend nondeterminism")
    jobs: list[tuple[int, str, int, Request]] = []
    for r in range(repeats):
        cfg = base
        if repeats > 1:
            cfg = base.replace(seed=seed + r)
        elif not base.greedy and base.seed is None:
            cfg = base.replace(seed=seed)
        for i, p in enumerate(pairs):
            for order, (fst, snd) in (("AB", (p["a"], p["b"])), ("BA", (p["b"], p["a"]))):
                msgs = template.render({"first": render_side(fst), "second": render_side(snd)})
                jobs.append((i, order, r, Request(messages=msgs, config=cfg, choices=labels)))
    backend_spec = JudgeSpec(
        js.kind,
        js.target,
        js.revision,
        {},
        {k: v for k, v in js.options.items() if k not in JUDGE_ONLY_OPTIONS},
    )
    ex = executor or ExecutorConfig()
    if ex.distributed:
        ex = dataclasses.replace(ex, shard_size=batch_size)
    t0 = time.perf_counter()
    with executor_scope(ex, seed=seed) as scope, create_backend(backend_spec) as backend:
        cached = CachedBackend(backend, cache)
        responses = []
        step = scope.items_per_call(batch_size)
        for s in range(0, len(jobs), step):
            responses += cached.generate([j[3] for j in jobs[s : s + step]])
        identity, backend_stats = backend.identity(), backend.stats.to_dict()
        executor_info = scope.describe()
    answers: list[PairAnswer] = []
    choice: dict[tuple[int, str, int], str | None] = {}
    for (i, order, r, req), resp in zip(jobs, responses, strict=True):
        c = parse_choice(resp.text) if labels is None else choose_by_logprobs(resp.choice_logprobs)
        choice[i, order, r] = c
        answers.append(
            _answer(
                ids[i], pairs[i].get("language"), order, r, c, resp, req.prompt_hash(), labels is not None
            )
        )

    def stats_for(idx: list[int]) -> PositionConsistency:
        ab = [choice[i, "AB", r] for r in range(repeats) for i in idx]
        ba = [choice[i, "BA", r] for r in range(repeats) for i in idx]
        return position_consistency(ab, ba)

    langs: list[str] = sorted({lang for p in pairs if (lang := p.get("language"))})
    results = {
        lang: stats_for([i for i, p in enumerate(pairs) if p.get("language") == lang]) for lang in langs
    }
    results["all"] = stats_for(list(range(len(pairs))))
    sc = None
    if repeats > 1:
        units = [
            [_winner(choice[i, o, r], o == "AB") for r in range(repeats)]
            for i in range(len(pairs))
            for o in ("AB", "BA")
        ]
        sc = self_consistency(units)
    provenance: dict[str, object] = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "judge": {
            "spec": redact(str(js)),
            "identity": identity,
            "decoding": base.to_dict(),
            "seeds": list(range(seed, seed + repeats)) if repeats > 1 else None,
            "choices": list(labels) if labels is not None else None,
        },
        "template": template.describe(),
        "n_pairs": len(pairs),
        "usage": {"backend": backend_stats},
        "executor": executor_info,
        "cache": {
            "enabled": cache.enabled,
            "path": str(cache.path) if cache.enabled else None,
            **cache.stats.to_dict(),
        },
        "elapsed_s": time.perf_counter() - t0,
        "harness": harness_info(),
        "environment": environment(),
    }
    return PairwiseReport(redact(str(js)), repeats, results, answers, sc, warns, provenance)
