"""UPHELD builder: label parsing, merging annotators, aggregates, bad input, and the real files."""

import csv
import json
from pathlib import Path

import pytest
from datasets import load_dataset

from dataset_builders.upheld.builder import UpheldBuilder, parse_history
from dataset_builders.upheld.labels import UnknownLabel, parse_label
from harness.data.schema import DataValidationError

HEADER = [
    "id_annotated",
    "chat_history",
    "Option A",
    "Option B",
    "score_task_1_content",
    "score_task_2_style",
    "score_task_3_reasonableness",
    "model",
]
C = {
    1: "1: Strongly Disagree -- no content overlap",
    3: "3: Neutral  - some overlap of content",
    4: "4: Agree - mostly same content",
    5: "5: Strongly Agree -- same content",
}
S = {1: "1: Different styles", 3: "3: Somewhat same styles", 5: "5: Same styles"}
R = {1: "1: Not a reasonable continuation", 5: "5:  A reasonable continuation"}
HIST = "user: Hi, I need a train to Cambridge.\n \n\n  assistant: Where from?\n \n\n  user: From London."


def row(item, content, style, reason, model="gpt4", hist=HIST, a="From which station?", b="Which station?"):
    return [item, hist, a, b, C.get(content, content), S.get(style, style), R.get(reason, reason), model]


def write_set(root, rows_by_annotator, folder="main", header=HEADER, encoding="utf-8"):
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    for ann, rows in rows_by_annotator.items():
        with open(d / f"annotator_{ann}.csv", "w", newline="", encoding=encoding) as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
    return root


def good_source(tmp_path):
    labels = {  # annotator -> (content, style, reasonableness) for item t-1/gpt4
        1: (5, 5, 5),
        2: (5, 5, 5),
        3: (4, 3, 5),
        4: (5, 1, 1),
        5: (3, 3, 5),
    }
    rows = {
        a: [row("t-1", *v), row("t-1", 1, 1, 1, model="random", b="I like trains.")]
        for a, v in labels.items()
    }
    return write_set(tmp_path / "src", rows)


def load(out, config, tmp_path):
    return load_dataset(str(out), config, split="test", cache_dir=str(tmp_path / "hf"))


# -- labels and histories ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "dim", "value"),
    [
        ("3: Neutral  - some overlap of content", "content", 3.0),
        ("3: Neutral - some overlap of content", "content", 3.0),
        ("1: Strongly Disagree — no content overlap", "content", 1.0),
        ("  5:Strongly agree –– same content ", "content", 5.0),
        ("4", "content", 4.0),
        ("3: Somewhat same styles", "style", 2.0),
        ("5: Same styles", "style", 3.0),
        ("5:  A reasonable continuation", "reasonableness", 1.0),
        ("1: Not a reasonable continuation", "reasonableness", 0.0),
        ("", "content", None),
        ("   ", "style", None),
    ],
)
def test_parse_label(raw, dim, value):
    assert parse_label(raw, dim) == value


@pytest.mark.parametrize(
    ("raw", "dim"),
    [
        ("2: Somewhat same styles", "style"),  # 2 is not a written style point
        ("4: Different styles", "style"),  # wording does not match the point
        ("3: Neutral - no content overlap", "content"),
        ("Neutral", "content"),
        ("6: Strongly Agree -- same content", "content"),
        ("3: A reasonable continuation", "reasonableness"),
    ],
)
def test_parse_label_fails_loudly(raw, dim):
    with pytest.raises(UnknownLabel, match="known"):
        parse_label(raw, dim)


def test_parse_history():
    msgs = parse_history(HIST)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[0]["text"] == "Hi, I need a train to Cambridge." and msgs[2]["text"] == "From London."
    assert parse_history("") == []
    with pytest.raises(ValueError, match="does not start"):
        parse_history("hello there\nuser: hi")
    with pytest.raises(ValueError, match="utterance 2 .* empty"):
        parse_history("user: hi\nassistant:   \nuser: ok")


# -- building ------------------------------------------------------------------------------------


