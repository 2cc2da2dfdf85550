"""The human-annotation round trip of the MEDAL benchmark (MEDAL §5.2, App. E.1).

1. :func:`export_sheets` writes one blank sheet per language (``<lang>/sheet.csv`` and/or
   ``sheet.jsonl``), ``GUIDELINES.md`` (the Table 11 guideline, the Table 1 definitions, the scales
   and how to return the file) and ``manifest.json``. Annotation is blind: the sheets never show the
   chatbot or user model. With ``seeds`` the scene and persona are added for context.
2. Each annotator returns ``<lang>/<annotator_id>.csv`` (UTF-8, with or without BOM; comma,
   semicolon or tab separated) or ``.jsonl``; :func:`import_annotations` reads and validates them
   all into an :class:`AnnotationSet` (first error raised), :func:`validate_annotations` lists
   every error (for a CLI report). Issue labels are ``0``/``1`` (``true``/``false`` accepted),
   ``overall`` an integer 1–5; any other cell follows the builders' odd-cell policy
   (:mod:`harness.data.cells`: read by its point or a missing label, listed in ``odd_cells``).
3. :func:`~dataset_builders.medal_pipeline.annotation.agreement.agreement_tables` /
   ``agreement_markdown`` give Tables 4 and 5; :func:`benchmark_records` the dialogue-level
   common-schema records of the ``benchmark`` config.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dataset_builders.medal_labels import (
    ISSUE_ABBREVIATIONS,
    ISSUE_DEFINITIONS,
    MEDAL_ISSUES,
    MEDAL_OVERALL,
    MEDAL_SYSTEM,
    OVERALL_DEFINITION,
)
from dataset_builders.medal_pipeline.annotation.agreement import (  # noqa: F401  (re-exported)
    agreement_markdown,
    agreement_tables,
    benchmark_records,
    language_order,
    seed_field,
)
from dataset_builders.medal_pipeline.annotation.imports import (  # noqa: F401  (re-exported)
    LABEL_COLUMNS,
    REQUIRED_COLUMNS,
    SHEET_STEM,
    AnnotationSet,
    import_annotations,
    validate_annotations,
)
from dataset_builders.medal_pipeline.types import Dialogue

FORMATS = ("csv", "jsonl")


def render_dialogue(dialogue: Dialogue) -> str:
    """``user: …`` / ``assistant: …`` lines, as the Table 11 prompt shows a dialogue."""
    return "\n".join(f"{t.role}: {t.text}" for t in dialogue.turns)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def guidelines_text() -> str:
    """GUIDELINES.md: the Table 11 guideline, the Table 1 definitions, the scales, how to return."""
    guideline = MEDAL_SYSTEM.split("Your output must be")[0].replace("{{", "{").replace("}}", "}").strip()
    rows = "\n".join(
        f"| `{n}` | {ISSUE_ABBREVIATIONS[n]} | {ISSUE_DEFINITIONS[n]} | 0 / 1 |" for n in MEDAL_ISSUES
    )
    return f"""# MEDAL dialogue annotation guidelines

You will read dialogues between a user and a chatbot (the "assistant") and judge **only the
assistant's responses**, as if the chatbot were deployed in an online chat service. Annotate on your
own, without discussing the dialogues with other annotators. The scene and persona columns (when
present) only describe the simulated user; the chatbot never saw them.

## Guideline (MEDAL Table 11)

{guideline}

Item 9 ("Other") has no column: describe such issues in `comments`.

## Labels (MEDAL Table 1)

| column | abbreviation | definition | values |
|---|---|---|---|
{rows}
| `{MEDAL_OVERALL}` | Overall | {OVERALL_DEFINITION} | integer 1–5 |

* Issue columns: `1` = the issue appears in at least one assistant turn, `0` = it never does
  (`true` / `false` are accepted too). Nothing else (no `yes`, `x`, `0.5`).
* `{MEDAL_OVERALL}`: an integer from 1 (Very bad) to 5 (Very good): 5 – Very good (consistently
  appropriate, coherent, natural); 4 – Good (mostly appropriate, minor issues); 3 – Fair (mixed
  quality); 2 – Poor (many inappropriate/awkward responses); 1 – Very bad (mostly
  inappropriate/disruptive). No half points.
* `comments`: optional free text (e.g. what "Other" issue you saw, or why you rated as you did).

## How to fill in and return the sheet

