import math

import numpy as np
import pytest

from harness.parsing.logprobs import (
    choice_logprobs_from_top,
    continuation_word_logprob,
    expected_score,
    expected_score_from_tokens,
    normalized_choice_probs,
    p_yes,
)
from harness.types import LogprobsUnavailableError, Response, TokenLogprob


@pytest.mark.parametrize(
    "lp, expected",
    [
        ({"Yes": math.log(0.6), "No": math.log(0.2)}, 0.75),
        ({"Yes": -1.0, "No": -1.0}, 0.5),
        ({"Yes": -0.01, "No": -30.0}, 1 / (1 + math.exp(-29.99))),
        ({"Yes": None, "No": -1.0}, 0.0),  # Yes absent from top-k: probability 0
        ({"Yes": -1.0, "No": -math.inf}, 1.0),
    ],
)
def test_p_yes_golden(lp, expected):
    s = p_yes(lp)
    assert s.status == "ok"
    assert s.value == pytest.approx(expected, abs=1e-12)


def test_p_yes_says_when_a_label_was_outside_the_top_k():
    s = p_yes({"Yes": None, "No": -5.7})
    assert (
        s.value == pytest.approx(0.0) and s.status == "ok" and "'Yes' not among the top log-probs" in s.detail
    )
    assert p_yes({"Yes": -1.0, "No": -2.0}).detail == ""


def test_p_yes_missing_is_none_not_zero():
    s = p_yes({"Yes": None, "No": None})
    assert s.value is None and s.status == "missing_logprobs"


def test_p_yes_without_logprobs_raises():
    with pytest.raises(LogprobsUnavailableError):
        p_yes(Response(text="Yes"))


def test_expected_score_weights_digits():
    probs = np.array([0.1, 0.2, 0.4, 0.2, 0.1])
    lp = {str(i + 1): math.log(p) for i, p in enumerate(probs)}
    assert expected_score(lp).value == pytest.approx(float(np.dot(probs, [1, 2, 3, 4, 5])))
    # renormalised over the labels present
    lp2 = {"1": math.log(0.3), "5": math.log(0.1), "Yes": -0.1}
    assert expected_score(lp2, ["1", "2", "3", "4", "5"]).value == pytest.approx((0.3 * 1 + 0.1 * 5) / 0.4)


def test_top_logprob_variants_are_combined():
    top = {"Yes": math.log(0.3), " yes": math.log(0.1), "No": math.log(0.2), "Maybe": math.log(0.1)}
    lp = choice_logprobs_from_top(top, ["Yes", "No", "Perhaps"])
    assert math.exp(lp["Yes"]) == pytest.approx(0.4)
    assert math.exp(lp["No"]) == pytest.approx(0.2)
    assert lp["Perhaps"] is None
    assert normalized_choice_probs(lp)["Yes"] == pytest.approx(2 / 3)


def test_geval_from_generated_tokens():
    toks = [
        TokenLogprob("Rating", -0.1, {}),
        TokenLogprob(":", -0.1, {}),
        TokenLogprob(" 4", math.log(0.5), {" 4": math.log(0.5), " 3": math.log(0.3), " 5": math.log(0.2)}),
    ]
    s = expected_score_from_tokens(toks, ["1", "2", "3", "4", "5"])
    assert s.value == pytest.approx(0.5 * 4 + 0.3 * 3 + 0.2 * 5)
    none = expected_score_from_tokens([TokenLogprob("great", -0.1, {})], ["1", "2", "3"])
    assert none.value is None and none.status == "parse_error"


# -- GPTScore: log-prob of a word inside the scored continuation --------------------------------------
def _cont(*pairs):
    return Response("", token_logprobs=[TokenLogprob(t, lp) for t, lp in pairs])


@pytest.mark.parametrize(
    ("tokens", "value", "used"),
    [
        (
            [("Answer", -0.1), (":", -0.1), (" Yes", -0.2), (".", -0.1)],
            -0.2,
            [" Yes"],
        ),  # leading space counts
        ([("Answer", -0.1), (":", -0.1), (" ", -0.3), ("Yes", -0.2), (".", -0.1)], -0.2, ["Yes"]),
        ([("Answer", -0.1), (":", -0.1), (" Y", -0.2), ("es", -0.7), (".", -0.1)], -0.9, [" Y", "es"]),
        ([("Answer", -0.1), (":", -0.1), (" Yes.", -0.4)], -0.4, [" Yes."]),  # straddles: counts whole
        ([("Answer: Yes.", -1.5)], -1.5, ["Answer: Yes."]),  # one token for everything
        # byte-level / SentencePiece markers: matched after stripping them
        ([("Answer", -0.1), (":", -0.1), ("ĠYes", -0.2), (".", -0.1)], -0.2, ["ĠYes"]),
        ([("▁Answer", -0.1), (":", -0.1), ("▁Y", -0.2), ("es", -0.3), (".", -0.1)], -0.5, ["▁Y", "es"]),
    ],
)
def test_continuation_word_logprob_span_arithmetic(tokens, value, used):
    s = continuation_word_logprob(_cont(*tokens), "Answer: Yes.", "Yes")
    assert s.status == "ok" and s.value == pytest.approx(value)
    assert repr(used) in s.detail


def test_continuation_word_logprob_uses_the_last_occurrence():
    toks = [("Yes", -3.0), (",", -0.1), (" Answer", -0.1), (":", -0.1), (" Yes", -0.25), (".", -0.1)]
    s = continuation_word_logprob(_cont(*toks), "Yes, Answer: Yes.", "Yes")
    assert s.value == pytest.approx(-0.25)


def test_continuation_word_logprob_multibyte_bytes_count_with_their_character():
    # "是" split over two byte tokens: the first has an empty string (backends' token_strings rule)
    s = continuation_word_logprob(
        _cont(("答案", -0.1), ("：", -0.1), ("", -0.4), ("是", -0.5), ("。", -0.1)), "答案：是。", "是"
    )
    assert s.value == pytest.approx(-0.9)


def test_continuation_word_logprob_failures():
    missing = continuation_word_logprob(Response("", token_logprobs=None), "Answer: Yes.", "Yes")
    assert missing.value is None and missing.status == "missing_logprobs"
    assert continuation_word_logprob(Response(""), "Answer: Yes.", "Yes").status == "missing_logprobs"
    assert continuation_word_logprob(_cont(), "Answer: Yes.", "Yes").status == "missing_logprobs"
    bad = continuation_word_logprob(_cont(("Answer", -0.1), (": No.", -0.2)), "Answer: Yes.", "Yes")
    assert bad.value is None and bad.status == "parse_error" and "do not reconstruct" in bad.detail
    absent = continuation_word_logprob(_cont(("Answer: Yes.", -0.1)), "Answer: Yes.", "No")
    assert absent.status == "parse_error" and "does not occur" in absent.detail
    inf = continuation_word_logprob(_cont(("Answer:", -0.1), (" Yes.", -math.inf)), "Answer: Yes.", "Yes")
    assert inf.value is None and inf.status == "missing_logprobs"