def test_build_merges_annotators_and_aggregates(tmp_path):
    out = tmp_path / "out"
    res = UpheldBuilder().build(good_source(tmp_path), out, show_progress=False)
    assert res.configs == {"main": 2}
    ds = load(out, "main", tmp_path)
    rec = {r["id"]: r for r in ds}["t-1::gpt4"]
    assert rec["item_id"] == "t-1" and rec["system"] == "gpt4" and rec["dialogue_id"] == "t"
    assert rec["reference"] == "From which station?" and rec["response"] == "Which station?"
    assert rec["response_role"] == "assistant" and len(rec["context"]) == 3
    assert len(rec["labels"]) == 15 and {lab["annotator"] for lab in rec["labels"]} == {
        f"annotator_{i}" for i in range(1, 6)
    }
    agg = {a["dimension"]: a for a in rec["aggregates"]}
    # content 5,5,4,5,3: App. E.1 aggregate 22/25, mean 4.4, winner 5 with 3 of 5 -> majority
    assert agg["content"]["aggregate"] == pytest.approx(22 / 25) and agg["content"]["mean"] == pytest.approx(
        4.4
    )
    assert agg["content"]["majority"] == 5 and agg["content"]["agreement"] == "majority"
    # style written 5,5,3,1,3 -> 3,3,2,1,2: tie 2-2 -> none; aggregate 11/15
    assert agg["style"]["aggregate"] == pytest.approx(11 / 15) and agg["style"]["agreement"] == "none"
    assert agg["style"]["majority"] is None
    # reasonableness 5,5,5,1,5 -> 1,1,1,0,1
    assert agg["reasonableness"]["aggregate"] == pytest.approx(0.8) and agg["reasonableness"]["majority"] == 1
    assert rec["rating"] == pytest.approx(4.4) and rec["dimension"] == "content"
    other = {r["id"]: r for r in ds}["t-1::random"]
    assert {a["dimension"]: a["agreement"] for a in other["aggregates"]} == {
        "content": "full",
        "style": "full",
        "reasonableness": "full",
    }
    counts = res.manifest["configs"]["main"]["counts"]
    assert counts["label_sets"] == 10 and counts["labels"] == 30 and counts["annotators_per_item"] == {"5": 2}
    assert [d["name"] for d in res.manifest["dimensions"]] == ["content", "style", "reasonableness"]
    card = (out / "README.md").read_text()
    assert "config_name: main" in card and "Inter-annotator agreement" in card and "Likert 1–3" in card


def test_unnamed_id_column_identical_files_and_text_conflicts(tmp_path):
    src = tmp_path / "src"
    rows = [row("t-1", 5, 5, 5)]
    write_set(src, {1: rows, 2: rows, 3: [row("t-1", 4, 3, 5, a="A different reference.")]})
    header = ["Unnamed: 0", *HEADER[1:]]
    write_set(src, {4: [row("t-1", 4, 3, 5)]}, header=header)
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    text = "\n".join(res.warnings)
    assert "annotator_1.csv and annotator_2.csv are byte-identical" in text
    assert "unnamed ('Unnamed: 0'" in text and "annotator_4.csv" in text
    assert "t-1/gpt4 reference (kept the text of annotator_1, annotator_2, annotator_4)" in text
    conflicts = res.manifest["configs"]["main"]["text_conflicts"]
    assert conflicts[0]["other_variants"][0]["annotators"] == ["annotator_3"]
    assert "4 annotators" in text or "fewer than 5 annotators (1 with 4)" in text


def test_llm_arena_layout_and_missing_labels(tmp_path):
    src = tmp_path / "src"
    header = ["id", *HEADER[1:7]]
    arena = {a: [row("la_1-2", 4, 3, 5)[:7]] for a in range(1, 5)}
    arena[5] = [["la_1-2", "user: Prove it.", "Proof A", "Proof B", "", S[3], R[5]]]
    write_set(src, arena, folder="llm_arena", header=header)
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    assert res.configs == {"llm_arena": 1}
    assert any("no main set" in w for w in res.warnings)
    assert any("1 empty or unreadable label cell(s) kept as missing" in w for w in res.warnings)
    ds = load(tmp_path / "out", "llm_arena", tmp_path)
    rec = ds[0]
    assert rec["system"] is None and rec["id"] == "la_1-2"
    content = {a["dimension"]: a for a in rec["aggregates"]}["content"]
    assert content["n"] == 4 and content["aggregate"] == pytest.approx(16 / 20)
    missing = [lab for lab in rec["labels"] if lab["value"] is None]
    assert missing == [{"annotator": "annotator_5", "dimension": "content", "value": None, "raw": None}]


