"""MEDAL human-annotation round trip: export sheets -> annotators fill them -> import -> agreement -> records."""

from __future__ import annotations

import csv
import hashlib
import json
import random
from pathlib import Path

import krippendorff
import numpy as np
import pytest

from dataset_builders.medal import MEDAL_DIMENSIONS
from dataset_builders.medal_labels import ISSUE_ABBREVIATIONS, ISSUE_DEFINITIONS, MEDAL_ISSUES
from dataset_builders.medal_pipeline.annotation.sheets import (
    LABEL_COLUMNS,
    AnnotationSet,
    agreement_markdown,
    agreement_tables,
    benchmark_records,
    expected_from_manifest,
    export_sheets,
    import_annotations,
    validate_annotations,
)
from dataset_builders.medal_pipeline.types import Dialogue, SeedContext, Turn
from harness.data.schema import DataValidationError, validate_records

N_DIALOGUES = {"en": 6, "fr": 5, "de": 3}
ANNOTATORS = {"en": ("ann1", "ann2"), "fr": ("marie", "paul"), "de": ("hans",)}


def make_dialogues() -> tuple[list[Dialogue], dict[str, SeedContext]]:
    dialogues, seeds = [], {}
    for lang, n in N_DIALOGUES.items():
        for i in range(n):
            sid = f"seed-{lang}-{i}"
            seeds[sid] = SeedContext(
                sid,
                f"sc{i}",
                f"PersonX goes hiking ({lang} {i}).",
                "atomic10x",
                f"p{i}",
                f"A teacher, {i}",
                "personahub",
                lang,
            )
            turns = [
                Turn("user", f'Hi, "{lang}" dialogue {i}, with a comma', "user-llm"),
                Turn("assistant", f"Hello!\nA second line; {i}", "secret-bot-x" if i % 2 else "secret-bot-y"),
                Turn("user", "Bye. END_OF_DIALOGUE", "user-llm"),
            ]
            chatbot = "secret-bot-x" if i % 2 else "secret-bot-y"
            dialogues.append(
                Dialogue(f"dlg-{lang}-{i}", sid, lang, "user-llm", chatbot, turns, "end_of_dialogue")
            )
    return dialogues, seeds


# Known label vectors (one value per dialogue of the language, in order).
EXPLICIT = {
    ("en", "ann1", "overall"): [5, 4, 3, 5, 2, 5],
    ("en", "ann2", "overall"): [5, 5, 1, 4, 2, 3],
    ("en", "ann1", "repetitive"): [1, 0, 0, 1, 0, 0],
    ("en", "ann2", "repetitive"): [1, 1, 0, 0, 0, 0],
    ("fr", "marie", "unsafe"): [0, 0, 0, 0, 0],
    ("fr", "paul", "unsafe"): [0, 0, 0, 0, 0],
}


def label_vectors() -> dict[tuple[str, str, str], list[int]]:
    rng = random.Random(7)
    out = {}
    for lang, annotators in ANNOTATORS.items():
        for a in annotators:
            for dim in LABEL_COLUMNS:
                vec = [
                    rng.randint(1, 5) if dim == "overall" else int(rng.random() < 0.4)
                    for _ in range(N_DIALOGUES[lang])
                ]
                vec[0] = 1 if dim != "overall" else 5  # every vector varies or shares a value
                vec[1] = 0 if dim != "overall" else 2
                out[(lang, a, dim)] = EXPLICIT.get((lang, a, dim), vec)
    return out


