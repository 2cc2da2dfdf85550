"""Automatic labelling of generated dialogues with the MEDAL judge (Mendonça, Lavie and Trancoso, §4).

Every dialogue is scored by the registered ``medal`` task (``tasks/medal``, looked up by name in
the core's task registry with :func:`harness.tasks.get_task`: the dataset builders sit below the
task families and never import them, docs/architecture.md): the judge reads the whole dialogue
with the English Table 11 prompt and returns, as JSON, the eight Table 1 issue labels + ``other``
+ an overall 1–5 rating. The paper uses GPT-4.1; any judge spec the harness can load works
(``openai:gpt-4.1``, ``vllm:…``, ``replay:…`` in tests).

Parse failures are never coerced: a label the judge did not give validly is ``None`` (reason in
:attr:`AutoLabel.errors`), and a verdict whose overall rating did not parse has status
``parse_error`` with the raw text kept.

§5.1 "Filtering" removes, before benchmark curation, dialogues whose chatbot responses were
judged uninterpretable *because of other languages*, "detected via keyword matching of GPT-4.1
assessments": :func:`mentions_language_mixing` is this project's version of that keyword match
(the paper does not list its keywords).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dataset_builders.helpers import progress_bar
from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_OTHER
from dataset_builders.medal_pipeline.types import AutoLabel, Dialogue
from harness.judges.base import Judge, Verdict
from harness.tasks import TaskSpec, get_task

#: Every label the judge writes besides the overall rating, in Table 11's order.
AUTO_LABELS: tuple[str, ...] = (*MEDAL_ISSUES, MEDAL_OTHER)
#: The registered task whose judge labels the dialogues (Table 11 prompt, JSON issue verdict).
LABEL_TASK = "medal"


# -- the task ------------------------------------------------------------------------------------


def medal_task_for(languages: Iterable[str]) -> TaskSpec:
    """The registered :data:`LABEL_TASK` extended so that every code in ``languages`` (any string,
    e.g. ``"it"``, ``"pt-BR"``) has a template: its English one (the Table 11 prompt), as the paper
    uses for every language. The task's registered languages keep their templates; the registry is
    not touched."""
    task = get_task(LABEL_TASK)
    extra = [lang for lang in dict.fromkeys(languages) if lang not in task.templates]
    if not extra:
        return task
    english = task.template_for("en")
    templates = dict(task.templates)
    templates.update({lang: english for lang in extra})
    return dataclasses.replace(task, languages=(*task.languages, *extra), templates=templates)


def dialogue_item(d: Dialogue) -> dict[str, Any]:
    """The dialogue-level item the ``medal`` task scores (``system`` = the chatbot's role name)."""
    return {
        "id": d.id,
        "language": d.language,
        "level": "dialogue",
        "system": d.chatbot,
        "turns": d.messages(),
    }


# -- labelling -----------------------------------------------------------------------------------


def _auto_label(dialogue_id: str, v: Verdict) -> AutoLabel:
    extra = v.extra or {}
    got: Mapping[str, Any] = extra.get("labels") or {}
    labels: dict[str, int | None] = {}
    for name in AUTO_LABELS:
        value = got.get(name)
        # The parser only yields 0/1/None; anything else would be a bug upstream -> None, not 0.
        labels[name] = value if value in (0, 1) and not isinstance(value, bool) else None
    errors = dict(extra.get("label_errors") or {})
    if not errors and v.status != "ok" and v.detail:
        errors = {"verdict": v.detail}
    return AutoLabel(
        dialogue_id=dialogue_id,
        labels=labels,
        overall=v.score,
        comments=dict(extra.get("comments") or {}),
        status=v.status,
        raw=v.raw,
        errors=errors,
    )


def label_dialogues(
    dialogues: Sequence[Dialogue],
    judge: Judge,
    *,
    batch_size: int = 64,
    progress: bool = True,
) -> list[AutoLabel]:
    """Label ``dialogues`` with ``judge`` (one :class:`AutoLabel` per dialogue, in order).

    Dialogues go to ``judge.score`` ``batch_size`` at a time; the judge's request cache makes a
    re-run free. ``None`` labels / overall ratings stay ``None`` (see the module docstring)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    dialogues = list(dialogues)
    task = medal_task_for(d.language for d in dialogues)
    out: list[AutoLabel] = []
    with progress_bar(len(dialogues), "MEDAL auto-labels", progress) as bar:
        for start in range(0, len(dialogues), batch_size):
            batch = dialogues[start : start + batch_size]
            verdicts = judge.score(task, [dialogue_item(d) for d in batch])
            if len(verdicts) != len(batch):
                raise RuntimeError(f"judge returned {len(verdicts)} verdicts for {len(batch)} dialogues")
            for d, v in zip(batch, verdicts, strict=True):
                label = _auto_label(d.id, v)
                out.append(label)
                bar.advance("" if label.status == "ok" else f"{label.status}: {d.id}")
    return out


def label_summary(labels: Sequence[AutoLabel]) -> dict[str, Any]:
    """Counts for the run log / dataset card: ``n``; ``parse_failures`` (status != ok) and
    ``statuses``; per label the ``none`` count (not validly given), ``positives`` and the
    ``positive_rate`` over the non-None labels (None when all are None); the mean and the
    distribution of the overall rating over the parsed ones."""
    n = len(labels)
    names = list(AUTO_LABELS)
    for lab in labels:  # keep any extra label a custom judge wrote
        names += [k for k in lab.labels if k not in names]
    none = {k: sum(1 for lab in labels if lab.labels.get(k) is None) for k in names}
    positives = {k: sum(1 for lab in labels if lab.labels.get(k) == 1) for k in names}
    rate = {k: (positives[k] / (n - none[k]) if n - none[k] else None) for k in names}
    overall = [lab.overall for lab in labels if lab.overall is not None]
    return {
        "n": n,
        "parse_failures": sum(1 for lab in labels if lab.status != "ok"),
        "statuses": dict(Counter(lab.status for lab in labels)),
        "none": none,
        "positives": positives,
        "positive_rate": rate,
        "overall_mean": sum(overall) / len(overall) if overall else None,
        "overall_counts": {f"{k:g}": v for k, v in sorted(Counter(overall).items())},
        "any_issue": sum(1 for lab in labels if any(lab.labels.get(k) == 1 for k in MEDAL_ISSUES)),
    }


# -- §5.1 Filtering: language mixing found in the judge's comments -------------------------------

#: Generic phrases that, in an uninterpretable / other comment, point at language mixing. Matched
#: case-insensitively at word boundaries. A bare "language" is deliberately absent: "garbled
#: language" or "offensive language" are not about mixing. Phrases naming a language ("in English",
#: "switches to German", "mix of Chinese and ...") are found through :data:`LANGUAGE_NAMES`.
LANGUAGE_MIXING_KEYWORDS: tuple[str, ...] = (
    "other language",
    "other languages",
    "another language",
    "different language",
    "different languages",
    "foreign language",
    "foreign languages",
    "foreign word",
    "foreign words",
    "foreign characters",
    "foreign script",
    "wrong language",
    "multiple languages",
    "several languages",
    "two languages",
    "mixed languages",
    "mixes languages",
    "mixing languages",
    "mix of languages",
    "mixture of languages",
    "language mixing",
    "language switch",
    "language switching",
    "language change",
    "switches language",
    "switches languages",
    "switched language",
    "switched languages",
    "switching language",
    "switching languages",
    "switches to another",
    "switches to a different",
    "code-switch",
    "code-switches",
    "code-switching",
    "code switch",
    "code switching",
    "codeswitching",
    "target language",
    "non-target",
    "untranslated",
)

#: Language (and script) names per ISO 639-1 code, lower case. Any name that does not belong to the
#: dialogue's target language is a keyword ("replied in English" in a Portuguese dialogue).
LANGUAGE_NAMES: dict[str, tuple[str, ...]] = {
    "en": ("english",),
    "zh": (
        "chinese",
        "mandarin",
        "cantonese",
        "hanzi",
        "pinyin",
        "simplified characters",
        "traditional characters",
    ),
    "de": ("german",),
    "fr": ("french",),
    "pt": ("portuguese",),
    "es": ("spanish", "castilian"),
    "it": ("italian",),
    "ja": ("japanese", "kanji", "hiragana", "katakana"),
    "ko": ("korean", "hangul"),
    "ru": ("russian", "cyrillic"),
    "ar": ("arabic",),
    "hi": ("hindi", "devanagari"),
    "nl": ("dutch",),
    "pl": ("polish",),
    "tr": ("turkish",),
    "vi": ("vietnamese",),
    "th": ("thai",),
    "id": ("indonesian",),
    "ms": ("malay",),
    "sv": ("swedish",),
    "uk": ("ukrainian",),
    "el": ("greek",),
    "he": ("hebrew",),
    "fa": ("persian", "farsi"),
    "bn": ("bengali",),
    "ca": ("catalan",),
    "gl": ("galician",),
    "la": ("latin",),
}

#: Label comments searched by default: §5.1 filters *uninterpretable* responses; ``other`` is where
#: a judge may also put "answers in the wrong language".
MIXING_COMMENT_LABELS: tuple[str, ...] = ("uninterpretable", MEDAL_OTHER)


def base_language(code: str) -> str:
    """``"pt-BR"`` / ``"pt_BR"`` / ``"PT"`` -> ``"pt"``; ``"zh-Hans"`` -> ``"zh"``."""
    return re.split(r"[-_]", code.strip(), maxsplit=1)[0].casefold()


def _phrase_pattern(phrases: Iterable[str]) -> re.Pattern[str] | None:
    phrases = sorted(set(phrases), key=len, reverse=True)
    if not phrases:
        return None
    alts = "|".join(re.escape(p).replace(r"\ ", r"\s+") for p in phrases)
    return re.compile(rf"(?<![\w-])(?:{alts})(?![\w-])", re.I)


def mentions_language_mixing(
    label: AutoLabel,
    target_language: str,
    *,
    comment_labels: Sequence[str] = MIXING_COMMENT_LABELS,
) -> str | None:
    """The first judge comment that points at chatbot language mixing, as
    ``"<label>: '<keyword>' in <comment>"``, or ``None``.

    A **heuristic** (MEDAL §5.1 "keyword matching of GPT-4.1 assessments"; the paper does not
    publish its keywords): only comments of ``comment_labels`` whose label is 1 are read (the
    Table 11 prompt asks for comments on marked dimensions only, so a comment next to a 0 is not
    an assessment); a comment matches a :data:`LANGUAGE_MIXING_KEYWORDS` phrase or names a
    language other than ``target_language`` (its base code: ``pt-BR`` -> ``pt``). It can miss
    comments that describe mixing in other words and can flag a comment that names another
    language for another reason; the malformed-dialogue check (:mod:`.malformed`) and its rule
    based language identifier are the systematic counterparts."""
    target = base_language(target_language)
    names = [n for code, ns in LANGUAGE_NAMES.items() if code != target for n in ns]
    pattern = _phrase_pattern([*LANGUAGE_MIXING_KEYWORDS, *names])
    assert pattern is not None
    for name in comment_labels:
        if label.labels.get(name) != 1:
            continue
        comment = label.comments.get(name) or ""
        m = pattern.search(comment)
        if m:
            return f"{name}: {m.group(0).casefold()!r} in {comment}"
    return None
