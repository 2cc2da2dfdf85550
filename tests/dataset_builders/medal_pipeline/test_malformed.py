"""Malformed-dialogue detection (dataset_builders.medal_pipeline.malformed) with a replay checker."""

import json

import pytest

from dataset_builders.medal_pipeline.malformed import (
    MALFORMED_CHECK_SYSTEM,
    MALFORMED_SCHEMA,
    check_requests,
    check_sources,
    clean_for_langid,
    detect_malformed,
    identify,
    malformed_summary,
    parse_check,
    rule_language_check,
)
from dataset_builders.medal_pipeline.types import Dialogue, MalformedCheck, Turn
from harness.backends.replay import ReplayBackend
from harness.cache import CachedBackend, RequestCache

NAMES = {"pt": "Portuguese", "en": "English", "zh": "Chinese"}

PT_USER = "Oi! Estou pensando em visitar Lisboa no próximo mês, você tem alguma dica de passeio?"
PT_BOT = "Claro! Recomendo visitar o bairro de Alfama e o Castelo de São Jorge, além de provar os pastéis de nata em Belém."
EN_BOT = (
    "Sure! I would recommend visiting the Alfama district and the castle, and you should "
    "definitely try the custard tarts in Belém."
)


def _d(did, language, *turns):
    return Dialogue(
        did,
        f"seed-{did}",
        language,
        "user-llm",
        "bot",
        [Turn(role, text, "user-llm" if role == "user" else "bot") for role, text in turns],
        "max_turns",
    )


def _reply(role=0, mixing=0, role_comment="", mixing_comment=""):
    return json.dumps(
        {
            "role_confusion": {"label": role, "comment": role_comment},
            "language_mixing": {"label": mixing, "comment": mixing_comment},
        }
    )


CLEAN = _d("clean", "pt-BR", ("user", PT_USER), ("assistant", PT_BOT), ("user", "Que bom! Obrigado."))
ROLE = _d(
    "role",
    "en",
    ("user", "I'm planning a trip to York next month. Any tips on what to see there?"),
    ("assistant", "You could walk the city walls and visit the Minster."),
    (
        "user",
        "Great question! As an AI assistant, I can help you plan your trip. Here are some tips for you.",
    ),
)
MIXED = _d("mixed", "pt", ("user", PT_USER.replace("Lisboa", "Porto")), ("assistant", EN_BOT))
BROKEN = _d("broken", "pt", ("user", PT_USER.replace("Lisboa", "Coimbra")), ("assistant", PT_BOT))
ROLE_COMMENT = "In turn 2 the user offers help as an AI assistant."


@pytest.fixture
def checker(tmp_path):
    rules = [
        {"match": "Lisboa", "response": {"text": _reply()}},
        {"match": "As an AI assistant", "response": {"text": _reply(role=1, role_comment=ROLE_COMMENT)}},
        {"match": "Porto", "response": {"text": _reply()}},  # the LLM misses the English answer
        {"match": "Coimbra", "response": {"text": 'Sure: {"role_confusion": {"label": 0, "comment": ""}, '}},
    ]
    f = tmp_path / "checker.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rules) + "\n")
    backend = ReplayBackend(str(f))
    cache = RequestCache(tmp_path / "c.sqlite")
    yield CachedBackend(backend, cache)
    cache.close()


def test_check_requests_are_greedy_schema_guided_and_name_the_language():
    r_clean, r_role = check_requests([CLEAN, ROLE], NAMES)
    assert r_clean.config.temperature == 0.0 and r_clean.config.max_tokens == 512
    assert r_clean.json_schema == MALFORMED_SCHEMA
    assert r_clean.messages[0].role == "system" and r_clean.messages[0].content == MALFORMED_CHECK_SYSTEM
    user = r_clean.messages[1].content
    assert user.startswith("Target language: Portuguese\n")  # pt-BR falls back to the base code's name
    assert f"user: {PT_USER}\nassistant: {PT_BOT}\nuser: Que bom! Obrigado." in user
    assert "Target language: English" in r_role.messages[1].content
    # unknown to the mapping: the harness's language table, else the code itself
    (r_it, r_xx) = check_requests([_d("it", "it", ("user", "Ciao")), _d("xx", "xx-YY", ("user", "?"))], {})
    assert "Target language: Italian" in r_it.messages[1].content
    assert "Target language: xx-YY" in r_xx.messages[1].content
    assert MALFORMED_SCHEMA["required"] == ["role_confusion", "language_mixing"]


def test_parse_check():
    assert parse_check(_reply(1, 0, "user acts as the bot")) == (
        {"role_confusion": 1, "language_mixing": 0},
        {"role_confusion": "user acts as the bot"},
        "ok",
    )
    # fenced, after a reasoning trace, keys in another spelling, a bare label
    text = (
        '<think>hm {"x": 1}</think>```json\n{"Role Confusion": {"label": "0"}, "language-mixing": true}\n```'
    )
    assert parse_check(text) == ({"role_confusion": 0, "language_mixing": 1}, {}, "ok")
    labels, _, status = parse_check('{"role_confusion": {"label": "maybe"}, "language_mixing": {"label": 2}}')
    assert labels == {"role_confusion": None, "language_mixing": None} and status == "parse_error"
    labels, _, status = parse_check('{"role_confusion": {"label": 1, "comment": "x"}}')  # key missing
    assert labels == {"role_confusion": 1, "language_mixing": None} and status == "parse_error"
    labels, comments, status = parse_check("no JSON here")
    assert labels == {"role_confusion": None, "language_mixing": None} and comments == {}
    assert status == "parse_error"
    assert parse_check(None)[2] == "parse_error"


