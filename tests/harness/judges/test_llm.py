import json
import math

import pytest

from harness.cache import RequestCache
from harness.judges import load_judge
from harness.tasks import get_task

TASK = get_task("demo-turn")
ITEM = {
    "language": "es",
    "context": [{"role": "user", "text": "¿Te gusta el café?"}],
    "response": "Sí, mucho.",
}


def _replay(tmp_path, rules):
    f = tmp_path / "r.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rules) + "\n")
    return f


def test_llm_judge_scores_p_yes_and_keeps_raw(tmp_path):
    f = _replay(
        tmp_path,
        [
            {
                "match": "café",
                "response": {"text": "Yes", "choice_logprobs": {"Yes": math.log(0.3), "No": math.log(0.1)}},
            }
        ],
    )
    j = load_judge(f"replay:{f}", RequestCache(tmp_path / "c.sqlite"))
    (v,) = j.score(TASK, [ITEM])
    assert v.score == pytest.approx(0.75) and v.status == "ok" and v.raw == "Yes"
    assert v.extra["choice_logprobs"]["Yes"] == pytest.approx(math.log(0.3))
    assert len(v.prompt_hash) == 16


def test_decoding_defaults_to_temperature_zero_and_spec_overrides(tmp_path):
    f = _replay(tmp_path, [{"default": {"p_yes": 0.5}}])
    assert load_judge(f"replay:{f}").decoding(TASK)["temperature"] == 0.0
    d = load_judge(f"replay:{f},temperature=0.3,max_tokens=4").decoding(TASK)
    assert d["temperature"] == 0.3 and d["max_tokens"] == 4


def test_parse_failure_is_none_with_raw_text(tmp_path):
    f = _replay(tmp_path, [{"default": {"text": "I would say yes"}}])
    (v,) = load_judge(f"replay:{f}").score(TASK, [ITEM])
    assert v.score is None and v.status == "missing_logprobs" and v.raw == "I would say yes"


def test_sampling_judge_gets_the_run_seed(tmp_path):
    f = _replay(tmp_path, [{"default": {"p_yes": 0.5}}])
    assert load_judge(f"replay:{f},temperature=0.7", seed=13).decoding(TASK)["seed"] == 13
    assert load_judge(f"replay:{f},temperature=0.7,seed=2", seed=13).decoding(TASK)["seed"] == 2
    assert load_judge(f"replay:{f}", seed=13).decoding(TASK)["seed"] is None  # greedy: seed irrelevant