1. Open `<lang>/sheet.csv` (UTF-8; a spreadsheet program can import it) or `<lang>/sheet.jsonl`.
2. Fill in **every** label cell of **every** row: leave no cell empty. Do not change `dialogue_id`,
   do not add, remove or duplicate rows. Row order does not matter.
3. Save as `<lang>/<annotator_id>.csv` (CSV, UTF-8; comma-, semicolon- or tab-separated) or
   `<lang>/<annotator_id>.jsonl` (one JSON object per line, the same fields), where
   `<annotator_id>` is the id you were given (letters, digits, `-`, `_`; not `sheet`). Spreadsheet
   files (`.xlsx`, `.ods`) are not accepted: export to CSV.
4. Return that one file.
"""


def export_sheets(
    dialogues: Sequence[Dialogue],
    out_dir: Path,
    *,
    seeds: Mapping[str, Any] | None = None,
    formats: Sequence[str] = FORMATS,
    created_at: str | None = None,
) -> dict[str, list[Path]]:
    """Write the blank annotation sheets; return ``{lang: [sheet paths]}``.

    Columns: ``dialogue_id``, ``language``, (``scene``, ``persona`` when ``seeds`` is given),
    ``dialogue``, one empty column per :data:`LABEL_COLUMNS` and ``comments``. CSV is plain UTF-8
    (no BOM) written with :mod:`csv` (multi-line cells are quoted). Also writes
    ``out_dir/GUIDELINES.md`` and ``out_dir/manifest.json`` (dialogue ids per language, sha256 of
    every sheet, ``created_at``). Dialogues keep their given order within a language.
    """
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(f"formats must be a non-empty subset of {FORMATS}, got {list(formats)}")
    by_lang: dict[str, list[Dialogue]] = {}
    seen: set[str] = set()
    for d in dialogues:
        if d.id in seen:
            raise ValueError(f"dialogue {d.id!r} is given twice")
        if not d.turns:
            raise ValueError(f"dialogue {d.id!r} has no turns to annotate")
        seen.add(d.id)
        by_lang.setdefault(d.language, []).append(d)
    context = ("scene", "persona") if seeds is not None else ()
    columns = ["dialogue_id", "language", *context, "dialogue", *LABEL_COLUMNS, "comments"]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[Path]] = {}
    manifest_langs: dict[str, Any] = {}
    for lang in language_order(by_lang):
        rows = []
        for d in by_lang[lang]:
            row: dict[str, Any] = {"dialogue_id": d.id, "language": lang}
            row.update({c: seed_field(seeds, d.seed_id, c) for c in context})
            row.update({"dialogue": render_dialogue(d), **dict.fromkeys(LABEL_COLUMNS), "comments": ""})
            rows.append(row)
        (out_dir / lang).mkdir(exist_ok=True)
        paths = []
        if "csv" in formats:
            path = out_dir / lang / f"{SHEET_STEM}.csv"
            with open(path, "w", encoding="utf-8", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(columns)
                writer.writerows([["" if r[c] is None else r[c] for c in columns] for r in rows])
            paths.append(path)
        if "jsonl" in formats:
            path = out_dir / lang / f"{SHEET_STEM}.jsonl"
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
            paths.append(path)
        written[lang] = paths
        manifest_langs[lang] = {
            "dialogue_ids": [d.id for d in by_lang[lang]],
            "sheets": {p.relative_to(out_dir).as_posix(): _sha256(p) for p in paths},
        }
    guide = out_dir / "GUIDELINES.md"
    guide.write_text(guidelines_text(), encoding="utf-8")
    manifest = {
        "format": "medal-annotation-sheets/1",
        "created_at": created_at or datetime.now(UTC).isoformat(timespec="seconds"),
        "columns": columns,
        "label_columns": list(LABEL_COLUMNS),
        "scales": {**dict.fromkeys(MEDAL_ISSUES, "0/1"), MEDAL_OVERALL: "integer 1-5"},
        "guidelines": {"path": guide.name, "sha256": _sha256(guide)},
        "languages": manifest_langs,
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", "utf-8")
    return written


def expected_from_manifest(out_dir: Path) -> dict[str, str]:
    """``{dialogue id: language}`` from the ``manifest.json`` :func:`export_sheets` wrote."""
    manifest = json.loads((Path(out_dir) / "manifest.json").read_text(encoding="utf-8"))
    return {d: lang for lang, v in manifest["languages"].items() for d in v["dialogue_ids"]}
