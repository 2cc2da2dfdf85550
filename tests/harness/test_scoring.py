import math

import numpy as np
import pytest

from harness.scoring import (
    choice_logprobs_from_top,
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
