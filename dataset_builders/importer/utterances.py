"""Files with one row per utterance (the CHANEL unified format of DSTC11 Track 4: ``UID`` =
``dataset-dialogue-turn``, ``SID`` the speaker, ``SEG`` the text, ``TRANSLATION`` /
``BACKTRANSLATION`` and MT-quality columns) turned into the rows the generic importer reads: one
row per dialogue and language version, with the context / response (turn level) or the turns
(dialogue level) built from the utterances in UID order, the quality columns kept as metadata and
the human annotations of a joined file (``annotations:``) merged in.

Every column of an utterance file is accounted for: a text variant, the uid / speaker, metadata,
or ``ignore``d by the mapping; any other column is reported as a warning (never dropped silently).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dataset_builders.importer.mapping import (
    FORMAT_BY_SUFFIX,
    UTTERANCE_CONTEXT,
    UTTERANCE_LANGUAGE,
    UTTERANCE_RESPONSE,
    UTTERANCE_TURNS,
    AnnotationJoinSpec,
    ConfigSpec,
    UtteranceSpec,
)
from harness.data.schema import FEATURES_BY_LEVEL, DataValidationError

#: Row keys the utterance reader adds besides the annotation fields.
METADATA_KEY, ID_SUFFIX_KEY = "__metadata__", "__id_suffix__"
FILE_PREFIX = "file."

TableReader = Callable[[Path, str], Any]  # (path, kind) -> generic._Table


def utterance_features(level: str) -> tuple[Any, dict[str, str]]:
    """The level's common columns plus ``metadata`` (a JSON object per record), and its doc."""
    from datasets import Features, Value

    doc = (
        "JSON object: the text column read, the dialogue's uids (and speakers), and the metadata "
        "columns (MT quality: COMET_*, COS_SIM_*, ...) of the rated / last utterance"
    )
    return Features({**FEATURES_BY_LEVEL[level], "metadata": Value("string")}), {"metadata": doc}


def file_vars(cfg: ConfigSpec, path: Path) -> dict[str, str]:
    """The named groups of ``file_pattern`` matched against the file name (``{file.src}`` ...);
    a name that does not match is an error naming the pattern."""
    if cfg.file_pattern is None:
        return {}
    if (m := re.search(cfg.file_pattern, path.name)) is None:
        raise DataValidationError(
            path, "header", "<file name>", f"the file name does not match file_pattern {cfg.file_pattern!r}"
        )
    return {k: v for k, v in m.groupdict().items() if v is not None}


def expand(template: str, fvars: dict[str, str], path: Path, what: str) -> str:
    """``{file.NAME}`` placeholders of a template replaced by the file name's groups."""

    def sub(m: re.Match[str]) -> str:
        if m[1] not in fvars:
            known = ", ".join(f"file.{k}" for k in fvars) or "none: set file_pattern"
            raise DataValidationError(path, "header", "<file name>", f"{what}: no {{file.{m[1]}}} ({known})")
        return fvars[m[1]]

    return re.sub(r"\{file\.([A-Za-z_][A-Za-z0-9_]*)\}", sub, template)


def _matches(col: str, globs: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(col, g) for g in globs)


def unused_columns(spec: UtteranceSpec, columns: list[str]) -> list[str]:
    """Columns of an utterance file the mapping neither reads nor declares ignored."""
    used = {spec.uid, spec.speaker, *(v.column for v in spec.texts)}
    return [c for c in columns if c not in used and not _matches(c, spec.metadata + spec.ignore)]


