"""Dialogue sources of the self-supervised training data: plain multi-turn dialogues.

:func:`load_dialogues` reads one source into :class:`SourceDialogue` objects (id, language, the
utterances, their speaker roles and where they came from). The kinds of source:

``topical-chat:<file.json | directory>``
    Topical-Chat (Gopalakrishnan et al. 2019; CDLA-Sharing-1.0) in its release layout: a JSON object
    ``conversation_id -> {"content": [{"message", "agent", ...}], ...}``; a directory means every
    ``*.json`` file in it (sorted by name). Language ``en``; roles follow the agent: the agent who
    speaks first is ``user``, the other ``assistant``.
``chitchat:`` or ``chitchat:<dataset.json>``
    The Chit-Chat Challenge corpus (BYU; 7,168 human–human open-domain conversations; MIT) shipped by
    the PyPI package ``chitchat-dataset`` (its ``dataset.json`` by default): each turn is one
    sender's consecutive messages joined with a space; language ``en``; the first sender is
    ``user``. Its conversation ratings are never read. (:mod:`finetune.data.sources.files`)
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

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from finetune.data.sources.base import (
    CHITCHAT_PREFIX,
    CONTEXTS_PREFIX,
    JSONL_PREFIX,
    ROLES,
    SOURCE_LICENSES,
    TOPICAL_CHAT_PREFIX,
    LoadedDialogues,
    LoadReport,
    Raw,
    SourceDialogue,
    language_problem,
)
from finetune.data.sources.built import dataset_dialogues, resolve_dataset
from finetune.data.sources.files import chitchat, jsonl_dialogues, topical_chat
from harness.data.schema import DataValidationError

__all__ = [
    "CHITCHAT_PREFIX",
    "CONTEXTS_PREFIX",
    "JSONL_PREFIX",
    "ROLES",
    "SOURCE_LICENSES",
    "TOPICAL_CHAT_PREFIX",
    "LoadReport",
    "LoadedDialogues",
    "SourceDialogue",
    "language_problem",
    "load_dialogues",
    "resolve_dataset",
]


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
        raw = topical_chat(Path(text[len(TOPICAL_CHAT_PREFIX) :]).expanduser(), report)
        report.license = SOURCE_LICENSES["topical-chat"]
    elif text.startswith(CHITCHAT_PREFIX):
        rest = text[len(CHITCHAT_PREFIX) :]
        raw = chitchat(Path(rest).expanduser() if rest else None, report)
        report.license = SOURCE_LICENSES["chitchat"]
    elif text.startswith(JSONL_PREFIX):
        raw = jsonl_dialogues(Path(text[len(JSONL_PREFIX) :]).expanduser(), report)
    elif Path(text).expanduser().is_file():
        path = Path(text).expanduser()
        if path.suffix.lower() != ".jsonl":
            raise ValueError(
                f"{path}: a file source must be JSONL (*.jsonl or jsonl:<path>); for Topical-Chat JSON "
                f"use 'topical-chat:{path}'"
            )
        raw = jsonl_dialogues(path, report)
    elif text.startswith(CONTEXTS_PREFIX):
        raw = dataset_dialogues(text[len(CONTEXTS_PREFIX) :], report, registry, cache_dir, contexts=True)
    else:
        raw = dataset_dialogues(text, report, registry, cache_dir)
    return _collect(raw, report, language, limit)


def _collect(
    raw: Iterator[Raw], report: LoadReport, language: str | None, limit: int | None
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
