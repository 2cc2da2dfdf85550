"""The dialeval-harness demo benchmark: a small multilingual turn- and dialogue-level set written by
the project, packaged with it (``dataset_builders/demo_data/``) so everything runs offline.

Source files (one JSON object per line; blank lines are ignored)::

    turn.jsonl  {"item": "t01", "language": "en", "context": ["utt 1", "utt 2"], "response": "...", "rating": 4.0}
    dial.jsonl  {"item": "d01", "language": "en", "turns": ["utt 1", "utt 2", "..."], "rating": 3.0}

Ratings are on a 1-5 scale. Dialogue turns alternate user/assistant starting with the user; at
turn level the response is the assistant's and the context alternates backwards from it.
Configs: ``demo-turn`` and ``demo-dial`` (same record schema as every builder, see
:mod:`dataset_builders.base`); ``item_id`` is ``demo-turn-<item>``, ``id`` adds the language.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dataset_builders.base import DEFAULT_DIMENSION, Builder
from dataset_builders.helpers import LANGUAGES, check_rating, dialogue_level_roles, messages, turn_level_roles
from dataset_builders.records import ConfigData, SourceFile
from harness.data.schema import DataValidationError, Dimension, SourceUnavailableError

PACKAGED_DATA = Path(__file__).resolve().parent / "demo_data"
RATING_RANGE = (1.0, 5.0)

#: file name -> (config name, level)
DEMO_FILES: dict[str, tuple[str, str]] = {
    "turn.jsonl": ("demo-turn", "turn"),
    "dial.jsonl": ("demo-dial", "dialogue"),
}
_FIELDS = {
    "turn": ("item", "language", "context", "response", "rating"),
    "dialogue": ("item", "language", "turns", "rating"),
}


class DemoBuilder(Builder):
    """Builds ``demo-turn`` / ``demo-dial`` from the packaged JSONL files (or ``--source DIR``)."""

    name = "demo"
    version = "1.1.0"
    dimensions = (
        Dimension(
            "relevance", "Is the response relevant to the dialogue context? (mean rating)", "likert", 1, 5
        ),
        Dimension("coherence", "Is the dialogue coherent as a whole? (mean rating)", "likert", 1, 5),
    )
    pretty_name = "dialeval-harness demo benchmark"
    description = (
        "A small multilingual open-domain dialogue evaluation set written by the dialeval-harness developers "
        "for demos, tutorials and offline tests: turn-level items (context + response, rated for relevance) and "
        "dialogue-level items (rated for coherence), with 1-5 ratings. It is not a research benchmark: the items "
        "and ratings were written by hand to exercise the harness."
    )
    license = "CC-BY-4.0"
    homepage = ""
    citation = """\