def fill_csv(sheet: Path, dest: Path, values: dict[str, dict[str, object]], *, bom=False, delimiter=","):
    with open(sheet, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row.update({k: "" if v is None else str(v) for k, v in values.get(row["dialogue_id"], {}).items()})
    with open(dest, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)


def fill_jsonl(sheet: Path, dest: Path, values: dict[str, dict[str, object]]):
    rows = [json.loads(line) for line in sheet.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row.update(values.get(row["dialogue_id"], {}))
    dest.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def values_for(lang: str, annotator: str, vectors) -> dict[str, dict[str, object]]:
    ids = [f"dlg-{lang}-{i}" for i in range(N_DIALOGUES[lang])]
    return {d: {dim: vectors[(lang, annotator, dim)][i] for dim in LABEL_COLUMNS} for i, d in enumerate(ids)}


@pytest.fixture
def exported(tmp_path):
    dialogues, seeds = make_dialogues()
    out = tmp_path / "sheets"
    paths = export_sheets(dialogues, out, seeds=seeds, created_at="2025-01-01T00:00:00+00:00")
    return dialogues, seeds, out, paths


def fill_all(out: Path, vectors, jsonl_langs=()):
    for lang, annotators in ANNOTATORS.items():
        for a in annotators:
            if lang in jsonl_langs:
                fill_jsonl(
                    out / lang / "sheet.jsonl", out / lang / f"{a}.jsonl", values_for(lang, a, vectors)
                )
            else:
                fill_csv(out / lang / "sheet.csv", out / lang / f"{a}.csv", values_for(lang, a, vectors))


# -- export ----------------------------------------------------------------------------------------


def test_export_sheets_are_blind_and_blank(exported):
    dialogues, _, out, paths = exported
    assert list(paths) == ["en", "de", "fr"]  # the paper's language order
    assert paths["en"] == [out / "en" / "sheet.csv", out / "en" / "sheet.jsonl"]
    with open(out / "en" / "sheet.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "dialogue_id",
        "language",
        "scene",
        "persona",
        "dialogue",
        *LABEL_COLUMNS,
        "comments",
    ]
    assert [r["dialogue_id"] for r in rows] == [f"dlg-en-{i}" for i in range(6)]
    assert rows[1]["dialogue"] == (
        'user: Hi, "en" dialogue 1, with a comma\nassistant: Hello!\nA second line; 1\nuser: Bye. END_OF_DIALOGUE'
    )
    assert rows[1]["scene"] == "PersonX goes hiking (en 1)." and rows[1]["persona"] == "A teacher, 1"
    assert all(r[c] == "" for r in rows for c in (*LABEL_COLUMNS, "comments"))
    raw = b"".join(p.read_bytes() for ps in paths.values() for p in ps)
    assert not raw.startswith(b"\xef\xbb\xbf")
    for secret in (b"secret-bot", b"user-llm"):  # model names never reach the annotators
        assert secret not in raw
    jl = [json.loads(x) for x in (out / "de" / "sheet.jsonl").read_text("utf-8").splitlines()]
    assert len(jl) == 3 and jl[0]["overall"] is None and jl[0]["dialogue"].startswith("user: Hi")

    guide = (out / "GUIDELINES.md").read_text("utf-8")
    assert (
        "expert dialogue evaluator" in guide and "{{" not in guide and "overall_quality_rating" not in guide
    )
    for name in MEDAL_ISSUES:
        assert ISSUE_ABBREVIATIONS[name] in guide and ISSUE_DEFINITIONS[name] in guide
    assert "<lang>/<annotator_id>.csv" in guide and "integer 1–5" in guide and "5 – Very good" in guide

    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert manifest["created_at"] == "2025-01-01T00:00:00+00:00"
    assert manifest["languages"]["fr"]["dialogue_ids"] == [f"dlg-fr-{i}" for i in range(5)]
    for rel, sha in manifest["languages"]["en"]["sheets"].items():
        assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == sha
    assert expected_from_manifest(out) == {d.id: d.language for d in dialogues}


def test_export_without_seeds_and_bad_input(tmp_path):
    dialogues, _ = make_dialogues()
    paths = export_sheets(dialogues[:2], tmp_path / "s", formats=("jsonl",))
    assert paths == {"en": [tmp_path / "s" / "en" / "sheet.jsonl"]}
    row = json.loads((tmp_path / "s" / "en" / "sheet.jsonl").read_text("utf-8").splitlines()[0])
    assert "scene" not in row and "chatbot" not in row and "user_model" not in row
    with pytest.raises(ValueError, match="twice"):
        export_sheets([dialogues[0], dialogues[0]], tmp_path / "t")
    with pytest.raises(ValueError, match="formats"):
        export_sheets(dialogues, tmp_path / "t", formats=("xlsx",))


# -- round trip + agreement ------------------------------------------------------------------------


def test_round_trip_agreement_and_records(exported):
    dialogues, seeds, out, _ = exported
    vectors = label_vectors()
    fill_all(out, vectors)
    expected = expected_from_manifest(out)
    assert validate_annotations(out, expected) == []
    ann = import_annotations(out, expected)
    assert ann.annotators == {"de": ["hans"], "en": ["ann1", "ann2"], "fr": ["marie", "paul"]}
    assert ann.coverage == {"de": {"hans": 3}, "en": {"ann1": 6, "ann2": 6}, "fr": {"marie": 5, "paul": 5}}
    assert ann.missing == 0 and ann.uncovered == 0 and len(ann.files) == 5
    assert len(ann.labels) == 9 * (6 * 2 + 5 * 2 + 3)
    assert ("dlg-en-2", "ann2", "overall", 1.0, "1") in ann.labels

    tables = agreement_tables(ann)
    assert list(tables["languages"]) == ["en", "de", "fr"]
    de = tables["languages"]["de"]
    assert de["agreement"] is False and de["dimensions"] is None and de["annotators"] == ["hans"]
    en = tables["languages"]["en"]["dimensions"]
    # hand-computed: overall [5,4,3,5,2,5] vs [5,5,1,4,2,3]: exact 2/6, |a-b| <= 1 in 4/6
    assert en["overall"]["percent_agreement"] == pytest.approx(2 / 6)
    assert en["overall"]["adjacent_agreement"] == pytest.approx(4 / 6) == en["overall"]["table4"]
    assert en["repetitive"]["percent_agreement"] == pytest.approx(4 / 6) == en["repetitive"]["table4"]
    assert en["overall"]["n_items"] == 6 and en["overall"]["alpha_level"] == "interval"
    for lang, (a, b) in (("en", ANNOTATORS["en"]), ("fr", ANNOTATORS["fr"])):
        for dim in LABEL_COLUMNS:
            va, vb = np.array(vectors[(lang, a, dim)], float), np.array(vectors[(lang, b, dim)], float)
            stats = tables["languages"][lang]["dimensions"][dim]
            assert stats["percent_agreement"] == pytest.approx(float(np.mean(va == vb)))
            level = "interval" if dim == "overall" else "nominal"
            if len(set(va) | set(vb)) > 1:
                ref = krippendorff.alpha(reliability_data=np.vstack([va, vb]), level_of_measurement=level)
                assert stats["alpha"] == pytest.approx(ref), (lang, dim)
    # constant labels: alpha undefined -> None, agreement perfect
    assert tables["languages"]["fr"]["dimensions"]["unsafe"]["alpha"] is None
    assert tables["languages"]["fr"]["dimensions"]["unsafe"]["percent_agreement"] == pytest.approx(1.0)
    t4 = [tables["languages"][lg]["dimensions"]["repetitive"]["table4"] for lg in ("en", "fr")]
    assert tables["average"]["repetitive"]["table4"] == pytest.approx(sum(t4) / 2)
    json.dumps(tables)  # JSON-friendly

    md = agreement_markdown(tables)
    assert md[0] == "| Language | !Int | !Safe | !Emp | !Com | Rep | !Coh | !Rel | !Fac | Overall |"
    en_rows = [line for line in md if line.startswith("| EN |")]
    assert len(en_rows) == 2 and en_rows[0].endswith("| 0.67 |") and "| 0.6667 |" not in en_rows[0]
    assert en_rows[1].split("|")[-2].strip() == f"{en['overall']['alpha']:.4f}"
    assert "| – |" in [line for line in md if line.startswith("| FR |")][1] + "|"
    assert not any(line.startswith("| DE |") for line in md)
    assert any("Table 4" in line for line in md) and any("Table 5" in line for line in md)
    assert "DE (single annotator: no agreement)" in md[-1]

    records = benchmark_records(dialogues, ann, seeds=seeds)
    validate_records(records, "dialogue", MEDAL_DIMENSIONS)
    assert [r["id"] for r in records] == [d.id for d in dialogues]
    rec = next(r for r in records if r["id"] == "dlg-en-2")
    assert rec["rating"] == pytest.approx((3 + 1) / 2) and rec["dimension"] == "overall"
    assert rec["system"] == "secret-bot-y" and rec["scene"] == "PersonX goes hiking (en 2)."
    assert rec["turns"][1] == {"role": "assistant", "text": "Hello!\nA second line; 2"}
    assert len(rec["labels"]) == 18 and {lab["annotator"] for lab in rec["labels"]} == {"ann1", "ann2"}
    agg = {a["dimension"]: a for a in rec["aggregates"]}
    assert (
        agg["overall"]["n"] == 2
        and agg["overall"]["mean"] == pytest.approx(2.0)
        and agg["overall"]["agreement"] == "none"
    )
    de_rec = next(r for r in records if r["language"] == "de")
    assert de_rec["rating"] == float(vectors[("de", "hans", "overall")][0]) and len(de_rec["labels"]) == 9
    # only annotated dialogues get records; foreign labels are an error
    en_only = AnnotationSet(labels=[lab for lab in ann.labels if lab[0].startswith("dlg-en")])
    assert len(benchmark_records(dialogues, en_only)) == 6
    with pytest.raises(ValueError, match="not among the given dialogues"):
        benchmark_records(dialogues[:6], ann)


def test_jsonl_round_trip_equals_csv(tmp_path):
    dialogues, seeds = make_dialogues()
    vectors = label_vectors()
    runs = {}
    for kind, jsonl_langs in (("csv", ()), ("jsonl", tuple(N_DIALOGUES))):
        out = tmp_path / kind
        export_sheets(dialogues, out, seeds=seeds)
        fill_all(out, vectors, jsonl_langs)
        runs[kind] = import_annotations(out, expected_from_manifest(out))
    assert all(p.suffix == ".jsonl" for p in runs["jsonl"].files)
    assert sorted(runs["jsonl"].labels) == sorted(runs["csv"].labels)
    assert agreement_tables(runs["jsonl"]) == agreement_tables(runs["csv"])


def test_bom_semicolon_booleans_annotator_column_and_comments(exported):
    _, _, out, _ = exported
    vals = {f"dlg-de-{i}": {**dict.fromkeys(MEDAL_ISSUES, "false"), "overall": " 4 "} for i in range(3)}
    vals["dlg-de-0"].update(unsafe="TRUE", comments="rude; see turn 2", annotator="hans-2")
    fill_csv(out / "de" / "sheet.csv", out / "de" / "file1.csv", vals, bom=True, delimiter=";")
    assert (out / "de" / "file1.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    expected = {d: lg for d, lg in expected_from_manifest(out).items() if lg == "de"}
    ann = import_annotations(out, expected)
    assert ann.annotators == {"de": ["hans-2"]}  # the annotator column overrides the file stem
    assert ("dlg-de-0", "hans-2", "unsafe", 1.0, "TRUE") in ann.labels
    assert ("dlg-de-1", "hans-2", "overall", 4.0, " 4 ") in ann.labels
    assert ann.comments == {("dlg-de-0", "hans-2"): "rude; see turn 2"}
    # JSON booleans / ints
    sheet = out / "de" / "sheet.jsonl"
    fill_jsonl(
        sheet,
        out / "de" / "file1.jsonl",
        {d: {**dict.fromkeys(MEDAL_ISSUES, True), "overall": 2} for d in vals},
    )
    (out / "de" / "file1.csv").unlink()
    ann = import_annotations(out, expected)
    assert ("dlg-de-2", "file1", "lacks_empathy", 1.0, "true") in ann.labels
    assert ("dlg-de-2", "file1", "overall", 2.0, "2") in ann.labels


# -- bad files -------------------------------------------------------------------------------------

GOOD = {f"dlg-en-{i}": {**dict.fromkeys(MEDAL_ISSUES, 0), "overall": 4} for i in range(6)}


BAD_CSV = [
    # (id, mutate(rows list of dicts) -> rows, row, column, text)
    (
        "missing column",
        lambda rows: [{k: v for k, v in r.items() if k != "repetitive"} for r in rows],
        "header row",
        "repetitive",
        "required column missing",
    ),
    (
        "empty cell",
        lambda rows: [rows[0], {**rows[1], "unsafe": ""}, *rows[2:]],
        "row 2 ",
        "unsafe",
        "empty label",
    ),
    (
        "issue label 2",
        lambda rows: [*rows[:2], {**rows[2], "incoherent": "2"}, *rows[3:]],
        "row 3 ",
        "incoherent",
        "'2' is not an issue label",
    ),
    (
        "issue yes",
        lambda rows: [{**rows[0], "nonfactual": "yes"}, *rows[1:]],
        "row 1 ",
        "nonfactual",
        "'yes' is not an issue label",
    ),
    (
        "overall 6",
        lambda rows: [*rows[:3], {**rows[3], "overall": "6"}, *rows[4:]],
        "row 4 ",
        "overall",
        "'6' is not an overall rating",
    ),
    (
        "overall 3.5",
        lambda rows: [*rows[:5], {**rows[5], "overall": "3.5"}],
        "row 6 ",
        "overall",
        "'3.5' is not an overall rating",
    ),
    (
        "unknown id",
        lambda rows: [*rows[:4], {**rows[4], "dialogue_id": "dlg-xx-9"}, rows[5]],
        "row 5 ",
        "dialogue_id",
        "unknown dialogue id 'dlg-xx-9'",
    ),
    (
        "duplicate",
        lambda rows: [*rows[:5], {**rows[5], "dialogue_id": "dlg-en-1"}],
        "row 6 ",
        "dialogue_id",
        "'dlg-en-1' appears twice (first on row 2)",
    ),
    (
        "wrong language",
        lambda rows: [{**rows[0], "dialogue_id": "dlg-fr-0"}, *rows[1:]],
        "row 1 ",
        "dialogue_id",
        "is in language 'fr', but this file is under en/",
    ),
    ("partial", lambda rows: rows[:4], "whole file", "dialogue_id", "covers 4 of the 6 'en' dialogues"),
    (
        "language column",
        lambda rows: [rows[0], {**rows[1], "language": "fr"}, *rows[2:]],
        "row 2 ",
        "language",
        "language 'fr'",
    ),
]


def write_rows(path: Path, rows: list[dict]):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.parametrize("case", BAD_CSV, ids=[c[0] for c in BAD_CSV])
def test_bad_csv_names_file_row_and_column(exported, case):
    _, _, out, _ = exported
    name, mutate, where, column, text = case
    dest = out / "en" / "ann1.csv"
    fill_csv(out / "en" / "sheet.csv", dest, GOOD)
    with open(dest, encoding="utf-8", newline="") as f:
        write_rows(dest, mutate(list(csv.DictReader(f))))
    expected = {d: lg for d, lg in expected_from_manifest(out).items() if lg == "en"} | {"dlg-fr-0": "fr"}
    with pytest.raises(DataValidationError) as info:
        import_annotations(out, expected, strict=True)  # odd label cells are errors only under strict
    msg = str(info.value)
    assert (
        (str(dest) in msg or "en/ann1.csv" in msg)
        and where in msg
        and f"column {column!r}" in msg
        and text in msg
    ), msg
    assert info.value.column == column


def test_allow_partial_counts_missing_and_uncovered(exported):
    _, _, out, _ = exported
    good = {d: {**v, "overall": 5 if d != "dlg-en-0" else 3} for d, v in GOOD.items()}
    fill_csv(out / "en" / "sheet.csv", out / "en" / "ann1.csv", good)
    dest = out / "en" / "ann2.csv"
    fill_csv(out / "en" / "sheet.csv", dest, {**good, "dlg-en-1": {**good["dlg-en-1"], "overall": ""}})
    with open(dest, encoding="utf-8", newline="") as f:
        write_rows(dest, list(csv.DictReader(f))[:5])  # drops dlg-en-5
    expected = {d: lg for d, lg in expected_from_manifest(out).items() if lg in ("en", "fr")}
    errors = validate_annotations(out, expected)
    assert [(Path(e.file).name, e.row, e.column) for e in errors] == [
        ("ann2.csv", 2, "overall"),
        ("ann2.csv", "file", "dialogue_id"),
        ("fr", "file", "annotator"),
    ]
    with pytest.raises(DataValidationError, match="empty label"):
        import_annotations(out, expected)
    ann = import_annotations(out, expected, allow_partial=True)
    assert ann.missing == 1 and ann.uncovered == 1 and ann.coverage == {"en": {"ann1": 6, "ann2": 5}}
    assert ("dlg-en-1", "ann2", "overall", None, "") in ann.labels
    stats = agreement_tables(ann)["languages"]["en"]["dimensions"]["overall"]
    assert stats["n_items"] == 4 and stats["percent_agreement"] == pytest.approx(
        1.0
    )  # 6 items - 1 missing - 1 uncovered
    assert stats["alpha"] == pytest.approx(1.0)
    records = benchmark_records(make_dialogues()[0], ann)
    validate_records(records, "dialogue", MEDAL_DIMENSIONS)
    rec = next(r for r in records if r["id"] == "dlg-en-1")
    assert rec["rating"] == 5.0 and [a["n"] for a in rec["aggregates"] if a["dimension"] == "overall"] == [1]


def test_validate_collects_every_error_and_jsonl_lines(exported):
    _, _, out, _ = exported
    vals = {**GOOD, "dlg-en-2": {**GOOD["dlg-en-2"], "unsafe": 2, "overall": 4.0}}
    fill_jsonl(out / "en" / "sheet.jsonl", out / "en" / "ann1.jsonl", vals)
    with open(out / "en" / "ann1.jsonl", "a", encoding="utf-8") as f:
        f.write("\n{not json\n")
    fill_csv(out / "en" / "sheet.csv", out / "en" / "ann1.csv", GOOD)  # same annotator twice
    (out / "en" / "ann3.xlsx").write_bytes(b"PK")
    expected = {d: lg for d, lg in expected_from_manifest(out).items() if lg == "en"}
    errors = validate_annotations(out, expected, strict=True)
    got = [(Path(e.file).name, e.row, e.column) for e in errors]
    assert got == [
        ("ann1.jsonl", 3, "unsafe"),
        ("ann1.jsonl", 3, "overall"),
        ("ann1.jsonl", 8, "(json)"),
        ("ann1.jsonl", "file", "annotator"),
        ("ann3.xlsx", "file", "(format)"),
    ]
    msgs = [str(e) for e in errors]
    assert "ann1.jsonl, line 3, field 'unsafe': value '2': '2' is not an issue label" in msgs[0]
    assert "line 3, field 'overall': value '4.0': '4.0' is not an overall rating" in msgs[1]
    assert "Without --strict the build goes on" in msgs[0]
    assert "annotator 'ann1' already has a file in en/: ann1.csv" in msgs[3]
    with pytest.raises(DataValidationError, match="line 3, field 'unsafe'"):
        import_annotations(out, expected, strict=True)
    lenient = validate_annotations(out, expected)  # without strict the two label cells are odd cells
    assert [(Path(e.file).name, e.row, e.column) for e in lenient] == [got[2], got[3], got[4]]


def test_inconsistent_annotator_column_and_missing_header(exported):
    _, _, out, _ = exported
    vals = {d: {**v, "annotator": "a" if d != "dlg-en-3" else "b"} for d, v in GOOD.items()}
    fill_csv(out / "en" / "sheet.csv", out / "en" / "x.csv", vals)
    expected = {d: lg for d, lg in expected_from_manifest(out).items() if lg == "en"}
    with pytest.raises(DataValidationError, match=r"row 4 .*column 'annotator': annotator 'b' differs"):
        import_annotations(out, expected)
    (out / "en" / "x.csv").write_text("", encoding="utf-8")
    errors = validate_annotations(out, expected)
    assert [e.column for e in errors] == ["dialogue_id", *LABEL_COLUMNS, "annotator"] and errors[
        0
    ].row == "header"
