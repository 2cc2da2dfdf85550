"""UPHELD tasks end to end: App. H LLM-judge prompts (replay + tiny hf), the reference-metric judge,
and a fitted ensemble reloaded as ``--judge ensemble:<dir>`` through ``harness run``."""

import json
import math
from pathlib import Path

import evaluate
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.cache import RequestCache
from harness.judges import load_judge
from harness.run.runner import RunConfig, run
from harness.tasks import get_task
from tasks.upheld import UPHELD_APP_H_TASKS, UPHELD_TASKS
from tests.fixtures.tolerances import FLOAT32_PATHS
from tests.fixtures.upheld_source import write_upheld_source

REPO = Path(__file__).resolve().parents[3]
ITEM = {
    "id": "t-1::gpt4",
    "language": "en",
    "context": [
        {"role": "user", "text": "I need a train to Cambridge."},
        {"role": "assistant", "text": "From where?"},
    ],
    "reference": "From London, tomorrow morning.",
    "response": "London, early tomorrow.",
    "aggregates": [{"dimension": "content", "mean": 4.2}, {"dimension": "style", "mean": 2.0}],
    "rating": 4.2,
}


@pytest.fixture
def source(tmp_path):
    return write_upheld_source(tmp_path / "upheld", n_items=10, n_arena=8)


def test_app_h_prompts_are_verbatim_and_rendered():
    req = get_task("upheld-content-likert").build_request(ITEM)
    text = req.messages[-1].content
    assert text.startswith("Conversation: user: I need a train to Cambridge.\nassistant: From where?")
    assert (
        "Reference: From London, tomorrow morning." in text and "Prediction: London, early tomorrow." in text
    )
    assert "on a likert scale of 1 to 5" in text and text.endswith("Output only scores from 1 to 5 (integer)")
    yn = get_task("upheld-style-yes_no").build_request(ITEM).messages[-1].content
    assert "Continuation: From London" in yn and 'otherwise output "No".' in yn
    # the human target is the task dimension's mean, not the record's headline rating
    assert get_task("upheld-style").human_rating(ITEM) == 2.0
    assert get_task("upheld-content").human_rating(ITEM) == pytest.approx(4.2)
    hashes = {t.template_for("en").hash for t in UPHELD_APP_H_TASKS.values()}
    assert len(hashes) == 4


def _replay(tmp_path, rules):
    f = tmp_path / "judge.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rules) + "\n")
    return f"replay:{f}"


def test_written_verdicts_parse_and_failures_are_counted(tmp_path):
    spec = _replay(
        tmp_path,
        [
            {"match": "Prediction: bad json", "response": {"text": '{"score": }'}},
            {"match": "Prediction: seven", "response": {"text": "Score: 7"}},
            {"match": "Prediction: words", "response": {"text": "I'd say four."}},
            {"match": "Prediction: explained", "response": {"text": "Score: 2 - it drops the time."}},
            {"default": {"text": "5"}},
        ],
    )
    items = [
        dict(ITEM, id=str(i), response=r)
        for i, r in enumerate(["bad json", "seven", "words", "explained", "ok"])
    ]
    items.append(dict(ITEM, id="no-ref", reference="  "))
    judge = load_judge(spec, RequestCache(enabled=False))
    v = judge.score(UPHELD_APP_H_TASKS[("content", "llm_judge_likert_1_5")], items)
    assert [x.score for x in v] == [None, None, 4.0, 2.0, 5.0, None]
    assert [x.status for x in v] == ["parse_error", "parse_error", "ok", "ok", "ok", "invalid_item"]
    assert v[0].raw == '{"score": }' and "outside" in v[1].detail and "reference" in v[5].detail
    assert judge.backend_stats()["requests"] == 5  # the item without a reference never reached the model


def test_evaluate_module_with_replay_and_correlation(tmp_path):
    spec = _replay(
        tmp_path,
        [
            {"match": "Prediction: same", "response": {"text": "Yes."}},
            {"match": "Prediction: garbled", "response": {"text": "hmm"}},
            {"default": {"text": "No, different."}},
        ],
    )
    m = evaluate.load(str(REPO / "tasks" / "upheld"), "yes_no")
    conts = ["same"] * 4 + ["other"] * 4 + ["garbled"]
    human = [5, 4, 5, 4, 1, 2, 1, 1, 3]
    out = m.compute(
        conversations=["user: hi"] * 9,
        references=["ref"] * 9,
        continuations=conts,
        judge=spec,
        human=human,
        systems=list("aabbccaab"),
        n_bootstrap=50,
    )
    assert out["scores"] == [1.0] * 4 + [0.0] * 4 + [None]
    assert out["parse_failures"] == 1 and out["raw"][-1] == "hmm"
    r = stats.pearsonr([1.0] * 4 + [0.0] * 4, human[:8]).statistic
    assert out["correlation"]["value"] == pytest.approx(r, abs=1e-12) and out["correlation"]["n_missing"] == 1
    assert out["system_level"]["pearson"]["n"] == 3


