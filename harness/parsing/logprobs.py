"""Choice-scoring primitives usable by any task.

* :func:`p_yes` — xDial-Eval §4: ``P(Yes) = P(Yes) / (P(Yes) + P(No))`` from the next-token
  log-probs of the label words.
* :func:`expected_score` — G-Eval style probability-weighted score over digit labels
  (``sum_d d * p(d) / sum_d p(d)``), from label log-probs at one position.
* :func:`expected_score_from_tokens` — the same over the top alternatives of the first generated
  token that is a score digit (for judges that write e.g. "Rating: 4").
* :func:`continuation_word_logprob` — GPTScore (as in MEEP §5.3): the log-prob of a word ("Yes")
  inside a continuation ("Answer: Yes.") the backend scored after the prompt.

All return ``None`` (never 0) when the needed probabilities are missing; callers count that
as a parse failure and keep the raw output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.special import logsumexp, softmax

from harness.parsing.score import ParsedScore
from harness.types import LogprobsUnavailableError, Response, TokenLogprob


def _norm(tok: str) -> str:
    return tok.strip().casefold()


def choice_logprobs_from_top(top: Mapping[str, float], choices: Sequence[str]) -> dict[str, float | None]:
    """Map top-k token log-probs to label-word log-probs.

    Tokens are matched to labels after stripping whitespace and case-folding (``"Yes"``,
    ``" yes"`` and ``"YES"`` all count for ``"Yes"``); several matching tokens are combined with
    log-sum-exp. A label with no matching token gets ``None`` (it was not in the top-k).
    """
    out: dict[str, float | None] = {}
    for c in choices:
        vals = [
            lp for tok, lp in top.items() if _norm(tok) == _norm(c) and lp is not None and math.isfinite(lp)
        ]
        out[c] = float(logsumexp(vals)) if vals else None
    return out


def normalized_choice_probs(choice_logprobs: Mapping[str, float | None]) -> dict[str, float] | None:
    """Softmax over the labels whose log-prob is known; labels missing from top-k get probability 0.

    Returns ``None`` when no label has a log-prob.
    """
    known = {k: v for k, v in choice_logprobs.items() if v is not None and math.isfinite(v)}
    if not known:
        return None
    keys = list(known)
    probs = softmax(np.array([known[k] for k in keys], dtype=np.float64))
    out = {k: 0.0 for k in choice_logprobs}
    out.update({k: float(p) for k, p in zip(keys, probs, strict=True)})
    return out


def _choice_lp(resp: Response | Mapping[str, float | None]) -> Mapping[str, float | None] | None:
    if isinstance(resp, Response):
        return resp.choice_logprobs
    return resp


def p_yes(resp: Response | Mapping[str, float | None], yes: str = "Yes", no: str = "No") -> ParsedScore:
    """Normalised probability of the positive label: P(Yes) / (P(Yes) + P(No))."""
    lp = _choice_lp(resp)
    if lp is None:
        raise LogprobsUnavailableError("P(Yes) scoring needs label log-probs, but the response carries none")
    sub = {yes: lp.get(yes), no: lp.get(no)}
    probs = normalized_choice_probs(sub)
    if probs is None:
        return ParsedScore(None, "missing_logprobs", f"neither {yes!r} nor {no!r} has a log-prob")
    absent = [k for k, v in sub.items() if v is None]
    if absent:  # a server's top-k list (openai backend) can leave one label out: its share is ~0
        return ParsedScore(
            probs[yes], "ok", f"{absent[0]!r} not among the top log-probs: its probability taken as 0"
        )
    return ParsedScore(probs[yes], "ok")


def expected_score(
    resp: Response | Mapping[str, float | None], labels: Mapping[str, float] | Sequence[str] | None = None
) -> ParsedScore:
    """Probability-weighted score over labels (default: the digits present in the log-probs)."""
    lp = _choice_lp(resp)
    if lp is None:
        raise LogprobsUnavailableError(
            "expected-score scoring needs label log-probs, but the response carries none"
        )
    values = _label_values(labels, lp)
    probs = normalized_choice_probs({k: lp.get(k) for k in values})
    if probs is None:
        return ParsedScore(None, "missing_logprobs", f"no score label among {list(values)} has a log-prob")
    return ParsedScore(float(sum(values[k] * p for k, p in probs.items())), "ok")


def expected_score_from_tokens(
    token_logprobs: Sequence[TokenLogprob] | None, labels: Mapping[str, float] | Sequence[str]
) -> ParsedScore:
    """G-Eval: find the first generated token that is a score label and weight its top alternatives."""
    if token_logprobs is None:
        raise LogprobsUnavailableError(
            "expected-score scoring needs token log-probs, but the response carries none"
        )
    values = _label_values(labels, {})
    norm_values = {_norm(k): k for k in values}
    for tl in token_logprobs:
        if _norm(tl.token) in norm_values:
            top = dict(tl.top) or {tl.token: tl.logprob}
            if tl.token not in top:
                top[tl.token] = tl.logprob
            lp = choice_logprobs_from_top(top, list(values))
            return expected_score(lp, values)
    return ParsedScore(None, "parse_error", f"no generated token is one of {list(values)}")


def _label_values(
    labels: Mapping[str, float] | Sequence[str] | None, lp: Mapping[str, float | None]
) -> dict[str, float]:
    if labels is None:
        labels = [k for k in lp if k.strip().lstrip("-").replace(".", "", 1).isdigit()]
    if isinstance(labels, Mapping):
        return {str(k): float(v) for k, v in labels.items()}
    out = {}
    for lab in labels:
        try:
            out[str(lab)] = float(lab)
        except ValueError as e:
            raise ValueError(f"label {lab!r} is not numeric; pass a mapping label -> value") from e
    return out


_SPACE_MARKERS = ("Ġ", "▁", "Ċ")


def _compact(s: str) -> str:
    for m in _SPACE_MARKERS:
        s = s.replace(m, "")
    return "".join(s.split())


def continuation_word_logprob(resp: Response, continuation: str, target: str) -> ParsedScore:
    """GPTScore (MEEP §5.3): the log-prob of ``target`` inside the continuation echoed after the
    prompt, e.g. of "Yes" in "Answer: Yes.".

    The value is the sum of the log-probs of the continuation tokens (``resp.token_logprobs``, in
    order) whose character span overlaps the *last* occurrence of ``target`` in ``continuation``;
    spans come from concatenating the tokens' strings, which backends guarantee reconstruct the
    continuation (for ASCII text). A token that straddles the word (" Yes", "Yes.") counts whole;
    an empty token string (the first bytes of a multi-byte character) counts with the token that
    completes the character. When the strings do not concatenate to the continuation, they are
    matched again with whitespace and the byte-level / SentencePiece space markers ("Ġ", "▁")
    removed on both sides; when that fails too, the result is a parse failure. No token log-probs:
    ``ParsedScore(None, "missing_logprobs", ...)``.

    The value is a log-probability (<= 0; higher = more likely "Yes"), not a probability: the
    correlation with human ratings is taken on it directly (Spearman is rank-based, so it equals
    the correlation of the probability; Pearson is linear in the log-prob).
    """
    tl = resp.token_logprobs
    if not tl:
        return ParsedScore(
            None,
            "missing_logprobs",
            "the response carries no continuation token log-probs (GPTScore needs a backend that scores "
            "Request.continuation: hf or vllm)",
        )
    if not target or target not in continuation:
        return ParsedScore(
            None, "parse_error", f"target {target!r} does not occur in continuation {continuation!r}"
        )
    tokens = [t.token for t in tl]
    start = continuation.rfind(target)
    end = start + len(target)
    if "".join(tokens) != continuation:
        pieces = [_compact(t) for t in tokens]
        if "".join(pieces) != _compact(continuation):
            return ParsedScore(
                None,
                "parse_error",
                f"the token strings {tokens!r} do not reconstruct the continuation {continuation!r}",
            )
        tokens = pieces
        start = len(_compact(continuation[:start]))
        end = start + len(_compact(target))
    picked: list[int] = []
    pos = 0
    for i, tok in enumerate(tokens):
        s, e = pos, pos + len(tok)
        pos = e
        if (s < end and e > start) or (s == e and start <= s < end):
            picked.append(i)
    if not picked:  # pragma: no cover - a non-empty target inside the text always overlaps a token
        return ParsedScore(None, "parse_error", f"no continuation token covers {target!r}")
    lps = [tl[i].logprob for i in picked]
    if any(lp is None or not math.isfinite(lp) for lp in lps):
        return ParsedScore(
            None, "missing_logprobs", f"non-finite log-prob among the tokens of {target!r}: {lps}"
        )
    return ParsedScore(float(sum(lps)), "ok", f"log-prob of token(s) {[tl[i].token for i in picked]!r}")
