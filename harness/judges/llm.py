"""LLM judge: renders a task's prompt template, calls a backend through the cache, and scores the
response with the task's scoring method (``task.scorer``, :mod:`harness.scorers`): P(Yes) or
expected score from label log-probs, a verdict written in free text (yes/no, Likert, a score on any
scale), the log-prob of an echoed continuation (GPTScore), a JSON verdict of issue labels + overall
score (MEDAL), or any scorer a plug-in registers. The scorer says what to request and how to read
the response; this judge only runs the requests.

Spec option ``reasoning=true`` marks a reasoning judge: unless ``max_tokens`` is given, it gets the
task's reasoning budget (MEDAL §5.3.1: 32,768 tokens instead of 8,192)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.backends.base import BackendStatsRecord, create_backend
from harness.cache import CachedBackend, RequestCache
from harness.jsontypes import JSONObject
from harness.judges.base import Item, Judge, Verdict
from harness.options import check_option
from harness.spec import JudgeSpec
from harness.tasks import TaskSpec, load_hook
from harness.types import GenerationConfig, Request, Response

# spec options read by the judge (or a task's procedure, e.g. CPDScore's n_calls), not passed to the backend
JUDGE_OPTIONS = ("reasoning", "n_calls")


class LLMJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        self.reasoning = check_option(
            f"{spec.kind} judge", "reasoning", spec.options.get("reasoning", False), bool
        )
        backend_spec = dataclasses.replace(
            spec, options={k: v for k, v in spec.options.items() if k not in JUDGE_OPTIONS}
        )
        self.backend = create_backend(backend_spec)
        self.cached = CachedBackend(self.backend, cache)

    def identity(self) -> JSONObject:
        return self.backend.identity()

    def generation_config(self, task: TaskSpec) -> GenerationConfig:
        """The task's default decoding (temperature 0) with the spec's key=value overrides; a
        sampling judge without its own seed gets the run's seed (greedy requests keep seed=None so
        their cache entries do not depend on it)."""
        base = task.generation
        if self.reasoning and task.reasoning_max_tokens and "max_tokens" not in self.spec.decoding:
            base = base.replace(max_tokens=task.reasoning_max_tokens)
        cfg = self.spec.generation_config(base)
        if cfg.temperature > 0 and cfg.seed is None and self.seed is not None:
            cfg = cfg.replace(seed=self.seed)
        return task.scorer.generation(cfg)  # e.g. token log-probs for the expected score

    def decoding(self, task: TaskSpec) -> JSONObject:
        return self.generation_config(task).to_dict()

    def score_range(self, task: TaskSpec) -> tuple[float, float] | None:
        """The scale of ``task``'s scorer (None for GPTScore, a log-prob)."""
        return task.scorer.score_range()

    def method(self, task: TaskSpec) -> str:
        if task.procedure:
            return f"{task.scoring} via the task's protocol {task.procedure}"
        return task.scoring

    def score(self, task: TaskSpec, items: Sequence[Item]) -> list[Verdict]:
        if task.procedure:  # a multi-call / multi-step protocol (e.g. CPDScore) through this judge's backend
            verdicts = load_hook(task.procedure)(self, task, items)
            if len(verdicts) != len(items):
                raise RuntimeError(
                    f"{task.procedure} returned {len(verdicts)} verdicts for {len(items)} items"
                )
            return verdicts
        cfg = self.generation_config(task)
        out: list[Verdict | None] = []
        requests = []
        for item in items:
            missing = task.missing_inputs(item)
            if missing:  # never sent to the model: scored None and counted, not dropped
                out.append(Verdict(None, "invalid_item", "", "", detail=f"empty {', '.join(missing)}"))
            else:
                out.append(None)
                requests.append(task.build_request(item, cfg))
        pending = iter(zip(requests, self.cached.generate(requests), strict=True))
        for i, slot in enumerate(out):
            if slot is not None:
                continue
            req, resp = next(pending)
            if not resp.cached:
                self.usage = self.usage + resp.usage
            out[i] = self._verdict(task, items[i], req, resp)
        return [v for v in out if v is not None]

    def _verdict(self, task: TaskSpec, item: Item, req: Request, resp: Response) -> Verdict:
        scored = task.scorer.score(resp, item)
        s = scored.score
        return Verdict(
            score=s.value,
            status=s.status,
            detail=s.detail,
            extra=scored.extra,
            raw=resp.text,
            prompt_hash=req.prompt_hash(),
            usage=resp.usage,
            cached=resp.cached,
        )

    def backend_stats(self) -> BackendStatsRecord:
        return self.backend.stats.to_dict()

    def close(self) -> None:
        self.backend.close()