def _number(value: Any) -> Any:
    """A metadata cell: numbers as numbers, the rest as text (empty -> None)."""
    text = "" if value is None else str(value).strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def dialogues(spec: UtteranceSpec, t: Any) -> list[tuple[str, list[tuple[int, dict[str, Any]]]]]:
    """Rows grouped by the dialogue part of the uid (in order of first appearance) and ordered by
    turn number; a uid that does not match, a repeated uid or a bad row is an error on its row."""
    rx = re.compile(spec.pattern)
    groups: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
    seen: dict[str, int] = {}
    for rowno, row in t.rows:
        if rowno in t.bad:
            raise t.error(rowno, *t.bad[rowno])
        uid = str(row.get(spec.uid) or "").strip()
        if (m := rx.search(uid)) is None:
            raise t.error(
                rowno, spec.uid, f"uid {uid!r} does not match {spec.pattern!r} (dataset-dialogue-turn)"
            )
        if uid in seen:
            raise t.error(rowno, spec.uid, f"duplicate uid {uid!r} (first on row {seen[uid]})")
        seen[uid] = rowno
        groups.setdefault(m["dialogue"], []).append((int(m["turn"]), rowno, row))
    return [(d, [(r, row) for _, r, row in sorted(g, key=lambda x: x[0])]) for d, g in groups.items()]


def annotation_records(
    join: AnnotationJoinSpec, root: Path, fvars: dict[str, str], utt_path: Path, read: TableReader
) -> tuple[Any, list[tuple[int, dict[str, Any]]]] | None:
    """The joined annotation file's table and its records (those with every ``skip_without``
    field); None when no file matches and the join is not ``required``."""
    pattern = expand(join.files, fvars, utt_path, "annotations.files")
    hits = sorted(p for p in root.glob(pattern) if p.is_file()) if root.is_dir() else []
    if not hits:
        if join.required:
            raise DataValidationError(
                utt_path,
                "header",
                "<annotations>",
                f"no annotation file matches {pattern!r} under {root} (annotations.files; set "
                "'required: false' to import without human labels)",
            )
        return None
    if len(hits) > 1:
        raise DataValidationError(
            utt_path, "header", "<annotations>", f"{len(hits)} annotation files match {pattern!r}: {hits[:3]}"
        )
    path = hits[0]
    t = read(path, join.format or FORMAT_BY_SUFFIX.get(path.suffix.lower(), "?"))
    keep = [(n, r) for n, r in t.rows if n not in t.bad and all(_has(r, k) for k in join.skip_without)]
    return t, keep


def _has(record: dict[str, Any], key: str) -> bool:
    """A non-empty field ``key``, or (for a nested object, flattened) any ``key.*`` field."""
    if str(record.get(key) if record.get(key) is not None else "").strip():
        return True
    return any(k.startswith(f"{key}.") for k in record)


