"""Property-based tests (hypothesis) of the builders' readers: any xDial-Eval CSV, UPHELD
annotator CSV or importer CSV/TSV/JSONL/JSON file — any cell text, bytes that are not UTF-8, lone CRs,
stray quotes, wrong field counts — ends in records or a :class:`DataValidationError` naming the file
(with ``skip_invalid``, in records and counted skips), never another exception; a build writes only
into its output folder."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from dataset_builders.base import EmptyBuildError
from dataset_builders.helpers import LANGUAGE_NAMES, LANGUAGES
from dataset_builders.importer.generic import GenericImporter, read_table
from dataset_builders.records import SourceFile
from dataset_builders.upheld.builder import UpheldBuilder
from dataset_builders.xdial_eval import XDialEvalBuilder
from harness.data.schema import DataValidationError, SchemaError, SourceUnavailableError
from tests.fixtures.upheld_source import CONTENT, MAIN_HEADER, REASON, STYLE

READ = settings(max_examples=300, deadline=None, derandomize=True, database=None)
BUILD = settings(max_examples=25, deadline=None, derandomize=True, database=None)

CELL = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30),
    st.sampled_from(["", " ", "a,b", 'say "hi"', "line 1\nline 2", "cr\rcr", "\r\n", "<EMPTY>", "x" * 200]),
)
GOOD = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=20
).filter(str.strip)
RATING = st.one_of(
    st.sampled_from(["3", "4.5", "0", "-1", "nan", "inf", "1e400", "", "abc", " 2 "]),
    st.floats(allow_nan=True).map(repr),
)


def _csv_text(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


@st.composite
def damaged(draw, text: str) -> bytes:
    """The file's bytes, with line endings, a BOM, non-UTF-8 bytes and stray quotes drawn in."""
    data = text.encode("utf-8")
    ending = draw(st.sampled_from([b"\r\n", b"\n", b"\r"]))
    data = data.replace(b"\r\n", b"\n").replace(b"\n", ending)
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        junk = draw(st.sampled_from([b"\xe9", b"\xff\xfe", b"\x80", b'"', b",", b"\x00", b"\r"]))
        data = data[:at] + junk + data[at:]
    if draw(st.integers(0, 4)) == 0:
        data = data[: draw(st.integers(0, len(data)))]  # cut short
    return data


XDIAL_HEADER = [f"{LANGUAGE_NAMES[lang]}_{s}" for lang in LANGUAGES for s in ("ctx", "res")] + ["ratings"]


@st.composite
def xdial_file(draw) -> bytes:
    n_cols = len(XDIAL_HEADER)
    rows = []
    for _ in range(draw(st.integers(0, 4))):
        row = [draw(GOOD) for _ in range(n_cols - 1)] + [draw(st.sampled_from(["1", "2.5", "5"]))]
        if draw(st.integers(0, 2)) == 0:  # one hostile cell
            row[draw(st.integers(0, n_cols - 1))] = draw(st.one_of(CELL, RATING))
        if draw(st.integers(0, 9)) == 0:
            row = row[: draw(st.integers(0, n_cols))]  # a short (or empty) row
        rows.append(row)
    return draw(damaged(_csv_text(XDIAL_HEADER, rows)))


def _reader(builder, skip: bool):
    builder.skip_invalid, builder._skipped = skip, []
    return builder


@READ
@given(data=xdial_file(), skip=st.booleans(), langs=st.sampled_from([("en",), ("en", "de", "zh"), LANGUAGES]))
def test_xdial_reader(data, skip, langs):
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "fed-turn.csv"
        f.write_bytes(data)
        b = _reader(XDialEvalBuilder(), skip)
        try:
            cfg = b.read_config(SourceFile("fed-turn", "turn", f, str(f)), langs, [])
            records = [r for chunk in cfg.iter_chunks() for r in chunk]  # streamed: read them all
            event(f"records: {bool(records)}, skipped: {bool(b._skipped)}")
        except DataValidationError as e:
            event("error")
            assert Path(e.file).name == "fed-turn.csv" and e.row is not None and e.column is not None
            return
        rows = {r["item_id"] for r in records}
        assert len(records) == len(rows) * len(langs)
        assert all(r["response"].strip() and r["context"] and r["rating"] == r["rating"] for r in records)
        assert all(s["file"] == "fed-turn.csv" and s["field"] for s in b._skipped) and (
            skip or not b._skipped
        )


