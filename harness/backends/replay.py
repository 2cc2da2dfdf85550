"""``replay:<file>`` — deterministic scripted responses for pipeline tests.

The file is JSON Lines (or a JSON / YAML list) of rules, tried in order; the first rule whose
``match`` regex is found in the request's rendered conversation (``"role: content"`` lines) wins::

    {"match": "Dialogue Response:\\nhello", "response": {"text": "Yes", "p_yes": 0.9}}
    {"match": "coherent", "responses": [{"text": "No", "p_yes": 0.2}, {"text": "Yes", "p_yes": 0.7}]}
    {"default": {"hashed_p_yes": true}}

A response object takes ``text``, ``choice_logprobs`` (label → log-prob), ``token_logprobs``
(list of {token, logprob, top}), ``usage``, ``finish_reason``, and two shorthands: ``p_yes``
(sets log-probs of "Yes"/"No") and ``hashed_p_yes`` (a P(Yes) derived from a hash of the prompt:
arbitrary but deterministic scores), and ``unique`` (appends ``[<hash of the request>]`` to
``text``: a distinct, deterministic reply per request, as sampled models give). ``responses`` lists are served in call order, cycling; with
``"select": "seed"`` the request's decoding seed picks one instead (``responses[seed % len]``), so
a scripted answer depends only on the request (resumed runs and retries with seed = base +
attempt replay exactly).

A continuation request (``Request.continuation``, GPTScore scoring) gets no text and
``finish_reason="continuation"``. Its response object may give ``continuation_logprob`` (the
sum) and/or ``token_logprobs`` (whose ``token`` strings should concatenate to the continuation):
with only ``continuation_logprob`` the whole continuation is one token carrying it; with only
``token_logprobs`` their sum is the total; with neither (e.g. a ``hashed_p_yes`` default) the
continuation is split at whitespace (``"Answer: Yes."`` -> ``"Answer:"``, ``" Yes."``) and each
piece gets a log-prob derived from a hash of the rendered prompt, the continuation and the
piece's index — arbitrary but deterministic, so a caller can still find "Yes" by character
offsets. ``Request.json_schema`` is ignored.
Backend option ``delay=<seconds>`` sleeps per request (to simulate a slow model in tests). A
response object ``{"error": "message"}`` is a scripted failure: the request raises
:class:`~harness.types.BackendError` (the requests before it in the batch are reported as usual),
as a server that keeps refusing a request does once its retries are spent.
A request that matches no rule and has no default is an error naming the request.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import yaml

from harness.backends.base import Backend, Capabilities
from harness.jsontypes import JSON, JSONObject
from harness.options import check_option
from harness.types import BackendError, Request, Response, TokenLogprob, TokenLogprobDict, Usage


class ReplayResponse(TypedDict, total=False):
    """A scripted response object of a replay file (see the module docstring)."""

    text: str
    choice_logprobs: dict[str, float | None]
    token_logprobs: list[TokenLogprobDict]
    usage: dict[str, int]
    finish_reason: str
    p_yes: float
    hashed_p_yes: bool
    unique: bool
    continuation_logprob: float
    error: str


@dataclass(frozen=True)
class ReplayRule:
    """A rule of a replay file: its ``match`` regex and the response(s) it serves."""

    pattern: re.Pattern[str]
    #: ``response``: served every time (then ``responses`` is empty)
    response: ReplayResponse | None
    responses: list[ReplayResponse]
    select: str  # "order" | "seed"


def _render(req: Request) -> str:
    return "\n".join(f"{m.role}: {m.content}" for m in req.messages)


class ReplayBackend(Backend):
    kind = "replay"
    capabilities = Capabilities(choice_logprobs=True, token_logprobs=True, continuation_logprobs=True)

    def __init__(
        self, model: str, *, revision: str | None = None, delay: float = 0.0, **options: JSON
    ) -> None:
        super().__init__(model, revision=revision, **options)
        self.path = Path(model)
        try:
            found = self.path.is_file()
        except (OSError, ValueError):  # a name the OS refuses (too long, NUL byte)
            found = False
        if not found:
            raise FileNotFoundError(f"replay file not found: {str(self.path)[:200]}")
        self.delay = check_option("replay backend", "delay", delay, float, lo=0, hi=3600)
        self._text = self.path.read_text(encoding="utf-8")
        self.rules, self.default = self._load(self._text)
        self._counters = [0] * len(self.rules)
        self._lock = threading.Lock()

    def _load(self, text: str) -> tuple[list[ReplayRule], ReplayResponse | None]:
        entries: list[JSON]
        stripped = text.lstrip()
        if self.path.suffix in (".yaml", ".yml"):
            entries = yaml.safe_load(text) or []
        elif stripped.startswith("["):
            entries = json.loads(text)
        else:
            entries = []
            for lineno, line in enumerate(text.splitlines(), 1):
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{self.path}:{lineno}: invalid JSON in replay file: {e}") from e
        rules: list[ReplayRule] = []
        default: ReplayResponse | None = None
        for n, entry in enumerate(entries, 1):
            if not isinstance(entry, dict):
                raise ValueError(f"{self.path}: rule {n} must be an object, got {type(entry).__name__}")
            if "default" in entry:
                default = entry["default"]
                continue
            if "match" not in entry or not ("response" in entry or "responses" in entry):
                raise ValueError(f"{self.path}: rule {n} needs 'match' and 'response' or 'responses'")
            if entry.get("select", "order") not in ("order", "seed"):
                raise ValueError(f"{self.path}: rule {n}: 'select' is 'order' (default) or 'seed'")
            try:
                pattern = re.compile(entry["match"], re.S)
            except re.error as err:
                raise ValueError(
                    f"{self.path}: rule {n} has an invalid regex {entry['match']!r}: {err}"
                ) from err
            single = entry.get("response") if "response" in entry else None
            rules.append(
                ReplayRule(pattern, single, entry.get("responses") or [], entry.get("select", "order"))
            )
        return rules, default

    def _identity_extras(self) -> JSONObject:
        return {"file_sha256": hashlib.sha256(self._text.encode()).hexdigest()[:16]}

    def _pick(self, req: Request) -> ReplayResponse:
        conv = _render(req)
        for i, rule in enumerate(self.rules):
            if rule.pattern.search(conv):
                if rule.response is not None:
                    return rule.response
                seq = rule.responses
                if rule.select == "seed":
                    return seq[(req.config.seed or 0) % len(seq)]
                with self._lock:
                    k = self._counters[i]
                    self._counters[i] += 1
                return seq[k % len(seq)]
        if self.default is not None:
            return self.default
        raise LookupError(f"replay file {self.path} has no rule matching request: {conv[:300]!r}")

    def _generate(self, requests: list[Request], emit: Callable[[int, Response], None]) -> list[Response]:
        out = []
        for i, req in enumerate(requests):
            if self.delay:
                time.sleep(self.delay)
            spec = self._pick(req)
            if "error" in spec:
                raise BackendError(f"replay {self.path.name}: scripted failure: {spec['error']}")
            resp = self._build(req, spec)
            emit(i, resp)
            out.append(resp)
        return out

    @staticmethod
    def _build(req: Request, spec: ReplayResponse) -> Response:
        if req.continuation is not None:
            return _continuation(req, spec)
        text = spec.get("text", "")
        if spec.get("unique"):  # a distinct (deterministic) reply per request, e.g. for load tests
            text = f"{text} [{hashlib.sha256(_render(req).encode()).hexdigest()[:10]}]".strip()
        choice_lp = spec.get("choice_logprobs")
        p = spec.get("p_yes")
        if spec.get("hashed_p_yes"):
            h = hashlib.sha256(_render(req).encode()).digest()
            p = 0.02 + 0.96 * int.from_bytes(h[:8], "big") / 2**64
        if p is not None:
            p = float(p)
            choice_lp = {
                "Yes": math.log(p) if p > 0 else -math.inf,
                "No": math.log1p(-p) if p < 1 else -math.inf,
            }
            if not text:
                text = "Yes" if p >= 0.5 else "No"
        if req.choices is not None and choice_lp is not None:
            choice_lp = {c: choice_lp.get(c) for c in req.choices}
        elif req.choices is not None:
            choice_lp = {c: None for c in req.choices}
        tl = spec.get("token_logprobs")
        token_lp = [TokenLogprob.from_dict(t) for t in tl] if tl is not None else None
        u = spec.get("usage") or {}
        usage = Usage(
            int(u.get("prompt_tokens", sum(len(m.content.split()) for m in req.messages))),
            int(u.get("completion_tokens", len(text.split()))),
        )
        return Response(
            text=text,
            choice_logprobs=choice_lp if req.choices is not None else None,
            token_logprobs=token_lp,
            usage=usage,
            finish_reason=spec.get("finish_reason", "stop"),
            raw={"replay": True},
        )


def _hashed_logprob(*parts: str) -> float:
    h = hashlib.sha256("\x00".join(parts).encode()).digest()
    return math.log(0.02 + 0.96 * int.from_bytes(h[:8], "big") / 2**64)


def _continuation(req: Request, spec: ReplayResponse) -> Response:
    cont = req.continuation or ""
    total = spec.get("continuation_logprob")
    tl = spec.get("token_logprobs")
    if tl is not None:
        tokens = [TokenLogprob.from_dict(t) for t in tl]
    elif total is not None:
        tokens = [TokenLogprob(token=cont, logprob=float(total))]
    else:
        conv = _render(req)
        pieces = re.findall(r"\s*\S+|\s+$", cont)
        tokens = [TokenLogprob(p, _hashed_logprob(conv, cont, str(k))) for k, p in enumerate(pieces)]
    if total is None:
        total = sum(t.logprob for t in tokens)
    u = spec.get("usage") or {}
    n_prompt = sum(len(m.content.split()) for m in req.messages) + len(cont.split())
    return Response(
        text="",
        token_logprobs=tokens,
        usage=Usage(int(u.get("prompt_tokens", n_prompt)), 0),
        finish_reason="continuation",
        raw={"replay": True},
        continuation_logprob=float(total),
    )
