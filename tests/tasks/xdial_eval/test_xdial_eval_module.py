"""The xDial-Eval `evaluate` module: loads offline by path, and gives the runner's numbers."""

import json
from pathlib import Path

import evaluate
import numpy as np
import pytest
from scipy import stats

from harness.run.runner import RunConfig, run

MODULE = str(Path(__file__).resolve().parents[3] / "tasks" / "xdial_eval")
DEMO = Path(__file__).resolve().parents[3] / "dataset_builders" / "demo_data"


@pytest.fixture
def replay(tmp_path):
    f = tmp_path / "judge.jsonl"
    f.write_text(json.dumps({"default": {"hashed_p_yes": True}}) + "\n")
    return f


def _demo(level, langs):
    rows = [json.loads(line) for line in (DEMO / f"{level}.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if r["language"] in langs]
    return sorted(rows, key=lambda r: (langs.index(r["language"]), r["item"]))


def test_turn_module_matches_harness_run(tmp_path, replay):
    rows = _demo("turn", ["en", "de"])
    metric = evaluate.load(MODULE, "turn")
    out = metric.compute(
        contexts=[r["context"] for r in rows],
        responses=[r["response"] for r in rows],
        references=[r["rating"] for r in rows],
        languages=[r["language"] for r in rows],
        datasets=["demo-turn"] * len(rows),
        judge=f"replay:{replay}",
        n_bootstrap=200,
    )
    ref = run(
        RunConfig(
            judge=f"replay:{replay}",
            tasks=["demo-turn"],
            languages=["en", "de"],
            n_bootstrap=200,
            output_dir=tmp_path / "run",
            show_progress=False,
        )
    ).results["results"]["demo-turn"]
    for lang in ("en", "de"):
        assert out["per_language"][lang]["pearson"] == pytest.approx(ref[lang]["pearson"]["value"], abs=1e-12)
        assert out["per_language"][lang]["spearman"] == pytest.approx(
            ref[lang]["spearman"]["value"], abs=1e-12
        )
    assert out["pearson"] == pytest.approx(ref["all"]["pearson"]["value"], abs=1e-12)
    assert out["meta"]["all"]["pearson"]["ci"] == pytest.approx(
        ref["all"]["pearson"]["ci"]
    )  # paired bootstrap, same seed
    assert len(out["scores"]) == len(rows) and out["parse_failures"] == 0


def test_dialogue_module_with_embedded_judge():
    rows = _demo("dial", ["en"])
    out = evaluate.load(MODULE, "dialogue").compute(
        dialogues=[r["turns"] for r in rows],
        references=[r["rating"] for r in rows],
        languages=["en"] * len(rows),
        datasets=["demo-dial"] * len(rows),
        n_bootstrap=0,
    )
    scores = np.array(out["scores"])
    assert np.all((scores > -1) & (scores < 1))
    assert out["pearson"] == pytest.approx(stats.pearsonr(scores, [r["rating"] for r in rows]).statistic)


def test_meta_module_equals_scipy_and_counts_missing():
    rng = np.random.default_rng(0)
    human = rng.normal(size=40)
    pred = (human + rng.normal(size=40)).tolist()
    pred[3] = None
    out = evaluate.load(MODULE, "meta").compute(
        predictions=pred, references=human.tolist(), languages=["fr"] * 40, datasets=["x"] * 40, n_bootstrap=0
    )
    keep = [i for i in range(40) if i != 3]
    ref = stats.spearmanr(np.array(pred, dtype=float)[keep], human[keep]).statistic
    assert out["spearman"] == pytest.approx(ref, abs=1e-12)
    assert out["parse_failures"] == 1 and out["scores"][3] is None


def test_unknown_config_is_an_error():
    with pytest.raises(KeyError, match="unknown config"):
        evaluate.load(MODULE, "bogus")
