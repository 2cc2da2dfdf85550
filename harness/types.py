"""Core value types shared by backends, judges, the cache and the runner.

The backend interface is deliberately narrow: a :class:`Request` (chat messages + a
:class:`GenerationConfig`, optionally a set of label words to score) goes in, a
:class:`Response` (text, log-probs, usage, raw payload) comes out. Everything here is
plain data and JSON-serialisable so it can be cached and replayed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from harness.jsontypes import JSONObject
from harness.options import OptionKind, check_option

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown chat role {self.role!r}; expected one of {ROLES}")
        if not isinstance(self.content, str):
            raise TypeError(f"chat message content must be str, got {type(self.content).__name__}")

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}

    @classmethod
    def from_dict(cls, d: Mapping[str, str]) -> ChatMessage:
        return cls(role=d["role"], content=d["content"])


# Upper bounds of the decoding options (a typo such as max_tokens=1e30 is an error, not a request):
#: no model generates more than a million tokens in one reply
MAX_NEW_TOKENS = 1_000_000
#: vocabularies are < 1M tokens; top_k beyond that is the same as no top_k
MAX_TOP_K = 1_000_000
#: alternatives per position; OpenAI allows 20, vLLM's --max-logprobs default is 20
MAX_TOP_LOGPROBS = 1_000
#: seconds per request: a day
MAX_TIMEOUT_S = 86_400.0

# Fields of GenerationConfig that do not change what a model returns; excluded from cache keys.
NON_SEMANTIC_FIELDS = frozenset({"timeout"})


@dataclass(frozen=True)
class GenerationConfig:
    """Decoding parameters. Judges default to greedy decoding (temperature 0)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    # Return per-token log-probs of the generated text, with this many alternatives per position.
    logprobs: bool = False
    top_logprobs: int = 0
    # Seconds per request for remote backends (not part of the cache key).
    timeout: float | None = None

    def __post_init__(self) -> None:
        def check(
            name: str,
            kind: type[OptionKind],
            lo: float | None = None,
            hi: float | None = None,
            lo_open: bool = False,
            allow_none: bool = False,
        ) -> None:
            value = getattr(self, name)
            checked: object = (
                check_option("decoding", name, value, kind, lo=lo, hi=hi, lo_open=lo_open, allow_none=True)
                if allow_none
                else check_option("decoding", name, value, kind, lo=lo, hi=hi, lo_open=lo_open)
            )
            if (
                checked is not None
                and checked is not value
                and (kind in (int, bool) or isinstance(value, str))
            ):
                # 256.0 -> 256, "true" -> True, "0.7" -> 0.7; numeric floats stay as given (cache keys)
                object.__setattr__(self, name, checked)

        check("temperature", float, lo=0)
        check("top_p", float, lo=0, lo_open=True, hi=1)
        check(
            "top_k", int, lo=-1, hi=MAX_TOP_K, allow_none=True
        )  # 0 or -1 = no top-k (HF / vLLM conventions)
        check("max_tokens", int, lo=1, hi=MAX_NEW_TOKENS)
        check("seed", int, lo=0, hi=2**63 - 1, allow_none=True)
        check("presence_penalty", float, lo=-2, hi=2)
        check("frequency_penalty", float, lo=-2, hi=2)
        check("logprobs", bool)
        check("top_logprobs", int, lo=0, hi=MAX_TOP_LOGPROBS)
        check("timeout", float, lo=0, lo_open=True, hi=MAX_TIMEOUT_S, allow_none=True)
        if isinstance(self.stop, list):  # tolerate lists from configs
            object.__setattr__(self, "stop", tuple(self.stop))
        if not isinstance(self.stop, tuple) or not all(isinstance(x, str) for x in self.stop):
            raise ValueError(f"decoding: option stop={self.stop!r} must be strings separated by '|'")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def to_dict(self) -> JSONObject:
        d: JSONObject = dataclasses.asdict(self)
        d["stop"] = list(self.stop)
        return d

    def semantic_dict(self) -> JSONObject:
        return {k: v for k, v in self.to_dict().items() if k not in NON_SEMANTIC_FIELDS}

    # Overrides and dicts come from spec strings and config files: __post_init__ checks every value.
    def replace(self, **overrides: Any) -> GenerationConfig:
        unknown = set(overrides) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown generation parameter(s): {sorted(unknown)}")
        return dataclasses.replace(self, **overrides)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GenerationConfig:
        d = dict(d)
        if "stop" in d and d["stop"] is not None:
            d["stop"] = tuple(d["stop"])
        return cls(**d)


