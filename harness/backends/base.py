"""The one narrow backend interface and the backend registry.

A backend turns :class:`~harness.types.Request` objects (chat messages + generation config,
optionally label words to score) into :class:`~harness.types.Response` objects (text, token and
choice log-probs, usage, raw payload). Backends know nothing about tasks, caching or judging.
"""

from __future__ import annotations

import importlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import ClassVar, TypedDict

from harness.jsontypes import JSON, JSONObject
from harness.spec import BACKEND_KINDS, BackendKind, JudgeSpec, register_backend_kind
from harness.types import LogprobsUnavailableError, Request, Response


@dataclass(frozen=True)
class Capabilities:
    # Can return Response.choice_logprobs for Request.choices (exact or from top-k log-probs).
    choice_logprobs: bool = False
    # Can return per-token log-probs (with top alternatives) of generated text.
    token_logprobs: bool = False
    # Can constrain generation to Request.json_schema (guided / structured decoding).
    guided_json: bool = False
    # Can score Request.continuation: log-probs of given text after the prompt (GPTScore).
    continuation_logprobs: bool = False


class BackendStatsRecord(TypedDict, total=False):
    """Work sent to the model(s): :meth:`BackendStats.to_dict`'s counts; a composite judge
    (:meth:`harness.judges.base.Judge.backend_stats`) adds its parts' breakdown to their sums."""

    requests: int
    batches: int
    retries: int
    load_seconds: float
    #: the learned judge's LLM feature backend
    llm: BackendStatsRecord
    #: the members of a panel / ``mean:`` ensemble, in order
    members: list[BackendStatsRecord]
    #: the judges of a ``bylang:`` router, by route
    routes: dict[str, BackendStatsRecord]


@dataclass
class BackendStats:
    """Work actually sent to the model (cache hits never reach a backend)."""

    requests: int = 0
    batches: int = 0
    retries: int = 0
    # Seconds spent loading weights lazily (on first use); the runner books them as judge loading.
    load_seconds: float = 0.0

    def to_dict(self) -> BackendStatsRecord:
        return {
            "requests": self.requests,
            "batches": self.batches,
            "retries": self.retries,
            "load_seconds": round(self.load_seconds, 3),
        }


