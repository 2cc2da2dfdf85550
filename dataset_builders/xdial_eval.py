"""xDial-Eval (Zhang et al., Findings of EMNLP 2023): 12 turn-level and 6 dialogue-level open-domain
dialogue evaluation sets, machine-translated from English into nine languages.

Source layout (the upstream repository, https://github.com/e0397123/xDial-Eval, ``data/``)::

    turn/<stem>.csv   columns <language>_ctx, <language>_res (x10 languages), ratings
    dial/<stem>.csv   columns <language>_dial (x10 languages), ratings

``<language>`` is the English name (``english``, ``chinese``, ...). Utterances inside a field are
separated by ``"\\n"``; dialogue fields start with a blank line, which is stripped. Note that
upstream stores ``heval-dial.csv`` (Human-Eval, a dialogue-level set) under ``data/turn/``; the
level of every set is taken from :data:`XDIAL_SETS`, not from the folder it is found in.

One config per set, named by the file stem (``fed-turn``, ``conture-dial``, ...); each config
holds every language as rows. The CSVs do not mark speakers: roles are inferred as in the
authors' scripts (dialogues alternate [H] human / [C] chatbot, starting with the human; at turn
level the response is the chatbot's and the context alternates backwards from it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from dataset_builders.base import DEFAULT_DIMENSION, Builder
from dataset_builders.helpers import (
    LANGUAGE_NAMES,
    RowSpill,
    dialogue_level_roles,
    download_file,
    iter_csv_records,
    messages,
    turn_level_roles,
    undecodable_cell,
)
from dataset_builders.records import ConfigData, SourceFile
from harness.data.cells import read_rating
from harness.data.schema import DataValidationError, Dimension, SourceUnavailableError

UPSTREAM_REPO = "https://github.com/e0397123/xDial-Eval"
RAW_BASE_URL = "https://raw.githubusercontent.com/e0397123/xDial-Eval/main/data"
RATING_COLUMN = "ratings"


@dataclass(frozen=True)
class XDialSet:
    """One set of Table 1 of the xDial-Eval paper."""

    stem: str  # file stem upstream = config name
    title: str  # name in Table 1
    level: str  # "turn" | "dialogue"
    instances: int  # #Instance in Table 1 (English items)
    upstream_dir: str  # folder under data/ upstream ("turn" | "dial")
    reference: str  # the original English dataset (as cited in Table 1)
    original_source: str  # where the English data comes from (upstream README)

    @property
    def url(self) -> str:
        return f"{RAW_BASE_URL}/{self.upstream_dir}/{self.stem}.csv"


_GRADE = "https://github.com/li3cmz/GRADE/tree/main/evaluation"
_USR = "http://shikib.com/usr"
_ZHAO = "https://github.com/ZHAOTING/dialog-processing/tree/master/src/tasks/response_eval"
_FED = "http://shikib.com/fed_data.json"
_CONTURE = "https://github.com/alexa/conture"
_DSTC10 = "https://chateval.org/dstc10"

#: Table 1 of the paper, in its order. Stems are those used by the authors' scripts.
XDIAL_SETS: tuple[XDialSet, ...] = (
    XDialSet("persona-usr", "Persona-USR", "turn", 300, "turn", "Mehri and Eskenazi (2020b)", _USR),
    XDialSet("persona-zhao", "Persona-Zhao", "turn", 900, "turn", "Zhao et al. (2020)", _ZHAO),
    XDialSet("convai2-grade", "ConvAI2-GRADE", "turn", 600, "turn", "Huang et al. (2020)", _GRADE),
    XDialSet("dstc10-persona_clean", "Persona-DSTC10", "turn", 4829, "turn", "Zhang et al. (2022b)", _DSTC10),
    XDialSet("dailydialog-grade", "DailyDialog-GRADE", "turn", 300, "turn", "Huang et al. (2020)", _GRADE),
    XDialSet("dailydialog-zhao", "DailyDialog-Zhao", "turn", 900, "turn", "Zhao et al. (2020)", _ZHAO),
    XDialSet(
        "dailydialog-gupta",
        "DailyDialog-Gupta",
        "turn",
        500,
        "turn",
        "Gupta et al. (2019)",
        "https://github.com/prakharguptaz/multirefeval",
    ),
    XDialSet("topical-usr", "Topical-USR", "turn", 360, "turn", "Mehri and Eskenazi (2020b)", _USR),
    XDialSet("dstc10-topical_clean", "Topical-DSTC10", "turn", 4500, "turn", "Zhang et al. (2022b)", _DSTC10),
    XDialSet("empathetic-grade", "Empathetic-GRADE", "turn", 300, "turn", "Huang et al. (2020)", _GRADE),
    XDialSet("fed-turn", "FED-Turn", "turn", 375, "turn", "Mehri and Eskenazi (2020a)", _FED),
    XDialSet("conture-turn", "ConTurE-Turn", "turn", 1066, "turn", "Ghazarian et al. (2022a)", _CONTURE),
    XDialSet(
        "ieval-dial",
        "IEval",
        "dialogue",
        1920,
        "dial",
        "Svikhnushina et al. (2022)",
        "https://github.com/Sea94/ieval",
    ),
    XDialSet(
        "persona-see",
        "Persona-See",
        "dialogue",
        3316,
        "dial",
        "See et al. (2019)",
        "https://github.com/facebookresearch/ParlAI/tree/main/projects/controllable_dialogue",
    ),
    XDialSet(
        "reliable-dial",
        "Reliable-Eval",
        "dialogue",
        2925,
        "dial",
        "Ji et al. (2022)",
        "https://github.com/TianboJi/Dialogue-Eval",
    ),
    XDialSet("conture-dial", "ConTurE-Dial", "dialogue", 119, "dial", "Ghazarian et al. (2022b)", _CONTURE),
    XDialSet("fed-dial", "FED-Dial", "dialogue", 125, "dial", "Mehri and Eskenazi (2020a)", _FED),
    XDialSet(
        "heval-dial",
        "Human-Eval",
        "dialogue",
        286,
        "turn",  # sic: upstream keeps this dialogue-level set under data/turn/
        "Smith et al. (2022)",
        "https://github.com/facebookresearch/ParlAI/tree/main/projects/humaneval",
    ),
)
SETS_BY_STEM: dict[str, XDialSet] = {s.stem: s for s in XDIAL_SETS}
#: Table 1 instance counts, by config name.
EXPECTED_INSTANCES: dict[str, int] = {s.stem: s.instances for s in XDIAL_SETS}

XDIAL_CITATION = """\
@inproceedings{zhang-etal-2023-xdial,
    title = "x{D}ial-Eval: A Multilingual Open-Domain Dialogue Evaluation Benchmark",
    author = "Zhang, Chen and D{'}Haro, Luis Fernando and Tang, Chengguang and Shi, Ke and Tang, Guohua and Li, Haizhou",
    booktitle = "Findings of the Association for Computational Linguistics: EMNLP 2023",
    month = dec,
    year = "2023",
    address = "Singapore",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2023.findings-emnlp.371",
    doi = "10.18653/v1/2023.findings-emnlp.371",
}"""

# Share of rows whose translation equals the English text above which a warning is raised.
_IDENTICAL_WARN_FRACTION = 0.5
_MAX_LISTED_ROWS = 10


def split_utterances(text: str) -> list[str]:
    """Split a ``"\\n"``-separated field into utterances: leading/trailing blank lines are dropped
    (dialogue fields start with one) and each utterance is stripped of surrounding whitespace. Blank
    lines *inside* the field are kept as ``""`` so the caller can report them."""
    parts = [p.strip() for p in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while parts and not parts[0]:
        parts.pop(0)
    while parts and not parts[-1]:
        parts.pop()
    return parts


def _mean_only(dimension: str, mean: float | None) -> dict[str, Any]:
    """The sources publish mean ratings only: no per-annotator labels, no count."""
    return {
        "dimension": dimension,
        "n": None,
        "mean": mean,
        "aggregate": None,
        "majority": None,
        "agreement": None,
    }


class XDialEvalBuilder(Builder):
    """Builds the xDial-Eval sets into one Parquet config per set (all languages as rows)."""

    name = "xdial-eval"
    version = "1.1.0"
    pretty_name = "xDial-Eval"
    description = (
        "xDial-Eval is a multilingual open-domain dialogue evaluation benchmark (Zhang et al., Findings of "
        "EMNLP 2023): 12 turn-level and 6 dialogue-level English evaluation sets with human quality ratings, "
        "machine-translated (Microsoft Azure) into Chinese, Spanish, German, French, Japanese, Korean, Hindi, "
        "Arabic and Russian. The original English ratings are kept for every translation. This is a "
        "re-packaging of the CSV files of the authors' repository into a common record schema "
        "(turn level: context + response; dialogue level: turns), one config per set."
    )
    license = "GPL-3.0"
    homepage = UPSTREAM_REPO
    citation = XDIAL_CITATION
    tags = ("dialogue-evaluation", "multilingual", "machine-translated", "meta-evaluation")
    dimensions = (
        Dimension(
            "relevance",
            "Turn-level response quality as rated in the original set (its own aspect and scale; the "
            "xDial-Eval prompts ask whether the response is relevant to the context). Mean over annotators.",
            "continuous",
            0,
            5,
            source="xDial-Eval §3, Table 1",
        ),
        Dimension(
            "coherence",
            "Dialogue-level quality as rated in the original set (its own aspect and scale; the xDial-Eval "
            "prompts ask whether the dialogue is coherent). Mean over annotators.",
            "continuous",
            0,
            5,
            source="xDial-Eval §3, Table 1",
        ),
    )

    def __init__(self, *, transport: httpx.BaseTransport | None = None, timeout: float = 60.0) -> None:
        # ``transport`` lets tests (or proxies) control how the default source is fetched.
        self._transport = transport
        self._timeout = timeout

    # -- sources ---------------------------------------------------------------------------------
    def resolve_sources(self, source: str | os.PathLike[str] | None, warnings: list[str]) -> list[SourceFile]:
        if source is None:
            found = self._download_default(warnings)
        else:
            found = self._scan_directory(Path(source).expanduser(), warnings)
        missing = [s.stem for s in XDIAL_SETS if s.stem not in found]
        if not found:
            where = "the default source" if source is None else str(source)
            raise SourceUnavailableError(
                f"xdial-eval: none of the {len(XDIAL_SETS)} xDial-Eval sets was found in {where}; expected "
                "<source>/turn/<stem>.csv and <source>/dial/<stem>.csv (or the CSVs directly in <source>), "
                f"stems: {', '.join(s.stem for s in XDIAL_SETS)}"
            )
        if missing:
            warnings.append(
                f"xdial-eval: {len(missing)} of {len(XDIAL_SETS)} sets not present in the source and not built: "
                + ", ".join(missing)
            )
        return [found[s.stem] for s in XDIAL_SETS if s.stem in found]

    def _scan_directory(self, root: Path, warnings: list[str]) -> dict[str, SourceFile]:
        if not root.exists():
            raise SourceUnavailableError(f"xdial-eval: source directory {root} does not exist")
        if not root.is_dir():
            raise SourceUnavailableError(
                f"xdial-eval: --source must be a directory holding turn/*.csv and dial/*.csv, got the file {root}"
            )
        found: dict[str, SourceFile] = {}
        for s in XDIAL_SETS:
            other = "dial" if s.upstream_dir == "turn" else "turn"
            candidates = [
                root / s.upstream_dir / f"{s.stem}.csv",
                root / other / f"{s.stem}.csv",
                root / f"{s.stem}.csv",
            ]
            hits = [c for c in candidates if c.is_file()]
            if hits:
                found[s.stem] = SourceFile(s.stem, s.level, hits[0], str(hits[0].resolve()))
                if len(hits) > 1:
                    warnings.append(
                        f"xdial-eval: {s.stem}: several files found, using {hits[0]} and ignoring "
                        + ", ".join(str(h) for h in hits[1:])
                    )
        used = {f.path.resolve() for f in found.values()}
        unknown = sorted(
            str(p)
            for d in (root, root / "turn", root / "dial")
            if d.is_dir()
            for p in d.glob("*.csv")
            if p.resolve() not in used and p.stem not in SETS_BY_STEM
        )
        if unknown:
            warnings.append(
                "xdial-eval: ignored CSV file(s) that are not xDial-Eval sets: " + ", ".join(unknown)
            )
        return found

    def download_dir(self) -> Path:
        from harness.cache import default_home

        return default_home() / "downloads" / "xdial-eval"

    def _download_default(self, warnings: list[str]) -> dict[str, SourceFile]:
        root = self.download_dir()
        found: dict[str, SourceFile] = {}
        offline_error: Exception | None = None
        client = httpx.Client(follow_redirects=True, timeout=self._timeout, transport=self._transport)
        with client:
            for s in XDIAL_SETS:
                dest = root / s.upstream_dir / f"{s.stem}.csv"
                if dest.is_file():  # downloaded earlier
                    found[s.stem] = SourceFile(s.stem, s.level, dest, s.url)
                    continue
                if offline_error is not None:
                    continue
                try:
                    ok = download_file(s.url, dest, client)
                except httpx.TransportError as e:  # no network, DNS failure, timeout, ...
                    offline_error = e
                    continue
                except httpx.HTTPStatusError as e:
                    raise SourceUnavailableError(
                        f"xdial-eval: downloading {s.url} failed with HTTP {e.response.status_code}; "
                        "retry later, or download the CSVs yourself and pass --source DIR"
                    ) from e
                if ok:
                    found[s.stem] = SourceFile(s.stem, s.level, dest, s.url)
        if offline_error is not None:
            hint = (
                f"could not download xDial-Eval from {RAW_BASE_URL} ({type(offline_error).__name__}: "
                f"{offline_error}). This machine looks offline: fetch the CSVs of {UPSTREAM_REPO} (folder data/) "
                "elsewhere and pass --source DIR, a directory holding turn/*.csv and dial/*.csv"
            )
            if not found:
                raise SourceUnavailableError(f"xdial-eval: {hint}") from offline_error
            warnings.append(
                f"xdial-eval: {hint}; building from the {len(found)} file(s) downloaded earlier to {root}"
            )
        return found

    # -- parsing ---------------------------------------------------------------------------------
    def read_config(self, src: SourceFile, languages: tuple[str, ...], warnings: list[str]) -> ConfigData:
        """Check every row of the CSV (streamed; a broken row is an error, or a counted skip with
        --skip-invalid; odd cells: :mod:`harness.data.cells`), spilling the rows kept to a temporary
        columnar file; the records (language-major: every row in one language, then the next) are
        produced from it chunk by chunk as the build writes them: memory holds one chunk."""
        spec = SETS_BY_STEM[src.config]
        level = spec.level
        path = src.path
        suffixes = ("ctx", "res") if level == "turn" else ("dial",)
        text_col = "ctx" if level == "turn" else "dial"

        records_in = iter_csv_records(path)
        header = next(records_in, None)
        if header is None:
            raise DataValidationError(path, "header", RATING_COLUMN, "empty file (no header)")
        if (bad := undecodable_cell(path, "header", header, header)) is not None:
            raise bad
        dupes = sorted({c for c in header if header.count(c) > 1})
        if dupes:
            raise DataValidationError(path, "header", dupes[0], f"duplicate column(s) {dupes}")
        col = {c: i for i, c in enumerate(header)}
        required = [RATING_COLUMN] + [
            f"{LANGUAGE_NAMES[lang]}_{sfx}" for lang in languages for sfx in suffixes
        ]
        absent = [c for c in required if c not in col]
        if absent:
            why = f"missing column(s) {absent} required for a {level}-level set (header: {header})"
            raise DataValidationError(path, "header", absent[0], why)

        # every row is checked first: a bad one is an error, or with --skip-invalid a counted skip
        english = col.get(f"english_{text_col}")
        used = [f"{LANGUAGE_NAMES[lang]}_{x}" for lang in languages for x in suffixes]
        if english is not None and header[english] not in used:
            used.append(header[english])
        spill = RowSpill(used)
        ratings: dict[int, float | None] = {}
        en_counts: dict[int, int] = {}
        n_data = 0
        for i, row in enumerate(records_in, start=1):
            n_data = i
            if self.cells.odd_row(path.name, i, row, header):
                continue
            try:
                checked = _checked_row(path, i, row, header, col, languages, level, english)
            except DataValidationError as err:
                self.invalid(err)
                continue
            if checked is not None:  # nothing usable in the row (no dialogue): left out
                self.cells.record(path.name, i, checked[0], row[col[checked[0]]], "row_left_out", checked[1])
                continue
            raw = row[col[RATING_COLUMN]]  # each set keeps its own scale: no range check
            got = read_rating(raw, self.dimensions[level == "dialogue"], check_scale=False)
            if got.kind is not None:
                self.cells.record(path.name, i, RATING_COLUMN, raw, got.kind, got.problem)
            ratings[i] = got.value
            if english is not None:
                en_counts[i] = len(split_utterances(row[english]))
            spill.add(i, [row[col[c]] for c in used])
        if not n_data:
            spill.close()
            raise DataValidationError(path, 1, RATING_COLUMN, "no data rows")
        if not ratings:
            spill.close()
            raise DataValidationError(path, 1, RATING_COLUMN, f"no valid data rows ({n_data} skipped)")
        spill.finish()

        dimension = DEFAULT_DIMENSION[level]
        extra: dict[str, Any] = {"title": spec.title, "utterance_count_mismatches": {}}
        cfg = ConfigData(src.config, level, [], spec.instances, dimension, spec.title, src, extra)

        def chunks() -> Iterator[list[dict[str, Any]]]:
            mismatches: dict[str, list[int]] = {}
            try:
                for lang in languages:
                    lname = LANGUAGE_NAMES[lang]
                    text_column = f"{lname}_{text_col}"
                    columns = [text_column, *([f"{lname}_res"] if level == "turn" else [])]
                    if english is not None:
                        columns.append(header[english])
                    identical = 0
                    for rows, cells in spill.read(columns):
                        out: list[dict[str, Any]] = []
                        texts = cells[text_column]
                        for k, i in enumerate(rows):
                            utts = split_utterances(texts[k])
                            if english is not None:
                                if len(utts) != en_counts[i]:
                                    mismatches.setdefault(lang, []).append(i)
                                if lang != "en" and texts[k].strip() == cells[header[english]][k].strip():
                                    identical += 1
                            item_id = f"{src.config}-{i:05d}"
                            rec: dict[str, Any] = {
                                "id": f"{item_id}-{lang}",
                                "item_id": item_id,
                                "dataset": src.config,
                                "language": lang,
                                "level": level,
                            }
                            if level == "turn":
                                rec["context"] = messages(utts, turn_level_roles(len(utts)))
                                rec["response"] = cells[f"{lname}_res"][k].strip()
                            else:
                                rec["turns"] = messages(utts, dialogue_level_roles(len(utts)))
                            rec["rating"] = ratings[i]
                            rec["dimension"] = dimension
                            rec["aggregates"] = [_mean_only(dimension, ratings[i])]
                            out.append(rec)
                        yield out
                    if identical > _IDENTICAL_WARN_FRACTION * len(ratings):
                        warnings.append(
                            f"{src.config}: column {text_column!r} equals 'english_{text_col}' in {identical} of "
                            f"{len(ratings)} rows; the {lname} translation may be missing in {path.name}"
                        )
            finally:
                spill.close()
            for lang, bad in mismatches.items():
                listed = ", ".join(map(str, bad[:_MAX_LISTED_ROWS])) + (
                    " ..." if len(bad) > _MAX_LISTED_ROWS else ""
                )
                warnings.append(
                    f"{src.config}: {len(bad)} row(s) of '{LANGUAGE_NAMES[lang]}_{text_col}' have a different "
                    f"number of utterances than the English text (rows {listed}); inferred roles may not align there"
                )
            cfg.extra["utterance_count_mismatches"] = dict(mismatches)

        cfg.chunks = chunks
        return cfg

    # -- card ------------------------------------------------------------------------------------
    def license_note(self) -> str:
        return (
            "The xDial-Eval repository (translations and packaging) is distributed under GPL-3.0. "
            "The underlying English evaluation sets were created by other authors and keep their own "
            "licenses and terms of use; check the original source of each set (table above) before "
            "redistributing. Human-Eval in particular is only available from its authors on request."
        )

    def card_sections(self, configs: list[ConfigData], languages: tuple[str, ...]) -> list[str]:
        built = {c.name for c in configs}
        out = [
            "## xDial-Eval sets (Table 1 of the paper)",
            "",
            "| set | level | config | #instances (Table 1) | original data | status |",
            "|---|---|---|---:|---|---|",
        ]
        for s in XDIAL_SETS:
            status = "built" if s.stem in built else "**not in source**"
            out.append(
                f"| {s.title} ({s.reference}) | {s.level} | `{s.stem}` | {s.instances} | {s.original_source} | {status} |"
            )
        out += [
            "",
            "## Notes",
            "",
            "- Ratings are the original English mean human ratings, copied to every translation; their scale "
            "differs between sets (see the statistics above).",
            "- Speaker roles are **inferred**, the CSVs do not mark speakers. Following the authors' scripts, "
            "dialogues alternate human ([H] → `user`) and chatbot ([C] → `assistant`) starting with the human; "
            "at turn level the response is the chatbot's and the context alternates backwards from it. "
            "Dialogue fields start with a blank line, which is stripped before roles are assigned (the authors' "
            "script splits the raw field, so its first tag lands on that empty line).",
            "- Utterances are stripped of surrounding whitespace, nothing else is changed (the ConTurE sets keep "
            "their literal `<EMPTY>` placeholder); a row without a readable dialogue is left out and listed.",
            "- Turn-level `dimension` is `relevance`, dialogue-level `coherence` (the aspects prompted for in the "
            "paper); the source ratings themselves come from each set's own annotation protocol.",
            "",
        ]
        return out


def _checked_row(path, i, row, header, col, languages, level, english) -> tuple[str, str] | None:
    """None when data row ``i`` is sound and every text reads; (column, problem) of a text that does not
    (no usable dialogue: an odd row); a :class:`DataValidationError` for a row that breaks the file."""
    if len(row) != len(header):
        column = header[len(row)] if len(row) < len(header) else f"<extra field {len(header) + 1}>"
        raise DataValidationError(path, i, column, f"row has {len(row)} fields, the header has {len(header)}")
    text_col, sfx = ("ctx", ("ctx", "res")) if level == "turn" else ("dial", ("dial",))
    used = [col[f"{LANGUAGE_NAMES[lang]}_{x}"] for lang in languages for x in sfx]
    used += [col[RATING_COLUMN]] + ([english] if english is not None else [])
    if (bad := undecodable_cell(path, i, header, row, used)) is not None:
        raise bad
    kind = "context" if level == "turn" else "dialogue"
    for lang in languages:
        text_column = f"{LANGUAGE_NAMES[lang]}_{text_col}"
        utts = split_utterances(row[col[text_column]])
        if not utts:
            return text_column, f"empty {kind}"
        if gap := next((k for k, u in enumerate(utts, 1) if not u), None):
            return text_column, f"empty utterance {gap} of {len(utts)} inside the {kind}"
        if level == "turn" and not row[col[f"{LANGUAGE_NAMES[lang]}_res"]].strip():
            return f"{LANGUAGE_NAMES[lang]}_res", "empty response"
    return None
