"""Helpers shared by the ``hf`` and ``vllm`` backends (both render and tokenise with a transformers
tokenizer): continuation scoring (GPTScore) and the system-role fallback.

Continuation scoring (``Request.continuation``): the continuation is tokenised on its own
(``add_special_tokens=False``) and appended to the rendered prompt's ids; the log-prob of each of
its tokens given everything before it is read by teacher forcing (hf: :func:`score_continuations`;
vLLM: ``prompt_logprobs``). :func:`token_strings` names the tokens so that their strings
concatenate back to the decoded continuation (for ASCII text: the continuation itself), which lets
a caller find the tokens of a word ("Yes" in "Answer: Yes.") by character offsets.

System-role fallback (MEEP §4: "When possible, we make the assignment directly in the API call,
using the 'system' option. If this method is not supported by the model, the role assignment is
prefixed to the prompt text."): :func:`probe_system_role` renders a probe chat with a sentinel
system message once per backend; when the template raises on a system role or silently drops it,
the mode is ``"prefixed"`` and :func:`merge_system_messages` folds the system content into the
first user message as ``"<system>\\n\\n<user>"``. Otherwise the mode is ``"system_message"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from harness.jsontypes import JSON
from harness.types import ChatMessage, Response, TokenLogprob, Usage

if TYPE_CHECKING:
    import torch

    from harness.backends.hf import HFBackend


class TokenCodec(Protocol):
    """What scoring needs of a tokenizer (transformers' or vLLM's): text to ids and back."""

    def encode(self, text: str, /, *, add_special_tokens: bool) -> list[int]: ...

    def decode(self, ids: list[int], /, **options: bool) -> str: ...


class ChatTokenizer(TokenCodec, Protocol):
    """A tokenizer with a chat template (vLLM's engine tokenizer)."""

    def apply_chat_template(self, conversation: list[dict[str, str]], /, **options: object) -> str: ...


SYSTEM_MESSAGE = "system_message"
PREFIXED = "prefixed"
_SENTINEL = "SYSTEM-ROLE-PROBE-5f3a9c"


# -- system role ------------------------------------------------------------------------------------
def probe_system_role(render: Callable[[list[dict[str, str]]], str]) -> str:
    """``"system_message"`` if ``render`` (chat messages -> prompt text) carries a system message,
    else ``"prefixed"`` (the template raises on it, or drops it)."""
    try:
        text = render([{"role": "system", "content": _SENTINEL}, {"role": "user", "content": "hi"}])
    except Exception:  # noqa: BLE001 - jinja raise_exception("System role not supported"), etc.
        return PREFIXED
    return SYSTEM_MESSAGE if _SENTINEL in str(text) else PREFIXED


class SystemRoleFallback:
    """Mixin of the hf and vllm backends: :attr:`system_role_mode` (probed once, lazily) and
    :meth:`_chat_dicts`; the backend provides ``_apply_template(messages) -> prompt text``."""

    _system_role: str | None = None

    def _apply_template(self, messages: list[dict[str, str]]) -> str:
        raise NotImplementedError

    @property
    def system_role_mode(self) -> str:
        """``"system_message"`` if the chat template carries a system message, ``"prefixed"`` if it
        raises on one or drops it (the system content then goes before the first user message)."""
        if self._system_role is None:
            self._system_role = probe_system_role(self._apply_template)
        return self._system_role

    def _chat_dicts(self, messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        """Chat messages as dicts for the template, system messages merged if it cannot carry them."""
        dicts = [m.to_dict() for m in messages]
        if any(m["role"] == "system" for m in dicts) and self.system_role_mode == PREFIXED:
            dicts = merge_system_messages(dicts)
        return dicts

    def _system_raw(self, messages: Sequence[ChatMessage]) -> dict[str, str]:
        """``{"system_role": mode}`` for a chat with a system message (for ``Response.raw``), else ``{}``."""
        return {"system_role": self.system_role_mode} if any(m.role == "system" for m in messages) else {}


def merge_system_messages(messages: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """Fold the system messages' contents (joined by blank lines) into the first user message as
    ``"<system>\\n\\n<user>"``; with no user message they become one, where the first system
    message was."""
    system = [m["content"] for m in messages if m["role"] == "system"]
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if not system:
        return rest
    prefix = "\n\n".join(system)
    for m in rest:
        if m["role"] == "user":
            m["content"] = f"{prefix}\n\n{m['content']}"
            return rest
    at = next(i for i, m in enumerate(messages) if m["role"] == "system")
    return [*rest[:at], {"role": "user", "content": prefix}, *rest[at:]]


# -- continuation tokens ----------------------------------------------------------------------------
def continuation_ids(tokenizer: TokenCodec, continuation: str) -> list[int]:
    """Token ids of a continuation tokenised on its own (no special tokens)."""
    ids = [int(t) for t in tokenizer.encode(continuation, add_special_tokens=False)]
    if not ids:
        raise ValueError(f"continuation {continuation!r} tokenises to no tokens")
    return ids


def token_strings(decode: Callable[[list[int]], str], ids: Sequence[int]) -> list[str]:
    """One string per token such that their concatenation is ``decode(ids)``.

    Growing prefixes are decoded and the differences taken, so tokenizers that drop a leading
    space (SentencePiece) or split a character over several byte tokens still concatenate back:
    a token that ends inside a multi-byte character gets ``""`` and the token completing it gets
    the whole character.
    """
    out: list[str] = []
    emitted = ""
    ids = [int(t) for t in ids]
    for k in range(1, len(ids) + 1):
        s = decode(ids[:k])
        if k < len(ids) and s.endswith("\ufffd"):
            out.append("")  # an incomplete character: attributed to the token that completes it
            continue
        if s.startswith(emitted):
            out.append(s[len(emitted) :])
        else:  # the decoder rewrote earlier text (rare); keep what differs from the common prefix
            p = next(
                (i for i, (a, b) in enumerate(zip(s, emitted, strict=False)) if a != b),
                min(len(s), len(emitted)),
            )
            out.append(s[p:])
        emitted = s
    return out


def tokenizer_decoder(tokenizer: TokenCodec) -> Callable[[list[int]], str]:
    """``decode`` for :func:`token_strings`: no special tokens skipped, no space clean-up."""

    def decode(ids: list[int]) -> str:
        try:
            return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        except TypeError:  # a tokenizer wrapper without the transformers keyword
            return tokenizer.decode(ids, skip_special_tokens=False)

    return decode


def continuation_response(
    decode: Callable[[list[int]], str],
    prompt_tokens: int,
    ids: Sequence[int],
    logprobs: Sequence[float],
    raw: Mapping[str, JSON],
) -> Response:
    """The :class:`Response` of a continuation request: no text, one :class:`TokenLogprob` per
    continuation token (named by :func:`token_strings`), their sum in ``continuation_logprob``."""
    if len(ids) != len(logprobs):
        raise ValueError(f"{len(logprobs)} log-probs for {len(ids)} continuation tokens")
    names = token_strings(decode, ids)
    lps = [float(x) for x in logprobs]
    return Response(
        text="",
        token_logprobs=[TokenLogprob(token=t, logprob=lp, top={}) for t, lp in zip(names, lps, strict=True)],
        usage=Usage(prompt_tokens=prompt_tokens + len(ids), completion_tokens=0),
        finish_reason="continuation",
        raw={**raw, "continuation_token_ids": [int(t) for t in ids]},
        continuation_logprob=float(sum(lps)),
    )


# -- hf teacher forcing -----------------------------------------------------------------------------
def score_continuations(
    backend: HFBackend, items: Sequence[tuple[list[int], list[int]]]
) -> list[list[float]]:
    """Per-token ``log P(target_t | prompt, target_<t)`` for ``(prompt_ids, target_ids)`` pairs, in
    batched forward passes of ``backend.batch_size`` left-padded sequences (the hf backend's
    ``_pad`` / ``_forward``, longest first). The model must be loaded; call under inference mode."""
    import torch

    out: list[list[float]] = [[] for _ in items]
    order = sorted(range(len(items)), key=lambda i: -(len(items[i][0]) + len(items[i][1])))
    for start in range(0, len(order), backend.batch_size):
        chunk = order[start : start + backend.batch_size]
        keep = max(len(items[i][1]) for i in chunk) + 1
        ids, mask, pos = backend._pad([items[i][0] + items[i][1] for i in chunk])
        logits, _ = backend._forward(ids, mask, pos, None, keep=keep, use_cache=False)
        lsm = torch.log_softmax(logits, dim=-1)
        for b, i in enumerate(chunk):
            target = items[i][1]
            first = keep - len(target) - 1
            idx = torch.tensor(target, device=lsm.device).unsqueeze(1)
            out[i] = lsm[b, first : first + len(target)].gather(-1, idx).squeeze(1).tolist()
    return out


def last_token_logits(backend: HFBackend, seqs: Sequence[list[int]]) -> torch.Tensor:
    """Next-token logits after each of ``seqs`` (``[batch, vocab]``, float32) from one forward pass
    of the hf backend's model, for a decoding step that needs no KV cache afterwards (one token).

    The batch is right-padded and given no attention mask: causal attention never looks to the
    right, so padding cannot reach a real position and positions are ``0..len-1`` as unbatched,
    while attention runs the fused causal kernel. (Left padding needs an explicit mask, which sends
    SDPA to its slower masked path: on CPU about half the time of a P(Yes) pass.) Only the logits at
    each row's last position are computed (``logits_to_keep`` with those positions, where the model
    takes it). The model must be loaded; call under inference mode."""
    import torch

    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), backend.tokenizer.pad_token_id, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
    last = torch.tensor([len(s) - 1 for s in seqs], dtype=torch.long)
    kwargs: dict[str, torch.Tensor | bool] = {"input_ids": ids.to(backend._input_device), "use_cache": False}
    col = last
    if "logits_to_keep" in backend._accepts:
        keep = torch.unique(last)  # sorted
        kwargs["logits_to_keep"] = keep.to(backend._input_device)
        col = torch.searchsorted(keep, last)
    logits = backend._model(**kwargs).logits
    return logits[torch.arange(len(seqs), device=logits.device), col.to(logits.device)].float()
