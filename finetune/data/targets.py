"""Held-out targets of ``harness chatbot-eval`` (:mod:`finetune.chatbot_eval`, UPHELD App. B.1):
conversations cut before a human-written turn — the history before it (the last ``max_context``
turns) and the withheld turn, the reference.

Sources (:func:`load_targets`): a JSONL file (``*.jsonl`` / ``jsonl:<path>``), one dialogue per line
(a list of ``{"role", "text"}`` turns, or an object with it under ``turns`` + optional ``id`` and
``language``: what ``harness finetune chatbot`` reads); ``topical-chat:<path>`` or a built dataset /
registry reference (``DIR[:CONFIG]``, ``NAME[@X.Y.Z][:CONFIG]``) with dialogue-level records, read by
:func:`finetune.data.sources.load_dialogues`; or a built dataset's turn-level config with references
(UPHELD ``main``): one target per ``item_id`` (``context`` + ``reference``; withheld user turns are
skipped and counted). Targets of a dialogue are its assistant turns after the first turn; ``limit``
keeps a seeded random subset.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Target:
    """One withheld turn: the history before it and the human-written turn (the reference)."""

    id: str
    dialogue_id: str
    turn: int | None  # index in the dialogue (None for turn-level items)
    language: str
    context: list[dict[str, str]]  # [{"role", "text"}], oldest first
    reference: str


def load_targets(
    source: str | os.PathLike[str], *, max_context: int | None = None, limit: int | None = None, seed: int = 0
) -> tuple[list[Target], dict[str, Any]]:
    """The withheld turns of ``source`` and a description of what was read (for the results)."""
    from dataset_builders.helpers import sha256_file
    from finetune.data.sources import JSONL_PREFIX, TOPICAL_CHAT_PREFIX, load_dialogues

    for name, v in (("max_context", max_context), ("limit", limit)):
        if v is not None and v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    text = os.fspath(source)
    info: dict[str, Any] = {"source": text}
    path = Path(text.removeprefix(JSONL_PREFIX)).expanduser()
    turn_level = None
    if text.startswith(JSONL_PREFIX) or (path.suffix.lower() == ".jsonl" and path.is_file()):
        dialogues = _read_jsonl(path)
        info.update(kind="jsonl", files=[{"path": str(path.resolve()), "sha256": sha256_file(path)}])
    elif text.startswith(TOPICAL_CHAT_PREFIX) or (turn_level := _turn_level_config(text, info)) is None:
        loaded = load_dialogues(text)
        info.update(kind="dialogues", report=loaded.report.to_dict())
        dialogues = [
            (d.id, d.language, [{"role": r, "text": t} for r, t in zip(d.roles, d.turns, strict=True)])
            for d in loaded
        ]
    if turn_level is not None:
        targets = _turn_targets(*turn_level, max_context, info)
    elif not dialogues:
        raise ValueError(f"{text}: the source holds no dialogue (with at least two turns)")
    else:
        targets = [t for d in dialogues for t in _dialogue_targets(*d, max_context)]
    if not targets:
        raise ValueError(
            f"{text}: no assistant turn after the first turn, so there is nothing to generate "
            "(targets are the assistant turns, their history the context)"
        )
    info["targets_available"] = len(targets)
    if limit is not None and len(targets) > limit:
        targets = [targets[i] for i in sorted(random.Random(seed).sample(range(len(targets)), limit))]
    info["targets"] = len(targets)
    return targets, info


def _read_jsonl(path: Path) -> list[tuple[str, str, list[dict[str, str]]]]:
    """(id, language, turns) per line; roles normalised as :func:`finetune.sft.to_messages` does."""
    from dataset_builders.helpers import dialogue_level_roles
    from finetune.data.sources import language_problem
    from finetune.sft import to_messages

    out, seen = [], set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{lineno}: invalid JSON: {e}") from None
        meta = obj if isinstance(obj, dict) else {}
        turns = meta.get("turns") if isinstance(obj, dict) else obj
        did, lang = str(meta.get("id", f"line-{lineno}")), meta.get("language", "en")
        where = f"{path}:{lineno} (dialogue {did!r})"
        if not isinstance(turns, list):
            raise ValueError(f"{where}: a line is a list of {{role, text}} turns or an object with 'turns'")
        if (p := language_problem(lang)) is not None:
            raise ValueError(f"{where}: {p}")
        if turns and all(isinstance(t, str) for t in turns):
            turns = [
                {"role": r, "text": t} for r, t in zip(dialogue_level_roles(len(turns)), turns, strict=True)
            ]
        if not all(isinstance(t, dict) for t in turns):
            raise ValueError(f"{where}: a turn must be a {{role, text}} object")
        try:
            msgs = to_messages(turns)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        if did in seen:
            raise ValueError(f"{where}: duplicate dialogue id")
        seen.add(did)
        out.append(
            (
                did,
                lang,
                [{"role": m["role"], "text": m["content"].strip()} for m in msgs if m["content"].strip()],
            )
        )
    return out


def _dialogue_targets(
    did: str, lang: str, turns: list[dict[str, str]], k_max: int | None
) -> Iterator[Target]:
    system = [t for t in turns if t["role"] == "system"]  # kept in every context, not counted in K
    conv = [t for t in turns if t["role"] != "system"]
    for k, t in enumerate(conv):
        if k >= 1 and t["role"] == "assistant":
            yield Target(f"{did}#{k}", did, k, lang, system + conv[:k][-(k_max or k) :], t["text"])


def _turn_level_config(text: str, info: dict[str, Any]) -> tuple[Path, str] | None:
    """(directory, config) when ``text`` names a built dataset's turn-level config; None for a
    dialogue-level one (or no build manifest), which :func:`load_dialogues` reads."""
    from finetune.data.sources import resolve_dataset

    directory, config, release = resolve_dataset(text, None)
    manifest_path = directory / "build_manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8")) if manifest_path.is_file() else {}
    levels = {c: e.get("level") for c, e in (manifest.get("configs") or {}).items()}
    if config is None and levels and list(levels.values()).count("dialogue") != 1:
        turn = [c for c, lvl in levels.items() if lvl == "turn"]
        if len(turn) != 1 or "dialogue" in levels.values():
            raise ValueError(
                f"{text}: name the config (DIR:CONFIG or NAME@X.Y.Z:CONFIG); configs: {', '.join(levels)}"
            )
        config = turn[0]
    if config is None or levels.get(config) != "turn":
        return None
    info.update(release=release, fingerprint=manifest.get("fingerprint"))
    return directory, config


def _turn_targets(directory: Path, config: str, k_max: int | None, info: dict[str, Any]) -> list[Target]:
    import datasets

    ds = datasets.load_dataset(str(directory), config, split="test")
    if not {"context", "reference"} <= set(ds.column_names):
        raise ValueError(
            f"{directory}:{config} has no context / reference columns: no withheld turn to compare with"
        )
    skipped: Counter[str] = Counter()
    out, seen = [], set()
    for row in ds:
        key, ref = str(row.get("item_id") or row["id"]), str(row.get("reference") or "").strip()
        ctx = [
            {"role": t["role"], "text": t["text"]}
            for t in row.get("context") or []
            if str(t.get("text") or "").strip()
        ]
        reason = (
            "same_item"
            if key in seen
            else "no_reference"
            if not ref
            else "empty_context"
            if not ctx
            else "user_turn"
            if (row.get("response_role") or "assistant") != "assistant"
            else None
        )
        if reason:
            skipped[reason] += 1
            continue
        seen.add(key)
        out.append(
            Target(
                key,
                str(row.get("dialogue_id") or key),
                None,
                row.get("language") or "en",
                ctx[-(k_max or len(ctx)) :],
                ref,
            )
        )
    info.update(kind="turn-items", path=str(directory), config=config, rows=len(ds), skipped=dict(skipped))
    return out
