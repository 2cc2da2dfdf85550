"""Self-supervised evaluator training data from plain dialogues (xDial-Eval §4, App. C.1).

xDial-Eval fine-tunes its LLM metrics on the synthetic data of two BERT-based metrics, with a
balanced number of positive and negative instances (§4, footnote 9):

* **PoE / xPoE-Turn** — turn-level *relevance*: a context and a response; positive = the real next
  utterance, negative = an irrelevant one (:func:`relevance_pairs`). Negatives are *random*
  utterances of other dialogues in the same language, or *hard* ones: an utterance of the same
  dialogue at another position (on topic, but not the right continuation).
* **FineD-Eval / xFined-Dial** — dialogue-level *coherence*: positive = a real human–human
  dialogue, negative = an incoherent one (:func:`coherence_pairs`) made by *utterance-order
  shuffling* (a permutation that changes the text sequence; two utterances are swapped) or
  *utterance replacement* (k ≥ 1 utterances replaced by utterances of other dialogues in the same
  language).

Guarantees (tested): a negative is never the positive (neither the same position nor the same
text, compared ignoring case, punctuation and whitespace: :func:`norm_text`); every negative comes from the language of its
positive; the output is balanced (as many positives as negatives: with ``negatives_per_positive``
> 1 each positive is repeated once per negative and ``meta["pair"]`` links a positive copy with its
negative, which suits pairwise ranking losses); the output is a function of the input and ``seed``.
A positive for which no valid negative exists is dropped and counted, never kept unpaired.

Every function returns a ``list[Example]`` carrying a :class:`PairReport` as ``.report``.
"""

from __future__ import annotations

import hashlib
import math
import random
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from finetune.data.sources import SourceDialogue

LEVELS: tuple[str, ...] = ("turn", "dialogue")
#: kind -> level and label: positives, the two turn-level and the two dialogue-level negatives, and
#: human-labelled examples (:mod:`finetune.data.supervised`).
KINDS: dict[str, str] = {
    "positive": "positive (real continuation / real dialogue)",
    "random": "turn-level negative: a random utterance of another dialogue in the same language",
    "hard": "turn-level negative: an utterance of the same dialogue at another position",
    "shuffle": "dialogue-level negative: utterance order shuffled",
    "replace": "dialogue-level negative: k >= 1 utterances replaced by utterances of other dialogues",
    "human": "human-labelled example (label = normalised mean rating, or binarised)",
}
_MAX_TRIES = 64


@dataclass
class Example:
    """One training example of an evaluator.

    Turn level: ``context`` (previous utterances, oldest first) and ``response``; ``turns`` is None.
    Dialogue level: ``turns`` (the whole dialogue); ``context`` is empty and ``response`` None.
    ``roles`` are the speakers: turn level = roles of ``context`` + the role of ``response``;
    dialogue level = roles of ``turns`` (positional: negatives keep the roles of the positions).
    ``label``: 1/0 for self-supervised pairs; a float in [0, 1] (or 0/1) for human labels.
    ``source_id``: the dialogue the example comes from (what :func:`split_by_dialogue` groups by).
    ``meta``: how it was made (position, pair, the dialogue a negative's text came from, ...).
    """

    id: str
    language: str
    level: str
    context: list[str]
    response: str | None
    turns: list[str] | None
    label: int | float
    kind: str
    source_id: str
    roles: list[str] | None = None
    reference: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PairReport:
    """Counts of a pair construction: what was made, skipped, and where a fallback was needed."""

    level: str
    seed: int
    params: dict[str, Any]
    dialogues: int = 0  # dialogues given
    skipped_short: int = 0  # too few utterances for this construction
    positives: int = 0  # examples with label 1 (copies included)
    negatives: int = 0
    unique_positives: int = 0  # positions (turn) / dialogues (dialogue) used
    by_kind: dict[str, int] = field(default_factory=dict)
    by_language: dict[str, dict[str, int]] = field(default_factory=dict)
    #: "hard->random": a hard negative was wanted but none existed, a random one was drawn instead
    fallbacks: dict[str, int] = field(default_factory=dict)
    unfilled_negatives: int = 0  # negative slots with no valid candidate at all
    positives_dropped: int = 0  # positives without any valid negative (dropped to stay balanced)
    skipped_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ExampleList(list):
    """A ``list[Example]`` (or of instruction examples) carrying its report as ``.report``."""

    def __init__(self, items: Iterable[Any], report: Any) -> None:
        super().__init__(items)
        self.report = report


def rng_for(seed: int, *parts: str) -> random.Random:
    """A ``random.Random`` seeded from sha256 of (seed, parts): stable across runs and platforms."""
    h = hashlib.sha256(":".join(["finetune.data", str(seed), *parts]).encode("utf-8")).hexdigest()
    return random.Random(int(h[:16], 16))