# -- bad input: an error naming file, row and field, or a counted skip -----------------------------


def _bad_cases(tmp_path):
    ok = [row("t-1", 5, 5, 5)]
    return {
        "unknown label": (
            [row("t-2", "3: Maybe", 5, 5)],
            "score_task_1_content",
            "the wording is not that of point 3",
        ),
        "duplicate id": ([row("t-2", 5, 5, 5), row("t-2", 4, 5, 5)], "id_annotated", "duplicate item 't-2'"),
        "empty turn": (
            [row("t-2", 5, 5, 5, hist="user: hi\nassistant:  \nuser: ok")],
            "chat_history",
            "empty",
        ),
        "empty response": ([row("t-2", 5, 5, 5, b="  ")], "Option B", "empty model continuation"),
        "empty id": ([row("", 5, 5, 5)], "id_annotated", "empty item id"),
    }, ok


@pytest.mark.parametrize("case", ["duplicate id", "empty id"])
def test_bad_rows_are_errors_or_counted_skips(tmp_path, case):
    cases, ok = _bad_cases(tmp_path)
    bad_rows, field, message = cases[case]
    src = write_set(tmp_path / "src", {1: ok + bad_rows, 2: ok})
    with pytest.raises(DataValidationError) as ei:
        UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    msg = str(ei.value)
    bad_row = 3 if case == "duplicate id" else 2
    assert "annotator_1.csv" in msg and f"row {bad_row}" in msg and repr(field) in msg and message in msg
    assert not (tmp_path / "out").exists()  # a failed build leaves nothing behind

    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False, skip_invalid=True)
    skipped = res.manifest["skipped"]
    assert skipped["count"] == 1
    assert skipped["rows"][0]["file"] == "annotator_1.csv" and skipped["rows"][0]["row"] == bad_row
    assert skipped["rows"][0]["field"] == field
    assert "Skipped source rows: 1" in (tmp_path / "out" / "README.md").read_text()


@pytest.mark.parametrize(
    ("case", "kind", "rows"),
    [
        ("unknown label", "wording_mismatch", 2),
        ("empty turn", "row_left_out", 1),
        ("empty response", "row_left_out", 1),
    ],
)
def test_odd_cells_are_accounted_for_or_strict_errors(tmp_path, case, kind, rows):
    cases, ok = _bad_cases(tmp_path)
    bad_rows, field, message = cases[case]
    src = write_set(tmp_path / "src", {1: ok + bad_rows, 2: ok})
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    assert res.configs == {"main": rows}
    [cell] = res.manifest["odd_cells"]["cells"]
    assert (cell["file"], cell["row"], cell["column"], cell["kind"]) == ("annotator_1.csv", 2, field, kind)
    assert res.manifest["skipped"]["count"] == 0
    with pytest.raises(DataValidationError) as ei:
        UpheldBuilder().build(src, tmp_path / "strict", show_progress=False, strict=True)
    msg = str(ei.value)
    assert "annotator_1.csv" in msg and "row 2" in msg and repr(field) in msg and message in msg
    assert "Without --strict the build goes on" in msg
    assert not (tmp_path / "strict").exists()


def test_mixed_encoding_names_row_and_field(tmp_path):
    src = write_set(tmp_path / "src", {1: [row("t-1", 5, 5, 5)], 2: [row("t-1", 5, 5, 5)]})
    f = src / "main" / "annotator_2.csv"
    f.write_bytes(f.read_bytes() + "t-9,user: caf\u00e9?,Oui,Non,4,3,5,gpt4\n".encode("latin-1"))
    with pytest.raises(DataValidationError, match=r"annotator_2.csv, row 2 .*'chat_history'.*invalid UTF-8"):
        UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False, skip_invalid=True)
    assert res.manifest["skipped"]["count"] == 1 and res.configs == {"main": 1}


