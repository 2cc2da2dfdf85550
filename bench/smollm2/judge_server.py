"""SmolLM2 judge parts that go through vLLM's OpenAI server or score labels: MEDAL JSON verdicts
with JSON-schema guided decoding, and pairwise position bias by label log-probs.

    python bench/smollm2/judge.py medal --per-language 3                   # unguided, hf (the "medal" section)
    python bench/smollm2/judge.py medal --server vllm --per-language 3     # guided, vLLM's server ("medal_guided")
    python bench/smollm2/judge.py pairwise --pairs 3                       # label log-probs, hf ("pairwise")

Both MEDAL runs judge the same dialogues (:func:`medal_items`: the first ``--n`` per shared
dialogue set and language, at most ``--per-language`` per language). The guided run sends the
MEDAL task's verdict schema as ``response_format`` (``openai:smollm2-135m-instruct,base_url=...``
against vLLM's server on 127.0.0.1, :mod:`bench.smollm2.server`); whether the server really
guided each request is read from the cached responses (``Response.raw["guided"]``), as is how each
generation ended (``finish_reason``).

The pairwise part asks the MEDAL App. C.5 question of pairs of xDial-Eval dialogues in both orders
(:func:`harness.robustness.pairwise.run_pairwise`) and takes the most probable of the labels
``A`` / ``B`` / ``Tie`` as the answer (``choices=``): SmolLM2's written answers mostly do not parse.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.smollm2.judge import HF, LANGS, MODEL, items, load, save

#: A fixed port: the openai backend's identity (and so its cache keys) carries the base URL, so a
#: rerun on the same port resumes from the request cache.
SERVER_PORT = 8763


def medal_items(source: Path, n: int, per_language: int | None) -> list[dict[str, Any]]:
    """The dialogues of the MEDAL parts: the first ``n`` per set and language, then (if given) the
    first ``per_language`` of each language over the sets."""
    its = items(source, "dialogue", n)
    if per_language:
        its = [it for lang in LANGS for it in [x for x in its if x["language"] == lang][:per_language]]
    return its


def medal_stats(rows: Sequence[dict[str, Any]], its: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per language: parse failures (never coerced), statuses, the mean overall score of the parsed
    verdicts, issues flagged, replies containing ``{``, finish reasons and guided replies.
    ``rows``: ``{status, ok, score, labels, raw, finish_reason, guided}`` per item of ``its``."""
    per: dict[str, Any] = {}
    for lang in LANGS:
        vs = [v for v, it in zip(rows, its, strict=True) if it["language"] == lang]
        if not vs:
            continue
        ok = [v for v in vs if v["ok"]]
        flagged = Counter(k for v in vs for k, x in (v["labels"] or {}).items() if x == 1)
        per[lang] = {
            "n": len(vs),
            "parse_failures": len(vs) - len(ok),
            "statuses": dict(Counter(v["status"] for v in vs)),
            "overall_mean": sum(v["score"] for v in ok) / len(ok) if ok else None,
            "flagged": dict(flagged),
            "looks_like_json": sum("{" in (v["raw"] or "") for v in vs),
            "finish_reasons": dict(Counter(str(v.get("finish_reason")) for v in vs)),
            "guided": sum(bool(v.get("guided")) for v in vs),
        }
    return per


def _row(
    status: str, score: float | None, extra: dict[str, Any] | None, text: str, resp: Any
) -> dict[str, Any]:
    raw = resp.raw if resp is not None and isinstance(resp.raw, dict) else {}
    return {
        "status": status,
        "ok": status == "ok" and score is not None,
        "score": score,
        "labels": (extra or {}).get("labels"),
        "raw": text,
        "finish_reason": resp.finish_reason if resp is not None else None,
        "guided": raw.get("guided"),
    }


