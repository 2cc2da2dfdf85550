"""The in-loop user judge deciding by label log-probs (``generation.user_judge.decide: logprobs``):
accepted when P(Yes) > P(No) as the start of its reply, whatever it writes; neither label with a
log-prob is a counted parse failure (a rejection, never guessed); no feedback text reaches the next
attempt; the label log-probs are recorded per attempt. The default (``written``: the paper's
``"Yes."`` / ``"No. <reason>"`` parse) is unchanged: no choices sent, nothing new recorded, the same
generation fingerprint. Generation only, with the replay agents of tests/fixtures/medal_pipeline.py
and a scripted judge whose written replies contradict its log-probs."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
import yaml

from dataset_builders.medal_pipeline.config import PipelineConfig
from dataset_builders.medal_pipeline.generate import DialogueGenerator, ModelPool
from dataset_builders.medal_pipeline.pipeline import build_seeds
from dataset_builders.medal_pipeline.prompts import parse_user_judge, user_judge_choices, user_judge_verdict
from dataset_builders.medal_pipeline.types import Attempt
from harness.cache import CachedBackend, RequestCache
from harness.types import Response
from tests.fixtures.medal_pipeline import write_replay_config

#: A judge whose written reply says the opposite of its log-probs (a 135M model's situation: the text
#: is no verdict, the label probabilities are): the mode decides which one counts.
JUDGE = [
    {"match": r"user: Greetings, esteemed[^\n]*$", "response": {"text": "Yes.", "p_yes": 0.2}},
    {"match": r"user: Wow!!! Amazing[^\n]*$", "response": {"text": "Yes.", "p_yes": 0.3}},
    {"match": r"user: As an AI[^\n]*$", "response": {"text": "Yes.", "p_yes": 0.1}},
    {"match": r"user: Sem sentido[^\n]*$", "response": {"text": "Yes."}},  # no log-probs at all
    {
        "match": r"user: Talvez sim[^\n]*$",
        "response": {"text": "Yes.", "choice_logprobs": {"Yes": None, "No": None}},
    },
    {"default": {"text": "No. I would not say that.", "p_yes": 0.9}},
]


def _generate(tmp_path: Path, decide: str | None):
    """Generation over the replay agents (English + Portuguese, 2 scenes), the scripted judge above."""
    judge = tmp_path / "judge.jsonl"
    judge.write_text("".join(json.dumps(r) + "\n" for r in JUDGE), "utf-8")
    generation = {"user_judge": {"decide": decide}} if decide else {}
    path = write_replay_config(
        tmp_path,
        models={"user_judge": f"replay:{judge}"},
        seeds={"n_scenes": 2},
        generation=generation,
    )
    cfg = PipelineConfig.load(path)
    seeds = build_seeds(cfg)
    judged: list = []
    original = CachedBackend.generate

    def spy(self, requests, on_result=None):
        requests = list(requests)
        if Path(self.backend.model).stem == "judge":
            judged.extend(requests)
        return original(self, requests, on_result)

    cache = RequestCache(tmp_path / "requests.sqlite")
    pool = ModelPool(cache)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(CachedBackend, "generate", spy)
            state = DialogueGenerator(cfg, seeds, pool, cfg.work, progress=False).run()
    finally:
        pool.close()
        cache.close()
    return cfg, state, judged


def _attempts(state) -> list[Attempt]:
    first = [a for slot in state.first_turns.values() for a in slot["attempts"]]
    later = [a for d in state.dialogues for t in d.turns[1:] for a in t.attempts]
    return first + later


# -- the verdict of one reply ------------------------------------------------------------------------


def _resp(text: str = "", **lps: float | None) -> Response:
    return Response(text=text, choice_logprobs=dict(lps) if lps else None)


@pytest.mark.parametrize(
    ("yes", "no", "accepted"),
    [
        (math.log(0.6), math.log(0.1), True),  # P(Yes) > P(No), unnormalised
        (math.log(0.1), math.log(0.6), False),
        (-2.0, -2.0, False),  # a tie is not P(Yes) > P(No)
        (-3.0, None, True),  # "No" outside a server's top log-probs: its probability taken as 0
        (None, -3.0, False),
        (-math.inf, -1.0, False),
    ],
)
def test_logprob_verdicts_follow_the_probabilities(yes, no, accepted):
    got = user_judge_verdict(_resp("No. written replies are ignored", Yes=yes, No=no), "logprobs")
    assert got == (accepted, "", {"Yes": yes, "No": no})


@pytest.mark.parametrize(
    "resp",
    [
        _resp("Yes.", Yes=None, No=None),
        _resp("Yes."),  # no choice log-probs at all
        _resp("Yes.", Yes=-math.inf, No=-math.inf),
        _resp("Yes.", Ja=-0.1, Nein=-2.0),  # other labels
    ],
)
def test_no_label_logprob_is_a_parse_failure(resp):
    accepted, feedback, lps = user_judge_verdict(resp, "logprobs")
    assert accepted is None and feedback == "" and set(lps) == {"Yes", "No"}


@pytest.mark.parametrize("text", ["Yes.", "No. Too long.", "Perhaps.", ""])
def test_written_verdicts_are_the_papers_parse(text):
    resp = _resp(text, Yes=-0.1, No=-5.0)  # log-probs, if any, are not looked at
    assert user_judge_verdict(resp) == (*parse_user_judge(text), None)
    assert user_judge_verdict(resp, "written") == (*parse_user_judge(text), None)
    assert user_judge_choices("written") is None and user_judge_choices("logprobs") == ("Yes", "No")
    with pytest.raises(ValueError, match="decision mode 'maybe'"):
        user_judge_verdict(resp, "maybe")


# -- the config field --------------------------------------------------------------------------------

MODELS = {
    "users": {"u": "replay:x"},
    "chatbots": {"c": "replay:y"},
    "user_judge": "replay:z",
    "labeller": "replay:w",
}


@pytest.mark.parametrize("bad", ["logprob", "Logprobs", "yes", ""])
def test_a_bad_decide_value_is_an_error_naming_the_field(tmp_path, bad):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({"models": MODELS, "generation": {"user_judge": {"decide": bad}}}))
    with pytest.raises(ValueError, match=r"generation\.user_judge\.decide") as e:
        PipelineConfig.load(p)
    assert str(p) in str(e.value) and "'written'" in str(e.value) and "'logprobs'" in str(e.value)


def test_the_default_is_written_and_keeps_the_fingerprint(tmp_path):
    default = PipelineConfig.model_validate({"models": MODELS})
    assert default.generation.user_judge.decide == "written"
    # the fingerprint of this config before the field existed: existing work folders still resume
    assert default.generation_fingerprint() == "8bc5bc6218ef3d26"
    judge = {"temperature": 0.1, "max_tokens": 64}  # the default user-judge decoding, spelled out
    for decide, same in (("written", True), ("logprobs", False)):
        data = {"models": MODELS, "generation": {"user_judge": {**judge, "decide": decide}}}
        assert (PipelineConfig.model_validate(data).generation_fingerprint() == "8bc5bc6218ef3d26") is same


# -- generation ------------------------------------------------------------------------------------


def test_logprob_judge_decides_by_probabilities_not_by_its_text(tmp_path):
    cfg, state, judged = _generate(tmp_path, "logprobs")
    assert judged and all(r.choices == ("Yes", "No") for r in judged)
    attempts = _attempts(state)
    assert all(a.feedback == "" for a in attempts)  # no feedback text in this mode
    assert all(a.judge_logprobs is not None and set(a.judge_logprobs) == {"Yes", "No"} for a in attempts)
    for a in attempts:  # accepted exactly when P(Yes) > P(No), whatever the written reply said
        if a.accepted is not None:
            assert a.accepted == (a.judge_logprobs["Yes"] > a.judge_logprobs["No"])
    # "Greetings…" (written "Yes.", P(Yes) 0.2) is rejected, the regenerated opener (written "No. …",
    # P(Yes) 0.9) accepted; the label log-probs are recorded on the attempts
    en = [d for d in state.dialogues if d.language == "en" and d.turns]
    assert en
    first = en[0].turns[0].attempts
    assert [a.accepted for a in first] == [False, True] and first[0].judge_raw == "Yes."
    assert first[0].judge_logprobs == pytest.approx({"Yes": math.log(0.2), "No": math.log(0.8)})
    assert first[1].judge_raw.startswith("No.")
    # the regeneration of a rejected later turn saw the prior attempt and no feedback
    regen = [t for d in en for t in d.turns[1:] if t.role == "user" and len(t.attempts) == 2]
    assert regen and all(
        t.attempts[0].text.startswith("Wow!!!") and not t.attempts[0].accepted for t in regen
    )
    # the quiz question: every attempt rejected by its log-probs -> user_rejected
    assert any(d.status == "user_rejected" for d in state.dialogues)


def test_no_label_logprob_is_a_counted_rejection(tmp_path):
    cfg, state, _ = _generate(tmp_path, "logprobs")
    failures = [a for a in _attempts(state) if a.accepted is None]
    assert failures and state.counters["user_judge_parse_failures"] == len(failures)
    assert {a.text.split()[0] for a in failures} <= {"Sem", "Talvez"}
    assert all(a.judge_logprobs == {"Yes": None, "No": None} for a in failures)
    # never guessed: the Portuguese lighthouse keeper's seed contexts fail every attempt
    rejected = [d for d in state.dialogues if d.status == "first_turn_rejected"]
    assert rejected and all(not d.turns for d in rejected)
    for d in rejected:
        slot = state.first_turns[f"{d.seed_id}|{d.user_model}"]
        assert Counter(a.accepted for a in slot["attempts"]) == {None: cfg.generation.first_turn.attempts}


def test_the_written_default_is_unchanged(tmp_path):
    cfg, state, judged = _generate(tmp_path, None)
    assert judged and all(r.choices is None for r in judged)  # nothing new sent (same cache keys)
    attempts = _attempts(state)
    assert attempts and all(a.judge_logprobs is None for a in attempts)
    assert all("judge_logprobs" not in a.to_dict() for a in attempts)  # records as they were
    for a in attempts:  # the written reply decides: the script's "Yes." accepts "Greetings…"
        assert (a.accepted, a.feedback) == parse_user_judge(a.judge_raw)
    en = [d for d in state.dialogues if d.language == "en" and d.turns]
    assert [a.accepted for a in en[0].turns[0].attempts] == [True]
    assert en[0].turns[0].text.startswith("Greetings")
    # every written reply of the script parses ("Yes." or "No. …"), log-probs or not
    assert state.counters["user_judge_parse_failures"] == 0


def test_a_real_hf_judge_decides_by_its_label_logprobs(tmp_path, tiny_llama, tiny_qwen2):
    """Through the hf backend (tiny random models): every verdict has both label log-probs (exact,
    teacher-forced) and is accepted exactly when P(Yes) > P(No); the judge writes one token."""
    from tests.fixtures.medal_pipeline import write_model_config

    models = {
        "users": {"tiny-user": f"hf:{tiny_qwen2},max_tokens=8"},
        "chatbots": {"tiny-bot": f"hf:{tiny_llama},max_tokens=8"},
        "user_judge": f"hf:{tiny_llama}",
    }
    path = write_model_config(tmp_path, "medal-lp", models, languages=["en", "de"], n_scenes=2, max_turns=3)
    data = yaml.safe_load(path.read_text("utf-8"))
    data["generation"]["user_judge"] = {"temperature": 0.0, "max_tokens": 1, "decide": "logprobs"}
    path.write_text(yaml.safe_dump(data), "utf-8")
    cfg = PipelineConfig.load(path)
    cache = RequestCache(tmp_path / "requests.sqlite")
    pool = ModelPool(cache)
    try:
        state = DialogueGenerator(cfg, build_seeds(cfg), pool, cfg.work, progress=False).run()
    finally:
        pool.close()
        cache.close()
    attempts = _attempts(state)
    assert attempts and state.counters["user_judge_parse_failures"] == 0
    for a in attempts:
        lp = a.judge_logprobs
        assert lp is not None and all(math.isfinite(lp[k]) for k in ("Yes", "No"))
        assert a.accepted == (lp["Yes"] > lp["No"]) and a.feedback == ""
    usage = state.usage["user_judge"]
    assert usage["completion_tokens"] <= usage["requests"]  # one token each (or an immediate EOS)
