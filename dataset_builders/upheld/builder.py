"""UPHELD builder: merge the per-annotator CSVs into turn-level records with every annotator's labels.

UPHELD (Subasic et al.) releases one CSV per annotator (``annotator_1.csv`` .. ``annotator_10.csv``)
per set; each row is one annotator's label set for one *item*: a chat history, the human reference
continuation (``Option A``), a model continuation (``Option B``), the model id (``model``, main set
only) and three score strings. An item is identified by its turn id (``id_annotated`` — written as
an unnamed first column, ``Unnamed: 0``, in 9 of the 10 main files — or ``id`` in the verification
sets) plus the model. Each item is rated by five of the ten annotators.

Output: one turn-level config per set (``main``, ``llm_arena``, and ``topical_chat`` when its
files are given), one row per item, with the labels of every annotator on the three dimensions,
the App. E.1 aggregate (sum / sum of maxima), the mean, the winning label and the agreement
bucket of App. J. See :mod:`dataset_builders.upheld.labels` for the label vocabulary. Odd cells (a
label in another scale's wording, an unreadable label, a row whose texts cannot be read, blank and
repeated header rows) follow the builders' policy (:mod:`harness.data.cells`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from dataset_builders.base import Builder
from dataset_builders.helpers import download_file, read_csv_records, sha256_file, undecodable_cell
from dataset_builders.records import ConfigData, SourceFile
from dataset_builders.upheld.labels import DIMENSIONS, SCORE_COLUMNS, read_upheld_label
from harness.data.schema import DataValidationError, SourceUnavailableError

UPSTREAM_REPO = "https://github.com/upwork/upwork-ai-research/tree/upheld"
RAW_BASE_URL = "https://raw.githubusercontent.com/upwork/upwork-ai-research/upheld"
N_ANNOTATORS = 10
#: config -> (accepted folder names under --source, upstream folder of the default source or None)
SETS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "main": (("main", "upheld"), "data/upheld"),
    "llm_arena": (("llm_arena", "llm_arena_annotated"), "additional_resources/llm_arena_annotated"),
    "topical_chat": (("topical_chat", "topical_chat_annotated", "topical"), None),
}
CONFIG_TITLES = {
    "main": "UPHELD main set",
    "llm_arena": "LLM Arena verification set",
    "topical_chat": "Topical-Chat verification set",
}
#: What the paper reports for the main set (§3.2).
PAPER_COUNTS = {"turns": 400, "conversations": "53 + 7", "label_sets": 12291, "labels": 36873}
TEXT_FIELDS = {"chat_history": "context", "Option A": "reference", "Option B": "response"}
ID_COLUMNS = ("id_annotated", "id")
UNNAMED_ID_COLUMNS = ("", "Unnamed: 0")

UPHELD_CITATION = """@inproceedings{subasic2026upheld,
  title = {Evaluating Language Models in Realistic Conversational Contexts: the {UPHELD} Benchmark},
  author = {Subasic, Ilija and Rabinovich, Andrew and Chen, Zhao},
  year = {2026},
  note = {Dataset: https://github.com/upwork/upwork-ai-research/tree/upheld/data/upheld}
}"""

_ROLE_RE = re.compile(r"(?:^|\n)[ \t]*(user|assistant)[ \t]*:", re.I)
_ANNOTATOR_RE = re.compile(r"^annotator_(\d+)\.csv$")


def parse_history(text: str) -> list[dict[str, str]]:
    """``"user: ...\\n assistant: ..."`` -> messages; blank lines inside an utterance are dropped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return []
    found = list(_ROLE_RE.finditer(text))
    if not found or text[: found[0].start()].strip():
        raise ValueError("the chat history does not start with 'user:' or 'assistant:'")
    out = []
    for k, m in enumerate(found):
        end = found[k + 1].start() if k + 1 < len(found) else len(text)
        body = "\n".join(line.strip() for line in text[m.end() : end].split("\n") if line.strip())
        if not body:
            raise ValueError(f"utterance {k + 1} ({m.group(1).lower()}) of the chat history is empty")
        out.append({"role": m.group(1).lower(), "text": body})
    return out


def _clean(text: str) -> str:
    return "\n".join(
        line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n") if line.strip()
    )


def _natural_key(text: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


class UpheldBuilder(Builder):
    """Builds UPHELD (main set + verification sets) from the per-annotator CSV files."""

    name = "upheld"
    version = "1.0.0"
    pretty_name = "UPHELD"
    description = (
        "UPHELD (Utility & Planning Human-Scale Evaluated Long Dialogues; Subasic et al.) is a reference-full "
        "benchmark of multi-turn human-to-human conversations written by professional script writers. At every "
        "turn, candidate continuations from several models (GPT-3.5, GPT-4o, Llama-3.1-70B base, a fine-tuned "
        "custom model, plus a GPT-4o rephrase of the reference and a random turn as calibration baselines) were "
        "compared with the withheld human turn (the reference) by five annotators on content equivalence "
        "(1–5), style equivalence (1–3) and reasonableness (binary). The verification sets `llm_arena` and, "
        "when its files are given, `topical_chat` apply the same protocol to Chatbot Arena and Topical-Chat "
        "conversations. One row per (turn, model) item with every annotator's labels and their aggregates."
    )
    license = "CC-BY-4.0"
    homepage = UPSTREAM_REPO
    citation = UPHELD_CITATION
    tags = (
        "dialogue-evaluation",
        "reference-based",
        "human-annotations",
        "multi-annotator",
        "meta-evaluation",
    )
    dimensions = DIMENSIONS

    def __init__(
        self,
        *,
        min_annotators: int = 1,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 60.0,
    ) -> None:
        if min_annotators < 1:
            raise ValueError("min_annotators must be at least 1")
        self.min_annotators = min_annotators
        self._transport = transport
        self._timeout = timeout

    def build_options(self) -> dict[str, Any]:
        return {"min_annotators": self.min_annotators}

    def normalize_languages(self, languages: Any) -> tuple[str, ...]:
        if languages is None:
            return ("en",)
        wanted = {
            p.strip().lower()
            for raw in ([languages] if isinstance(languages, str) else languages)
            for p in str(raw).split(",")
            if p.strip()
        }
        if wanted - {"en", "english"}:
            raise ValueError(
                f"upheld is English only; cannot build languages {sorted(wanted - {'en', 'english'})}"
            )
        return ("en",)

    def license_note(self) -> str:
        return (
            "Labels and UPHELD conversations: CC-BY-4.0. `llm_arena`: prompts CC-BY-4.0, model outputs "
            "CC-BY-NC-4.0 (Chatbot Arena conversations)."
        )

    @classmethod
    def paper_comparisons(cls, path: Path, manifest: dict[str, Any]) -> list[tuple[str, Any]]:
        from dataset_builders.upheld.paper import paper_comparisons

        return paper_comparisons(path, manifest)

    def card_sections(self, configs: list[ConfigData], languages: tuple[str, ...]) -> list[str]:
        main = next((c for c in configs if c.name == "main"), None)
        if main is None:
            return []
        k = main.extra["counts"]
        same = k["label_sets"] == PAPER_COUNTS["label_sets"] and k["labels"] == PAPER_COUNTS["labels"]
        short = sum(n for a, n in k["annotators_per_item"].items() if int(a) < 5)
        users = k["response_roles"].get("user", 0)
        notes = [
            "The label counts match the paper exactly."
            if same
            else "The label counts differ from the paper.",
            f"The files hold {k['turn_ids']} turn ids and {k['conversations']} conversation-id prefixes (ids are "
            "`<conversation>-<turn>`; `mw-`/`mu-` prefixes look MultiWOZ-/MuTual-derived), "
            "so the paper's turn and conversation counts do not describe the released files one to one.",
            f"{short} (turn, model) item(s) have fewer than five annotators.",
            *(
                f"{' and '.join(names)} are byte-identical."
                for names in main.extra["identical_annotator_files"]
            ),
            f"{len(main.extra['text_conflicts'])} item field(s) show different texts to different annotators "
            "(listed in the build warnings).",
            f"{users} of {k['items']} rated continuations are user turns (`response_role`).",
        ]
        return [
            "## Counts against the paper",
            "",
            "| count | paper (§3.2) | these files |",
            "|---|---:|---:|",
            f"| turns | {PAPER_COUNTS['turns']} | {k['turn_ids']} turn ids |",
            f"| conversations | {PAPER_COUNTS['conversations']} | {k['conversations']} id prefixes "
            f"({', '.join(f'{n} {f}' for f, n in k['conversation_id_families'].items())}); "
            f"{k['distinct_opening_utterances']} distinct opening utterances |",
            f"| label sets | {PAPER_COUNTS['label_sets']:,} | {k['label_sets']:,} |",
            f"| labels | {PAPER_COUNTS['labels']:,} | {k['labels']:,} |",
            "",
            " ".join(notes),
            "",
        ]

    # -- sources ---------------------------------------------------------------------------------
    def resolve_sources(self, source: str | os.PathLike[str] | None, warnings: list[str]) -> list[SourceFile]:
        if source is None:
            return self._download_default(warnings)
        root = Path(source).expanduser()
        if not root.is_dir():
            raise SourceUnavailableError(f"upheld: --source must be a directory, got {root}")
        found: list[SourceFile] = []
        for config, (folders, _) in SETS.items():
            for folder in folders:
                files = self._annotator_files(root / folder)
                if files:
                    found.append(self._source(config, root / folder, [(p, str(p.resolve())) for p in files]))
                    break
            else:
                if config != "topical_chat":
                    warnings.append(
                        f"upheld: no {config} set in {root} (looked for {', '.join(folders)}/annotator_*.csv)"
                    )
        if not found and (files := self._annotator_files(root)):
            found.append(self._source("main", root, [(p, str(p.resolve())) for p in files]))
        if not found:
            raise SourceUnavailableError(
                f"upheld: no annotator_<n>.csv files in {root}; expected main/annotator_1.csv .. "
                "main/annotator_10.csv (and llm_arena/, topical_chat/), or the files directly in the directory"
            )
        return found

    @staticmethod
    def _annotator_files(folder: Path) -> list[Path]:
        if not folder.is_dir():
            return []
        numbered = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _ANNOTATOR_RE.match(p.name))]
        return [p for _, p in sorted(numbered, key=lambda np_: np_[0])]

    @staticmethod
    def _source(config: str, folder: Path, parts: list[tuple[Path, str]]) -> SourceFile:
        return SourceFile(config, "turn", folder, str(folder), parts=tuple(parts))

    def _download_default(self, warnings: list[str]) -> list[SourceFile]:
        from harness.cache import default_home

        root = default_home() / "downloads" / "upheld"
        out: list[SourceFile] = []
        client = httpx.Client(follow_redirects=True, timeout=self._timeout, transport=self._transport)
        with client:
            for config, (_, upstream) in SETS.items():
                if upstream is None:
                    continue
                parts = []
                for i in range(1, N_ANNOTATORS + 1):
                    url = f"{RAW_BASE_URL}/{upstream}/annotator_{i}.csv"
                    dest = root / config / f"annotator_{i}.csv"
                    if not dest.is_file():
                        try:
                            ok = download_file(url, dest, client)
                        except httpx.TransportError as e:
                            raise SourceUnavailableError(
                                f"upheld: could not download {url} ({type(e).__name__}: {e}). This machine looks "
                                f"offline: fetch data/upheld of {UPSTREAM_REPO} elsewhere and pass --source DIR "
                                "(DIR/main/annotator_*.csv, DIR/llm_arena/annotator_*.csv)"
                            ) from e
                        except httpx.HTTPStatusError as e:
                            raise SourceUnavailableError(
                                f"upheld: downloading {url} failed with HTTP {e.response.status_code}"
                            ) from e
                        if not ok:
                            warnings.append(f"upheld: {url} not found (HTTP 404)")
                            continue
                    parts.append((dest, url))
                if parts:
                    out.append(self._source(config, root / config, parts))
        if not out:
            raise SourceUnavailableError(f"upheld: nothing could be downloaded from {RAW_BASE_URL}")
        return out

    # -- reading ---------------------------------------------------------------------------------
    def read_config(self, src: SourceFile, languages: tuple[str, ...], warnings: list[str]) -> ConfigData:
        from dataset_builders.upheld.merge import merge_items

        rows: list[dict[str, Any]] = []
        label_sets_per_annotator: dict[str, int] = {}
        hashes: dict[str, list[str]] = {}
        self._unnamed: list[str] = []
        for path, _origin in src.files():
            if (m := _ANNOTATOR_RE.match(path.name)) is None:  # files are picked by this pattern
                raise DataValidationError(path, "name", "file", "not an annotator file (annotator_<n>.csv)")
            annotator = f"annotator_{m.group(1)}"
            got = self._read_file(path, annotator, src.config, warnings)
            label_sets_per_annotator[annotator] = len(got)
            rows.extend(got)
            hashes.setdefault(sha256_file(path), []).append(path.name)
        if self._unnamed:
            warnings.append(
                f"upheld/{src.config}: the item-id column is unnamed ('Unnamed: 0', a pandas index export) in "
                f"{len(self._unnamed)} file(s) ({', '.join(self._unnamed)}); read as id_annotated"
            )
        identical = [names for names in hashes.values() if len(names) > 1]
        for names in identical:
            warnings.append(
                f"upheld/{src.config}: {' and '.join(names)} are byte-identical: those annotators' labels are "
                "copies of each other in the release (kept as published; they inflate agreement statistics)"
            )
        records, extra = merge_items(self, src, rows, warnings)
        extra["counts"]["label_sets_per_annotator"] = label_sets_per_annotator
        extra["identical_annotator_files"] = identical
        if src.config == "main":
            extra["paper_counts"] = PAPER_COUNTS
        return ConfigData(
            name=src.config,
            level="turn",
            records=records,
            dimension="content",
            title=CONFIG_TITLES.get(src.config),
            extra=extra,
        )

    def _read_file(
        self, path: Path, annotator: str, config: str, warnings: list[str]
    ) -> list[dict[str, Any]]:
        records = read_csv_records(path)  # the csv field limit raised: chat histories exceed 128 KiB
        if not records:
            raise DataValidationError(path, "header", "<header>", "the file is empty")
        header, reader = records[0], records[1:]
        if (bad := undecodable_cell(path, "header", header, header)) is not None:
            raise bad
        col = {h: i for i, h in enumerate(header)}
        if header and header[0] in UNNAMED_ID_COLUMNS:
            id_col = header[0]
            self._unnamed.append(path.name)
        else:
            found = next((c for c in ID_COLUMNS if c in col), None)
            if found is None:
                raise DataValidationError(
                    path, "header", "id_annotated", "no item-id column (id_annotated / id)"
                )
            id_col = found
        for required in (*TEXT_FIELDS, *SCORE_COLUMNS):
            if required not in col:
                raise DataValidationError(path, "header", required, "required column missing")
        known = {id_col, *TEXT_FIELDS, *SCORE_COLUMNS, "model"}
        extra_cols = [h for h in header if h not in known]
        extra_filled: Counter[str] = Counter()
        out: list[dict[str, Any]] = []
        first_row: dict[tuple[str, str], int] = {}
        for i, row in enumerate(reader, start=1):
            if self.cells.odd_row(path.name, i, row, header):  # a blank or repeated header row
                continue
            try:
                out_row = self._read_row(path, i, row, header, col, id_col, annotator)
            except DataValidationError as err:
                self.invalid(err)
                continue
            if out_row is None:  # nothing usable in it: accounted for as an odd row
                continue
            key = (out_row["item"], out_row["system"] or "")
            if key in first_row:
                self.invalid(
                    DataValidationError(
                        path,
                        i,
                        id_col,
                        f"duplicate item {key[0]!r} (model {key[1] or '-'}): first on row {first_row[key]}",
                    )
                )
                continue
            first_row[key] = i
            for h in extra_cols:
                if row[col[h]].strip():
                    extra_filled[h] += 1
            out.append(out_row)
        for h, n in extra_filled.items():
            warnings.append(
                f"upheld/{config}: {path.name}: column {h!r} is not part of UPHELD; {n} non-empty cells ignored"
            )
        return out

    def _read_row(self, path, i, row, header, col, id_col, annotator) -> dict[str, Any] | None:
        """One annotator's label set, or None for a row with nothing usable (no readable chat history,
        reference or continuation: an odd row, recorded). Labels follow the odd-cell policy."""
        if len(row) != len(header):
            raise DataValidationError(
                path, i, "<row>", f"row has {len(row)} fields, the header has {len(header)}"
            )
        if (bad := undecodable_cell(path, i, [h or id_col for h in header], row)) is not None:
            raise bad
        texts: dict[str, Any] = {}
        try:
            texts["context"] = parse_history(row[col["chat_history"]])
        except ValueError as e:
            self.cells.record(path.name, i, "chat_history", row[col["chat_history"]], "row_left_out", str(e))
            return None
        for column in ("Option A", "Option B"):
            value = _clean(row[col[column]])
            if not value:
                what = "reference (human) continuation" if column == "Option A" else "model continuation"
                self.cells.record(path.name, i, column, row[col[column]], "row_left_out", f"empty {what}")
                return None
            texts[TEXT_FIELDS[column]] = value
        item = row[col[id_col]].strip()
        if not item:
            raise DataValidationError(path, i, id_col or "id_annotated", "empty item id")
        labels: list[dict[str, Any]] = []
        for column, dim in SCORE_COLUMNS.items():
            raw = row[col[column]]
            got = read_upheld_label(raw, dim)
            if got.kind is not None:
                self.cells.record(path.name, i, column, raw, got.kind, got.problem)
            labels.append(
                {"annotator": annotator, "dimension": dim, "value": got.value, "raw": raw.strip() or None}
            )
        system = row[col["model"]].strip() if "model" in col else ""
        return {
            "item": item,
            "system": system or None,
            "annotator": annotator,
            "file": path,
            "row": i,
            "texts": texts,
            "labels": labels,
        }
