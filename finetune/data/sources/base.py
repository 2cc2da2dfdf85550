"""The types every dialogue source shares: :class:`SourceDialogue`, :class:`LoadReport`,
:class:`LoadedDialogues`, language-code checks and the raw-dialogue tuple the readers yield
(:mod:`finetune.data.sources` documents the sources)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataset_builders.helpers import sha256_file

ROLES: tuple[str, ...] = ("user", "assistant")
TOPICAL_CHAT_PREFIX = "topical-chat:"
JSONL_PREFIX = "jsonl:"
CHITCHAT_PREFIX = "chitchat:"
CONTEXTS_PREFIX = "contexts:"
#: Licenses of the sources whose terms travel with derived training data.
SOURCE_LICENSES: dict[str, str] = {"topical-chat": "cdla-sharing-1.0", "chitchat": "mit"}

# ISO 639 code with optional subtags (as harness.data.schema), e.g. "en", "pt-BR", "zh-Hant".
_LANG_RE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
#: ISO 639-1 (two-letter) codes; a two-letter primary subtag must be one of these. Three-letter
#: (ISO 639-2/3) primary subtags are accepted when well-formed.
ISO_639_1: frozenset[str] = frozenset(
    """aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy
    da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy
    hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li
    ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa
    pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th
    ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu""".split()
)


def language_problem(code: Any) -> str | None:
    """Why ``code`` is not a usable ISO 639 language code (None when it is)."""
    if not isinstance(code, str) or not code:
        return f"missing language code (got {code!r})"
    if not _LANG_RE.match(code):
        return f"{code!r} is not an ISO 639 language code (e.g. 'en', 'zh', 'pt-BR')"
    primary = code.split("-", 1)[0]
    if len(primary) == 2 and primary not in ISO_639_1:
        return f"unknown language code {code!r} ({primary!r} is not an ISO 639-1 code)"
    return None


@dataclass
class SourceDialogue:
    """One multi-turn dialogue: its utterances (oldest first) and their speakers' roles."""

    id: str
    language: str
    turns: list[str]
    roles: list[str]
    origin: str  # e.g. "topical-chat:valid_freq.json", "/path/to/dataset:dialogues", "data.jsonl"

    def __post_init__(self) -> None:
        if len(self.turns) != len(self.roles):
            raise ValueError(f"dialogue {self.id!r}: {len(self.turns)} turns but {len(self.roles)} roles")


@dataclass
class LoadReport:
    """What :func:`load_dialogues` read, kept and left out (and why)."""

    source: str
    read: int = 0  # dialogues read from the source (before any filtering)
    kept: int = 0
    skipped_one_turn: int = 0  # < 2 non-empty utterances left: no context-response pair possible
    skipped_language: int = 0  # another language than ``language=``
    empty_utterances_dropped: int = 0
    duplicate_contexts: int = 0  # turn-level sources: rows whose context was read already
    utterances_kept: int = 0
    limit: int | None = None
    limit_reached: bool = False
    languages: dict[str, int] = field(default_factory=dict)  # kept dialogues per language
    #: reason -> ids of the dialogues skipped for it ("one_turn", "language")
    skipped_ids: dict[str, list[str]] = field(default_factory=dict)
    #: dialogue id -> number of empty utterances dropped from it
    empty_utterances_by_dialogue: dict[str, int] = field(default_factory=dict)
    #: files read: {path, sha256, size} (dataset sources: {path, config, fingerprint, release})
    files: list[dict[str, Any]] = field(default_factory=list)
    license: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"{self.source}: read {self.read} dialogues, kept {self.kept} "
            f"({', '.join(f'{k} {v}' for k, v in self.languages.items()) or 'none'}); "
            f"skipped {self.skipped_one_turn} with < 2 utterances, {self.skipped_language} of another "
            f"language; dropped {self.empty_utterances_dropped} empty utterances"
            + (f"; {self.duplicate_contexts} repeated contexts read once" if self.duplicate_contexts else "")
        )


class LoadedDialogues(list):
    """A ``list[SourceDialogue]`` that carries its :class:`LoadReport` as ``.report``."""

    def __init__(self, items: list[SourceDialogue], report: LoadReport) -> None:
        super().__init__(items)
        self.report = report


# -- entry point ---------------------------------------------------------------------------------


# A raw dialogue: (id, language, [(text|None, role)], origin, file for error messages)
Raw = tuple[str, str, list[tuple[Any, str]], str, str]


def file_entry(path: Path) -> dict[str, Any]:
    return {"path": str(path), "sha256": sha256_file(path), "size": path.stat().st_size}
