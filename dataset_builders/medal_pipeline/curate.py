"""Balanced benchmark curation (Mendonça, Lavie and Trancoso, §5.1): pick ``N`` dialogues per
language from the automatically labelled pool for human annotation.

Per language, independently, with its own RNG (``random.Random`` seeded from ``sha256(seed,
language)``, so the result is deterministic for a seed and a different seed generally gives a
different selection):

1. **Filtering.** Dialogues with language mixing (a ``language_mixing`` reason in their
   :class:`MalformedCheck`, or listed in ``language_mixing`` — ids found by keyword matching of the
   judge's comments) are dropped (``language_mixing``), as are other malformed dialogues (role
   confusion: ``malformed``), unfinished ones (``incomplete``), ones without a chatbot turn
   (``no_chatbot_turn``) and ones without a usable automatic label (``unlabelled``: no label,
   status not ``ok``, overall or some MEDAL issue label None). Each dialogue is counted under the
   first reason that applies, in that order. With ``exclude_language_mixing=False`` the
   language-mixing reason is ignored (a dialogue with role confusion too is still ``malformed``).
2. **Seeding.** For each user–chatbot pair (sorted), one random candidate with no issue and
   overall 5. Without one, the overall requirement is relaxed (``seed:overall=5``: an issue-free
   dialogue with the highest overall score); without an issue-free dialogue the pair is skipped
   (``seed:no_issue``). Seeding stops at ``N`` (pairs left: ``seed:capacity``).
3. **Balancing.** Until ``N`` are selected: the target is the category (the 8 MEDAL issues and
   ``no_issue``) with the fewest selected dialogues so far (a dialogue with several issues counts
   for each; ties broken at random); among the remaining candidates with it, keep those whose
   overall score is the least represented in the selection so far, then those whose chatbot is the
   least represented, and pick one at random. A least-represented category without candidates
   left is skipped and counted as a relaxation (``issue:<category>``) at every step at which it
   was skipped. The overall and chatbot filters only choose among existing candidates, so they
   never have to be relaxed. The loop ends when no candidate is left (``shortfall``).

"No issue" means none of the 8 MEDAL issues is marked; the judge's ``other`` label is ignored, as
it is not part of the annotated label set.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_LANGUAGES
from dataset_builders.medal_pipeline.types import ACTIVE, AutoLabel, Dialogue, MalformedCheck

NO_ISSUE = "no_issue"
CATEGORIES: tuple[str, ...] = (*MEDAL_ISSUES, NO_ISSUE)
LANGUAGE_MIXING = "language_mixing"
EXCLUSION_REASONS = (LANGUAGE_MIXING, "malformed", "incomplete", "no_chatbot_turn", "unlabelled")
SEED_OVERALL = 5


@dataclass
class CurationConfig:
    n_per_language: int = 100
    seed: int = 0
    exclude_language_mixing: bool = True


@dataclass
class Selection:
    dialogue_id: str
    language: str
    stage: str  # "seed" | "balance"
    order: int  # 0-based position in the language's selection
    target: str  # the issue (or "no_issue") it was picked for
    relaxed: list[str] = field(default_factory=list)  # requirements ignored for this pick
    chatbot: str = ""
    user_model: str = ""
    overall: float | None = None
    issues: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Selection:
        return cls(**d)


@dataclass
class CurationResult:
    selected: list[Selection]
    excluded: dict[str, int]  # reason -> dialogues (all languages)
    relaxations: dict[str, int]  # requirement -> times it was ignored (all languages)
    shortfall: dict[str, int]  # language -> dialogues missing to reach N
    per_language: dict[str, dict[str, Any]]  # candidates, pool/selection distributions, ...
    config: dict[str, Any] = field(default_factory=dict)

    def selected_ids(self, language: str | None = None) -> list[str]:
        return [s.dialogue_id for s in self.selected if language is None or s.language == language]

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": dict(self.config),
            "selected": [s.to_dict() for s in self.selected],
            "excluded": dict(self.excluded),
            "relaxations": dict(self.relaxations),
            "shortfall": dict(self.shortfall),
            "per_language": self.per_language,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CurationResult:
        return cls(
            [Selection.from_dict(s) for s in d["selected"]],
            dict(d["excluded"]),
            dict(d["relaxations"]),
            dict(d["shortfall"]),
            dict(d["per_language"]),
            dict(d.get("config") or {}),
        )


def language_rng(seed: int, language: str) -> random.Random:
    """A ``random.Random`` seeded from sha256 of (seed, language): stable across runs/platforms."""
    h = hashlib.sha256(f"medal-curation:{seed}:{language}".encode()).hexdigest()
    return random.Random(int(h[:16], 16))


def usable_label(label: AutoLabel | None) -> bool:
    """Status ``ok``, an overall score and a 0/1 for every MEDAL issue."""
    return (
        label is not None
        and label.status == "ok"
        and label.overall is not None
        and all(label.labels.get(i) is not None for i in MEDAL_ISSUES)
    )


def label_issues(label: AutoLabel) -> list[str]:
    """The MEDAL issues marked present (``other`` ignored), in Table 1 order."""
    return [i for i in MEDAL_ISSUES if label.labels.get(i) == 1]


def exclusion_reason(
    d: Dialogue,
    label: AutoLabel | None,
    malformed: MalformedCheck | None,
    language_mixing: Mapping[str, str],
    exclude_language_mixing: bool,
) -> str | None:
    """Why ``d`` is not a curation candidate (first of :data:`EXCLUSION_REASONS`), or None."""
    reasons = set(malformed.reasons) if malformed is not None else set()
    if exclude_language_mixing and (LANGUAGE_MIXING in reasons or d.id in language_mixing):
        return LANGUAGE_MIXING
    if reasons - {LANGUAGE_MIXING}:
        return "malformed"
    if d.status == ACTIVE:
        return "incomplete"
    if not any(t.role == "assistant" for t in d.turns):
        return "no_chatbot_turn"
    if not usable_label(label):
        return "unlabelled"
    return None


@dataclass
class _Cand:
    id: str
    chatbot: str
    user_model: str
    overall: float
    issues: tuple[str, ...]

    @property
    def categories(self) -> tuple[str, ...]:
        return self.issues or (NO_ISSUE,)


def _distribution(cands: Sequence[_Cand]) -> dict[str, Any]:
    issues = Counter(c for x in cands for c in x.categories)
    return {
        "n": len(cands),
        "categories": {c: issues.get(c, 0) for c in CATEGORIES},
        "overall": {_score_key(k): v for k, v in sorted(Counter(x.overall for x in cands).items())},
        "chatbots": dict(sorted(Counter(x.chatbot for x in cands).items())),
        "pairs": len({(x.user_model, x.chatbot) for x in cands}),
    }


def _score_key(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _curate_language(
    language: str, cands: list[_Cand], n: int, rng: random.Random
) -> tuple[list[Selection], Counter]:
    relax: Counter = Counter()
    selected: list[Selection] = []
    taken: set[str] = set()
    cat_count: Counter = Counter()
    overall_count: Counter = Counter()
    chatbot_count: Counter = Counter()

    def take(c: _Cand, stage: str, target: str, relaxed: list[str]) -> None:
        taken.add(c.id)
        cat_count.update(c.categories)
        overall_count[c.overall] += 1
        chatbot_count[c.chatbot] += 1
        selected.append(
            Selection(
                dialogue_id=c.id,
                language=language,
                stage=stage,
                order=len(selected),
                target=target,
                relaxed=relaxed,
                chatbot=c.chatbot,
                user_model=c.user_model,
                overall=c.overall,
                issues=list(c.issues),
            )
        )

    # Stage 1: one issue-free, overall-5 dialogue per user–chatbot pair.
    by_pair: dict[tuple[str, str], list[_Cand]] = defaultdict(list)
    for c in cands:
        by_pair[(c.user_model, c.chatbot)].append(c)
    for pair in sorted(by_pair):
        if len(selected) >= n:
            relax["seed:capacity"] += 1
            continue
        clean = [c for c in by_pair[pair] if not c.issues]
        if not clean:
            relax["seed:no_issue"] += 1
            continue
        best = [c for c in clean if c.overall == SEED_OVERALL]
        relaxed: list[str] = []
        if not best:
            relaxed = ["seed:overall=5"]
            relax["seed:overall=5"] += 1
            top = max(c.overall for c in clean)
            best = [c for c in clean if c.overall == top]
        take(rng.choice(best), "seed", NO_ISSUE, relaxed)

    # Stage 2: balance issue categories, then overall scores, then chatbots.
    pools: dict[str, list[_Cand]] = {cat: [] for cat in CATEGORIES}
    for c in cands:
        for cat in c.categories:
            pools[cat].append(c)
    while len(selected) < n:
        left = {cat: [c for c in pools[cat] if c.id not in taken] for cat in CATEGORIES}
        pools = left
        viable = [cat for cat in CATEGORIES if left[cat]]
        if not viable:
            break
        low = min(cat_count[cat] for cat in viable)
        skipped = [cat for cat in CATEGORIES if not left[cat] and cat_count[cat] <= low]
        for cat in skipped:
            relax[f"issue:{cat}"] += 1
        target = rng.choice([cat for cat in viable if cat_count[cat] == low])
        pool = left[target]
        least = min(overall_count[c.overall] for c in pool)
        pool = [c for c in pool if overall_count[c.overall] == least]
        least = min(chatbot_count[c.chatbot] for c in pool)
        pool = [c for c in pool if chatbot_count[c.chatbot] == least]
        take(rng.choice(pool), "balance", target, [f"issue:{cat}" for cat in skipped])
    return selected, relax


def curate(
    dialogues: Sequence[Dialogue],
    labels: Mapping[str, AutoLabel],
    *,
    malformed: Mapping[str, MalformedCheck] | None = None,
    language_mixing: Mapping[str, str] | None = None,
    config: CurationConfig | None = None,
) -> CurationResult:
    """Select ``config.n_per_language`` dialogues per language (see the module docstring)."""
    config = config or CurationConfig()
    malformed = malformed or {}
    language_mixing = language_mixing or {}
    by_lang: dict[str, list[_Cand]] = defaultdict(list)
    excluded_by_lang: dict[str, Counter] = defaultdict(Counter)
    for d in dialogues:
        label = labels.get(d.id)
        reason = exclusion_reason(
            d, label, malformed.get(d.id), language_mixing, config.exclude_language_mixing
        )
        excluded_by_lang.setdefault(d.language, Counter())  # every language gets an entry
        if reason is not None:
            excluded_by_lang[d.language][reason] += 1
            continue
        assert label is not None and label.overall is not None
        by_lang[d.language].append(
            _Cand(d.id, d.chatbot, d.user_model, float(label.overall), tuple(label_issues(label)))
        )
    selected: list[Selection] = []
    excluded: Counter = Counter()
    relaxations: Counter = Counter()
    shortfall: dict[str, int] = {}
    per_language: dict[str, dict[str, Any]] = {}
    rank = {lang: i for i, lang in enumerate(MEDAL_LANGUAGES)}
    for lang in sorted(excluded_by_lang, key=lambda x: (rank.get(x, len(rank)), x)):
        cands = by_lang.get(lang, [])
        sel, relax = _curate_language(lang, cands, config.n_per_language, language_rng(config.seed, lang))
        selected += sel
        excluded.update(excluded_by_lang[lang])
        relaxations.update(relax)
        missing = config.n_per_language - len(sel)
        if missing > 0:
            shortfall[lang] = missing
        chosen = {s.dialogue_id for s in sel}
        exhausted = [cat for cat in CATEGORIES if all(c.id in chosen for c in cands if cat in c.categories)]
        per_language[lang] = {
            "dialogues": len(cands) + sum(excluded_by_lang[lang].values()),
            "candidates": len(cands),
            "selected": len(sel),
            "seeds": sum(s.stage == "seed" for s in sel),
            "shortfall": max(missing, 0),
            "excluded": dict(excluded_by_lang[lang]),
            "relaxations": dict(sorted(relax.items())),
            "exhausted": exhausted,
            "pool": _distribution(cands),
            "selection": _distribution([c for c in cands if c.id in chosen]),
        }
    return CurationResult(
        selected,
        {r: excluded[r] for r in EXCLUSION_REASONS if excluded[r]},
        dict(sorted(relaxations.items())),
        shortfall,
        per_language,
        asdict(config),
    )


# -- dataset card ---------------------------------------------------------------------------------
def _pct(k: int, n: int) -> str:
    return f"{k} ({100.0 * k / n:.0f}%)" if n else str(k)


def curation_markdown(result: CurationResult, labels: Mapping[str, AutoLabel] | None = None) -> list[str]:
    """Markdown lines for the dataset card: per language the selected count, the issue distribution
    of the selection vs the candidate pool, the overall-score distribution, chatbot coverage, and
    the relaxations and exclusions. ``labels`` is optional: the selections carry their issues and
    overall score (``labels`` overrides them, e.g. after relabelling)."""
    langs = list(result.per_language)
    sel_by_lang: dict[str, list[Selection]] = defaultdict(list)
    for s in result.selected:
        sel_by_lang[s.language].append(s)

    def sel_dist(lang: str) -> dict[str, Any]:
        cats: Counter = Counter()
        overall: Counter = Counter()
        for s in sel_by_lang[lang]:
            lab = labels.get(s.dialogue_id) if labels else None
            issues = label_issues(lab) if lab is not None else s.issues
            score = lab.overall if lab is not None and lab.overall is not None else s.overall
            cats.update(issues or [NO_ISSUE])
            if score is not None:
                overall[_score_key(float(score))] += 1
        return {"categories": cats, "overall": overall}

    cfg = result.config
    lines = [
        f"Balanced curation (MEDAL §5.1): {cfg.get('n_per_language', '?')} dialogues per language, "
        f"seed {cfg.get('seed', '?')}; language-mixing dialogues "
        f"{'excluded' if cfg.get('exclude_language_mixing', True) else 'kept'}.",
        "",
        "| Language | Dialogues | Candidates | Selected | Seeds | Shortfall | Chatbots covered |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for lang in langs:
        p = result.per_language[lang]
        covered = len(p["selection"]["chatbots"])
        lines.append(
            f"| {lang} | {p['dialogues']} | {p['candidates']} | {p['selected']} | {p['seeds']} | "
            f"{p['shortfall']} | {covered}/{len(p['pool']['chatbots'])} |"
        )
    dists = {lang: sel_dist(lang) for lang in langs}
    lines += [
        "",
        "Issue distribution, selection (candidate pool); a dialogue counts for each of its issues:",
        "",
        "| Issue | " + " | ".join(langs) + " |",
        "|---|" + "---:|" * len(langs),
    ]
    for cat in CATEGORIES:
        cells = [
            f"{dists[lang]['categories'].get(cat, 0)} ({result.per_language[lang]['pool']['categories'].get(cat, 0)})"
            for lang in langs
        ]
        lines.append(f"| {cat} | " + " | ".join(cells) + " |")
    scores = sorted(
        {k for lang in langs for k in result.per_language[lang]["pool"]["overall"]}
        | {k for lang in langs for k in dists[lang]["overall"]},
        key=float,
    )
    lines += [
        "",
        "Overall-score distribution, selection (candidate pool):",
        "",
        "| Overall | " + " | ".join(langs) + " |",
        "|---|" + "---:|" * len(langs),
    ]
    for k in scores:
        cells = [
            f"{dists[lang]['overall'].get(k, 0)} ({result.per_language[lang]['pool']['overall'].get(k, 0)})"
            for lang in langs
        ]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    chatbots = sorted({c for lang in langs for c in result.per_language[lang]["pool"]["chatbots"]})
    if chatbots:
        lines += [
            "",
            "Chatbot coverage, selection (candidate pool):",
            "",
            "| Chatbot | " + " | ".join(langs) + " |",
            "|---|" + "---:|" * len(langs),
        ]
        for bot in chatbots:
            cells = [
                f"{result.per_language[lang]['selection']['chatbots'].get(bot, 0)} "
                f"({result.per_language[lang]['pool']['chatbots'].get(bot, 0)})"
                for lang in langs
            ]
            lines.append(f"| {bot} | " + " | ".join(cells) + " |")
    total = sum(p["dialogues"] for p in result.per_language.values())
    lines += ["", "Exclusions before selection:"]
    if result.excluded:
        lines += [f"- {reason}: {_pct(k, total)}" for reason, k in result.excluded.items()]
    else:
        lines.append("- none")
    lines += ["", "Relaxed requirements (times ignored):"]
    if result.relaxations:
        lines += [f"- `{req}`: {k}" for req, k in result.relaxations.items()]
    else:
        lines.append("- none")
    if result.shortfall:
        lines += [
            "",
            "Shortfall (too few candidates): "
            + ", ".join(f"{lang} {k}" for lang, k in result.shortfall.items())
            + ".",
        ]
    return lines
