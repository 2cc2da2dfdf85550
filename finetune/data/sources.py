"""Dialogue sources of the self-supervised training data: plain multi-turn dialogues.

:func:`load_dialogues` reads one source into :class:`SourceDialogue` objects (id, language, the
utterances, their speaker roles and where they came from). Three kinds of source:

``topical-chat:<file.json | directory>``
    Topical-Chat (Gopalakrishnan et al. 2019; CDLA-Sharing-1.0) in its release layout: a JSON object
    ``conversation_id -> {"content": [{"message", "agent", ...}], ...}``; a directory means every
    ``*.json`` file in it (sorted by name). Language ``en``; roles follow the agent: the agent who
    speaks first is ``user``, the other ``assistant``.
a built dataset directory or a registry reference, optionally with a config: ``DIR[:CONFIG]`` or ``NAME[@X.Y.Z][:CONFIG]``
    Dialogue-level common-schema records (:mod:`harness.data.schema`), read with
    ``datasets.load_dataset(DIR, CONFIG, split="test")``; ``turns`` gives utterances and roles. The
    config may be left out when the dataset has a single dialogue-level config.
``contexts:`` + a dataset reference as above, with a turn-level config
    The *contexts* of turn-level records as dialogues, each distinct context (per language) once —
    the rated responses are left out, since their quality is what evaluators are scored on.
a JSONL file (``*.jsonl``, or ``jsonl:<path>``)
    One dialogue per line: ``{"id", "language", "turns": [str | {"role", "text"}]}``; plain strings
    alternate ``user`` / ``assistant`` starting with ``user``.

Bad data is never dropped silently. Empty utterances are dropped and counted; a dialogue left with
fewer than two utterances cannot give a context–response pair and is skipped and counted (its id
listed); both go into the :class:`LoadReport` (``result.report``). An unknown or malformed language
code, a missing id, a duplicate id or an unknown role is an error naming the file and the dialogue.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataset_builders.helpers import dialogue_level_roles, sha256_file
from harness.data.schema import DataValidationError

ROLES: tuple[str, ...] = ("user", "assistant")
TOPICAL_CHAT_PREFIX = "topical-chat:"
JSONL_PREFIX = "jsonl:"
CONTEXTS_PREFIX = "contexts:"
#: Licenses of the sources whose terms travel with derived training data.
SOURCE_LICENSES: dict[str, str] = {"topical-chat": "cdla-sharing-1.0"}

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


def load_dialogues(
    source: str | os.PathLike[str],
    *,
    language: str | None = None,
    limit: int | None = None,
    registry: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> LoadedDialogues:
    """Read the dialogues of ``source`` (see the module docstring for the kinds of source).

    ``language``: keep only dialogues of this language (the others are counted, not errors).
    ``limit``: stop after this many dialogues are kept. ``registry``: the dataset registry that
    resolves ``NAME@X.Y.Z`` references (default: the harness registry); ``cache_dir``: the
    ``datasets`` cache for dataset sources (default: its own default). Returns a list of
    :class:`SourceDialogue` with a ``.report`` (:class:`LoadReport`)."""
    if language is not None and (p := language_problem(language)):
        raise ValueError(f"language=: {p}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    text = os.fspath(source)
    report = LoadReport(source=text, limit=limit)
    if text.startswith(TOPICAL_CHAT_PREFIX):
        raw = _topical_chat(Path(text[len(TOPICAL_CHAT_PREFIX) :]).expanduser(), report)
        report.license = SOURCE_LICENSES["topical-chat"]
    elif text.startswith(JSONL_PREFIX):
        raw = _jsonl(Path(text[len(JSONL_PREFIX) :]).expanduser(), report)
    elif Path(text).expanduser().is_file():
        path = Path(text).expanduser()
        if path.suffix.lower() != ".jsonl":
            raise ValueError(
                f"{path}: a file source must be JSONL (*.jsonl or jsonl:<path>); for Topical-Chat JSON "
                f"use 'topical-chat:{path}'"
            )
        raw = _jsonl(path, report)
    elif text.startswith(CONTEXTS_PREFIX):
        raw = _dataset(text[len(CONTEXTS_PREFIX) :], report, registry, cache_dir, contexts=True)
    else:
        raw = _dataset(text, report, registry, cache_dir)
    return _collect(raw, report, language, limit)


# -- shared filtering ----------------------------------------------------------------------------

# A raw dialogue: (id, language, [(text|None, role)], origin, file for error messages)
_Raw = tuple[str, str, list[tuple[Any, str]], str, str]


def _collect(
    raw: Iterator[_Raw], report: LoadReport, language: str | None, limit: int | None
) -> LoadedDialogues:
    out: list[SourceDialogue] = []
    seen: dict[str, str] = {}
    langs: Counter[str] = Counter()
    if limit == 0:
        report.limit_reached = True
        return LoadedDialogues(out, report)
    for did, lang, utterances, origin, file in raw:
        report.read += 1
        if did in seen:
            raise DataValidationError(
                file,
                repr(did),
                "id",
                f"duplicate dialogue id (first in {seen[did]})",
                row_label="dialogue",
                column_label="field",
            )
        seen[did] = file
        if p := language_problem(lang):
            raise DataValidationError(
                file, repr(did), "language", p, row_label="dialogue", column_label="field"
            )
        if language is not None and lang != language:
            report.skipped_language += 1
            report.skipped_ids.setdefault("language", []).append(did)
            continue
        turns: list[str] = []
        roles: list[str] = []
        dropped = 0
        for text, role in utterances:
            if text is None or not str(text).strip():
                dropped += 1
                continue
            turns.append(str(text).strip())
            roles.append(role)
        if dropped:
            report.empty_utterances_dropped += dropped
            report.empty_utterances_by_dialogue[did] = dropped
        if len(turns) < 2:
            report.skipped_one_turn += 1
            report.skipped_ids.setdefault("one_turn", []).append(did)
            continue
        out.append(SourceDialogue(did, lang, turns, roles, origin))
        langs[lang] += 1
        report.kept += 1
        report.utterances_kept += len(turns)
        if limit is not None and report.kept >= limit:
            report.limit_reached = True
            break
    report.languages = dict(sorted(langs.items()))
    return LoadedDialogues(out, report)


def _file_entry(path: Path) -> dict[str, Any]:
    return {"path": str(path), "sha256": sha256_file(path), "size": path.stat().st_size}


# -- Topical-Chat --------------------------------------------------------------------------------


def _topical_chat(path: Path, report: LoadReport) -> Iterator[_Raw]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() == ".json")
        if not files:
            raise FileNotFoundError(f"topical-chat: no *.json file in {path}")
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"topical-chat: {path} does not exist")
    for file in files:
        report.files.append(_file_entry(file))
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataValidationError(
                file, "<file>", "<json>", f"not valid UTF-8 JSON: {e}", row_label="part"
            ) from None
        if not isinstance(data, dict):
            raise DataValidationError(
                file,
                "<file>",
                "<json>",
                "expected an object conversation_id -> conversation",
                row_label="part",
            )
        for did, conv in data.items():
            yield _topical_conversation(file, str(did), conv)


def _topical_conversation(file: Path, did: str, conv: Any) -> _Raw:
    def err(fld: str, problem: str) -> DataValidationError:
        return DataValidationError(file, repr(did), fld, problem, row_label="dialogue", column_label="field")

    content = conv.get("content") if isinstance(conv, dict) else None
    if not isinstance(content, list):
        raise err("content", "missing or not a list of messages")
    agents: dict[str, str] = {}
    utterances: list[tuple[Any, str]] = []
    for i, msg in enumerate(content):
        if not isinstance(msg, dict):
            raise err(f"content.{i}", "a message must be an object {message, agent}")
        agent = msg.get("agent")
        if not isinstance(agent, str) or not agent:
            raise err(f"content.{i}.agent", f"missing agent (got {agent!r})")
        if agent not in agents:
            if len(agents) == 2:
                raise err(f"content.{i}.agent", f"a third speaker {agent!r} (seen: {', '.join(agents)})")
            agents[agent] = ROLES[len(agents)]
        text = msg.get("message")
        if text is not None and not isinstance(text, str):
            raise err(f"content.{i}.message", f"not a string: {text!r}")
        utterances.append((text, agents[agent]))
    return did, "en", utterances, f"topical-chat:{file.name}", str(file)


# -- JSONL ---------------------------------------------------------------------------------------


def _jsonl(path: Path, report: LoadReport) -> Iterator[_Raw]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    report.files.append(_file_entry(path))
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataValidationError(
                    path, lineno, "<json>", f"invalid JSON: {e}", row_label="line"
                ) from None
            if not isinstance(obj, dict):
                raise DataValidationError(
                    path, lineno, "<json>", "a line must be a JSON object", row_label="line"
                )
            yield _jsonl_dialogue(path, lineno, obj)


def _jsonl_dialogue(path: Path, lineno: int, obj: dict[str, Any]) -> _Raw:
    did = obj.get("id")
    if isinstance(did, int) and not isinstance(did, bool):
        did = str(did)
    if not isinstance(did, str) or not did.strip():
        raise DataValidationError(
            path, lineno, "id", f"missing dialogue id (got {did!r})", row_label="line", column_label="field"
        )
    where = f"{lineno} (dialogue {did!r})"

    def err(fld: str, problem: str) -> DataValidationError:
        return DataValidationError(path, where, fld, problem, row_label="line", column_label="field")

    lang = obj.get("language")
    if (p := language_problem(lang)) or not isinstance(lang, str):  # no problem: a code (a str)
        raise err("language", p or f"missing language code (got {lang!r})")
    turns = obj.get("turns")
    if not isinstance(turns, list):
        raise err("turns", "missing or not a list")
    kinds = {type(t) for t in turns if t is not None}
    if kinds - {str, dict}:
        raise err("turns", "a turn must be a string or an object {role, text}")
    if kinds == {str, dict}:
        raise err("turns", "mixes plain strings and {role, text} objects")
    utterances: list[tuple[Any, str]] = []
    if dict in kinds:
        for i, t in enumerate(turns):
            if t is None:
                raise err(f"turns.{i}", "null turn")
            role, text = t.get("role"), t.get("text")
            if role not in ROLES:
                raise err(f"turns.{i}.role", f"unknown role {role!r}; expected one of {ROLES}")
            if text is not None and not isinstance(text, str):
                raise err(f"turns.{i}.text", f"not a string: {text!r}")
            utterances.append((text, role))
    else:
        utterances = list(zip(turns, dialogue_level_roles(len(turns)), strict=True))
    return did, lang, utterances, path.name, str(path)


# -- built datasets / registry references ----------------------------------------------------------


def _dataset(
    text: str,
    report: LoadReport,
    registry: str | os.PathLike[str] | None,
    cache_dir: str | os.PathLike[str] | None,
    contexts: bool = False,
) -> Iterator[_Raw]:
    import datasets

    directory, config, release = _resolve_dataset(text, registry)
    manifest_path = directory / "build_manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    configs: dict[str, Any] = manifest.get("configs") or {}
    want = "turn" if contexts else "dialogue"
    if config is None:
        level_configs = [c for c, e in configs.items() if e.get("level") == want]
        if len(level_configs) != 1:
            raise ValueError(
                f"{directory}: name the config (DIR:CONFIG); {want}-level configs: "
                f"{', '.join(level_configs) or 'none'} (all: {', '.join(configs) or 'unknown'})"
            )
        config = level_configs[0]
    level = (configs.get(config) or {}).get("level")
    if configs and config not in configs:
        raise ValueError(f"{directory}: no config {config!r}; configs: {', '.join(configs)}")
    if level not in (None, want):
        hint = (
            f"; for the contexts of turn-level records use '{CONTEXTS_PREFIX}{text}'"
            if level == "turn"
            else ""
        )
        raise ValueError(
            f"{directory}:{config} is {level}-level; load_dialogues reads "
            f"{'the contexts of turn-level records' if contexts else 'dialogue-level records (turns)'}{hint}"
        )
    report.files.append(
        {
            "path": str(directory),
            "config": config,
            "fingerprint": manifest.get("fingerprint"),
            "release": manifest.get("release") or release,
        }
    )
    ds = datasets.load_dataset(
        str(directory), config, split="test", cache_dir=os.fspath(cache_dir) if cache_dir else None
    )
    field_name = "context" if contexts else "turns"
    if field_name not in ds.column_names:
        raise ValueError(f"{directory}:{config} has no {field_name!r} column (not {want}-level records)")
    file = f"{directory}/{config}"
    origin = f"{release['name']}@{release['version']}:{config}" if release else f"{directory}:{config}"
    seen_contexts: set[tuple[str, tuple[str, ...]]] = set()
    for row in ds:
        did = row.get("id")
        if not isinstance(did, str) or not did:
            raise DataValidationError(
                file, report.read + 1, "id", f"missing record id (got {did!r})", column_label="field"
            )
        turns = row.get(field_name) or []
        if field_name == "context":  # one dialogue per distinct context of a language
            key = (str(row.get("language")), tuple(str(t.get("text")) for t in turns))
            if key in seen_contexts:
                report.duplicate_contexts += 1
                continue
            seen_contexts.add(key)
            did = f"{did}#context"
        utterances = []
        for i, t in enumerate(turns):
            role = t.get("role")
            if role not in ROLES:
                raise DataValidationError(
                    file,
                    repr(did),
                    f"{field_name}.{i}.role",
                    f"unknown role {role!r}",
                    row_label="dialogue",
                    column_label="field",
                )
            utterances.append((t.get("text"), role))
        yield did, row.get("language"), utterances, origin, file


def _resolve_dataset(
    text: str, registry: str | os.PathLike[str] | None
) -> tuple[Path, str | None, dict[str, Any] | None]:
    """``DIR`` / ``DIR:CONFIG`` / ``NAME[@X.Y.Z][:CONFIG]`` -> (directory, config, release)."""
    from harness.data.registry import Registry, RegistryError

    path = Path(text).expanduser()
    if path.is_dir():
        return path, None, None
    base, sep, config = text.rpartition(":")
    if sep and base and Path(base).expanduser().is_dir():
        return Path(base).expanduser(), config or None, None
    ref, config_or_none = (base, config or None) if sep and base else (text, None)
    try:
        rv = Registry(registry).resolve(ref)
    except RegistryError as e:
        raise FileNotFoundError(
            f"{text!r} is neither 'topical-chat:<path>', a JSONL file, a dataset directory (DIR[:CONFIG]) "
            f"nor a registered dataset (NAME[@X.Y.Z][:CONFIG]): {e}"
        ) from None
    return rv.path, config_or_none, {"name": rv.name, "version": rv.version}
