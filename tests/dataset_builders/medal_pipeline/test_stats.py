"""MEDAL pool statistics (App. C.4 Table 2) and issue heatmaps (Fig. 2 / Fig. 9) on tiny corpora."""

from __future__ import annotations

import json
import math
import random
import warnings

import pytest

from dataset_builders.medal_labels import ISSUE_ABBREVIATIONS, MEDAL_ISSUES
from dataset_builders.medal_pipeline import stats as st
from dataset_builders.medal_pipeline.types import MAX_TURNS, AutoLabel, Dialogue, Turn

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from lexical_diversity import lex_div as ld


def dialogue(did, language, texts, chatbot="bot-a", user="user-a"):
    turns = [
        Turn("user" if i % 2 == 0 else "assistant", t, user if i % 2 == 0 else chatbot)
        for i, t in enumerate(texts)
    ]
    return Dialogue(did, f"seed-{did}", language, user, chatbot, turns, MAX_TURNS)


def label(did, issues=(), overall=4.0, none=()):
    labels = {i: (None if i in none else int(i in issues)) for i in MEDAL_ISSUES}
    labels["other"] = 0
    return AutoLabel(did, labels, overall, {}, "ok", "{}")


# -- lengths and tokens -----------------------------------------------------------------------------
def test_utterance_length_units():
    assert st.utterance_length("Hello there, my friend!", "en") == 4
    assert st.utterance_length("  Olá,   tudo bem? ", "pt") == 3
    assert st.utterance_length("我今天 很高兴！", "zh") == 7  # whitespace not counted, punctuation is
    assert st.utterance_length("我今天很高兴", "zh-CN") == 6
    assert st.utterance_length("今日は 晴れ", "ja") == 5
    assert st.length_unit("zh_Hans") == "characters" and st.length_unit("de") == "words"


def test_mtld_tokens_per_language():
    assert st.mtld_tokens(["The cats were running, and I don't worry!"], "en") == [
        "the",
        "cat",
        "be",
        "run",
        "and",
        "i",
        "dont",
        "worry",
    ]
    # Other languages: lower-cased, punctuation (ASCII and Unicode) removed, no lemmas.
    assert st.mtld_tokens(["«Les chats» étaient là — n'est-ce pas ?"], "fr") == [
        "les",
        "chats",
        "étaient",
        "là",
        "nestce",
        "pas",
    ]
    assert st.mtld_tokens("¿Qué tal?  Bien.", "es") == ["qué", "tal", "bien"]


def test_mtld_tokens_chinese_uses_jieba(monkeypatch):
    import jieba

    calls = []
    real = jieba.lcut

    def spy(text, *a, **kw):
        calls.append(text)
        return real(text, *a, **kw)

    monkeypatch.setattr(jieba, "lcut", spy)
    text = "我今天很高兴，你呢？ Hello World!"
    toks = st.mtld_tokens([text], "zh")
    assert calls == [text]
    expected = [t.lower() for t in real(text) if t.strip() and t not in "，？!"]
    assert toks == expected
    assert "hello" in toks and "，" not in toks and " " not in toks


def test_mtld_matches_lexical_diversity():
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(40)]
    for n in (0, 1, 5, 9, 10, 11, 57, 300, 1000):
        toks = [rng.choice(vocab) for _ in range(n)]
        assert st.mtld(toks) == ld.mtld(toks)
    toks = st.mtld_tokens(["The quick brown fox jumps over the lazy dog again and again."] * 12, "en")
    assert st.mtld(toks) == ld.mtld(toks)


# -- Table 2 ----------------------------------------------------------------------------------------
@pytest.fixture
def corpus():
    return [
        dialogue("en1", "en", ["hello there friend", "hi", "how are you today", "fine thanks"]),
        dialogue("en2", "en", ["one two", "three four five six"], chatbot="bot-b"),
        dialogue("zh1", "zh", ["你好吗", "我很好，谢谢！", "再见"]),
    ]


def test_language_statistics_hand_computed(corpus):
    s = st.language_statistics(corpus)
    assert list(s) == ["all", "zh", "en"]
    en = s["en"]
    assert en["dialogues"] == 2 and en["utterances"] == 6 and en["unit"] == "words"
    assert en["avg_turns"] == pytest.approx(3.0)
    # lengths: 3, 1, 4, 2 | 2, 4 ; user 3, 4, 2 ; chatbot 1, 2, 4
    assert en["avg_utterance_length"] == pytest.approx(16 / 6)
    assert en["avg_user_utterance_length"] == pytest.approx(9 / 3)
    assert en["avg_chatbot_utterance_length"] == pytest.approx(7 / 3)
    zh = s["zh"]
    assert zh["unit"] == "characters" and zh["avg_turns"] == 3
    # 3, 7 (incl. ， and ！), 2 characters
    assert zh["avg_utterance_length"] == pytest.approx(12 / 3)
    assert zh["avg_user_utterance_length"] == pytest.approx(5 / 2)
    assert zh["avg_chatbot_utterance_length"] == pytest.approx(7.0)
    # MTLD over the concatenated stream, in dialogue order
    en_tokens = st.mtld_tokens([t.text for d in corpus[:2] for t in d.turns], "en")
    assert en_tokens[:3] == ["hello", "there", "friend"] and len(en_tokens) == 16
    assert en["mtld"] == ld.mtld(en_tokens) and en["mtld_tokens"] == 16 and not en["mtld_reliable"]
    import jieba

    zh_tokens = [t for x in ["你好吗", "我很好，谢谢！", "再见"] for t in jieba.lcut(x) if t not in "，！"]
    assert zh["mtld"] == ld.mtld(zh_tokens)
    al = s["all"]
    assert al["dialogues"] == 3 and al["utterances"] == 9 and al["avg_turns"] == pytest.approx(3.0)
    assert al["unit"] == "mixed" and al["avg_utterance_length"] is None and al["mtld"] is None
    assert al["word_languages"]["avg_utterance_length"] == pytest.approx(16 / 6)


