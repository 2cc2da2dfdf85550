"""Scoring methods moved into scorer objects without changing any task: for every registered task
(and the translation-adequacy and extended MEDAL tasks built on the fly), the judge's decoding, score
range and method, each request's prompt hash and cache payload, and the verdicts of a set of
synthetic responses (scores, statuses, details, sample extras) match ``task_golden.json``, written
by the code before the move (commit 749413a). Everything is compared exactly but the verdicts'
floats, which are compared with a tolerance (:data:`FLOAT_TOL`).

A prompt or scorer changed on purpose changes the digests: rewrite the file with
``PYTHONPATH=. python tests/harness/scorers/test_tasks_unchanged.py --write`` and say why in the
commit (cache keys of that task change with it)."""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).with_name("task_golden.json")
#: float64 log-prob arithmetic on the same inputs: a few ulps apart across CPUs at most
FLOAT_TOL = 1e-12
TEXTS = [
    "Yes",
    "No",
    "Score: 4",
    "72",
    "I rate this 2.5 out of 3",
    "Engagingness: 85/100",
    "4",
    "yes, it is",
    json.dumps({"overall": {"label": 4, "comment": ""}}),
    "garbage",
    json.dumps(
        {"overall_quality_rating": {"label": 3, "comment": "ok"}, "unsafe": {"label": 1, "comment": ""}}
    ),
]


def _item(level: str, lang: str) -> dict[str, Any]:
    if level == "turn":
        return {
            "id": "i1",
            "language": lang,
            "response": "Fine, thanks.",
            "reference": "Great, and you?",
            "context": [
                {"role": "user", "text": "Hello there"},
                {"role": "assistant", "text": "Hi! How are you?"},
            ],
        }
    return {
        "id": "d1",
        "language": lang,
        "turns": [
            {"role": "user", "text": "Hello there"},
            {"role": "assistant", "text": "Hi! How are you?"},
            {"role": "user", "text": "Fine."},
        ],
    }


def _responses() -> list[Any]:
    from harness.types import Response, TokenLogprob

    out = [Response(text=t) for t in TEXTS]
    out.append(Response(text="Yes", choice_logprobs={"Yes": -0.2, "No": -1.9}))
    out.append(
        Response(text="3", token_logprobs=[TokenLogprob("3", -0.5, {"3": -0.5, "4": -1.2, "2": -2.0})])
    )
    out.append(Response(text="", choice_logprobs={"1": -3.0, "2": -2.0, "3": -1.0, "4": -0.5, "5": -2.5}))
    out.append(
        Response(
            text="",
            token_logprobs=[TokenLogprob("Answer:", -1.0), TokenLogprob(" Yes.", -0.3)],
            continuation_logprob=-1.3,
            finish_reason="continuation",
        )
    )
    out.append(Response(text="Yes", raw={"system_role": "prefixed"}))
    return out


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if hasattr(x, "to_dict"):
        return _plain(x.to_dict())
    return x


def _split(x: Any, floats: list[float]) -> Any:
    """``x`` with every float replaced by a placeholder, the floats appended to ``floats`` in order."""
    if isinstance(x, float):
        floats.append(x)
        return "<float>"
    if isinstance(x, dict):
        return {k: _split(v, floats) for k, v in x.items()}
    if isinstance(x, list):
        return [_split(v, floats) for v in x]
    return x


def _digest(x: Any) -> str:
    return hashlib.sha256(json.dumps(_plain(x), sort_keys=True).encode()).hexdigest()[:16]


def _verdicts_digest(x: Any) -> dict[str, Any]:
    """The verdicts' text, statuses and structure as a digest (exact), their floats as a list:
    scores from log-probs go through exp/log, whose last bits differ by CPU (compared with
    :data:`FLOAT_TOL`)."""
    floats: list[float] = []
    skeleton = _split(_plain(x), floats)
    return {"digest": _digest(skeleton), "floats": floats}


def _verdict(judge: Any, task: Any, item: Any, req: Any, resp: Any) -> list[Any]:
    try:
        v = judge._verdict(task, item, req, resp)
    except Exception as e:  # e.g. P(Yes) of a response without log-probs: the same error as before
        return ["raises", type(e).__name__, str(e)]
    return [v.score, v.status, v.detail, v.extra]


def snapshot() -> dict[str, dict[str, Any]]:
    """Per task: decoding / range / method, and digests of its requests and verdicts."""
    from dataset_builders.medal_pipeline.labels import medal_task_for
    from harness.cache import RequestCache
    from harness.judges import load_judge
    from harness.qa.scores import adequacy_task
    from harness.tasks import all_tasks
    from harness.types import sha256_json

    replay = Path(tempfile.mkdtemp()) / "r.jsonl"
    replay.write_text('{"default": {"text": "Yes"}}\n')
    judge = load_judge(f"replay:{replay}", RequestCache(enabled=False))
    reasoning = load_judge(f"replay:{replay},reasoning=true", RequestCache(enabled=False))
    tasks = {
        **all_tasks(),
        "translation-adequacy": adequacy_task(["de", "fr"]),
        "medal-for-it": medal_task_for(["it", "en"]),
    }
    out: dict[str, dict[str, Any]] = {}
    for name, t in sorted(tasks.items()):
        requests, verdicts = {}, {}
        cfg = judge.generation_config(t)
        for lang in [lang for lang in t.languages if lang in t.templates][:3]:
            item = _item(t.level, lang)
            req = t.build_request(item, cfg)
            requests[lang] = [
                req.prompt_hash(),
                sha256_json(req.payload()),
                req.choices,
                req.continuation,
                sha256_json(req.json_schema) if req.json_schema else None,
            ]
            if not t.procedure:
                verdicts[lang] = [_verdict(judge, t, item, req, resp) for resp in _responses()]
        out[name] = {
            "decoding": cfg.to_dict(),
            "decoding_reasoning": reasoning.generation_config(t).to_dict(),
            "range": list(judge.score_range(t)) if judge.score_range(t) is not None else None,
            "method": judge.method(t),
            "requests": _digest(requests),
            "verdicts": _verdicts_digest(verdicts),
        }
    return out


def test_every_task_requests_and_scores_as_before_the_scorer_objects():
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    now = json.loads(json.dumps(snapshot()))
    assert sorted(now) == sorted(golden)
    changed = {}
    for t in golden:
        for k in golden[t]:
            want, got = golden[t][k], now[t][k]
            if k == "verdicts":
                same = want["digest"] == got["digest"] and got["floats"] == pytest.approx(
                    want["floats"], rel=FLOAT_TOL, abs=FLOAT_TOL
                )
            else:
                same = want == got
            if not same:
                changed[f"{t}.{k}"] = (want, got)
    assert not changed, changed


if __name__ == "__main__":  # pragma: no cover - writes the golden file
    if "--write" in sys.argv:
        GOLDEN.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {GOLDEN}")
