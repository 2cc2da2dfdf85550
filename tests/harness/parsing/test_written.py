"""Written-verdict parsers (UPHELD App. H): values when stated, parse failures otherwise — never 0."""

import pytest

from harness.parsing import parse_likert, parse_scale_score, parse_yes_no


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Yes", 1.0),
        ("No", 0.0),
        ("yes.", 1.0),
        ("**No.** The prediction adds a price the reference never mentions.", 0.0),
        ('"Yes" - both ask which station.', 1.0),
        ("Answer: no\nExplanation: different content.", 0.0),
        ("After comparing them, my verdict: Yes", 1.0),
        ("The continuation says no more than needed; Output: Yes", 1.0),
        ("I think yes, they match.", 1.0),
    ],
)
def test_yes_no_parsed(text, value):
    s = parse_yes_no(text)
    assert s.status == "ok" and s.value == value


@pytest.mark.parametrize(
    "text",
    ["", "   ", None, "Maybe.", "It depends on whether yes or no applies.", "Answer: yes. Verdict: no."],
)
def test_yes_no_failures_are_none(text):
    s = parse_yes_no(text)
    assert s.value is None and s.status == "parse_error" and s.detail


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4", 4.0),
        ("5/5", 5.0),
        ("**3**", 3.0),
        ("Score: 2 - the prediction only shares the greeting.", 2.0),
        ("I would rate this a 4 out of 5 because the content matches.", 4.0),
        ("Rating: four", 4.0),
        ("The prediction conveys most of it.\nScore: 4", 4.0),
        ("Two of the facts match, so: 3", 3.0),
    ],
)
def test_likert_parsed(text, value):
    s = parse_likert(text)
    assert s.status == "ok" and s.value == value, s


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("Score: 7", "outside"),
        ("0", "outside"),
        ("Score: 3.5", "not an integer"),
        ("Somewhere between 2 and 4.", "several"),
        ("They are semantically equivalent.", "no 1-5 score"),
    ],
)
def test_likert_failures_are_none(text, why):
    s = parse_likert(text)
    assert s.value is None and s.status == "parse_error"
    assert why in s.detail


# -- parse_scale_score (MEEP: a score on any scale, anywhere in the reply) ----------------------------
@pytest.mark.parametrize(
    ("text", "lo", "hi", "integer", "language", "value"),
    [
        # labelled forms
        ("Score: 75", 0, 100, False, None, 75.0),
        ("- Engagingness: 2", 1, 3, True, None, 2.0),
        ("Engagingness (1-3): 3", 1, 3, True, None, 3.0),
        ("Puntuación: 80", 0, 100, False, "es", 80.0),
        ("评分：85", 0, 100, False, "zh", 85.0),
        ("评分：85分（满分100分）", 0, 100, False, "zh", 85.0),
        ("The response is vivid. **75**", 0, 100, False, None, 75.0),
        ("75/100", 0, 100, False, None, 75.0),
        ("2 out of 3", 1, 3, True, None, 2.0),
        ("The response deserves 75 out of 100.", 0, 100, False, None, 75.0),
        ("I think it merits a score of 75.", 0, 100, False, None, 75.0),
        ("I would rate this response 80", 0, 100, False, None, 80.0),
        ("I would give this response a 75 out of 100.", 0, 100, False, None, 75.0),
        ("Score: 75\n\nI would rate it 75 out of 100 because it asks a question.", 0, 100, False, None, 75.0),
        (
            "Final score: 70. The variety sub-score is 60 and the interest score is 80.",
            0,
            100,
            False,
            None,
            70.0,
        ),
        ("1. Variety: good\n2. Interest: high\nOverall score: 80", 0, 100, False, None, 80.0),
        ("Score: 85\n\nIt is the 2nd best reply I have seen.", 0, 100, False, None, 85.0),
        ("0分表示不吸引人，100分表示非常吸引人。我给80分。", 0, 100, False, "zh", 80.0),
        # numbers written as words
        ("Score: seventy-five", 0, 100, False, None, 75.0),
        ("The response is fine. I'd give it a two.", 1, 3, True, None, 2.0),
        ("three", 1, 3, True, None, 3.0),
        ("Puntuación: setenta y cinco", 0, 100, False, "es", 75.0),
        ("Le daría una puntuación de ochenta.", 0, 100, False, "es", 80.0),
        ("Respuesta muy interesante. Le doy un ochenta.", 0, 100, False, "es", 80.0),
        ("Note : soixante-quinze", 0, 100, False, "fr", 75.0),
        ("评分：七十五", 0, 100, False, "zh", 75.0),
        ("我给这个回应打八十五分，因为它很有趣。", 0, 100, False, "zh", 85.0),
        ("这个回应十分有趣，评分：90", 0, 100, False, "zh", 90.0),  # 十分 + adjective = "very"
        ("分数为二", 1, 3, True, "zh", 2.0),
        # leading, final, only number
        ("75", 0, 100, False, None, 75.0),
        ("２", 1, 3, True, None, 2.0),  # full-width digit
        ("75 - it asks a follow-up question.", 0, 100, False, None, 75.0),
        ("The reply is specific and invites an answer, so I'd say\n\n85", 0, 100, False, None, 85.0),
        ("Considering everything: 60", 0, 100, False, None, 60.0),
        (
            "A score of zero means 'disengaging' and a score of 100 means 'very engaging'. This one is a 70.",
            0,
            100,
            False,
            None,
            70.0,
        ),
        # never rescaled
        ("Score: 0.8", 0, 100, False, None, 0.8),
        ("Puntuación: 7,5", 0, 100, False, "es", 7.5),
        ("Score: 90%", 0, 100, False, None, 90.0),
    ],
)
def test_scale_score_parsed(text, lo, hi, integer, language, value):
    s = parse_scale_score(text, lo, hi, integer=integer, language=language)
    assert s.status == "ok" and s.value == pytest.approx(value), s
    assert isinstance(s.value, float)


