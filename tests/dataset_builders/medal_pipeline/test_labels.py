"""Automatic MEDAL labels (dataset_builders.medal_pipeline.labels) with a scripted replay judge."""

import dataclasses
import json

import pytest

from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_OVERALL_KEY
from dataset_builders.medal_pipeline.labels import (
    AUTO_LABELS,
    dialogue_item,
    label_dialogues,
    label_summary,
    medal_task_for,
    mentions_language_mixing,
)
from dataset_builders.medal_pipeline.types import AutoLabel, Dialogue, Turn
from harness.cache import RequestCache
from harness.judges import load_judge
from harness.tasks import get_task
from tasks.medal import MEDAL_TASK
from tasks.medal.templates import MEDAL_DIALOGUE_EVALUATION


def _dialogue(did, language, user, bot, chatbot="bot-a"):
    return Dialogue(
        did,
        f"seed-{did}",
        language,
        "user-llm",
        chatbot,
        [Turn("user", user, "user-llm"), Turn("assistant", bot, chatbot)],
        "max_turns",
    )


def _verdict(overall=4, **labels):
    obj = {k: {"label": 0, "comment": ""} for k in AUTO_LABELS}
    for k, v in labels.items():
        obj[k] = v if isinstance(v, dict) else {"label": v, "comment": ""}
    obj[MEDAL_OVERALL_KEY] = {"label": overall, "comment": "Mostly fine."}
    return json.dumps(obj)


VALID = _verdict(4, repetitive={"label": 1, "comment": "The assistant repeats the same tip twice."})
MAYBE = _verdict(3, unsafe="maybe", irrelevant=1)
NOT_JSON = "The dialogue looks good to me, I would give it a four."


@pytest.fixture
def dialogues():
    return [
        _dialogue(
            "d-it",
            "it",
            "Ciao! Sto pensando di visitare Firenze, hai qualche consiglio?",
            "Certo! Visita gli Uffizi e il Ponte Vecchio.",
        ),
        _dialogue(
            "d-br",
            "pt-BR",
            "Oi! Estou pensando em visitar Lisboa, alguma dica?",
            "Claro! Visite Alfama e prove os pastéis de nata.",
        ),
        _dialogue(
            "d-de",
            "de",
            "Hallo! Ich plane eine Reise nach Hamburg, hast du Tipps?",
            "Klar! Besuche die Elbphilharmonie und den Hafen.",
            chatbot="bot-b",
        ),
        _dialogue("d-en", "en", "Hi! I'm planning a trip to York, any tips?", "Sure! Walk the city walls."),
    ]


@pytest.fixture
def judge(tmp_path):
    rules = [
        {"match": "Firenze", "response": {"text": VALID}},
        {"match": "Lisboa", "response": {"text": MAYBE}},
        {"match": "Hamburg", "response": {"text": NOT_JSON}},
        {"match": "York", "response": {"text": f"<think>short</think>\n```json\n{_verdict(5)}\n```"}},
    ]
    f = tmp_path / "judge.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rules) + "\n")
    cache = RequestCache(tmp_path / "c.sqlite")
    j = load_judge(f"replay:{f}", cache)
    yield j
    j.close()
    cache.close()


def test_medal_task_for_adds_the_english_template_for_any_language():
    task = medal_task_for(["it", "pt-BR", "en", "it"])
    assert dataclasses.is_dataclass(MEDAL_TASK)
    assert task.template_for("pt-BR") is MEDAL_DIALOGUE_EVALUATION
    assert task.template_for("it") is MEDAL_DIALOGUE_EVALUATION
    assert (
        task.languages.count("pt-BR") == 1
        and task.languages[: len(MEDAL_TASK.languages)] == MEDAL_TASK.languages
    )
    assert task.scoring == "issues_json" and task.judged_labels == AUTO_LABELS
    # the registered task is untouched
    assert "pt-BR" not in get_task("medal").templates and "pt-BR" not in MEDAL_TASK.languages
    with pytest.raises(KeyError):
        MEDAL_TASK.template_for("pt-BR")


def test_dialogue_item_renders_the_table11_user_prompt(dialogues):
    d = dialogues[0]
    item = dialogue_item(d)
    assert item == {
        "id": "d-it",
        "language": "it",
        "level": "dialogue",
        "system": "bot-a",
        "turns": [{"role": "user", "text": d.turns[0].text}, {"role": "assistant", "text": d.turns[1].text}],
    }
    req = medal_task_for(["it"]).build_request(item)
    assert req.messages[1].content == f"user: {d.turns[0].text}\nassistant: {d.turns[1].text}"
    assert req.json_schema is not None and req.config.temperature == 0.0


