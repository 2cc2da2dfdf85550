"""Malformed-dialogue detection (Mendonça, Lavie and Trancoso, §3.4 and App. C.3).

The paper removes, before annotation, dialogues with two systematic generation errors:

* **role confusion** — the user agent stops acting as a human user and takes the chatbot's role
  (offers help as an assistant would, answers its own questions, says it is an AI);
* **language mixing** — an utterance not in the dialogue's target language. App. C.3 attributes it
  to the chatbot, §3.4 to the user agent; both sides are checked here.

Two independent sources feed one :class:`MalformedCheck` per dialogue:

* an **LLM check** (the paper uses GPT-4.1; its prompt is not published, so
  :data:`MALFORMED_CHECK_SYSTEM` / :data:`MALFORMED_CHECK_USER` are this project's prompt modelled on
  App. C.3) returning ``{"role_confusion": {"label", "comment"}, "language_mixing": {...}}``;
* a **rule check** for language mixing: py3langid on every utterance long enough to be identified
  (:func:`rule_language_check`).

A reply of the LLM check that does not parse is status ``parse_error``: counted, its raw text kept,
and by itself never a reason to call a dialogue malformed. A label that did parse is still used.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dataset_builders.helpers import progress_bar
from dataset_builders.medal_pipeline.types import Dialogue, MalformedCheck
from harness.cache import CachedBackend
from harness.languages import LANGUAGES
from harness.parsing.issues_json import extract_json_object
from harness.types import ChatMessage, GenerationConfig, Request

ROLE_CONFUSION = "role_confusion"
LANGUAGE_MIXING = "language_mixing"
MALFORMED_REASONS: tuple[str, ...] = (ROLE_CONFUSION, LANGUAGE_MIXING)

SOURCE_LLM = "llm"
SOURCE_LANGID = "langid"
_DETAIL_SEP = " | "

# -- the LLM check -------------------------------------------------------------------------------

MALFORMED_CHECK_SYSTEM = """You are checking synthetic dialogues for generation errors. Each dialogue is between two participants: "user", played by a language model instructed to act as a human user who talks to a chatbot, and "assistant", the chatbot. Both participants were instructed to speak only the dialogue's target language. You do not judge the quality of the conversation, only whether it is well formed.

Check the dialogue for two errors:

1. **role_confusion:** the "user" participant stops acting as a human user and takes on the assistant's role at any point. **Mark if:** the user offers help, advice, explanations or services the way an assistant would (e.g. "How can I help you today?", "Here are some tips for you: ..."); the user answers its own questions or the assistant's questions as a chatbot would; the user says it is an AI, a language model, a virtual assistant or a chatbot; the two participants have swapped roles. **Do not mark if:** the user shares personal experience or opinions, gives information about themselves, or asks follow-up questions, as a human would; the assistant asks questions and the user answers them as a person.
2. **language_mixing:** any utterance, by the user or the assistant, is not written in the target language, or mixes the target language with another language (whole sentences, clauses or several words in another language, or text in another script). **Do not mark if:** the other-language words are proper nouns (names of people, places, brands, works), titles, or common loanwords and technical terms normally used untranslated in the target language.

Mark an error (label 1) if it appears at any point in the dialogue, otherwise label 0. Your output must be a valid JSON object with the following structure:

{
  "role_confusion": { "label": 0/1, "comment": "" },
  "language_mixing": { "label": 0/1, "comment": "" }
}

Only include a comment if the label is 1: a brief 1-sentence English explanation naming the turn where the error occurs."""

#: User message of the check; ``str.format`` fields: ``language`` (the target language's English
#: name) and ``conversation`` (one ``user: …`` / ``assistant: …`` line per turn).
MALFORMED_CHECK_USER = """Target language: {language}