def norm_text(text: str) -> str:
    """Text as compared when deciding that two utterances are the same: case, punctuation, symbols
    and whitespace do not count ("Same." == "same")."""
    kept = "".join(" " if unicodedata.category(ch)[0] in "PSZ" else ch for ch in text.casefold())
    return " ".join(kept.split())


def _by_language(dialogues: Sequence[SourceDialogue]) -> dict[str, list[SourceDialogue]]:
    groups: dict[str, list[SourceDialogue]] = defaultdict(list)
    seen: set[str] = set()
    for d in dialogues:
        if d.id in seen:
            raise ValueError(f"duplicate dialogue id {d.id!r} (origin {d.origin})")
        seen.add(d.id)
        groups[d.language].append(d)
    return dict(sorted(groups.items()))


def _slot_kinds(rng: random.Random, n: int, first: str, second: str, ratio: float) -> list[str]:
    """``n`` negative kinds, exactly ``round(n * ratio)`` of them ``first``, in random order."""
    k = round(n * ratio)
    kinds = [first] * k + [second] * (n - k)
    rng.shuffle(kinds)
    return kinds


class _Pool:
    """Every utterance of one language: uniform draws of an utterance of *another* dialogue."""

    def __init__(self, dialogues: Sequence[SourceDialogue]) -> None:
        self.dialogues = dialogues
        self.flat = [(di, j) for di, d in enumerate(dialogues) for j in range(len(d.turns))]
        self.keys = [[norm_text(t) for t in d.turns] for d in dialogues]

    def draw(self, rng: random.Random, own: int, banned: set[str]) -> tuple[int, int] | None:
        """An utterance (dialogue index, position) not in dialogue ``own`` whose normalised text is
        not in ``banned``; None when there is none."""
        n = len(self.flat)
        if n == 0 or len(self.dialogues) < 2:
            return None
        for _ in range(_MAX_TRIES):
            di, j = self.flat[rng.randrange(n)]
            if di != own and self.keys[di][j] not in banned:
                return di, j
        valid = [(di, j) for di, j in self.flat if di != own and self.keys[di][j] not in banned]
        return rng.choice(valid) if valid else None


def _finish(report: PairReport, out: list[Example]) -> ExampleList:
    kinds = Counter(e.kind for e in out)
    report.by_kind = dict(sorted(kinds.items()))
    report.positives = sum(e.label == 1 for e in out)
    report.negatives = sum(e.label == 0 for e in out)
    per_lang: dict[str, Counter[str]] = defaultdict(Counter)
    for e in out:
        per_lang[e.language]["positives" if e.label == 1 else "negatives"] += 1
    report.by_language = {k: dict(v) for k, v in sorted(per_lang.items())}
    return ExampleList(out, report)


def _usable(group: Sequence[SourceDialogue], report: PairReport) -> list[SourceDialogue]:
    """Dialogues with at least two utterances; the others are counted and listed as skipped."""
    usable = []
    for d in group:
        if len(d.turns) < 2:
            report.skipped_short += 1
            report.skipped_ids.append(d.id)
        else:
            usable.append(d)
    return usable


def _check_common(negatives_per_positive: int, ratio: float, ratio_name: str) -> None:
    if not isinstance(negatives_per_positive, int) or negatives_per_positive < 1:
        raise ValueError(f"negatives_per_positive must be an integer >= 1, got {negatives_per_positive!r}")
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"{ratio_name} must be in [0, 1], got {ratio!r}")


# -- turn level: relevance (PoE) ------------------------------------------------------------------