def test_missing_annotators(tmp_path):
    src = write_set(
        tmp_path / "src", {1: [row("t-1", 5, 5, 5), row("t-2", 5, 5, 5)], 2: [row("t-1", 5, 5, 5)]}
    )
    res = UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    assert res.manifest["configs"]["main"]["counts"]["annotators_per_item"] == {"1": 1, "2": 1}
    with pytest.raises(DataValidationError, match=r"annotator_1.csv, row 2 .*'annotators'.*1 annotator\(s\)"):
        UpheldBuilder(min_annotators=2).build(src, tmp_path / "o2", show_progress=False)
    res = UpheldBuilder(min_annotators=2).build(src, tmp_path / "o2", show_progress=False, skip_invalid=True)
    assert res.configs == {"main": 1} and res.manifest["skipped"]["count"] == 1


def test_missing_column_and_empty_source(tmp_path):
    src = write_set(tmp_path / "src", {1: [row("t-1", 5, 5, 5)[:6]]}, header=HEADER[:6])
    with pytest.raises(DataValidationError, match=r"header.*'score_task_3_reasonableness'"):
        UpheldBuilder().build(src, tmp_path / "out", show_progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no annotator_<n>.csv"):
        UpheldBuilder().build(tmp_path / "empty", tmp_path / "out", show_progress=False)
    with pytest.raises(ValueError, match="English only"):
        UpheldBuilder().build(src, tmp_path / "out", languages=["zh"], show_progress=False)


# -- the real files ------------------------------------------------------------------------------


@pytest.mark.shared_data
def test_real_upheld_counts_against_the_paper(shared_data, tmp_path):
    src = shared_data / "upheld"
    if not src.is_dir():
        pytest.skip("../shared/data/upheld not found")
    out = tmp_path / "upheld"
    res = UpheldBuilder().build(src, out, show_progress=False)
    assert res.configs == {"main": 2462, "llm_arena": 122}
    main = res.manifest["configs"]["main"]["counts"]
    # the paper (§3.2): 12,291 label sets, 36,873 labels -> exact; 400 turns -> 412 turn ids in the files
    assert main["label_sets"] == 12291 and main["labels"] == 36873
    assert main["turn_ids"] == 412 and main["annotators_per_item"]["5"] == 2450
    arena = res.manifest["configs"]["llm_arena"]["counts"]
    assert arena["label_sets"] == 610 and arena["missing_labels"] == 4
    assert len(res.manifest["inputs"]) == 20 and all(len(i["sha256"]) == 64 for i in res.manifest["inputs"])
    for config in ("main", "llm_arena"):
        ds = load(out, config, tmp_path)
        assert ds.num_rows == res.configs[config]
    json.dumps(res.manifest)  # serialisable
    _docs_agreement_table_matches(out, res.manifest)


def _docs_agreement_table_matches(out, manifest) -> None:
    """docs/datasets.md quotes `harness datasets show upheld@1.0.0`'s agreement table of the main
    config: every number of it must be what the code computes on the real files now."""
    from harness.report.datasets import agreement_tables

    doc = (Path(__file__).resolve().parents[3] / "docs" / "datasets.md").read_text(encoding="utf-8")
    rows = {
        cells[0]: cells[1:]
        for line in doc.split("UPHELD main, all models", 1)[1].split("\n\n", 2)[1].splitlines()[2:]
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    [table] = [t for title, t in agreement_tables(out, manifest) if title.startswith("main:")]
    assert set(rows) == set(table["dimension"]), rows
    cols = ["percent", "adjacent", "alpha", "cohen_k", "fleiss_k", "full", "majority", "plurality", "none"]
    for _, got in table.iterrows():
        shown = rows[got["dimension"]]
        for col, cell in zip(cols, shown, strict=True):
            value = float(cell.split()[0])
            assert got[col] == pytest.approx(value, abs=6e-4), (got["dimension"], col, got[col], cell)