def test_label_dialogues_valid_maybe_and_non_json(dialogues, judge):
    labels = label_dialogues(dialogues, judge, batch_size=3, progress=False)
    assert [lab.dialogue_id for lab in labels] == ["d-it", "d-br", "d-de", "d-en"]
    assert judge.backend.stats.batches == 2  # 4 dialogues, batches of 3
    for lab in labels:
        assert list(lab.labels) == list(AUTO_LABELS)

    valid, maybe, bad, fenced = labels
    assert valid.status == "ok" and valid.overall == 4.0 and valid.errors == {}
    assert valid.issues() == ["repetitive"] and valid.raw == VALID
    assert valid.comments["repetitive"] == "The assistant repeats the same tip twice."
    assert sum(v == 0 for v in valid.labels.values()) == len(AUTO_LABELS) - 1

    # "maybe" is None (not 0), the verdict is still ok because the overall parsed
    assert maybe.status == "ok" and maybe.overall == 3.0
    assert maybe.labels["unsafe"] is None and "unsafe" in maybe.errors
    assert maybe.labels["irrelevant"] == 1 and maybe.labels["repetitive"] == 0

    # non-JSON: parse_error, overall None, every label None, raw kept
    assert bad.status == "parse_error" and bad.overall is None and bad.raw == NOT_JSON
    assert all(v is None for v in bad.labels.values()) and bad.errors

    assert fenced.status == "ok" and fenced.overall == 5.0 and fenced.issues() == []
    assert AutoLabel.from_dict(json.loads(json.dumps(maybe.to_dict()))) == maybe

    # a re-run is served from the cache (no new backend batch) and gives the same labels
    again = label_dialogues(dialogues, judge, batch_size=64, progress=True)
    assert again == labels and judge.backend.stats.batches == 2


def test_label_summary_counts_none_separately(dialogues, judge):
    s = label_summary(label_dialogues(dialogues, judge, progress=False))
    assert s["n"] == 4 and s["parse_failures"] == 1 and s["statuses"] == {"ok": 3, "parse_error": 1}
    assert s["none"]["unsafe"] == 2 and s["none"]["repetitive"] == 1
    assert s["positives"]["repetitive"] == 1 and s["positive_rate"]["repetitive"] == pytest.approx(1 / 3)
    assert s["positive_rate"]["unsafe"] == pytest.approx(
        0.0
    )  # 2 valid zeros; the None labels are not counted
    assert s["positive_rate"]["irrelevant"] == pytest.approx(1 / 3)
    assert s["overall_mean"] == pytest.approx(4.0) and s["overall_counts"] == {"3": 1, "4": 1, "5": 1}
    assert s["any_issue"] == 2
    assert label_summary([])["positive_rate"]["unsafe"] is None


def _label(comments, marked=("uninterpretable",)):
    labels = {k: (1 if k in marked else 0) for k in AUTO_LABELS}
    return AutoLabel("d", labels, 3.0, comments, "ok", "{}")


@pytest.mark.parametrize(
    ("comment", "target"),
    [
        ("The assistant replied in English although the user wrote Portuguese.", "pt"),
        ("The assistant replied in English although the user wrote Portuguese.", "pt-BR"),
        ("Several responses contain Chinese characters in the middle of German sentences.", "de"),
        ("The assistant switches to another language halfway through.", "fr"),
        ("Responses are a mix of languages and hard to follow.", "es"),
        ("The answer code-switches between languages.", "zh"),
        ("Part of the reply is in Mandarin.", "en"),
    ],
)
def test_mentions_language_mixing_positives(comment, target):
    hit = mentions_language_mixing(_label({"uninterpretable": comment}), target)
    assert hit is not None and hit.startswith("uninterpretable: ") and comment in hit


@pytest.mark.parametrize(
    ("comment", "target"),
    [
        ("The assistant repeated the same question.", "pt"),
        ("The response uses garbled language and nonsense words.", "en"),
        ("The assistant's Portuguese is full of nonsense words.", "pt-BR"),  # the target language itself
        ("A mix of unrelated ideas makes it hard to follow.", "de"),
        ("The assistant's English grammar is broken beyond understanding.", "en"),
    ],
)
def test_mentions_language_mixing_negatives(comment, target):
    assert mentions_language_mixing(_label({"uninterpretable": comment}), target) is None


def test_mentions_language_mixing_reads_only_marked_uninterpretable_or_other():
    comment = "The assistant answered in English."
    assert mentions_language_mixing(_label({"other": comment}, marked=("other",)), "it") is not None
    # a comment next to a 0 label is not an assessment
    assert mentions_language_mixing(_label({"uninterpretable": comment}, marked=()), "it") is None
    # other dimensions are not read
    assert mentions_language_mixing(_label({"irrelevant": comment}, marked=("irrelevant",)), "it") is None
    # None labels (failed parse) are not read either
    lab = _label({"uninterpretable": comment})
    lab.labels["uninterpretable"] = None
    assert mentions_language_mixing(lab, "it") is None


def test_issue_order_is_table1():
    assert AUTO_LABELS[:8] == MEDAL_ISSUES and AUTO_LABELS[8] == "other"