def relevance_pairs(
    dialogues: Sequence[SourceDialogue],
    *,
    seed: int,
    negatives_per_positive: int = 1,
    hard_negative_ratio: float = 0.5,
    max_context: int = 4,
    balance: bool = True,
) -> ExampleList:
    """Turn-level relevance pairs (PoE, xDial-Eval §4).

    For every utterance after the first, a positive: context = up to ``max_context`` previous
    utterances, response = the real utterance (label 1). For each positive ``negatives_per_positive``
    negatives (label 0) with the same context: a ``hard`` one (an utterance of the same dialogue at
    another position) for a share ``hard_negative_ratio`` of the negatives of each language, else a
    ``random`` one (an utterance of another dialogue of the same language). A negative never has the
    positive's text. When the wanted kind has no candidate the other kind is used (counted in
    ``report.fallbacks``); a positive with no valid negative is dropped (counted).

    ``balance`` (default): one positive copy per negative, so positives == negatives and
    ``meta["pair"]`` pairs them; ``balance=False`` keeps one positive per position."""
    _check_common(negatives_per_positive, hard_negative_ratio, "hard_negative_ratio")
    if max_context < 1:
        raise ValueError(f"max_context must be >= 1, got {max_context}")
    report = PairReport(
        level="turn",
        seed=seed,
        params={
            "negatives_per_positive": negatives_per_positive,
            "hard_negative_ratio": hard_negative_ratio,
            "max_context": max_context,
            "balance": balance,
        },
        dialogues=len(dialogues),
    )
    out: list[Example] = []
    fallbacks: Counter[str] = Counter()
    for lang, group in _by_language(dialogues).items():
        rng = rng_for(seed, "relevance", lang)
        usable = _usable(group, report)
        pool = _Pool(usable)
        positions = [(di, i) for di, d in enumerate(usable) for i in range(1, len(d.turns))]
        kinds = _slot_kinds(
            rng, len(positions) * negatives_per_positive, "hard", "random", hard_negative_ratio
        )
        for p, (di, i) in enumerate(positions):
            d = usable[di]
            keys = pool.keys[di]
            start = max(0, i - max_context)
            context, ctx_roles = d.turns[start:i], d.roles[start:i]
            roles = [*ctx_roles, d.roles[i]]
            banned = {keys[i]}  # the positive's text, then every negative already drawn for it
            negatives: list[tuple[str, int, int]] = []  # (kind, dialogue index, position)
            for want in kinds[p * negatives_per_positive : (p + 1) * negatives_per_positive]:
                got = None
                for kind in (want, "random" if want == "hard" else "hard"):
                    if kind == "hard":
                        cands = [j for j in range(len(d.turns)) if j != i and keys[j] not in banned]
                        pick = (di, rng.choice(cands)) if cands else None
                    else:
                        pick = pool.draw(rng, di, banned)
                    if pick is not None:
                        got = (kind, *pick)
                        if kind != want:
                            fallbacks[f"{want}->{kind}"] += 1
                        break
                if got is None:
                    report.unfilled_negatives += 1
                    continue
                negatives.append(got)
                banned.add(pool.keys[got[1]][got[2]])
            if not negatives:
                report.positives_dropped += 1
                continue
            report.unique_positives += 1
            base = f"{d.id}#t{i}"
            common: dict[str, Any] = {"language": lang, "level": "turn", "turns": None}
            n_pos = len(negatives) if balance else 1
            for k in range(len(negatives)):
                if k < n_pos:
                    out.append(
                        Example(
                            id=f"{base}:pos{k}",
                            context=list(context),
                            response=d.turns[i],
                            label=1,
                            kind="positive",
                            source_id=d.id,
                            roles=list(roles),
                            meta={"position": i, "pair": k},
                            **common,
                        )
                    )
                if k < len(negatives):
                    kind, dj, j = negatives[k]
                    src = usable[dj]
                    out.append(
                        Example(
                            id=f"{base}:neg{k}",
                            context=list(context),
                            response=src.turns[j],
                            label=0,
                            kind=kind,
                            source_id=d.id,
                            roles=list(roles),
                            meta={
                                "position": i,
                                "pair": k if balance else 0,
                                "from_dialogue": src.id,
                                "from_position": j,
                            },
                            **common,
                        )
                    )
    report.fallbacks = dict(sorted(fallbacks.items()))
    return _finish(report, out)


# -- dialogue level: coherence (FineD-Eval) -------------------------------------------------------


def _shuffle(rng: random.Random, keys: list[str], avoid: set[tuple[str, ...]]) -> list[int] | None:
    """A permutation of the positions whose text sequence differs from the original (and, when
    possible, from the sequences in ``avoid``); None when every utterance has the same text."""
    n = len(keys)
    if len(set(keys)) < 2:
        return None
    original = tuple(keys)
    if n == 2:
        return [1, 0]
    fallback = None
    perm = list(range(n))
    for _ in range(_MAX_TRIES):
        rng.shuffle(perm)
        seq = tuple(keys[p] for p in perm)
        if seq != original:
            if seq not in avoid:
                return list(perm)
            fallback = fallback or list(perm)
    if fallback is not None:
        return fallback
    i = rng.randrange(n)  # unlucky draws (many repeated utterances): swap two different texts
    j = next(j for j in [*range(i + 1, n), *range(i)] if keys[j] != keys[i])  # exists: >= 2 texts
    perm = list(range(n))
    perm[i], perm[j] = perm[j], perm[i]
    return perm


