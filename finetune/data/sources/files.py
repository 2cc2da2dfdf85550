"""Dialogue corpora stored as files: Topical-Chat (its release JSON), the Chit-Chat Challenge corpus
(PyPI ``chitchat-dataset``) and JSONL dialogues. Each reader yields raw dialogues
(:data:`finetune.data.sources.base.Raw`) for :func:`finetune.data.sources.load_dialogues`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dataset_builders.helpers import dialogue_level_roles
from finetune.data.sources.base import ROLES, LoadReport, Raw, file_entry, language_problem
from harness.data.schema import DataValidationError

# -- Topical-Chat --------------------------------------------------------------------------------


def topical_chat(path: Path, report: LoadReport) -> Iterator[Raw]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() == ".json")
        if not files:
            raise FileNotFoundError(f"topical-chat: no *.json file in {path}")
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"topical-chat: {path} does not exist")
    for file in files:
        for did, conv in _conversations(file, report):
            yield _topical_conversation(file, did, conv)


def _conversations(file: Path, report: LoadReport) -> Iterator[tuple[str, Any]]:
    """The (id, conversation) pairs of a JSON file holding one object ``conversation_id ->
    conversation`` (Topical-Chat, the Chit-Chat Challenge), the file recorded in ``report``."""
    report.files.append(file_entry(file))
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataValidationError(
            file, "<file>", "<json>", f"not valid UTF-8 JSON: {e}", row_label="part"
        ) from None
    if not isinstance(data, dict):
        raise DataValidationError(
            file, "<file>", "<json>", "expected an object conversation_id -> conversation", row_label="part"
        )
    for did, conv in data.items():
        yield str(did), conv


def _topical_conversation(file: Path, did: str, conv: Any) -> Raw:
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


def jsonl_dialogues(path: Path, report: LoadReport) -> Iterator[Raw]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    report.files.append(file_entry(path))
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


def _jsonl_dialogue(path: Path, lineno: int, obj: dict[str, Any]) -> Raw:
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


# -- Chit-Chat Challenge (PyPI chitchat-dataset) ---------------------------------------------------


def chitchat_default_path() -> Path:
    """``dataset.json`` of the installed ``chitchat-dataset`` package (MIT)."""
    try:
        import chitchat_dataset
    except ImportError as e:
        raise ImportError(
            "chitchat: needs the PyPI package 'chitchat-dataset' (pip install chitchat-dataset), or give the "
            "corpus file: 'chitchat:<path to dataset.json>'"
        ) from e
    return Path(chitchat_dataset.__file__).resolve().parent / "dataset.json"


def chitchat(path: Path | None, report: LoadReport) -> Iterator[Raw]:
    """The BYU Chit-Chat Challenge corpus (7,168 human–human conversations, MIT) as released in the
    ``chitchat-dataset`` package: a JSON object ``conversation_id -> {"messages": [[{"text",
    "sender", "timestamp"}, ...], ...], "ratings", "prompt", "start"}``. Each inner list is one turn
    (consecutive messages of one sender), its messages joined with a space; the first sender is
    ``user``, the other ``assistant``. Language ``en``. Ratings are never read."""
    file = path if path is not None else chitchat_default_path()
    if not file.is_file():
        raise FileNotFoundError(f"chitchat: {file} does not exist")
    for did, conv in _conversations(file, report):
        yield _chitchat_conversation(file, did, conv)


def _chitchat_conversation(file: Path, did: str, conv: Any) -> Raw:
    def err(fld: str, problem: str) -> DataValidationError:
        return DataValidationError(file, repr(did), fld, problem, row_label="dialogue", column_label="field")

    turns = conv.get("messages") if isinstance(conv, dict) else None
    if not isinstance(turns, list):
        raise err("messages", "missing or not a list of turns")
    senders: dict[str, str] = {}
    utterances: list[tuple[Any, str]] = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, list) or not turn:
            raise err(f"messages.{i}", "a turn must be a non-empty list of messages {text, sender}")
        texts: list[str] = []
        sender = None
        for j, msg in enumerate(turn):
            if not isinstance(msg, dict):
                raise err(f"messages.{i}.{j}", "a message must be an object {text, sender}")
            s, text = msg.get("sender"), msg.get("text")
            if not isinstance(s, str) or not s:
                raise err(f"messages.{i}.{j}.sender", f"missing sender (got {s!r})")
            if sender is not None and s != sender:
                raise err(f"messages.{i}.{j}.sender", f"a turn mixes senders {sender!r} and {s!r}")
            sender = s
            if text is not None and not isinstance(text, str):
                raise err(f"messages.{i}.{j}.text", f"not a string: {text!r}")
            if text and text.strip():
                texts.append(text.strip())
        assert sender is not None
        if sender not in senders:
            if len(senders) == 2:
                raise err(f"messages.{i}", f"a third speaker {sender!r} (seen: {', '.join(senders)})")
            senders[sender] = ROLES[len(senders)]
        utterances.append((" ".join(texts) or None, senders[sender]))
    return did, "en", utterances, f"chitchat:{file.name}", str(file)