def test_tiny_hf_model_runs_the_likert_task(tmp_path, tiny_qwen2):
    judge = load_judge(f"hf:{tiny_qwen2},max_tokens=4", RequestCache(tmp_path / "c.sqlite"))
    v = judge.score(UPHELD_APP_H_TASKS[("content", "llm_judge_likert_1_5")], [ITEM, dict(ITEM, id="2")])
    assert len(v) == 2 and all(x.status in ("ok", "parse_error") for x in v)
    assert all((x.score is None) == (x.status != "ok") for x in v)  # random weights: failures stay None


def test_metric_judge_run_on_upheld_source(tmp_path, source):
    out = run(
        RunConfig(
            judge="metric:rougeL",
            tasks=["upheld-content"],
            source=str(source),
            output_dir=tmp_path / "run",
            n_bootstrap=50,
            show_progress=False,
        )
    )
    s = out.samples
    assert set(s["dataset"]) == {"main", "llm_arena"} and s["score"].notna().all()
    # scores are rouge-score's F-measure of (reference, response); human = mean content label
    from rouge_score import rouge_scorer

    from harness.data.resolve import load_items, prepare_dataset

    items = {
        r["id"]: r
        for r in load_items(prepare_dataset("upheld", source=str(source), show_progress=False), "main")
    }
    sc = rouge_scorer.RougeScorer(["rougeL"])
    row = s[s["dataset"] == "main"].iloc[3]
    it = items[row["id"]]
    assert row["score"] == pytest.approx(
        sc.score(it["reference"], it["response"])["rougeL"].fmeasure, abs=1e-12
    )
    assert row["human_rating"] == pytest.approx(
        np.mean([lab["value"] for lab in it["labels"] if lab["dimension"] == "content"])
    )
    r = out.results["results"]["upheld-content"]["en"]["pearson"]["per_dataset"]["main"]["value"]
    m = s[s["dataset"] == "main"]
    assert r == pytest.approx(stats.pearsonr(m["score"], m["human_rating"]).statistic, abs=1e-9)
    assert r > 0.5  # the fixture's labels follow word overlap
    assert out.results["judge"]["identity"]["metric"] == "rougeL"
    again = run(
        RunConfig(
            judge="metric:rougeL",
            tasks=["upheld-content"],
            source=str(source),
            output_dir=tmp_path / "run2",
            n_bootstrap=0,
            show_progress=False,
        )
    )
    assert again.results["usage"]["backend"]["requests"] == 0  # all from the request cache


def test_metric_judge_rejects_unknown_metric_and_counts_missing_reference():
    with pytest.raises(ValueError, match="unknown reference metric"):
        load_judge("metric:bleu")
    j = load_judge("metric:rouge1")
    v = j.score(UPHELD_TASKS["content"], [ITEM, dict(ITEM, reference="")])
    assert v[0].ok and v[1].score is None and v[1].status == "invalid_item"


def test_ensemble_saved_reloaded_as_judge_and_run(tmp_path, source):
    from harness.judges.learned.model import fit_ensemble, load_ensemble

    feats = ["rouge1", "rougeL", "bert_score_F1", "message_embedding_cos_sim"]
    first = run(
        RunConfig(
            judge="metric:rouge1",
            tasks=["upheld-content"],
            source=str(source),
            output_dir=tmp_path / "r0",
            n_bootstrap=0,
            show_progress=False,
        )
    )
    ids = first.samples[first.samples["dataset"] == "main"]["id"].tolist()
    from harness.data.resolve import load_items, prepare_dataset
    from harness.judges.metric import ReferenceFeatures

    items = load_items(prepare_dataset("upheld", source=str(source), show_progress=False), "main")
    f = ReferenceFeatures(RequestCache(enabled=False)).compute(
        [i["reference"] for i in items], [i["response"] for i in items], feats
    )
    f["human"] = [get_task("upheld-content").human_rating(i) for i in items]
    ens = fit_ensemble(
        f,
        feats,
        "human",
        "linear_regression",
        label_scale="continuous",
        training={"dataset": "upheld", "config": "main"},
        feature_info={"reference_metrics": {"rouge": {"use_stemmer": False}}},
    )
    path = ens.save(tmp_path / "ens")
    assert set(ids) == {i["id"] for i in items}
    out = run(
        RunConfig(
            judge=f"ensemble:{path}",
            tasks=["upheld-content"],
            source=str(source),
            output_dir=tmp_path / "r1",
            n_bootstrap=0,
            show_progress=False,
        )
    )
    main = out.samples[out.samples["dataset"] == "main"].set_index("id")
    expected = load_ensemble(path).predict_scores(f)
    got = main.loc[[i["id"] for i in items], "score"].to_numpy()
    # the run computes BERTScore / embedding features in other batches than `f` (float32 paths differ,
    # tests/fixtures/tolerances.py), and the regression's coefficients scale those differences
    assert np.allclose(got, expected, atol=10 * FLOAT32_PATHS)
    ident = out.results["judge"]["identity"]
    assert (
        ident["backend"] == "ensemble"
        and ident["features"] == feats
        and ident["training"]["config"] == "main"
    )
    arena = out.samples[out.samples["dataset"] == "llm_arena"]
    assert len(arena) == 8 and arena["score"].notna().all()  # transfer: applied unchanged
    assert not math.isnan(out.results["results"]["upheld-content"]["en"]["pearson"]["value"])
    assert isinstance(pd.DataFrame(out.samples), pd.DataFrame)
