"""One decoding step of one row of the ``hf`` backend (:mod:`harness.backends.hf`).

:class:`Row` is the decoding state of one request; :class:`RowDecoding` (a mixin of
:class:`~harness.backends.hf.HFBackend`) advances a row by one token from the next-token logits:
presence / frequency penalties, greedy or seeded sampling (temperature, top-k, top-p), EOS and stop
strings, the length limit, and token log-probs from the *unprocessed* distribution with their
``top`` alternatives named by text. The mixin needs ``tokenizer``, ``_eos_ids`` (set of int) and
``_tok_str`` (a dict cache of token strings) on the class it is mixed into.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.types import Request, TokenLogprob


@dataclass(eq=False)
class Row:
    """Decoding state of one request."""

    index: int
    req: Request
    ids: list[int]
    truncated: bool
    max_new: int
    choice_ids: dict[str, list[int]] | None = None
    choice_lp: dict[str, float] | None = None
    first_logits: torch.Tensor | None = None  # next-token logits after the prompt (teacher-forcing path)
    gen: list[int] = field(default_factory=list)  # generated ids, EOS excluded
    n_generated: int = 0
    token_lps: list[TokenLogprob] = field(default_factory=list)
    finished: bool = False
    finish_reason: str | None = None
    stop_at: int | None = None  # char offset where the text is cut at a stop string
    generator: torch.Generator | None = None
    cont_ids: list[int] | None = None  # Request.continuation tokens (scoring mode)
    cont_lps: list[float] | None = None

    @property
    def single_token_choices(self) -> bool:
        return self.choice_ids is not None and all(len(c) == 1 for c in self.choice_ids.values())


class RowDecoding:
    """Advances a :class:`Row` by one token; mixed into :class:`~harness.backends.hf.HFBackend`."""

    tokenizer: Any
    _eos_ids: set[int]
    _tok_str: dict[int, str]

    def _advance(self, r: Row, logits: torch.Tensor, greedy_token: int) -> None:
        cfg = r.req.config
        sel = logits
        if (cfg.presence_penalty or cfg.frequency_penalty) and r.gen:
            counts = torch.bincount(torch.tensor(r.gen, device=logits.device), minlength=logits.numel())
            counts = counts[: logits.numel()].to(logits.dtype)
            sel = (
                logits - cfg.frequency_penalty * counts - cfg.presence_penalty * (counts > 0).to(logits.dtype)
            )
            greedy_token = int(sel.argmax())
        tok = greedy_token if cfg.greedy else self._sample(r, sel)
        r.n_generated += 1
        if tok in self._eos_ids:
            r.finished, r.finish_reason = True, "stop"
            return
        r.gen.append(tok)
        if cfg.logprobs:
            r.token_lps.append(self._token_logprob(tok, torch.log_softmax(logits, dim=-1), cfg.top_logprobs))
        if cfg.stop:
            text = self.tokenizer.decode(r.gen, skip_special_tokens=True)
            hits = [i for s in cfg.stop if s and (i := text.find(s)) >= 0]
            if hits:
                r.stop_at = min(hits)
                r.finished, r.finish_reason = True, "stop"
                return
        if r.n_generated >= r.max_new:
            r.finished, r.finish_reason = True, "length"

    def _sample(self, r: Row, logits: torch.Tensor) -> int:
        cfg = r.req.config
        x = logits / cfg.temperature
        if cfg.top_k is not None and 0 < cfg.top_k < x.numel():
            kth = torch.topk(x, cfg.top_k).values[-1]
            x = x.masked_fill(x < kth, -math.inf)
        if cfg.top_p < 1.0:
            sx, si = torch.sort(x, descending=True)
            p = torch.softmax(sx, dim=-1)
            sx = sx.masked_fill(p.cumsum(-1) - p > cfg.top_p, -math.inf)  # always keeps the top token
            x = torch.full_like(x, -math.inf).scatter(0, si, sx)
        if r.generator is None:
            seed = cfg.seed if cfg.seed is not None else secrets.randbits(63)
            r.generator = torch.Generator(device=x.device).manual_seed(int(seed))
        return int(torch.multinomial(torch.softmax(x, dim=-1), 1, generator=r.generator))

    def _token_str(self, tok: int) -> str:
        """A token as text; a token that is only part of a UTF-8 character decodes to U+FFFD, so it is
        named by its vocabulary entry instead (keeps distinct byte tokens apart in ``top``)."""
        s = self._tok_str.get(tok)
        if s is None:
            s = self.tokenizer.decode([tok])
            if "\ufffd" in s:
                s = self.tokenizer.convert_ids_to_tokens(tok) or s
            self._tok_str[tok] = s
        return s

    def _token_logprob(self, tok: int, lsm: torch.Tensor, k: int) -> TokenLogprob:
        top: dict[str, float] = {}
        if k > 0:
            vals, idx = torch.topk(lsm, min(k, lsm.numel()))
            for v, i in zip(vals.tolist(), idx.tolist(), strict=True):
                s = self._token_str(i)
                # distinct ids that decode alike (e.g. partial UTF-8 bytes) are merged, as label matching does
                top[s] = float(torch.logaddexp(torch.tensor(top[s]), torch.tensor(v))) if s in top else v
            top = dict(sorted(top.items(), key=lambda kv: -kv[1]))
        return TokenLogprob(token=self._token_str(tok), logprob=float(lsm[tok]), top=top)