def test_language_identifier_and_cleaning():
    assert identify(EN_BOT)[0] == "en" and identify(PT_USER)[0] == "pt"
    lang, p = identify("我下个月想去北京旅游，你有什么推荐的地方吗？")
    assert lang == "zh" and 0.9 <= p <= 1.0
    assert clean_for_langid("Olá 😀👍🏽 veja https://example.com/a?b=1 ou www.x.pt  ❤️ ") == "Olá veja ou"


def test_rule_language_check():
    rows, problems = rule_language_check(MIXED)
    assert [r["turn"] for r in rows] == [0, 1] and [r["role"] for r in rows] == ["user", "assistant"]
    assert rows[0]["lang"] == "pt" and rows[1]["lang"] == "en" and rows[1]["mismatch"]
    assert len(problems) == 1 and problems[0].startswith("turn 1 (assistant) identified as 'en' (p=")
    assert problems[0].endswith("expected 'pt'")
    # pt-BR is compared as pt; short utterances are skipped (lang None), not flagged
    rows, problems = rule_language_check(CLEAN)
    assert problems == [] and rows[2] == {
        "turn": 2,
        "role": "user",
        "lang": None,
        "prob": None,
        "mismatch": False,
    }
    # a long English utterance in a zh-TW dialogue is flagged; the Chinese one is not
    zh = _d("zh", "zh-TW", ("user", "我下个月想去北京旅游，你有什么推荐的地方吗？"), ("assistant", EN_BOT))
    rows, problems = rule_language_check(zh)
    assert [r["mismatch"] for r in rows] == [False, True] and "expected 'zh'" in problems[0]
    # thresholds: everything too short, or an impossible probability -> nothing found
    assert rule_language_check(MIXED, min_chars=10_000)[1] == []
    assert rule_language_check(MIXED, min_prob=1.01)[1] == []


def test_detect_malformed_llm_and_langid(checker):
    dialogues = [CLEAN, ROLE, MIXED, BROKEN, CLEAN]
    calls = []
    generate = checker.generate
    checker.generate = lambda requests: calls.append(len(requests)) or generate(requests)
    checks = detect_malformed(dialogues, checker, language_names=NAMES, batch_size=2, progress=False)
    assert [c.dialogue_id for c in checks] == ["clean", "role", "mixed", "broken", "clean"]
    assert calls == [2, 2, 1]  # one generate call per batch
    stats = checker.backend.stats
    assert (stats.batches, stats.requests) == (2, 4)  # the repeated CLEAN came from the cache
    clean, role, mixed, broken, _ = checks

    assert not clean.malformed and clean.reasons == [] and clean.details == {} and clean.llm_status == "ok"
    assert [u["lang"] for u in clean.langid] == ["pt", "pt", None]

    assert role.reasons == ["role_confusion"] and role.details == {"role_confusion": f"llm: {ROLE_COMMENT}"}
    assert role.llm_status == "ok" and json.loads(role.llm_raw)["role_confusion"]["label"] == 1

    assert mixed.reasons == ["language_mixing"] and mixed.llm_status == "ok"
    assert mixed.details["language_mixing"].startswith("langid: turn 1 (assistant) identified as 'en'")
    assert check_sources(mixed) == {"language_mixing": ["langid"]}

    # an unparseable reply is counted, kept, and not malformed by itself
    assert broken.llm_status == "parse_error" and not broken.malformed and broken.llm_raw.startswith("Sure:")

    s = malformed_summary(checks)
    assert s["n"] == 5 and s["malformed"] == 2 and s["malformed_share"] == pytest.approx(0.4)
    assert s["reasons"] == {"role_confusion": 1, "language_mixing": 1}
    assert s["sources"]["llm"] == {"role_confusion": 1, "language_mixing": 0}
    assert s["sources"]["langid"] == {"role_confusion": 0, "language_mixing": 1}
    assert s["sources"]["both"] == {"role_confusion": 0, "language_mixing": 0}
    assert s["parse_failures"] == 1 and s["llm_status"] == {"ok": 4, "parse_error": 1}
    assert s["langid_utterances"]["mismatch"] == 1

    assert MalformedCheck.from_dict(json.loads(json.dumps(mixed.to_dict()))) == mixed
    # a re-run is served from the cache
    assert detect_malformed(dialogues, checker, language_names=NAMES, progress=True) == checks
    assert calls[-1] == 5 and (stats.batches, stats.requests) == (2, 4)


def test_both_sources_and_an_llm_label_without_comment(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"default": {"text": _reply(mixing=1)}}) + "\n")
    cache = RequestCache(tmp_path / "c.sqlite")
    (c,) = detect_malformed(
        [MIXED], CachedBackend(ReplayBackend(str(f)), cache), language_names=NAMES, progress=False
    )
    assert c.reasons == ["language_mixing"]
    llm, langid = c.details["language_mixing"].split(" | ")
    assert llm == "llm: (no comment)" and langid.startswith("langid: turn 1 (assistant)")
    assert check_sources(c) == {"language_mixing": ["llm", "langid"]}
    assert malformed_summary([c])["sources"]["both"]["language_mixing"] == 1
    cache.close()


def test_no_checker_is_skipped_and_langid_still_runs():
    checks = detect_malformed([CLEAN, ROLE, MIXED], None, language_names=NAMES, progress=False)
    assert [c.llm_status for c in checks] == ["skipped"] * 3 and all(c.llm_raw == "" for c in checks)
    assert [c.reasons for c in checks] == [[], [], ["language_mixing"]]  # role confusion needs the LLM
    s = malformed_summary(checks)
    assert s["llm_status"] == {"skipped": 3} and s["parse_failures"] == 0 and s["malformed"] == 1
    assert malformed_summary([])["malformed_share"] is None