class Backend(ABC):
    kind: ClassVar[str] = "base"
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init__(self, model: str, *, revision: str | None = None, **options: JSON) -> None:
        self.model = model
        self.revision = revision
        self.options = dict(options)
        self.stats = BackendStats()
        self._stats_lock = threading.Lock()

    # -- public API ---------------------------------------------------------------------------
    def generate(
        self, requests: Sequence[Request], on_result: Callable[[int, Response], None] | None = None
    ) -> list[Response]:
        """Run a batch of requests; one Response per Request, in order.

        ``on_result(i, response)`` is called once per request as soon as its response exists
        (streaming backends call it as each request completes, so a write-through cache keeps
        every finished call even if the process dies mid-batch).
        """
        requests = list(requests)
        if not requests:
            return []
        for r in requests:
            if r.choices is not None and not self.capabilities.choice_logprobs:
                raise LogprobsUnavailableError(
                    f"backend {self.kind!r} ({self.model}) cannot return log-probs of label words; "
                    "use a backend with log-prob support (hf, vllm, or an OpenAI-compatible server that returns logprobs)"
                )
            if r.continuation is not None and not self.capabilities.continuation_logprobs:
                raise LogprobsUnavailableError(
                    f"backend {self.kind!r} ({self.model}) cannot score a continuation's log-probs (prompt "
                    "log-probs / echo, which chat-completions APIs do not return); GPTScore-style scoring "
                    "needs the hf or vllm backend"
                )
            if r.config.logprobs and not self.capabilities.token_logprobs:
                raise LogprobsUnavailableError(
                    f"backend {self.kind!r} ({self.model}) cannot return token log-probs"
                )
        with self._stats_lock:
            self.stats.requests += len(requests)
            self.stats.batches += 1
        reported: set[int] = set()

        def emit(i: int, resp: Response) -> None:
            if i in reported:
                return
            reported.add(i)
            if on_result is not None:
                on_result(i, resp)

        out = self._generate(requests, emit)
        if len(out) != len(requests):
            raise RuntimeError(
                f"backend {self.kind} returned {len(out)} responses for {len(requests)} requests"
            )
        for i, resp in enumerate(out):
            emit(i, resp)
        return out

    def identity(self) -> JSONObject:
        """What identifies the model for cache keys and provenance (kind, model id, revision, adapter...)."""
        return {
            "backend": self.kind,
            "model": self.model,
            "revision": self.revision,
            **self._identity_extras(),
        }

    def close(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Release model memory / connections. Safe to call twice."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- to implement -------------------------------------------------------------------------
    @abstractmethod
    def _generate(self, requests: list[Request], emit: Callable[[int, Response], None]) -> list[Response]:
        """Return one Response per request, in order. May call ``emit(i, response)`` early for
        requests that finish before the whole batch (optional; the base class emits the rest)."""

    def _identity_extras(self) -> JSONObject:
        return {}


def register_backend(kind: str, path: str, example: str = "", notes: str = "") -> BackendKind:
    """Register a backend class by import path (``"package.module:Class"``) under ``kind``; the LLM
    judge kind ``kind:`` comes with it. Plug-ins use the entry-point group
    ``dialeval_harness.backends`` instead (naming a :class:`~harness.spec.BackendKind`)."""
    return register_backend_kind(BackendKind(kind, path, example or f"{kind}:MODEL", notes))


def backend_class(kind: str) -> type[Backend]:
    """The :class:`Backend` subclass registered as ``kind`` (imported on first use, so optional
    extras such as vllm stay optional)."""
    if kind not in BACKEND_KINDS:
        raise ValueError(f"no backend registered for kind {kind!r}; known: {sorted(BACKEND_KINDS.names())}")
    mod_name, _, cls_name = BACKEND_KINDS.get(kind).backend.partition(":")
    cls = getattr(importlib.import_module(mod_name), cls_name)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(
            f"backend kind {kind!r} names {BACKEND_KINDS.get(kind).backend}, which is not a Backend subclass"
        )
    return cls


#: Spec options that size an executor's workers (``num_gpus=1``), never passed to a backend.
EXECUTOR_OPTIONS = ("num_gpus", "num_cpus")

# Set by an executor (harness.executors) while it is active: judges and pipelines that call
# create_backend then get the executor's backend (e.g. a pool of Ray workers) instead of a local one.
_BACKEND_FACTORY: ContextVar[Callable[[JudgeSpec], Backend] | None] = ContextVar(
    "backend_factory", default=None
)


@contextmanager
def backend_factory(factory: Callable[[JudgeSpec], Backend]) -> Iterator[None]:
    """Make :func:`create_backend` call ``factory(spec)`` inside the ``with`` block (this thread)."""
    token = _BACKEND_FACTORY.set(factory)
    try:
        yield
    finally:
        _BACKEND_FACTORY.reset(token)


def create_backend(spec: JudgeSpec) -> Backend:
    """The backend a spec names: the active executor's (see :func:`backend_factory`), else a local one."""
    factory = _BACKEND_FACTORY.get()
    if factory is not None:
        return factory(spec)
    return create_local_backend(spec)


def create_local_backend(spec: JudgeSpec) -> Backend:
    """A backend instance in this process (executor sizing options such as ``num_gpus`` dropped)."""
    cls = backend_class(spec.kind)
    options = {k: v for k, v in spec.options.items() if k not in EXECUTOR_OPTIONS}
    return cls(spec.target, revision=spec.revision, **options)


def registered_backends() -> list[str]:
    return sorted(BACKEND_KINDS.names())
