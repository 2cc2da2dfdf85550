"""LLM judge: renders a task's prompt template, calls a backend through the cache, and scores the
response with the task's scoring method: P(Yes) or expected score from label log-probs, a verdict
written in free text (yes/no, Likert, a score on any scale), the log-prob of an echoed
continuation (GPTScore), or a JSON verdict of issue labels + overall score (MEDAL).

Spec option ``reasoning=true`` marks a reasoning judge: unless ``max_tokens`` is given, it gets the
task's reasoning budget (MEDAL §5.3.1: 32,768 tokens instead of 8,192)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from harness.backends.base import create_backend
from harness.cache import CachedBackend, RequestCache
from harness.judges.base import Judge, Verdict
from harness.options import check_option
from harness.spec import JudgeSpec
from harness.tasks import TaskSpec, load_hook
from harness.types import GenerationConfig, Response
from harness.verdicts import parse_likert, parse_scale_score, parse_yes_no
from harness.verdicts.issues_json import parse_issue_verdict
from harness.verdicts.logprobs import (
    Score,
    continuation_word_logprob,
    expected_score,
    expected_score_from_tokens,
    p_yes,
)

# spec options read by the judge (or a task's procedure, e.g. CPDScore's n_calls), not passed to the backend
JUDGE_OPTIONS = ("reasoning", "n_calls")


class LLMJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        self.reasoning = check_option(f"{spec.kind} judge", "reasoning", spec.options.get("reasoning", False), bool)
        backend_spec = dataclasses.replace(
            spec, options={k: v for k, v in spec.options.items() if k not in JUDGE_OPTIONS}
        )
        self.backend = create_backend(backend_spec)
        self.cached = CachedBackend(self.backend, cache)

    def identity(self) -> dict[str, Any]:
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
        if task.scoring == "expected_score" and not cfg.logprobs:
            cfg = cfg.replace(logprobs=True, top_logprobs=max(cfg.top_logprobs, 20))
        return cfg

    def decoding(self, task: TaskSpec) -> dict[str, Any]:
        return self.generation_config(task).to_dict()

    def score_range(self, task: TaskSpec) -> tuple[float, float] | None:
        """The scale :meth:`_score` puts ``task``'s verdicts on; None for GPTScore (a log-prob)."""
        if task.scoring in ("p_yes", "parse_yes_no"):
            return (0.0, 1.0)
        if task.scoring in ("expected_score", "parse_likert"):
            return (1.0, 5.0)  # digit labels 1-5 (expected_score: choices are never sent, see _score)
        if task.scoring == "parse_score":
            lo, hi = task.score_range or (0, 100)
            return (float(lo), float(hi))
        if task.scoring == "issues_json":
            lo, hi = task.score_range or (1, 5)
            return (float(lo), float(hi))
        return None

    def method(self, task: TaskSpec) -> str:
        if task.procedure:
            return f"{task.scoring} via the task's protocol {task.procedure}"
        return task.scoring

    def score(self, task: TaskSpec, items: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        if task.procedure:  # a multi-call / multi-step protocol (e.g. CPDScore) through this judge's backend
            verdicts = load_hook(task.procedure)(self, task, items)
            if len(verdicts) != len(items):
                raise RuntimeError(f"{task.procedure} returned {len(verdicts)} verdicts for {len(items)} items")
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

    def _verdict(self, task: TaskSpec, item: Mapping[str, Any], req, resp: Response) -> Verdict:
        common = dict(raw=resp.text, prompt_hash=req.prompt_hash(), usage=resp.usage, cached=resp.cached)
        if task.scoring == "issues_json":
            v = parse_issue_verdict(
                resp.text, task.judged_labels, task.overall_key, task.score_range or (1, 5)
            )
            return Verdict(
                score=v.overall,
                status=v.status,
                detail=v.detail,
                extra={
                    "labels": v.labels,
                    "comments": v.comments,
                    "label_errors": v.errors or None,
                    "finish_reason": resp.finish_reason,
                },
                **common,
            )
        s = self._score(task, resp, item.get("language"))
        extra: dict[str, Any] = {"choice_logprobs": resp.choice_logprobs}
        if task.scoring == "gptscore":
            extra["continuation_logprob"] = resp.continuation_logprob
        if resp.raw and resp.raw.get("system_role"):
            extra["system_role"] = resp.raw["system_role"]
        return Verdict(score=s.value, status=s.status, detail=s.detail, extra=extra, **common)

    @staticmethod
    def _score(task: TaskSpec, resp: Response, language: str | None = None) -> Score:
        if task.scoring == "p_yes":
            return p_yes(resp, *task.labels)
        if task.scoring == "expected_score":
            if resp.choice_logprobs:
                return expected_score(resp)
            return expected_score_from_tokens(resp.token_logprobs, [str(d) for d in range(1, 6)])
        if task.scoring == "parse_yes_no":
            return parse_yes_no(resp.text, *task.labels)
        if task.scoring == "parse_likert":
            return parse_likert(resp.text, 1, 5)
        if task.scoring == "parse_score":
            lo, hi = task.score_range or (0, 100)
            return parse_scale_score(resp.text, lo, hi, integer=task.score_integer, language=language)
        if task.scoring == "gptscore":
            return continuation_word_logprob(resp, task.continuation or "", task.continuation_target or "")
        raise ValueError(f"task {task.name!r}: unknown scoring method {task.scoring!r}")

    def backend_stats(self) -> dict[str, float]:
        return self.backend.stats.to_dict()

    def close(self) -> None:
        self.backend.close()
