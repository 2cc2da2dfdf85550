"""The `dstc11-track4` mapping on files written in the layouts DSTC11 Track 4 documents: CHANEL
utterance rows (UID = dataset-dialogue-turn, SID, SEG, TRANSLATION, MT-quality columns) under
task1/dev/<pair>/, task 2 paraphrase files, and the DSTC10 Track 5 annotation records."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import datasets
import pytest

from dataset_builders.base import EmptyBuildError
from dataset_builders.importer.generic import GenericImporter
from harness.data.schema import DataValidationError

T1_ES = [
    "UID",
    "SID",
    "SEG",
    "TRANSLATION",
    "BACKTRANSLATION",
    "COMET_20_ST",
    "COMET_21_ST",
    "COMET_22_ST",
    "COS_SIM_MULTI_1_ST",
    "COS_SIM_MULTI_2_ST",
]
T1_ZH = [
    "UID",
    "SID",
    "SEG",
    "TRANSLATION",
    "COMET_20_ST",
    "COMET_21_ST",
    "COMET_22_ST",
    "COS_SIM_MULTI_1_ST",
    "COS_SIM_MULTI_2_ST",
]
T2 = [
    "UID",
    "SID",
    "SEG",
    "PARAPHRASES",
    "LEVENSHTEIN",
    "COS_SIM_MONO_SP",
    "BACKTRANSLATION",
    "COS_SIM_MONO_SB",
]

# (uid, speaker, english, spanish, chinese, back-translation)
TURN_UTTS = [
    ("fed-turn-000000-0000", "User", "Hi!", "¡Hola!", "你好！", "Hello!"),
    (
        "fed-turn-000000-0001",
        "System",
        "Hello, how are you?",
        "Hola, ¿cómo estás?",
        "你好，你好吗？",
        "Hi, how are you?",
    ),
    (
        "fed-turn-000000-0002",
        "User",
        "Fine. Any plans?",
        "Bien. ¿Planes?",
        "很好。有计划吗？",
        "Good. Plans?",
    ),
    (
        "fed-turn-000000-0003",
        "System",
        "I will read a book.",
        "Leeré un libro.",
        "我会读一本书。",
        "I'll read a book.",
    ),
    (
        "fed-turn-000001-0000",
        "User",
        "Do you like cats?",
        "¿Te gustan los gatos?",
        "你喜欢猫吗？",
        "Do you like cats?",
    ),
    (
        "fed-turn-000001-0001",
        "System",
        "Cats are great.",
        "Los gatos son geniales.",
        "猫很棒。",
        "Cats are awesome.",
    ),
]
ASPECTS = {
    "Interesting": [1, 2, 1],
    "Engaging": [2, 2, 1],
    "Specific": [1, 1, 1],
    "Relevant": [2, 2, 2],
    "Correct": [2, 2, 2],
    "Semantically appropriate": [2, 1, 2],
    "Understandable": [1, 1, 1],
    "Fluent": [2, 2, 2],
    "Overall": [3, 4, 3],
}
DIAL_UTTS = [
    ("fed-dial-000000-0000", "User", "Hi there", "Hola", "嗨", "Hello"),
    (
        "fed-dial-000000-0001",
        "System",
        "Hello! What do you do?",
        "¡Hola! ¿Qué haces?",
        "你好！你做什么？",
        "Hi! What do you do?",
    ),
    ("fed-dial-000000-0002", "User", "I teach.", "Enseño.", "我教书。", "I teach."),
]
DIAL_ASPECTS = {
    "Coherent": [2, 1],
    "Error recovery": [1, 1],
    "Consistent": [1, 1],
    "Diverse": [2, 2],
    "Depth": [1, 1],
    "Likeable": [2, 2],
    "Understanding": [2, 1],
    "Flexible": [1, 1],
    "Informative": [1, 2],
    "Inquisitive": [2, 2],
    "Overall": [3, 3],
}


def _csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([header, *rows])


def _task1(path: Path, header: list[str], utts, col: int, order=None) -> None:
    rows = []
    for k, u in enumerate(utts):
        row = {
            "UID": u[0],
            "SID": u[1],
            "SEG": u[2],
            "TRANSLATION": u[col],
            "BACKTRANSLATION": u[5],
            "COMET_20_ST": 0.5 + k / 100,
            "COMET_21_ST": 0.1,
            "COMET_22_ST": 0.8,
            "COS_SIM_MULTI_1_ST": 0.9,
            "COS_SIM_MULTI_2_ST": 0.85,
        }
        rows.append([row[h] for h in header])
    _csv(path, header, [rows[i] for i in (order or range(len(rows)))])


@pytest.fixture
def release(tmp_path) -> Path:
    root = tmp_path / "DSTC_11_Track_4"
    # rows of the Spanish file out of UID order: the context follows the UID order, not the file order
    _task1(root / "task1/dev/en_es/fed-turn_multilingual_en_es.csv", T1_ES, TURN_UTTS, 3, [1, 0, 3, 2, 5, 4])
    _task1(root / "task1/dev/en_zh/fed-turn_multilingual_en_zh.csv", T1_ZH, TURN_UTTS, 4)
    _task1(root / "task1/dev/en_es/fed-dial_multilingual_en_es.csv", T1_ES, DIAL_UTTS, 3)
    _task1(root / "task1/dev/en_zh/fed-dial_multilingual_en_zh.csv", T1_ZH, DIAL_UTTS, 4)
    # another dev set whose name contains "dial": it is no FED file and must not be read as one
    _task1(root / "task1/dev/en_es/dailydialog-zhao_multilingual_en_es.csv", T1_ES, TURN_UTTS[:2], 3)
    _csv(
        root / "task2/dev/fed-turn_paraphrases.csv",
        T2,
        [[u[0], u[1], u[2], json.dumps([u[2] + " (p)"]), "[3]", "[0.9]", u[5], 0.95] for u in TURN_UTTS],
    )
    records = [
        {
            "context": "Hi!\nHello, how are you?\nFine. Any plans?",
            "response": "I will read a book.",
            "annotations": ASPECTS,
            "model": "Meena",
        },
        {"context": "Hey", "response": ""},  # no annotations, no response: not a dialogue of the CSVs
        {
            "context": "Do you like cats?",
            "response": "Cats are great.",
            "annotations": {k: v[::-1] for k, v in ASPECTS.items()},
            "model": "Human",
        },
    ]
    ann = root / "metadata/dev/en/fed-turn/fed-turn_eval.json"
    ann.parent.mkdir(parents=True)
    ann.write_text(json.dumps(records, ensure_ascii=False), "utf-8")
    dial = root / "metadata/dev/en/fed-dial/fed-dial_eval.json"
    dial.parent.mkdir(parents=True)
    dial.write_text(json.dumps([{"context": "Hi there\n...", "annotations": DIAL_ASPECTS}]), "utf-8")
    return root


def _load(out: Path, config: str, tmp_path: Path) -> list[dict]:
    ds = datasets.load_dataset(str(out), config, split="test", cache_dir=str(tmp_path / "hf"))
    return ds.to_list()


def test_documented_layout_imports_with_context_languages_metadata_and_labels(release, tmp_path):
    out = tmp_path / "out"
    res = GenericImporter("dstc11-track4").build(release, out, show_progress=False)
    assert res.configs == {"fed-turn": 6, "fed-turn-bt": 2, "fed-dial": 3}
    assert not [w for w in res.warnings if "not read by the mapping" in w]
    assert any("identical record" in w for w in res.warnings)  # English originals of en_es and en_zh
    turn = {r["id"]: r for r in _load(out, "fed-turn", tmp_path)}
    assert sorted(turn) == [f"fed-turn-00000{i}-{lang}" for i in (0, 1) for lang in ("en", "es", "zh")]
    en, es, zh = (turn[f"fed-turn-000000-{lang}"] for lang in ("en", "es", "zh"))
    assert {en["item_id"], es["item_id"], zh["item_id"]} == {"fed-turn-000000"}
    assert [m["text"] for m in en["context"]] == ["Hi!", "Hello, how are you?", "Fine. Any plans?"]
    assert [m["role"] for m in en["context"]] == ["user", "assistant", "user"]
    assert en["response"] == "I will read a book." and es["response"] == "Leeré un libro."
    assert [m["text"] for m in es["context"]] == ["¡Hola!", "Hola, ¿cómo estás?", "Bien. ¿Planes?"]
    assert zh["response"] == "我会读一本书。" and zh["language"] == "zh"
    labels = {(lab["dimension"], lab["annotator"]): lab["value"] for lab in en["labels"]}
    assert labels[("engagingness", "annotator1")] == pytest.approx(2.0)
    assert labels[("semantic_appropriateness", "annotator2")] == pytest.approx(1.0)
    assert len(en["labels"]) == 27 and en["rating"] == pytest.approx(5 / 3)
    assert es["labels"] == en["labels"]  # the translations carry the English item's annotations
    meta_es, meta_en = json.loads(es["metadata"]), json.loads(en["metadata"])
    assert meta_es["COMET_20_ST"] == pytest.approx(0.53) and meta_es["text_column"] == "TRANSLATION"
    assert meta_es["uids"][-1] == "fed-turn-000000-0003" and meta_es["speakers"][0] == "User"
    assert "COMET_20_ST" not in meta_en and meta_en["annotation_record"] == {"model": "Meena"}
    bt = {r["id"]: r for r in _load(out, "fed-turn-bt", tmp_path)}
    assert (
        bt["fed-turn-000001"]["response"] == "Cats are awesome." and bt["fed-turn-000001"]["language"] == "en"
    )
    assert json.loads(bt["fed-turn-000001"]["metadata"])["COS_SIM_MONO_SB"] == pytest.approx(0.95)
    dial = {r["id"]: r for r in _load(out, "fed-dial", tmp_path)}
    assert [m["role"] for m in dial["fed-dial-000000-es"]["turns"]] == ["user", "assistant", "user"]
    assert dial["fed-dial-000000-zh"]["turns"][2]["text"] == "我教书。"
    assert dial["fed-dial-000000-en"]["rating"] == pytest.approx(3.0)
    man = json.loads((out / "build_manifest.json").read_text())
    assert not any("dailydialog" in i["file"] for i in man["inputs"])


def test_language_selection_and_an_empty_selection(release, tmp_path):
    res = GenericImporter("dstc11-track4").build(
        release, tmp_path / "zh", languages="zh", show_progress=False
    )
    assert res.configs == {"fed-turn": 2, "fed-dial": 1}  # the English-only -bt config is left out
    assert any("fed-turn-bt: --language zh selects no record" in w for w in res.warnings)
    rows = _load(tmp_path / "zh", "fed-turn", tmp_path)
    assert {r["language"] for r in rows} == {"zh"}
    with pytest.raises(EmptyBuildError, match=r"--language de selects no record.*en \(\d+\).*es.*zh"):
        GenericImporter("dstc11-track4").build(release, tmp_path / "de", languages="de", show_progress=False)


def test_misaligned_annotation_records_are_an_error_naming_both_files(release, tmp_path):
    ann = release / "metadata/dev/en/fed-turn/fed-turn_eval.json"
    recs = json.loads(ann.read_text("utf-8"))
    recs[2]["response"] = "Dogs are great."
    ann.write_text(json.dumps(recs), "utf-8")
    with pytest.raises(
        DataValidationError,
        match=r"fed-turn_multilingual_en_es\.csv, row 5.*record 3 of fed-turn_eval\.json.*not aligned",
    ):
        GenericImporter("dstc11-track4").build(release, tmp_path / "out", show_progress=False)
    recs.pop()
    ann.write_text(json.dumps(recs), "utf-8")
    with pytest.raises(DataValidationError, match=r"2 dialogues here but 1 annotation records"):
        GenericImporter("dstc11-track4").build(release, tmp_path / "out", show_progress=False)


def test_unread_columns_are_reported_not_dropped(release, tmp_path):
    f = release / "task1/dev/en_zh/fed-turn_multilingual_en_zh.csv"
    rows = list(csv.reader(f.open(encoding="utf-8")))
    _csv(f, [*rows[0], "NOTES"], [[*r, "x"] for r in rows[1:]])
    res = GenericImporter("dstc11-track4").build(release, tmp_path / "out", show_progress=False)
    assert any("['NOTES'] are not read by the mapping" in w for w in res.warnings)