def build_rows(
    cfg: ConfigSpec,
    t: Any,
    fvars: dict[str, str],
    joined: tuple[Any, list[tuple[int, dict[str, Any]]]] | None,
    warnings: list[str],
) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """The importer rows of one utterance file (row number = the file row of the rated / last
    utterance) and the columns they carry."""
    spec = cfg.utterances
    assert spec is not None
    path = t.path
    for v in spec.texts:
        if v.column not in t.columns:
            raise t.error(
                "header", v.column, f"missing text column {v.column!r} ({', '.join(t.columns[:20])})"
            )
    for col in (spec.uid, spec.speaker):
        if col and col not in t.columns:
            raise t.error("header", col, f"missing column {col!r} ({', '.join(t.columns[:20])})")
    if extra := unused_columns(spec, t.columns):
        warnings.append(
            f"{cfg.name}: {path.name}: column(s) {extra} are not read by the mapping (add them to "
            "utterances.metadata to keep them, or to utterances.ignore)"
        )
    groups = dialogues(spec, t)
    by_key: dict[str, tuple[int, dict[str, Any]]] = {}
    ann_table = None
    if joined is not None:
        ann_table, records = joined
        join = cfg.annotations
        assert join is not None
        if join.align == "order" and len(records) != len(groups):
            raise t.error(
                "header",
                "<annotations>",
                f"{len(groups)} dialogues here but {len(records)} annotation records in {ann_table.path.name} "
                "(annotations.align: order pairs the k-th of each)",
            )
        if join.align == "key":
            for n, r in records:
                by_key[expand(str(join.key), {**fvars, **{k: str(v) for k, v in r.items()}}, path, "key")] = (
                    n,
                    r,
                )
    rows: list[tuple[int, dict[str, Any]]] = []
    columns: set[str] = set()
    for k, (dialogue, utts) in enumerate(groups):
        ann: dict[str, Any] = {}
        if joined is not None and cfg.annotations is not None:
            hit = records[k] if cfg.annotations.align == "order" else by_key.get(dialogue)
            if hit is None:
                raise t.error(utts[-1][0], spec.uid, f"no annotation record for dialogue {dialogue!r}")
            ann = _checked(cfg.annotations, hit, ann_table, utts, spec, t)
        last = len(utts) - 1
        targets = [last] if cfg.level == "dialogue" or spec.response == "last" else list(range(1, len(utts)))
        for variant in spec.texts:
            lang = expand(variant.language, fvars, path, f"language of {variant.column}")
            texts = [str(r.get(variant.column) or "").strip() for _, r in utts]
            for i, text in enumerate(texts):
                if not text:
                    raise t.error(utts[i][0], variant.column, f"empty utterance (dialogue {dialogue!r})")
            for end in targets:
                rowno, resp = utts[end]
                # turn level: the rated response is the assistant's; dialogue level: the user opens
                first = 0 if cfg.level == "dialogue" else end + 1
                msgs = [
                    {"speaker": "user" if (j - first) % 2 == 0 else "assistant", "text": texts[j]}
                    for j in range(end + 1)
                ]
                row = {
                    **ann,
                    "dialogue": dialogue,
                    "turn": str(end),
                    "uid": str(resp.get(spec.uid)),
                    "speaker": str(resp.get(spec.speaker) or "") if spec.speaker else "",
                    **{f"{FILE_PREFIX}{n}": v for n, v in fvars.items()},
                    UTTERANCE_LANGUAGE: lang,
                    ID_SUFFIX_KEY: variant.id_suffix,
                    METADATA_KEY: _metadata(spec, utts[: end + 1], variant.column, variant.metadata, ann),
                }
                if cfg.level == "turn":
                    row[UTTERANCE_CONTEXT], row[UTTERANCE_RESPONSE] = msgs[:-1], texts[end]
                else:
                    row[UTTERANCE_TURNS] = msgs
                columns.update(row)
                rows.append((rowno, row))
    return rows, sorted(columns)


def _metadata(
    spec: UtteranceSpec,
    utts: list[tuple[int, dict[str, Any]]],
    column: str,
    with_columns: bool,
    ann: dict[str, Any],
) -> dict[str, Any]:
    """The uids and speakers of the dialogue, the metadata columns of the rated (last) utterance
    (for a text they describe) and the annotation record's fields other than labels and texts."""
    _, last = utts[-1]
    out: dict[str, Any] = {"text_column": column, "uids": [str(r.get(spec.uid)) for _, r in utts]}
    if spec.speaker:
        out["speakers"] = [str(r.get(spec.speaker) or "") for _, r in utts]
    if with_columns:
        out.update({c: _number(v) for c, v in last.items() if _matches(c, spec.metadata)})
    if fields := {
        k: v for k, v in ann.items() if not k.startswith("annotations.") and k not in ("context", "response")
    }:
        out["annotation_record"] = fields
    return out


def _checked(
    join: AnnotationJoinSpec,
    hit: tuple[int, dict[str, Any]],
    ann_table: Any,
    utts: list[tuple[int, dict[str, Any]]],
    spec: UtteranceSpec,
    t: Any,
) -> dict[str, Any]:
    """The annotation record, after ``check``: its field must equal the original last utterance."""
    n, rec = hit
    if join.check is not None:
        want = " ".join(str(rec.get(join.check) or "").split())
        original = join.check_column
        got = " ".join(str(utts[-1][1].get(original) or "").split())
        if want != got:
            raise t.error(
                utts[-1][0],
                original,
                f"the annotation record ({ann_table.row_label} {n} of {ann_table.path.name}) has "
                f"{join.check} {want[:60]!r}, this dialogue ends with {got[:60]!r}: the files are not aligned",
            )
    return {k: v for k, v in rec.items()}
