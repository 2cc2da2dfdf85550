"""Written-verdict parsers (UPHELD App. H): values when stated, parse failures otherwise — never 0."""

import pytest

from harness.verdicts import parse_likert, parse_yes_no


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