def coherence_pairs(
    dialogues: Sequence[SourceDialogue],
    *,
    seed: int,
    negatives_per_positive: int = 1,
    shuffle_ratio: float = 0.5,
    max_replace_fraction: float = 0.5,
    balance: bool = True,
) -> ExampleList:
    """Dialogue-level coherence pairs (FineD-Eval, xDial-Eval §4 / App. C.1).

    Positive: the real dialogue (label 1). Negatives (label 0), ``shuffle_ratio`` of them per
    language by ``shuffle``: the utterances in another order (a permutation that changes the text
    sequence — for two utterances, the swap; ``meta["permutation"]``); the rest by ``replace``:
    k utterances, 1 <= k <= max(1, floor(n * max_replace_fraction)), replaced by utterances of
    other dialogues of the same language whose text occurs nowhere in the dialogue
    (``meta["replaced"]``). Roles stay those of the positions. When the wanted kind is impossible
    (all utterances identical / a single dialogue in the language) the other kind is used (counted);
    a dialogue with no valid negative is dropped (counted). ``balance`` as in :func:`relevance_pairs`."""
    _check_common(negatives_per_positive, shuffle_ratio, "shuffle_ratio")
    if not 0.0 < max_replace_fraction <= 1.0:
        raise ValueError(f"max_replace_fraction must be in (0, 1], got {max_replace_fraction!r}")
    report = PairReport(
        level="dialogue",
        seed=seed,
        params={
            "negatives_per_positive": negatives_per_positive,
            "shuffle_ratio": shuffle_ratio,
            "max_replace_fraction": max_replace_fraction,
            "balance": balance,
        },
        dialogues=len(dialogues),
    )
    out: list[Example] = []
    fallbacks: Counter[str] = Counter()
    for lang, group in _by_language(dialogues).items():
        rng = rng_for(seed, "coherence", lang)
        usable = _usable(group, report)
        pool = _Pool(usable)
        kinds = _slot_kinds(rng, len(usable) * negatives_per_positive, "shuffle", "replace", shuffle_ratio)
        for di, d in enumerate(usable):
            keys = pool.keys[di]
            seen_seqs: set[tuple[str, ...]] = {tuple(keys)}
            negatives: list[tuple[str, list[str], dict[str, Any]]] = []
            for want in kinds[di * negatives_per_positive : (di + 1) * negatives_per_positive]:
                got = None
                for kind in (want, "replace" if want == "shuffle" else "shuffle"):
                    if kind == "shuffle":
                        perm = _shuffle(rng, keys, seen_seqs)
                        if perm is not None:
                            got = (kind, [d.turns[p] for p in perm], {"permutation": perm})
                    else:
                        got = _replace(rng, pool, di, max_replace_fraction)
                    if got is not None:
                        if kind != want:
                            fallbacks[f"{want}->{kind}"] += 1
                        break
                if got is None:
                    report.unfilled_negatives += 1
                    continue
                negatives.append(got)
                seen_seqs.add(tuple(norm_text(t) for t in got[1]))
            if not negatives:
                report.positives_dropped += 1
                continue
            report.unique_positives += 1
            n_pos = len(negatives) if balance else 1
            common: dict[str, Any] = {"language": lang, "level": "dialogue", "response": None}
            for k in range(len(negatives)):
                if k < n_pos:
                    out.append(
                        Example(
                            id=f"{d.id}:pos{k}",
                            context=[],
                            turns=list(d.turns),
                            label=1,
                            kind="positive",
                            source_id=d.id,
                            roles=list(d.roles),
                            meta={"pair": k},
                            **common,
                        )
                    )
                if k < len(negatives):
                    kind, turns, meta = negatives[k]
                    out.append(
                        Example(
                            id=f"{d.id}:neg{k}",
                            context=[],
                            turns=turns,
                            label=0,
                            kind=kind,
                            source_id=d.id,
                            roles=list(d.roles),
                            meta={"pair": k if balance else 0, **meta},
                            **common,
                        )
                    )
    report.fallbacks = dict(sorted(fallbacks.items()))
    return _finish(report, out)


def _replace(
    rng: random.Random, pool: _Pool, di: int, max_fraction: float
) -> tuple[str, list[str], dict[str, Any]] | None:
    d = pool.dialogues[di]
    n = len(d.turns)
    k = rng.randint(1, max(1, math.floor(n * max_fraction)))
    positions = sorted(rng.sample(range(n), k))
    banned = set(pool.keys[di])  # no text of this dialogue, and no replacement used twice
    turns = list(d.turns)
    replaced = []
    for p in positions:
        pick = pool.draw(rng, di, banned)
        if pick is None:
            break
        dj, j = pick
        turns[p] = pool.dialogues[dj].turns[j]
        banned.add(pool.keys[dj][j])
        replaced.append({"position": p, "from_dialogue": pool.dialogues[dj].id, "from_position": j})
    if not replaced:
        return None
    return "replace", turns, {"replaced": replaced}