def judge_medal(spec: str, its: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    """MEDAL verdicts of ``its`` through the judge ``spec`` (the harness's own judge path), then
    the same requests again from the cache for what the verdicts do not carry (guided, finish)."""
    from harness.cache import RequestCache, default_cache_path
    from harness.judges import load_judge
    from harness.tasks import get_task

    task = get_task("medal")
    t0 = time.perf_counter()
    with load_judge(spec, RequestCache(default_cache_path())) as judge:
        verdicts = judge.score(task, its)
        seconds = time.perf_counter() - t0
        cfg = judge.generation_config(task)
        resps = judge.cached.generate([task.build_request(it, cfg) for it in its])  # cache hits
    rows = [_row(v.status, v.score, v.extra, v.raw, r) for v, r in zip(verdicts, resps, strict=True)]
    return rows, seconds


def part_medal_guided(
    source: Path,
    n: int,
    max_tokens: int,
    per_language: int | None,
    timeout: float = 1800.0,
    concurrency: int = 4,
) -> None:
    from bench.smollm2.server import ModelServer
    from harness.modelstore import resolve

    its = medal_items(source, n, per_language)
    out: dict[str, Any] = {
        "n_per_set": n,
        "dialogues_per_language": per_language,
        "max_tokens": max_tokens,
    }
    with ModelServer("vllm", resolve(MODEL), served_name=MODEL, port=SERVER_PORT) as srv:
        out["server_startup_s"] = round(srv.startup_seconds or 0.0, 1)
        spec = (
            f"openai:{MODEL},base_url={srv.base_url},max_tokens={max_tokens},"
            f"concurrency={concurrency},timeout={timeout}"
        )
        out["judge"] = spec + " (vLLM's OpenAI server; the task's verdict schema as response_format)"
        rows, seconds = judge_medal(spec, its)
        out["per_language"] = medal_stats(rows, its)
        out["examples"] = [r["raw"][:300] for r in rows[:2]]
        out["seconds"] = round(seconds, 1)
        save("medal_guided", out)


# -- pairwise position bias by label log-probs ----------------------------------------------------------
def pairwise_pairs(source: Path, per_language: int, languages: Sequence[str] = LANGS) -> list[dict[str, Any]]:
    """``per_language`` pairs per language: consecutive dialogues of one shared set (1–2, 3–4, …),
    taken in turn from each set."""
    conv = lambda d: [{"role": t["role"], "text": t["text"]} for t in d["turns"]]  # noqa: E731
    dial = items(source, "dialogue", per_language + 1, languages=languages)
    pairs = []
    for lang in languages:
        by_set: dict[str, list[dict[str, Any]]] = {}
        for d in dial:
            if d["language"] == lang:
                by_set.setdefault(str(d.get("dataset") or d["id"].split("-dial-")[0]), []).append(d)
        per_set = [list(zip(ds[0::2], ds[1::2], strict=False)) for ds in by_set.values()]
        ordered = [
            p
            for k in range(max(map(len, per_set), default=0))
            for ps in per_set
            if k < len(ps)
            for p in [ps[k]]
        ]
        for a, b in ordered[:per_language]:
            pairs.append({"id": f"{a['id']}|{b['id']}", "a": conv(a), "b": conv(b), "language": lang})
    return pairs


def part_pairwise(
    source: Path,
    per_language: int,
    languages: Sequence[str] = LANGS,
    choices: Sequence[str] = ("A", "B", "Tie"),
    judge: str = f"{HF},batch_size=4",
) -> None:
    from harness.cache import RequestCache, default_cache_path
    from harness.robustness.pairwise import run_pairwise

    pairs = pairwise_pairs(source, per_language, languages)
    t0 = time.perf_counter()
    rep = run_pairwise(judge, pairs, RequestCache(default_cache_path()), choices=choices).to_dict()
    seconds = round(time.perf_counter() - t0, 1)
    answers = rep["answers"]
    before = load().get("pairwise") or {}
    if all(a["cached"] for a in answers) and (before.get("judge"), before.get("n_pairs")) == (
        judge,
        len(pairs),
    ):
        seconds = before.get(
            "seconds", seconds
        )  # a rerun from the cache: the time of the run that scored them
    save(
        "pairwise",
        {
            "judge": judge,
            "choices": list(choices),
            "n_pairs": len(pairs),
            "pairs_per_language": per_language,
            "languages": list(languages),
            "results": rep["results"],
            "answers": dict(Counter(str(a["choice"]) for a in answers)),
            "greedy_first_tokens": dict(Counter(repr(a["raw"]) for a in answers).most_common(6)),
            "label_probs": label_probs([a["choice_logprobs"] for a in answers]),
            "seconds": seconds,
        },
    )


def label_probs(logprobs: Sequence[dict[str, float | None]]) -> dict[str, Any]:
    """How sure the answers are: each label's probability renormalised over the labels (a label
    without a log-prob counts 0), its mean and range over the answers."""
    import math

    probs = []
    for lp in logprobs:
        ex = {c: math.exp(v) if v is not None else 0.0 for c, v in lp.items()}
        total = sum(ex.values())
        if total > 0:
            probs.append({c: v / total for c, v in ex.items()})
    labels = list(probs[0]) if probs else []
    return {
        c: {
            "mean": sum(p[c] for p in probs) / len(probs),
            "min": min(p[c] for p in probs),
            "max": max(p[c] for p in probs),
        }
        for c in labels
    }