Dialogue:
{conversation}"""

MALFORMED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        name: {
            "type": "object",
            "properties": {
                "label": {"type": "integer", "enum": [0, 1]},
                "comment": {"type": "string"},
            },
            "required": ["label", "comment"],
            "additionalProperties": False,
        }
        for name in MALFORMED_REASONS
    },
    "required": list(MALFORMED_REASONS),
    "additionalProperties": False,
}

#: Decoding of the check: greedy, short (two labels and two one-sentence comments).
CHECK_GENERATION = GenerationConfig(temperature=0.0, top_p=1.0, max_tokens=512)


def base_language(code: str) -> str:
    """ISO base code: ``"pt-BR"`` / ``"pt_BR"`` -> ``"pt"``, ``"zh-Hant"`` -> ``"zh"``."""
    return re.split(r"[-_]", code.strip(), maxsplit=1)[0].casefold()


def language_name(code: str, language_names: Mapping[str, str] | None = None) -> str:
    """English name of ``code``: ``language_names[code]``, then its base code, then the harness's
    language table, else the code itself."""
    names = language_names or {}
    if code in names:
        return names[code]
    base = base_language(code)
    if base in names:
        return names[base]
    if base in LANGUAGES:
        return LANGUAGES[base].name.capitalize()
    return code


def conversation_text(d: Dialogue) -> str:
    return "\n".join(f"{t.role}: {t.text}" for t in d.turns)


def check_request(d: Dialogue, language_names: Mapping[str, str] | None = None) -> Request:
    user = MALFORMED_CHECK_USER.format(
        language=language_name(d.language, language_names), conversation=conversation_text(d)
    )
    return Request(
        messages=(ChatMessage("system", MALFORMED_CHECK_SYSTEM), ChatMessage("user", user)),
        config=CHECK_GENERATION,
        json_schema=MALFORMED_SCHEMA,
    )


def check_requests(dialogues: Sequence[Dialogue], language_names: Mapping[str, str]) -> list[Request]:
    """One check request per dialogue (temperature 0, 512 tokens, :data:`MALFORMED_SCHEMA`)."""
    return [check_request(d, language_names) for d in dialogues]


_BINARY = {"0": 0, "1": 1, "false": 0, "true": 1, "no": 0, "yes": 1}


def _binary(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value) if value in (0, 1) else None
    if isinstance(value, str):
        return _BINARY.get(value.strip().casefold())
    return None


def _norm_key(key: Any) -> str:
    return re.sub(r"[\s\-]+", "_", str(key).strip()).casefold()


def parse_check(text: str | None) -> tuple[dict[str, int | None], dict[str, str], str]:
    """``(labels, comments, status)`` of a check reply.

    The JSON object is found by :func:`harness.parsing.issues_json.extract_json_object` (after a reasoning
    trace, in a code fence, or the last balanced ``{…}``). Keys match case-insensitively; a label
    may be written bare (``"role_confusion": 1``). A label that is missing or not 0/1 (``1``/``0``,
    ``true``/``false``, ``"yes"``/``"no"``) is ``None``; the status is ``parse_error`` when any
    label is ``None``, else ``ok``. Comments are kept for every key that has one."""
    labels: dict[str, int | None] = {name: None for name in MALFORMED_REASONS}
    comments: dict[str, str] = {}
    obj, _why = extract_json_object(text)
    if obj is None:
        return labels, comments, "parse_error"
    by_key = {_norm_key(k): v for k, v in obj.items()}
    for name in MALFORMED_REASONS:
        if name not in by_key:
            continue
        entry = by_key[name]
        if isinstance(entry, Mapping):
            labels[name] = _binary(entry["label"]) if "label" in entry else None
            comment = entry.get("comment")
            if isinstance(comment, str) and comment.strip():
                comments[name] = comment.strip()
        else:
            labels[name] = _binary(entry)
    status = "ok" if all(v is not None for v in labels.values()) else "parse_error"
    return labels, comments, status


# -- the rule check: language identification ----------------------------------------------------


class LanguageIdentifier:
    """py3langid (ISO 639-1 codes, normalised probabilities), loaded once on first use."""

    _model: Any = None
    _lock = threading.Lock()

    @classmethod
    def model(cls) -> Any:
        if cls._model is None:
            with cls._lock:
                if cls._model is None:
                    from py3langid.langid import MODEL_FILE
                    from py3langid.langid import LanguageIdentifier as _LangId

                    # py3langid <0.3 names the loader from_pickled_model, later versions from_model_file
                    load = getattr(_LangId, "from_model_file", None) or _LangId.from_pickled_model
                    cls._model = load(MODEL_FILE, norm_probs=True)
        return cls._model

    @classmethod
    def identify(cls, text: str) -> tuple[str, float]:
        """``(ISO 639-1 code, probability)`` of ``text``'s language."""
        lang, prob = cls.model().classify(text)
        return str(lang), float(prob)