def test_single_language_all_row(corpus):
    s = st.language_statistics(corpus[:2])
    assert s["all"]["unit"] == "words"
    assert s["all"]["avg_utterance_length"] == pytest.approx(16 / 6)
    assert s["all"]["mtld"] == s["en"]["mtld"]


# -- issue rates and heatmaps ----------------------------------------------------------------------
@pytest.fixture
def labelled():
    ds = [
        dialogue("a1", "en", ["x", "y"], chatbot="A"),
        dialogue("a2", "en", ["x", "y"], chatbot="A"),
        dialogue("a3", "en", ["x", "y"], chatbot="A"),
        dialogue("a4", "en", ["x", "y"], chatbot="A"),
        dialogue("a5", "de", ["x", "y"], chatbot="A"),
        dialogue("b1", "en", ["x", "y"], chatbot="B"),
        dialogue("b2", "en", ["x", "y"], chatbot="B"),
        dialogue("b3", "de", ["x", "y"], chatbot="B"),  # no label: left out
    ]
    labs = {
        "a1": label("a1", ["nonfactual"], 3),
        "a2": label("a2", ["nonfactual", "repetitive"], 2),
        "a3": label("a3", [], 5),
        "a4": label("a4", [], None, none=["unsafe"]),  # unsafe unknown: any unknown too
        "a5": label("a5", ["incoherent"], 1),
        "b1": label("b1", [], 5),
        "b2": label("b2", ["unsafe"], 4),
    }
    return ds, labs


def _rate(df, chatbot, language, issue):
    row = df[(df.chatbot == chatbot) & (df.language == language) & (df.issue == issue)]
    assert len(row) == 1
    return float(row["rate"].iloc[0]), int(row["n"].iloc[0])


def test_issue_rates_hand_checked(labelled):
    ds, labs = labelled
    df = st.issue_rates(ds, labs)
    assert list(df.columns) == ["chatbot", "language", "issue", "rate", "n"]
    assert set(df["issue"]) == {*MEDAL_ISSUES, "any"}
    assert len(df) == 3 * 9  # (A, en), (A, de), (B, en)
    assert _rate(df, "A", "en", "nonfactual") == (50.0, 4)
    assert _rate(df, "A", "en", "repetitive") == (25.0, 4)
    assert _rate(df, "A", "en", "unsafe") == (0.0, 3)
    assert _rate(df, "A", "en", "any") == pytest.approx((200 / 3, 3))
    assert _rate(df, "A", "de", "incoherent") == (100.0, 1)
    assert _rate(df, "B", "en", "unsafe") == (50.0, 2)
    assert _rate(df, "B", "en", "any") == (50.0, 2)
    assert df[(df.chatbot == "B") & (df.language == "de")].empty
    pooled = st.issue_rates(ds, labs, pool_languages=True)
    assert _rate(pooled, "A", "all", "any") == (75.0, 4)

    om = st.overall_means(ds, labs)
    row = om[(om.chatbot == "A") & (om.language == "en")].iloc[0]
    assert row["overall"] == pytest.approx(10 / 3) and row["n"] == 3
    assert om[(om.chatbot == "B")]["overall"].tolist() == [4.5]

    table = st.any_issue_table(df)
    assert list(table.columns) == ["en", "de"] and list(table.index) == ["A", "B"]
    assert math.isnan(table.loc["B", "de"])
    types = st.issue_type_table(df, "chatbot")
    assert list(types.columns) == [ISSUE_ABBREVIATIONS[i] for i in MEDAL_ISSUES]
    assert types.loc["A", "!Fac"] == pytest.approx(40.0)  # 2 of 5 (en + de pooled)
    assert types.loc["A", "!Safe"] == pytest.approx(0.0)  # 0 of 4 known


def test_heatmaps_written(labelled, tmp_path):
    ds, labs = labelled
    p = st.issue_heatmap(ds, labs, tmp_path / "fig2.png")
    assert p.exists() and p.stat().st_size > 1000
    for by in ("chatbot", "language"):
        q = st.issue_type_heatmap(ds, labs, tmp_path / f"types-{by}.png", by=by)
        assert q.exists() and q.stat().st_size > 1000
    with pytest.raises(ValueError):
        st.issue_type_heatmap(ds, labs, tmp_path / "x.png", by="user")


def test_markdown_and_json(corpus, labelled):
    ds, labs = labelled
    stats = st.language_statistics(corpus)
    rates = st.issue_rates(ds, labs)
    md = st.statistics_markdown(stats, rates)
    text = "\n".join(md)
    assert "| All | 3 | 3.00 | — |" in text
    assert "| ZH | 1 | 3.00 | 4.0 chars |" in text
    assert "| EN | 2 | 3.00 | 2.7 words |" in text
    assert "| A | 66.7 | 100.0 |" in text and "| B | 50.0 | — |" in text
    assert "!Fac" in text
    js = st.statistics_json(stats, rates, st.overall_means(ds, labs))
    dumped = json.dumps(js, allow_nan=False)  # NaN became None
    assert json.loads(dumped)["languages"]["en"]["dialogues"] == 2
    nan_rates = rates.copy()
    nan_rates.loc[0, "rate"] = math.nan
    assert st.statistics_json(stats, nan_rates)["issue_rates"][0]["rate"] is None
    full = st.compute_statistics(ds, labs)
    json.dumps(full, allow_nan=False)
    assert full["languages"]["all"]["dialogues"] == len(ds)
