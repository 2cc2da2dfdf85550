"""The reference-metric `evaluate` modules load offline by path and give the library's numbers."""

from pathlib import Path

import evaluate
import pytest

from harness.judges.refmetrics import bertscore_scores, embedding_cosine, rouge_scores

TASKS = Path(__file__).resolve().parents[2] / "tasks"
MODULES = ("rouge_ref", "bertscore_ref", "embedding_similarity")

REFS = [
    "Thank you, that will be all.",
    "The cat sat on the mat.\nIt was happy.",
    "",
    "Book it for six, please.",
]
PREDS = ["I cannot make reservations; please call.", "It was happy.\nThe cat sat on a mat.", "Hello.", None]
VALID = [0, 1]
INVALID_ITEMS = [
    {"index": 2, "field": "reference", "reason": "empty"},
    {"index": 3, "field": "prediction", "reason": "missing (None)"},
]


@pytest.fixture(scope="module")
def modules():
    return {name: evaluate.load(str(TASKS / name)) for name in MODULES}


@pytest.mark.parametrize("name", MODULES)
def test_module_folder_is_not_a_package(name):
    folder = TASKS / name
    assert (folder / f"{name}.py").is_file() and (folder / "README.md").is_file()
    assert not (folder / "__init__.py").exists()  # `tasks` auto-imports sub-packages


def test_rouge_module_matches_library(modules):
    out = modules["rouge_ref"].compute(predictions=PREDS, references=REFS, use_stemmer=True, part="recall")
    lib = rouge_scores(REFS, PREDS, use_stemmer=True, part="recall")
    for m, vals in lib.scores.items():
        assert out[m] == vals
        assert out["means"][m] == pytest.approx(sum(vals[i] for i in VALID) / len(VALID))
    assert out["rougeL"][1] != out["rougeLsum"][1]  # newlines reached rouge-score
    assert out["invalid"] == 2 and out["invalid_items"] == INVALID_ITEMS
    assert out["info"]["use_stemmer"] is True and out["info"]["value"] == "recall"


def test_bertscore_module_matches_library(modules, minilm_path):
    out = modules["bertscore_ref"].compute(predictions=PREDS, references=REFS, batch_size=8)
    lib = bertscore_scores(REFS, PREDS, batch_size=8)
    for m, vals in lib.scores.items():
        assert [out[m][i] for i in VALID] == pytest.approx([vals[i] for i in VALID], abs=1e-6)
        assert out[m][2] is None and out[m][3] is None
    assert out["means"]["bert_score_F1"] == pytest.approx(lib.means()["bert_score_F1"], abs=1e-6)
    assert out["invalid"] == 2 and out["invalid_items"] == INVALID_ITEMS
    assert out["info"]["num_layers"] == 6 and out["info"]["path"] == str(minilm_path)
    assert "all-MiniLM-L6-v2" in out["info"]["encoder"]


def test_embedding_module_matches_library(modules, minilm_path):
    out = modules["embedding_similarity"].compute(predictions=PREDS, references=REFS)
    lib = embedding_cosine(REFS, PREDS)
    vals = lib.scores["message_embedding_cos_sim"]
    got = out["message_embedding_cos_sim"]
    assert [got[i] for i in VALID] == pytest.approx([vals[i] for i in VALID], abs=1e-6)
    assert got[2] is None and got[3] is None
    assert out["mean"] == pytest.approx(lib.means()["message_embedding_cos_sim"], abs=1e-6)
    assert out["invalid"] == 2 and out["invalid_items"] == INVALID_ITEMS
    assert out["info"]["path"] == str(minilm_path)


def test_module_info_cites_upheld_and_metric_paper(modules):
    for name, paper in zip(MODULES, ("Lin, Chin-Yew", "BERTScore", "Sentence-{BERT}"), strict=True):
        citation = modules[name].citation
        assert "UPHELD" in citation and paper in citation
        assert set(modules[name].features) == {"predictions", "references"}