def identify(text: str) -> tuple[str, float]:
    """``(ISO 639-1 code, probability)`` of ``text``'s language (py3langid)."""
    return LanguageIdentifier.identify(text)


_URL = re.compile(r"(?:https?://|www\.)\S+|\b[\w.+-]+@[\w-]+\.[\w.]+\b", re.I)
_INVISIBLE = {"\u200d", "\u200c", "\ufe0e", "\ufe0f", "\u20e3"}


def clean_for_langid(text: str) -> str:
    """``text`` without URLs, e-mail addresses, emoji / pictographs and other symbols (Unicode
    categories So, Sk, Cs, Co and emoji joiners / selectors), whitespace collapsed."""
    text = _URL.sub(" ", text)
    kept = [
        " " if unicodedata.category(ch) in ("So", "Sk", "Cs", "Co") or ch in _INVISIBLE else ch for ch in text
    ]
    return re.sub(r"\s+", " ", "".join(kept)).strip()


#: Languages a py3langid label may stand for besides itself (its known confusions between very
#: close languages); an utterance identified as one of these is not counted as mixing.
CLOSE_LANGUAGES: dict[str, frozenset[str]] = {
    "pt": frozenset({"gl"}),
    "gl": frozenset({"pt", "es"}),
    "no": frozenset({"nb", "nn", "da"}),
    "nb": frozenset({"no", "nn", "da"}),
    "nn": frozenset({"no", "nb"}),
    "hr": frozenset({"sr", "bs"}),
    "sr": frozenset({"hr", "bs"}),
    "bs": frozenset({"hr", "sr"}),
    "ms": frozenset({"id"}),
    "id": frozenset({"ms"}),
}


def _same_language(identified: str, target: str) -> bool:
    identified, target = base_language(identified), base_language(target)
    return identified == target or identified in CLOSE_LANGUAGES.get(target, frozenset())


def rule_language_check(
    d: Dialogue, *, min_chars: int = 20, min_prob: float = 0.9
) -> tuple[list[dict[str, Any]], list[str]]:
    """Identify the language of every utterance of ``d``.

    Returns the per-utterance list ``{turn, role, lang, prob, mismatch}`` (``lang``/``prob`` None
    for utterances shorter than ``min_chars`` characters once URLs and emoji are stripped: too
    short to identify) and the problems: utterances identified with probability ≥ ``min_prob`` as a
    language other than the target (base codes compared, ``pt-BR`` -> ``pt``, ``zh-TW`` -> ``zh``;
    :data:`CLOSE_LANGUAGES` are not counted), e.g.
    ``"turn 3 (assistant) identified as 'en' (p=0.99), expected 'pt'"``.

    Whole utterances are classified, so a few foreign words inside a long target-language
    utterance are (deliberately) not found: that is the LLM check's job."""
    target = base_language(d.language)
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for i, t in enumerate(d.turns):
        text = clean_for_langid(t.text)
        if len(text) < min_chars:
            rows.append({"turn": i, "role": t.role, "lang": None, "prob": None, "mismatch": False})
            continue
        lang, prob = identify(text)
        mismatch = prob >= min_prob and not _same_language(lang, target)
        rows.append({"turn": i, "role": t.role, "lang": lang, "prob": round(prob, 4), "mismatch": mismatch})
        if mismatch:
            problems.append(f"turn {i} ({t.role}) identified as {lang!r} (p={prob:.2f}), expected {target!r}")
    return rows, problems


# -- detection -----------------------------------------------------------------------------------


def _combine(
    d: Dialogue,
    llm: tuple[dict[str, int | None], dict[str, str], str] | None,
    raw: str,
    rows: list[dict[str, Any]],
    problems: list[str],
) -> MalformedCheck:
    parts: dict[str, list[str]] = {name: [] for name in MALFORMED_REASONS}
    status = "skipped"
    if llm is not None:
        labels, comments, status = llm
        for name in MALFORMED_REASONS:
            if labels.get(name) == 1:
                parts[name].append(f"{SOURCE_LLM}: {comments.get(name) or '(no comment)'}")
    parts[LANGUAGE_MIXING] += [f"{SOURCE_LANGID}: {p}" for p in problems]
    reasons = sorted(name for name, p in parts.items() if p)
    return MalformedCheck(
        dialogue_id=d.id,
        reasons=reasons,
        details={name: _DETAIL_SEP.join(parts[name]) for name in reasons},
        llm_status=status,
        llm_raw=raw,
        langid=rows,
    )