@st.composite
def upheld_file(draw) -> bytes:
    odd = st.sampled_from(["", "6: Odd", "?", "5"])
    rows = []
    for i in range(draw(st.integers(0, 4))):
        item = draw(st.one_of(st.just(f"t-{i}"), GOOD))
        hist = draw(
            st.one_of(
                st.sampled_from(["user: hi\nassistant: hello", "user: hi\r\n \r\nassistant: x", ""]), CELL
            )
        )
        labels = [
            draw(st.one_of(st.sampled_from(list(scale.values())), odd)) for scale in (CONTENT, STYLE, REASON)
        ]
        row = [item, hist, draw(GOOD), draw(GOOD), *labels, draw(GOOD)]
        if draw(st.integers(0, 2)) == 0:  # one hostile cell
            row[draw(st.integers(0, 7))] = draw(CELL)
        rows.append(row[: draw(st.integers(6, 8))] if draw(st.integers(0, 9)) == 0 else row)
    return draw(damaged(_csv_text(MAIN_HEADER, rows)))


@READ
@given(data=upheld_file(), skip=st.booleans())
def test_upheld_reader(data, skip):
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "annotator_1.csv"
        f.write_bytes(data)
        b = _reader(UpheldBuilder(), skip)
        b._unnamed = []
        try:
            rows = b._read_file(f, "annotator_1", "main", [])
        except DataValidationError as e:
            assert Path(e.file).name == "annotator_1.csv" and e.column is not None
            event("error")
            return
        event(f"rows: {bool(rows)}, skipped: {bool(b._skipped)}")
        assert all(r["item"] and r["texts"]["context"] is not None and len(r["labels"]) == 3 for r in rows)
        assert skip or not b._skipped


@st.composite
def table_file(draw) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["csv", "tsv", "jsonl", "json"]))
    header = ["id", "ctx", "resp", "score"]
    rows = [
        [draw(GOOD), draw(GOOD), draw(GOOD), draw(st.sampled_from(["1", "3", "5"]))]
        for _ in range(draw(st.integers(0, 4)))
    ]
    for row in rows:
        if draw(st.integers(0, 2)) == 0:  # one hostile cell
            row[draw(st.integers(0, 3))] = draw(st.one_of(CELL, RATING))
    if kind in ("csv", "tsv"):
        text = _csv_text(header, rows)
        text = text.replace(",", "\t") if kind == "tsv" else text
    else:
        objs = [
            dict(zip(header, r, strict=True)) | draw(st.sampled_from([{}, {"nested": {"a": 1}}, {"n": None}]))
            for r in rows
        ]
        text = "\n".join(json.dumps(o) for o in objs) if kind == "jsonl" else json.dumps(objs)
        if draw(st.booleans()):
            text += draw(st.sampled_from(["\n{bad", "\n[1, 2]", '\n"str"', "}", ""]))
    return kind, draw(damaged(text))


@READ
@given(table_file())
def test_importer_reader(kind_data):
    kind, data = kind_data
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / f"src.{kind}"
        f.write_bytes(data)
        try:
            t = read_table(f, kind, "utf-8")
        except DataValidationError as e:
            assert Path(e.file).name == f.name
            return
        assert all(isinstance(row, dict) and n >= 1 for n, row in t.rows)
        assert all(isinstance(col, str) and why for col, why in t.bad.values())


MAPPING = {
    "name": "fuzz",
    "dimensions": [{"name": "overall", "scale": "likert", "min": 1, "max": 5}],
    "configs": [
        {
            "name": "t",
            "level": "turn",
            "files": ["*.csv"],
            "language": "en",
            "id": "id",
            "context": "ctx",
            "response": "resp",
            "labels": [{"dimension": "overall", "column": "score", "annotator": "a"}],
        }
    ],
}


@BUILD
@given(files=st.tuples(xdial_file(), upheld_file(), table_file()), skip=st.booleans())
def test_builds_end_in_a_dataset_or_a_clear_error_and_write_only_their_folder(files, skip):
    xdial, upheld, (_, table) = files
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "x" / "turn").mkdir(parents=True)
        (base / "x" / "turn" / "fed-turn.csv").write_bytes(xdial)
        (base / "u" / "main").mkdir(parents=True)
        (base / "u" / "main" / "annotator_1.csv").write_bytes(upheld)
        (base / "i").mkdir()
        (base / "i" / "t.csv").write_bytes(table)
        sources = {p for p in base.rglob("*")}
        for name, builder, src in (
            ("x", XDialEvalBuilder(), "x"),
            ("u", UpheldBuilder(), "u"),
            ("i", GenericImporter(MAPPING), "i"),
        ):
            out = base / "out" / name
            try:
                builder.build(base / src, out, show_progress=False, skip_invalid=skip)
            except (DataValidationError, SchemaError, SourceUnavailableError, EmptyBuildError) as e:
                assert str(e) and not out.exists()
                event(f"{name}: {type(e).__name__}")
            else:
                assert (out / "build_manifest.json").is_file()
                event(f"{name}: built")
        written = {p for p in base.rglob("*")} - sources
        assert all(p.is_relative_to(base / "out") for p in written)
        assert not [p for p in written if ".tmp-" in p.name or ".old-" in p.name]