@pytest.mark.parametrize(
    ("text", "lo", "hi", "integer", "why"),
    [
        ("", 0, 100, False, "empty"),
        (None, 0, 100, False, "empty"),
        ("Score: 150", 0, 100, False, "outside 0-100"),
        ("Score: -5", 0, 100, False, "outside 0-100"),
        ("Engagingness: 5", 1, 3, True, "outside 1-3"),
        ("Score: 0", 1, 3, True, "outside 1-3"),
        ("Score: 2.5", 1, 3, True, "not an integer"),
        ("Rating: 8/10", 0, 100, False, "not on the 0-100 scale"),  # never rescaled to 80
        ("Score: 70. On reflection, score: 80.", 0, 100, False, "ambiguous"),
        ("Engagingness: 2\nEngagingness: 3", 1, 3, True, "ambiguous"),
        ("The response is engaging.", 0, 100, False, "no 0-100 score"),
        ("Score: N/A", 0, 100, False, "no 0-100 score"),
        (
            "The response is engaging; it asks 2 questions and mentions 3 hobbies.",
            0,
            100,
            False,
            "several numbers",
        ),
        ("I would score it somewhere in the 70-80 range.", 0, 100, False, "a range"),
        ("It mentions 250 islands.", 1, 3, True, "outside 1-3"),
    ],
)
def test_scale_score_failures_are_none(text, lo, hi, integer, why):
    s = parse_scale_score(text, lo, hi, integer=integer)
    assert s.value is None and s.status == "parse_error"
    assert why in s.detail, s.detail


def test_scale_score_ignores_an_echoed_prompt():
    from tasks.meep import templates as T

    echo = T.MEEP_SA.user.format(context="Hi!\nHow are you?", response="I have 2 dogs.") + " 65"
    assert parse_scale_score(echo, 0, 100).value == 65.0
    geval = T.GEVAL.user.format(context="hi", response="yo") + " 2\n\nThe response is generic."
    assert parse_scale_score(geval, 1, 3, integer=True).value == 2.0
    es = T.MEEP_SA_ES.user.format(context="Hola", response="Bien") + " setenta"
    assert parse_scale_score(es, 0, 100, language="es").value == 70.0
    zh = T.MEEP_SA_ZH.user.format(context="你好", response="很好") + " 七十"
    assert parse_scale_score(zh, 0, 100, language="zh").value == 70.0


def test_scale_score_bad_scale_is_an_error():
    with pytest.raises(ValueError):
        parse_scale_score("5", 3, 1)