def detect_malformed(
    dialogues: Sequence[Dialogue],
    checker: CachedBackend | None,
    *,
    language_names: Mapping[str, str],
    min_chars: int = 20,
    min_prob: float = 0.9,
    batch_size: int = 64,
    progress: bool = True,
) -> list[MalformedCheck]:
    """One :class:`MalformedCheck` per dialogue, in order.

    With a ``checker`` (a cached backend, GPT-4.1 in the paper) every batch of ``batch_size``
    dialogues is one ``checker.generate`` call; without one the LLM check is ``skipped`` and only
    the language identifier runs. ``details[reason]`` joins the evidence of each source with
    ``" | "``: ``"llm: <comment>"`` first, then ``"langid: <problem>"`` lines."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    dialogues = list(dialogues)
    out: list[MalformedCheck] = []
    with progress_bar(len(dialogues), "MEDAL malformed check", progress) as bar:
        for start in range(0, len(dialogues), batch_size):
            batch = dialogues[start : start + batch_size]
            replies: list[str | None] = [None] * len(batch)
            if checker is not None:
                responses = checker.generate(check_requests(batch, language_names))
                if len(responses) != len(batch):
                    raise RuntimeError(
                        f"checker returned {len(responses)} responses for {len(batch)} requests"
                    )
                replies = [r.text for r in responses]
            for d, text in zip(batch, replies, strict=True):
                rows, problems = rule_language_check(d, min_chars=min_chars, min_prob=min_prob)
                llm = parse_check(text) if checker is not None else None
                check = _combine(d, llm, text or "", rows, problems)
                out.append(check)
                bar.advance(", ".join(check.reasons))
    return out


def check_sources(check: MalformedCheck) -> dict[str, list[str]]:
    """Which sources (``llm`` / ``langid``) found each reason of ``check``."""
    out: dict[str, list[str]] = {}
    for reason in check.reasons:
        segments = check.details.get(reason, "").split(_DETAIL_SEP)
        found = []
        if segments and segments[0].startswith(f"{SOURCE_LLM}: "):
            found.append(SOURCE_LLM)
        if reason == LANGUAGE_MIXING and any(u.get("mismatch") for u in check.langid):
            found.append(SOURCE_LANGID)
        out[reason] = found
    return out


def malformed_summary(checks: Sequence[MalformedCheck]) -> dict[str, Any]:
    """Counts for the run log / dataset card: ``n``, ``malformed`` and ``malformed_share``;
    ``reasons`` (dialogues per reason); ``sources`` (per source, dialogues per reason it found;
    ``both`` = found by the LLM and langid); ``llm_status`` counts and ``parse_failures``;
    ``langid_utterances`` (identified / skipped as too short)."""
    n = len(checks)
    malformed = sum(1 for c in checks if c.malformed)
    reasons = Counter(r for c in checks for r in c.reasons)
    sources: dict[str, Counter[str]] = {SOURCE_LLM: Counter(), SOURCE_LANGID: Counter(), "both": Counter()}
    for c in checks:
        for reason, found in check_sources(c).items():
            for s in found:
                sources[s][reason] += 1
            if len(found) == 2:
                sources["both"][reason] += 1
    utterances = [u for c in checks for u in c.langid]
    return {
        "n": n,
        "malformed": malformed,
        "malformed_share": malformed / n if n else None,
        "reasons": {r: reasons.get(r, 0) for r in MALFORMED_REASONS},
        "sources": {s: {r: cnt.get(r, 0) for r in MALFORMED_REASONS} for s, cnt in sources.items()},
        "llm_status": dict(Counter(c.llm_status for c in checks)),
        "parse_failures": sum(1 for c in checks if c.llm_status == "parse_error"),
        "langid_utterances": {
            "identified": sum(1 for u in utterances if u.get("lang") is not None),
            "too_short": sum(1 for u in utterances if u.get("lang") is None),
            "mismatch": sum(1 for u in utterances if u.get("mismatch")),
        },
    }
