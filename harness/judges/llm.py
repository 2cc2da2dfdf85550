"""LLM judge: renders a task's prompt template, calls a backend through the cache, and scores the
response with the task's scoring method (P(Yes) or expected score over digit labels)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.backends.base import create_backend
from harness.cache import CachedBackend, RequestCache
from harness.judges.base import Judge, Verdict
from harness.scoring import Score, expected_score, expected_score_from_tokens, p_yes
from harness.spec import JudgeSpec
from harness.tasks import TaskSpec
from harness.types import GenerationConfig, Response
from harness.verdicts import parse_likert, parse_yes_no


class LLMJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        self.backend = create_backend(spec)
        self.cached = CachedBackend(self.backend, cache)

    def identity(self) -> dict[str, Any]:
        return self.backend.identity()

    def generation_config(self, task: TaskSpec) -> GenerationConfig:
        """The task's default decoding (temperature 0) with the spec's key=value overrides; a
        sampling judge without its own seed gets the run's seed (greedy requests keep seed=None so
        their cache entries do not depend on it)."""
        cfg = self.spec.generation_config(task.generation)
        if cfg.temperature > 0 and cfg.seed is None and self.seed is not None:
            cfg = cfg.replace(seed=self.seed)
        if task.scoring == "expected_score" and not cfg.logprobs:
            cfg = cfg.replace(logprobs=True, top_logprobs=max(cfg.top_logprobs, 20))
        return cfg

    def decoding(self, task: TaskSpec) -> dict[str, Any]:
        return self.generation_config(task).to_dict()

    def score(self, task: TaskSpec, items: Sequence[Mapping[str, Any]]) -> list[Verdict]:
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
            s = self._score(task, resp)
            if not resp.cached:
                self.usage = self.usage + resp.usage
            out[i] = Verdict(
                score=s.value,
                status=s.status,
                raw=resp.text,
                prompt_hash=req.prompt_hash(),
                detail=s.detail,
                usage=resp.usage,
                cached=resp.cached,
                extra={"choice_logprobs": resp.choice_logprobs},
            )
        return [v for v in out if v is not None]

    @staticmethod
    def _score(task: TaskSpec, resp: Response) -> Score:
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
        raise ValueError(f"task {task.name!r}: unknown scoring method {task.scoring!r}")

    def backend_stats(self) -> dict[str, float]:
        return self.backend.stats.to_dict()

    def close(self) -> None:
        self.backend.close()