@dataclass(frozen=True)
class Request:
    """One call to a backend.

    ``choices``: when set, the backend must return ``Response.choice_logprobs`` — the
    log-probability of each label word as the *start of the assistant reply* (e.g. "Yes"/"No"
    for P(Yes) scoring, or "1".."5" for expected-score scoring). Backends that cannot give
    log-probs raise :class:`LogprobsUnavailableError`.

    ``json_schema``: a JSON schema the reply must follow. Backends with guided decoding
    (``Capabilities.guided_json``: vLLM, OpenAI-compatible servers) constrain generation to it;
    the others generate freely and the judge's validating parser checks the reply.

    ``continuation``: scoring mode (GPTScore). Nothing is generated: the backend returns the
    log-probs of the continuation's tokens following the rendered prompt (the prompt's
    "echo" log-probs) in ``Response.token_logprobs`` and their sum in
    ``Response.continuation_logprob``. Only backends with ``Capabilities.continuation_logprobs``
    (hf, vllm) can; the others raise :class:`LogprobsUnavailableError`.
    """

    messages: tuple[ChatMessage, ...]
    config: GenerationConfig = field(default_factory=GenerationConfig)
    choices: tuple[str, ...] | None = None
    json_schema: JSONObject | None = field(default=None, hash=False, compare=False)
    continuation: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.messages, list):
            object.__setattr__(self, "messages", tuple(self.messages))
        if not self.messages:
            raise ValueError("a request needs at least one chat message")
        if isinstance(self.choices, list):
            object.__setattr__(self, "choices", tuple(self.choices))
        if self.choices is not None and len(self.choices) < 1:
            raise ValueError("choices, when given, must be non-empty")
        if self.continuation is not None and self.choices is not None:
            raise ValueError("a request scores either label choices or a continuation, not both")
        if self.continuation is not None and not self.continuation:
            raise ValueError("continuation, when given, must be a non-empty string")

    def payload(self) -> JSONObject:
        """The semantic content of the request (what the cache key is built from)."""
        out: JSONObject = {
            "messages": [{**m.to_dict()} for m in self.messages],
            "config": self.config.semantic_dict(),
            "choices": list(self.choices) if self.choices is not None else None,
        }
        # Only when set, so the cache keys of plain requests stay what they were.
        if self.json_schema is not None:
            out["json_schema"] = self.json_schema
        if self.continuation is not None:
            out["continuation"] = self.continuation
        return out

    def prompt_hash(self) -> str:
        return sha256_json({"messages": [m.to_dict() for m in self.messages]})[:16]


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


class TokenLogprobDict(TypedDict):
    """:meth:`TokenLogprob.to_dict` (a cached or replayed response's token log-probs)."""

    token: str
    logprob: float
    top: NotRequired[dict[str, float]]


class UsageDict(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int


class ResponseDict(TypedDict, total=False):
    """:meth:`Response.to_dict`: what the cache stores and a replay file holds."""

    text: str
    choice_logprobs: dict[str, float | None] | None
    token_logprobs: list[TokenLogprobDict] | None
    usage: UsageDict
    finish_reason: str | None
    raw: JSONObject | None
    continuation_logprob: float | None


@dataclass
class TokenLogprob:
    """Log-prob of one generated token plus the top alternatives at that position."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> TokenLogprobDict:
        return {"token": self.token, "logprob": self.logprob, "top": dict(self.top)}

    @classmethod
    def from_dict(cls, d: TokenLogprobDict) -> TokenLogprob:
        return cls(
            token=d["token"],
            logprob=float(d["logprob"]),
            top={k: float(v) for k, v in d.get("top", {}).items()},
        )


@dataclass
class Response:
    text: str
    choice_logprobs: dict[str, float | None] | None = None
    token_logprobs: list[TokenLogprob] | None = None
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    raw: JSONObject | None = None
    # Scoring mode (Request.continuation): sum of the continuation tokens' log-probs.
    continuation_logprob: float | None = None
    # Set by the cache layer, never by backends.
    cached: bool = False

    def to_dict(self) -> ResponseDict:
        return {
            "text": self.text,
            "choice_logprobs": self.choice_logprobs,
            "token_logprobs": [t.to_dict() for t in self.token_logprobs]
            if self.token_logprobs is not None
            else None,
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
            },
            "finish_reason": self.finish_reason,
            "raw": self.raw,
            "continuation_logprob": self.continuation_logprob,
        }

    @classmethod
    def from_dict(cls, d: ResponseDict, *, cached: bool = False) -> Response:
        tl = d.get("token_logprobs")
        u = d.get("usage") or {}
        return cls(
            text=d.get("text", ""),
            choice_logprobs=d.get("choice_logprobs"),
            token_logprobs=[TokenLogprob.from_dict(t) for t in tl] if tl is not None else None,
            usage=Usage(int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))),
            finish_reason=d.get("finish_reason"),
            raw=d.get("raw"),
            continuation_logprob=d.get("continuation_logprob"),
            cached=cached,
        )


class BackendError(RuntimeError):
    """A backend failed in a way retries did not fix."""


class BackendConfigError(BackendError):
    """The server refused the request because of the backend's configuration (HTTP 401/403: the
    credentials; 404: the model or URL): rerunning the same command cannot help, fixing it can."""


class LogprobsUnavailableError(BackendError):
    """The backend (or the server behind it) cannot return the log-probs a scoring method needs."""


def canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_json_default)


def sha256_json(obj: object) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def _json_default(o: object) -> object:
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
