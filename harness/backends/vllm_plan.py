"""How the vLLM backend maps requests onto engine sequences and outputs back onto responses —
pure functions over vLLM's output objects, testable without vLLM installed.

* :func:`sampling_kwargs` — a :class:`GenerationConfig` as ``SamplingParams`` keyword arguments;
* :func:`build_plan` — each request → its sequences (one per choice for exact choice scoring, or
  a single one-token sequence when every choice is one token; one prompt + continuation for
  GPTScore; one plain sequence otherwise);
* :func:`assemble_responses` — the engine's outputs → one :class:`Response` per request (summed
  choice log-probs, continuation log-probs, generated text and token log-probs).

Two ways to score choices (``Response.raw["choice_scoring"]`` says which one a response used):

* ``"prompt_logprobs"`` (exact, any label length): ``prompt + choice`` per choice with
  ``prompt_logprobs=0``; the log-probs of the choice tokens are read back and summed.
* ``"one_token"`` (when every choice is a single token): the prompt alone, ``max_tokens=1`` at
  temperature 0 with ``logprob_token_ids=<the label ids>`` — vLLM returns the log-probs of exactly
  those tokens at the first generated position, taken from the *raw* (unprocessed, full-vocabulary)
  distribution (engine ``logprobs_mode="raw_logprobs"``, vLLM's default), so they are the same
  numbers as the exact path, not renormalised over the labels. One sequence per request instead of
  one per choice plus one, no prompt log-probs (which bypass the prefix cache), and the greedy
  token that is the response's ``text`` comes from the same step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, SupportsFloat, TypedDict

from harness.backends import hf_scoring
from harness.jsontypes import JSON, JSONObject
from harness.types import BackendError, GenerationConfig, Request, Response, TokenLogprob, Usage


class SamplingKwargs(TypedDict, total=False):
    """Keyword arguments of ``vllm.SamplingParams`` the plans use."""

    n: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    presence_penalty: float
    frequency_penalty: float
    stop: list[str]
    seed: int
    #: top alternatives returned per generated position
    logprobs: int
    #: log-probs of the prompt tokens (0: just the actual token at each position)
    prompt_logprobs: int
    #: log-probs of these token ids at each generated position (the one-token path)
    logprob_token_ids: list[int]
    #: a JSON-schema constraint (newer vLLM: ``StructuredOutputsParams``)
    structured_outputs: object
    #: a JSON-schema constraint (older vLLM: ``GuidedDecodingParams``)
    guided_decoding: object


class CompletionOutput(Protocol):
    """What the plans read of a vLLM ``CompletionOutput`` (one sampled sequence)."""

    @property
    def text(self) -> str: ...

    @property
    def token_ids(self) -> Sequence[int]: ...

    @property
    def logprobs(self) -> Sequence[Mapping[int, object]] | None: ...

    @property
    def finish_reason(self) -> str | None: ...


class RequestOutput(Protocol):
    """What the plans read of a vLLM ``RequestOutput`` (one sequence of a plan)."""

    @property
    def prompt_logprobs(self) -> Sequence[Mapping[int, object] | None] | None: ...

    @property
    def outputs(self) -> Sequence[CompletionOutput]: ...


def sampling_kwargs(config: GenerationConfig) -> SamplingKwargs:
    """Map a :class:`GenerationConfig` to ``vllm.SamplingParams`` keyword arguments.

    Unset knobs (no ``top_k``, no stop strings, no seed, no log-probs) are left out so vLLM's own
    defaults apply; this keeps the mapping valid across vLLM versions (old ones want ``top_k=-1``
    for "off", new ones ``0``).
    """
    kw: SamplingKwargs = {
        "n": 1,
        "temperature": float(config.temperature),
        "top_p": float(config.top_p),
        "max_tokens": int(config.max_tokens),
        "presence_penalty": float(config.presence_penalty),
        "frequency_penalty": float(config.frequency_penalty),
    }
    if config.top_k is not None and config.top_k > 0:
        kw["top_k"] = int(config.top_k)
    if config.stop:
        kw["stop"] = list(config.stop)
    if config.seed is not None:
        kw["seed"] = int(config.seed)
    if config.logprobs:
        # vLLM returns the sampled token's log-prob plus this many top alternatives per position.
        kw["logprobs"] = int(config.top_logprobs)
    return kw


def choice_scoring_kwargs() -> SamplingKwargs:
    """SamplingParams kwargs for scoring one ``prompt + choice`` sequence (log-probs of the prompt
    tokens themselves, nothing sampled that matters)."""
    return {"n": 1, "temperature": 0.0, "max_tokens": 1, "prompt_logprobs": 0}


def one_token_kwargs(label_ids: Sequence[int]) -> SamplingKwargs:
    """SamplingParams kwargs of the one-token path: the greedy next token plus the raw log-probs of
    ``label_ids`` at that position (``SamplingParams.logprob_token_ids``)."""
    return {
        "n": 1,
        "temperature": 0.0,
        "max_tokens": 1,
        "logprob_token_ids": sorted({int(t) for t in label_ids}),
    }


def supports_label_logprobs(sampling_params_cls: Callable[..., object]) -> bool:
    """Whether the installed vLLM's ``SamplingParams`` takes ``logprob_token_ids`` (log-probs of given
    token ids at each generated position; vLLM >= 0.2x, absent from older releases)."""
    try:
        sp = sampling_params_cls(max_tokens=1, logprob_token_ids=[0])
    except Exception:  # noqa: BLE001 - TypeError (unknown keyword) or a validation error
        return False
    return list(getattr(sp, "logprob_token_ids", None) or []) == [0]


def engine_groups(plan: Sequence[SeqSpec]) -> list[list[int]]:
    """Indices of ``plan`` per ``LLM.generate`` call. One call, except when one-token sequences and
    sequences asking for top-k token log-probs are both present: vLLM's sampler builds one log-prob
    tensor per step and, when a step holds both kinds, keeps the label-id one (vllm/v1/sample/
    sampler.py), so top-k requests go in a second call."""
    topk = [k for k, s in enumerate(plan) if s.params.get("logprobs") is not None]
    if not topk or not any(s.one_token for s in plan):
        return [list(range(len(plan)))] if plan else []
    rest = [k for k, s in enumerate(plan) if s.params.get("logprobs") is None]
    return [rest, topk]


def one_token_choices(choice_ids: Mapping[str, Sequence[int]], choices: Sequence[str]) -> bool:
    """Whether ``choices`` can go through the one-token path: each is exactly one token."""
    return all(len(choice_ids[c]) == 1 for c in choices)


def choice_text_config(config: GenerationConfig) -> GenerationConfig:
    """Decoding config for the ``text`` of a choice request: the greedy (argmax) next token.

    Token log-probs are kept if the request asked for them (so G-Eval style parsing of the first
    token still works); stop strings are dropped so they cannot blank the single token.
    """
    return config.replace(temperature=0.0, top_p=1.0, top_k=None, max_tokens=1, stop=(), seed=None)


def guided_json_kwargs(sampling_module: object, schema: Mapping[str, JSON]) -> SamplingKwargs | None:
    """SamplingParams kwargs constraining output to a JSON schema with the installed vLLM's API
    (newer ``StructuredOutputsParams``, older ``GuidedDecodingParams``); ``None`` if it has neither."""
    if (cls := getattr(sampling_module, "StructuredOutputsParams", None)) is not None:
        return {"structured_outputs": cls(json=schema)}
    if (cls := getattr(sampling_module, "GuidedDecodingParams", None)) is not None:
        return {"guided_decoding": cls(json=schema)}
    return None


@dataclass(frozen=True)
class SeqSpec:
    """One sequence sent to vLLM: either the text of request ``req`` or one of its choices."""

    req: int
    token_ids: tuple[int, ...]
    params: SamplingKwargs
    choice: str | None = None  # None: the text sequence of the request
    start: int = 0  # for choice / continuation sequences: index of the first scored token
    continuation: bool = False  # the scoring sequence of a continuation request (no text sequence)
    # one-token path: (choice, its single token id) read from this sequence's first-token log-probs
    labels: tuple[tuple[str, int], ...] = ()

    @property
    def is_choice(self) -> bool:
        return self.choice is not None

    @property
    def one_token(self) -> bool:
        return bool(self.labels)


def build_plan(
    requests: Sequence[Request],
    prompt_ids: Sequence[Sequence[int]],
    choice_ids: Mapping[str, Sequence[int]],
    continuation_ids: Mapping[str, Sequence[int]] | None = None,
    guided: Callable[[Mapping[str, JSON]], SamplingKwargs | None] | None = None,
    one_token: bool = False,
) -> list[SeqSpec]:
    """All sequences for a batch: per request its choice sequences (if any), then its text sequence
    (a continuation request: just its scoring sequence). ``guided(schema)``: extra SamplingParams
    kwargs for a plain request with ``json_schema``.

    ``one_token=True``: a request whose choices are all single tokens gets one one-token sequence
    (:func:`one_token_kwargs`) that is also its text sequence; if the request asks for token
    log-probs (top-k alternatives) a separate text sequence follows, as on the exact path."""
    if len(requests) != len(prompt_ids):
        raise ValueError(f"{len(requests)} requests but {len(prompt_ids)} tokenised prompts")
    plan: list[SeqSpec] = []
    for i, (req, ids) in enumerate(zip(requests, prompt_ids, strict=True)):
        ids = tuple(int(t) for t in ids)
        if req.continuation is not None:
            cids = tuple(int(t) for t in (continuation_ids or {})[req.continuation])
            if not cids or not ids:
                raise ValueError(f"continuation {req.continuation!r} or its prompt tokenises to no tokens")
            plan.append(SeqSpec(i, ids + cids, choice_scoring_kwargs(), start=len(ids), continuation=True))
        elif req.choices is not None and one_token and one_token_choices(choice_ids, req.choices):
            labels = tuple((c, int(choice_ids[c][0])) for c in req.choices)
            kw = one_token_kwargs([t for _, t in labels])
            plan.append(SeqSpec(i, ids, kw, start=len(ids), labels=labels))
            if req.config.logprobs:
                plan.append(SeqSpec(i, ids, sampling_kwargs(choice_text_config(req.config))))
        elif req.choices is not None:
            for c in req.choices:
                cids = tuple(int(t) for t in choice_ids[c])
                if not cids:
                    raise ValueError(f"choice {c!r} tokenises to no tokens")
                plan.append(SeqSpec(i, ids + cids, choice_scoring_kwargs(), choice=c, start=len(ids)))
            plan.append(SeqSpec(i, ids, sampling_kwargs(choice_text_config(req.config))))
        else:
            extra = guided(req.json_schema) if guided and req.json_schema is not None else None
            params = sampling_kwargs(req.config)
            params.update(extra or {})
            plan.append(SeqSpec(i, ids, params))
    return plan


def _lp_value(entry: object) -> float:
    """A vLLM ``Logprob`` (has ``.logprob``) or a plain float."""
    if hasattr(entry, "logprob"):
        entry = entry.logprob
    if not isinstance(entry, SupportsFloat):
        raise BackendError(f"vLLM returned {entry!r} where a log-prob belongs")
    return float(entry)


def sum_choice_logprob(
    prompt_logprobs: Sequence[Mapping[int, object] | None] | None, token_ids: Sequence[int], start: int
) -> float:
    """Sum of the log-probs of ``token_ids[start:]`` read from vLLM ``prompt_logprobs``."""
    return float(sum(prompt_token_logprobs(prompt_logprobs, token_ids, start)))


def prompt_token_logprobs(
    prompt_logprobs: Sequence[Mapping[int, object] | None] | None, token_ids: Sequence[int], start: int
) -> list[float]:
    """The log-probs of ``token_ids[start:]``, one per token, read from vLLM ``prompt_logprobs``.

    ``prompt_logprobs[p]`` maps token id -> Logprob for prompt position ``p`` (position 0 is None);
    with ``prompt_logprobs=0`` it holds just the actual token at ``p``.
    """
    if prompt_logprobs is None:
        raise BackendError("vLLM returned no prompt log-probs for a scoring sequence")
    if len(prompt_logprobs) != len(token_ids):
        raise BackendError(
            f"vLLM returned {len(prompt_logprobs)} prompt log-probs for {len(token_ids)} prompt tokens"
        )
    if not 0 < start < len(token_ids):
        raise ValueError(f"choice start {start} out of range for a sequence of {len(token_ids)} tokens")
    out = []
    for p in range(start, len(token_ids)):
        pos = prompt_logprobs[p]
        tid = int(token_ids[p])
        if pos is None or tid not in pos:
            raise BackendError(f"vLLM prompt log-probs lack token {tid} at position {p}")
        out.append(_lp_value(pos[tid]))
    return out


def first_token_label_logprobs(
    logprobs: Sequence[Mapping[int, object]] | None, label_ids: Sequence[int]
) -> dict[int, float]:
    """The log-probs of ``label_ids`` at the first generated position of a one-token sequence
    (``CompletionOutput.logprobs[0]``, which holds the sampled token plus every requested id)."""
    if not logprobs:
        raise BackendError("vLLM returned no log-probs for a one-token choice sequence")
    pos = logprobs[0]
    out = {}
    for t in label_ids:
        t = int(t)
        if t not in pos:
            raise BackendError(f"vLLM log-probs of the first generated token lack label token {t}")
        out[t] = _lp_value(pos[t])
    return out


def token_logprobs_from_output(
    token_ids: Sequence[int],
    logprobs: Sequence[Mapping[int, object]] | None,
    top_k: int,
    decode: Callable[[int], str],
) -> list[TokenLogprob] | None:
    """Convert vLLM ``CompletionOutput.logprobs`` into :class:`TokenLogprob` s.

    Each position maps token id -> Logprob (the sampled token plus the top ``top_k``); ``top`` keeps
    only the entries ranked within ``top_k`` (the sampled token appears there only if it is one).
    """
    if logprobs is None:
        return None

    def text(t: int, entry: object) -> str:
        s = getattr(entry, "decoded_token", None)
        return s if s is not None else decode(t)

    out: list[TokenLogprob] = []
    for tid, pos in zip(token_ids, logprobs, strict=False):
        tid = int(tid)
        chosen = pos.get(tid)
        top: dict[str, float] = {}
        if top_k > 0:
            ranked = sorted(pos.items(), key=lambda kv: -_lp_value(kv[1]))
            for t, entry in ranked:
                rank = getattr(entry, "rank", None)
                if (rank is not None and rank > top_k) or len(top) >= top_k:
                    continue
                s = text(int(t), entry)
                if s not in top:  # several ids may decode alike: keep the likeliest
                    top[s] = _lp_value(entry)
        out.append(
            TokenLogprob(
                token=text(tid, chosen),
                logprob=_lp_value(chosen) if chosen is not None else -math.inf,
                top=top,
            )
        )
    return out


def assemble_responses(
    requests: Sequence[Request],
    plan: Sequence[SeqSpec],
    outputs: Sequence[RequestOutput],
    decode: Callable[[int], str],
    emit: Callable[[int, Response], None] | None = None,
    extra_raw: Sequence[Mapping[str, JSON]] | None = None,
    decode_ids: Callable[[list[int]], str] | None = None,
) -> list[Response]:
    """Build one :class:`Response` per request from vLLM ``RequestOutput`` s (same order as ``plan``);
    ``extra_raw[i]`` joins request ``i``'s ``raw``, ``decode_ids`` names continuation tokens."""
    if len(outputs) != len(plan):
        raise BackendError(f"vLLM returned {len(outputs)} outputs for {len(plan)} sequences")
    decode_ids = decode_ids or (lambda ids: "".join(decode(t) for t in ids))
    choice_lp: dict[int, dict[str, float]] = {}
    choice_tok: dict[int, dict[str, list[int]]] = {}
    text_out: dict[int, tuple[SeqSpec, RequestOutput]] = {}
    one_token_reqs: set[int] = set()
    for seq, out in zip(plan, outputs, strict=True):
        if seq.continuation:
            text_out[seq.req] = (seq, out)
        elif seq.choice is not None:  # seq.is_choice
            lp = sum_choice_logprob(out.prompt_logprobs, seq.token_ids, seq.start)
            choice_lp.setdefault(seq.req, {})[seq.choice] = lp
            choice_tok.setdefault(seq.req, {})[seq.choice] = list(seq.token_ids[seq.start :])
        else:
            if seq.one_token:  # also the text sequence, unless a separate one follows (it wins)
                label_lps = first_token_label_logprobs(out.outputs[0].logprobs, [t for _, t in seq.labels])
                choice_lp[seq.req] = {c: label_lps[t] for c, t in seq.labels}
                choice_tok[seq.req] = {c: [t] for c, t in seq.labels}
                one_token_reqs.add(seq.req)
            text_out[seq.req] = (seq, out)
    responses: list[Response] = []
    for i, req in enumerate(requests):
        seq, out = text_out[i]
        extra: JSONObject = dict(extra_raw[i]) if extra_raw is not None else {}
        if seq.continuation:
            lps = prompt_token_logprobs(out.prompt_logprobs, seq.token_ids, seq.start)
            cont_raw: JSONObject = {"prompt_tokens": seq.start, **extra}
            cids = seq.token_ids[seq.start :]
            resp = hf_scoring.continuation_response(decode_ids, seq.start, cids, lps, cont_raw)
            if emit is not None:
                emit(i, resp)
            responses.append(resp)
            continue
        comp = out.outputs[0]
        gen_ids = [int(t) for t in comp.token_ids]
        token_lp = None
        if req.config.logprobs:
            token_lp = token_logprobs_from_output(gen_ids, comp.logprobs, req.config.top_logprobs, decode)
        raw: JSONObject = {"token_ids": gen_ids, "prompt_tokens": len(seq.token_ids)}
        stop_reason = getattr(comp, "stop_reason", None)
        if isinstance(stop_reason, (str, int)):
            raw["stop_reason"] = stop_reason
        if req.choices is not None:
            raw["choice_token_ids"] = choice_tok[i]
            raw["choice_scoring"] = "one_token" if i in one_token_reqs else "prompt_logprobs"
        if req.json_schema is not None:
            raw["guided"] = any(k in seq.params for k in ("structured_outputs", "guided_decoding"))
        raw.update(extra)
        resp = Response(
            text=comp.text,
            choice_logprobs={c: choice_lp[i][c] for c in req.choices} if req.choices is not None else None,
            token_logprobs=token_lp,
            usage=Usage(prompt_tokens=len(seq.token_ids), completion_tokens=len(gen_ids)),
            finish_reason=comp.finish_reason,
            raw=raw,
        )
        if emit is not None:
            emit(i, resp)
        responses.append(resp)
    return responses