@misc{dialeval-harness-demo,
    title = "dialeval-harness demo benchmark",
    author = "{dialeval-harness developers}",
    note = "Packaged with dialeval-harness (dataset_builders/demo_data)",
}"""
    tags = ("dialogue-evaluation", "multilingual", "demo")

    def resolve_sources(self, source: str | os.PathLike[str] | None, warnings: list[str]) -> list[SourceFile]:
        root = PACKAGED_DATA if source is None else Path(source).expanduser()
        if not root.is_dir():
            raise SourceUnavailableError(f"demo: source directory {root} does not exist")
        out: list[SourceFile] = []
        for fname, (config, level) in DEMO_FILES.items():
            p = root / fname
            if p.is_file():
                origin = f"dataset_builders/demo_data/{fname}" if source is None else str(p.resolve())
                out.append(SourceFile(config, level, p, origin))
        missing = [f for f in DEMO_FILES if not (root / f).is_file()]
        if not out:
            raise SourceUnavailableError(f"demo: none of {', '.join(DEMO_FILES)} found in {root}")
        if missing:
            warnings.append(f"demo: {', '.join(missing)} not found in {root}; its config is not built")
        return out

    def read_config(self, src: SourceFile, languages: tuple[str, ...], warnings: list[str]) -> ConfigData:
        level = src.level
        path = src.path
        fields = _FIELDS[level]
        seen: dict[tuple[str, str], int] = {}
        item_ratings: dict[str, tuple[float, int]] = {}
        langs_by_item: dict[str, set[str]] = {}
        records: list[tuple[int, int, dict[str, Any]]] = []  # (language order, line, record)
        lang_order = {lang: i for i, lang in enumerate(LANGUAGES)}

        def err(line: int, fld: str, problem: str) -> DataValidationError:
            return DataValidationError(path, line, fld, problem, row_label="line", column_label="field")

        with open(path, encoding="utf-8-sig") as f:
            lines = f.read().splitlines()
        for n, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as e:
                raise err(n, "<json>", f"invalid JSON: {e.msg} at column {e.colno}") from None
            if not isinstance(obj, dict):
                raise err(n, "<json>", f"expected a JSON object, got {type(obj).__name__}")
            for fld in fields:
                if fld not in obj:
                    raise err(n, fld, "missing field")
            extra = sorted(set(obj) - set(fields))
            if extra:
                warnings.append(f"{src.config}: {path.name}, line {n}: ignored unknown field(s) {extra}")

            item = obj["item"]
            if not isinstance(item, str) or not item.strip():
                raise err(n, "item", f"item must be a non-empty string, got {item!r}")
            item = item.strip()
            lang = obj["language"]
            if lang not in LANGUAGES:
                raise err(n, "language", f"unknown language {lang!r}; expected one of {', '.join(LANGUAGES)}")
            key = (item, lang)
            if key in seen:
                raise err(
                    n, "item", f"duplicate item {item!r} for language {lang!r} (first on line {seen[key]})"
                )
            seen[key] = n
            rating = check_rating(obj["rating"])
            if rating is None or isinstance(obj["rating"], str):
                raise err(n, "rating", f"rating must be a finite number, got {obj['rating']!r}")
            if not RATING_RANGE[0] <= rating <= RATING_RANGE[1]:
                raise err(n, "rating", f"rating {rating:g} outside {RATING_RANGE[0]:g}-{RATING_RANGE[1]:g}")
            if item in item_ratings and item_ratings[item][0] != rating:
                first_rating, first_line = item_ratings[item]
                raise err(
                    n,
                    "rating",
                    f"item {item!r} has rating {first_rating:g} on line {first_line}; translations must agree",
                )
            item_ratings.setdefault(item, (rating, n))
            langs_by_item.setdefault(item, set()).add(lang)

            text_field = "context" if level == "turn" else "turns"
            utts = obj[text_field]
            if not isinstance(utts, list) or not utts:
                raise err(n, text_field, f"{text_field} must be a non-empty list of strings")
            for k, u in enumerate(utts, start=1):
                if not isinstance(u, str) or not u.strip():
                    raise err(n, text_field, f"utterance {k} must be a non-empty string, got {u!r}")
            utts = [u.strip() for u in utts]
            response = obj.get("response")
            if level == "turn" and (not isinstance(response, str) or not response.strip()):
                raise err(n, "response", f"response must be a non-empty string, got {response!r}")

            if lang not in languages:
                continue
            item_id = f"{src.config}-{item}"
            rec: dict[str, Any] = {
                "id": f"{item_id}-{lang}",
                "item_id": item_id,
                "dataset": src.config,
                "language": lang,
                "level": level,
            }
            if level == "turn":
                rec["context"] = messages(utts, turn_level_roles(len(utts)))
                rec["response"] = str(response).strip()  # a non-empty string (checked above)
            else:
                rec["turns"] = messages(utts, dialogue_level_roles(len(utts)))
            rec["rating"] = rating
            rec["dimension"] = DEFAULT_DIMENSION[level]
            records.append((lang_order[lang], n, rec))

        if not seen:
            raise err(1, "item", "no records in file")
        all_langs = {lang for langs in langs_by_item.values() for lang in langs}
        partial = sorted(i for i, langs in langs_by_item.items() if langs != all_langs)
        if partial:
            warnings.append(
                f"{src.config}: {len(partial)} item(s) lack some of the languages {sorted(all_langs)}: "
                + ", ".join(partial[:10])
                + (" ..." if len(partial) > 10 else "")
            )
        records.sort(key=lambda t: (t[0], t[1]))
        return ConfigData(
            name=src.config,
            level=level,
            records=[rec for _, _, rec in records],
            expected_instances=None,
            dimension=DEFAULT_DIMENSION[level],
            title="Demo turn level" if level == "turn" else "Demo dialogue level",
            source=src,
        )

    def license_note(self) -> str:
        return "Written by the dialeval-harness developers and released under CC-BY-4.0 (see demo_data/README.md); not derived from any existing dataset."
