"""Plain data of the MEDAL generation pipeline: seed contexts, dialogues and automatic labels.

Everything here is JSON-serialisable (``to_dict`` / ``from_dict``) because it is checkpointed after
every generation phase and written into the published dataset.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

#: Dialogue status values. ``active`` dialogues are still being generated; the rest are final.
ACTIVE = "active"
ENDED = "end_of_dialogue"  # the user emitted END_OF_DIALOGUE (accepted by the user judge)
MAX_TURNS = "max_turns"  # the turn cap was reached
USER_REJECTED = "user_rejected"  # every regeneration attempt of a user turn was rejected
FIRST_TURN_REJECTED = "first_turn_rejected"  # every attempt of the shared first user turn was rejected
EMPTY_RESPONSE = "empty_chatbot_response"  # the chatbot returned no text
STATUSES = (ACTIVE, ENDED, MAX_TURNS, USER_REJECTED, FIRST_TURN_REJECTED, EMPTY_RESPONSE)

END_OF_DIALOGUE = "END_OF_DIALOGUE"


def stable_id(prefix: str, *parts: Any, n: int = 12) -> str:
    """``prefix-<sha256 of the parts>[:n]``: the same inputs always give the same id."""
    h = hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()
    return f"{prefix}-{h[:n]}"


@dataclass(frozen=True)
class SeedContext:
    """One conversation starter (MEDAL App. C.1): scene + persona + affective state + gender + language.

    ``scene`` is the final scene text the user LLM sees (an Atomic10x-style templated sentence,
    with ``PersonX is <state>.`` appended when an affective state was sampled).
    """

    id: str
    scene_id: str
    scene: str
    scene_source: str
    persona_id: str
    persona: str
    persona_source: str
    language: str  # ISO 639 code
    affective_state: str | None = None  # sampled state (None when the scene already had one)
    affect_quadrant: str | None = None  # circumplex quadrant of the sampled state
    scene_affect: str | None = None  # affect keyword found in the scene (then nothing is sampled)
    gender: str | None = None  # sampled for gender-neutral scenes only
    scene_gender: str | None = None  # gender detected in the scene (male / female), else None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SeedContext:
        return cls(**d)


@dataclass
class Attempt:
    """One generated user utterance and the user judge's verdict on it."""

    text: str
    #: None: a parse failure — the judge's reply was neither "Yes." nor "No. ...", or (deciding by
    #: log-probs) neither label had a log-prob
    accepted: bool | None
    feedback: (
        str  # the judge's reason ("" when accepted or deciding by log-probs), raw reply in ``judge_raw``
    )
    judge_raw: str
    #: label -> log-prob of "Yes"/"No" when the judge decides by log-probs (absent otherwise)
    judge_logprobs: dict[str, float | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["judge_logprobs"] is None:  # written verdicts: the record stays as it was
            del d["judge_logprobs"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Attempt:
        return cls(**d)


@dataclass
class Turn:
    role: str  # "user" | "assistant"
    text: str
    model: str  # role name of the model that produced it
    attempts: list[Attempt] = field(default_factory=list)  # user turns: every attempt, the last accepted

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "text": self.text,
            "model": self.model,
            "attempts": [a.to_dict() for a in self.attempts],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Turn:
        return cls(d["role"], d["text"], d["model"], [Attempt.from_dict(a) for a in d.get("attempts", [])])


@dataclass
class Dialogue:
    """A generated user–chatbot dialogue. ``id`` is stable: seed context × user role × chatbot role."""

    id: str
    seed_id: str
    language: str
    user_model: str  # role name (a key of the config's ``users``)
    chatbot: str  # role name (a key of the config's ``chatbots``)
    turns: list[Turn] = field(default_factory=list)
    status: str = ACTIVE
    detail: str = ""  # why the dialogue ended (e.g. the last rejection feedback)

    @property
    def active(self) -> bool:
        return self.status == ACTIVE

    def messages(self) -> list[dict[str, str]]:
        """The dialogue as common-schema messages (``{role, text}``)."""
        return [{"role": t.role, "text": t.text} for t in self.turns]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "seed_id": self.seed_id,
            "language": self.language,
            "user_model": self.user_model,
            "chatbot": self.chatbot,
            "turns": [t.to_dict() for t in self.turns],
            "status": self.status,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Dialogue:
        return cls(
            d["id"],
            d["seed_id"],
            d["language"],
            d["user_model"],
            d["chatbot"],
            [Turn.from_dict(t) for t in d["turns"]],
            d["status"],
            d.get("detail", ""),
        )


@dataclass
class AutoLabel:
    """The MEDAL judge's verdict on one dialogue (Table 11): 8 issues + other + overall.

    A label the judge did not give validly is ``None`` (reason in ``errors``); ``status`` is
    ``ok`` when the overall score parsed, else the parse status. ``raw`` is the judge's text.
    """

    dialogue_id: str
    labels: dict[str, int | None]  # issue (and ``other``) -> 0/1/None
    overall: float | None
    comments: dict[str, str]
    status: str
    raw: str
    errors: dict[str, str] = field(default_factory=dict)

    def issues(self) -> list[str]:
        """The issues marked present (label 1)."""
        return [k for k, v in self.labels.items() if v == 1]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AutoLabel:
        return cls(**d)


@dataclass
class MalformedCheck:
    """Malformed-dialogue detection (MEDAL App. C.3) for one dialogue.

    ``reasons`` lists what was found: ``role_confusion`` (the user agent acts as the chatbot) and
    ``language_mixing`` (an utterance not in the target language), each from the LLM check and/or
    the rule-based language identifier; ``details`` explains each.
    """

    dialogue_id: str
    reasons: list[str]
    details: dict[str, str]
    llm_status: str  # "ok" | "parse_error" | "skipped"
    llm_raw: str
    langid: list[dict[str, Any]] = field(default_factory=list)  # per utterance: {turn, lang, prob}

    @property
    def malformed(self) -> bool:
        return bool(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MalformedCheck:
        return cls(**d)
