"""HTTP plumbing shared by the OpenAI-compatible backend and its Batch API client: which errors are
retried, ``Retry-After`` parsing, the server's error message, base-URL sanitising (no credentials in
identities or logs) and ``top_logprobs`` decoding."""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Iterable
from typing import SupportsFloat
from urllib.parse import SplitResult, urlsplit, urlunsplit

import httpx
import numpy as np

DEFAULT_BASE_URL = "https://api.openai.com/v1"
OPENAI_MAX_TOP_LOGPROBS = 20
CHOICE_MATCH_MODES = ("normalized", "exact")
RETRYABLE_STATUS = frozenset({408, 429})  # plus every 5xx
_MAX_ERROR_CHARS = 1000
_REDACTED = "***"
_FORMAT_REJECTED = re.compile(r"response_format|json_schema")  # in a 400: no guided decoding there


class _RetryableHTTPError(Exception):
    """A response status worth retrying (429 / 5xx / 408), with the server's Retry-After."""

    def __init__(self, status: int, message: str, retry_after: float | None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


class _Aborted(Exception):
    """A request skipped because another request of the batch already failed permanently."""


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(
        exc, _RetryableHTTPError | httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError
    )


_USERINFO = re.compile(r"^([^:/?#]*://)[^/?#]*@")


def split_base_url(url: str) -> SplitResult:
    """``urlsplit`` of a ``base_url``, or a ValueError naming the option and the URL (credentials
    removed) when urllib cannot split it (``http://[::1/v1``: "Invalid IPv6 URL")."""
    try:
        return urlsplit(url)
    except ValueError as e:
        shown = _USERINFO.sub(r"\1", url.strip())  # never the credentials
        hint = (
            "; write an IPv6 host in matching brackets, e.g. http://[::1]:8000/v1" if "IPv6" in str(e) else ""
        )
        raise ValueError(f"openai backend: base_url {shown!r} is not a valid URL ({e}){hint}") from None


def sanitize_base_url(url: str) -> str:
    """``scheme://host[:port]/path`` — no credentials, query or fragment, no trailing slash."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def _is_openai_host(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == "openai.com" or host.endswith(".openai.com")


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            v = float(ms) / 1000.0
            if math.isfinite(v) and v >= 0:
                return v
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra is None:
        return None
    ra = ra.strip()
    try:
        v = float(ra)
        return v if math.isfinite(v) and v >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(resp: httpx.Response) -> str:
    """The error message from an error response body (OpenAI, vLLM, TGI, FastAPI shapes)."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    msg: object = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            msg = err.get("message") or err
        elif err:
            msg = err
        else:
            msg = body.get("message") or body.get("detail")
    if msg is None:
        msg = resp.text.strip() or resp.reason_phrase or "(empty body)"
    msg = str(msg)
    if len(msg) > _MAX_ERROR_CHARS:
        msg = msg[:_MAX_ERROR_CHARS] + "..."
    return msg


def _top_to_dict(top: object) -> dict[str, float]:
    """OpenAI's ``top_logprobs`` (list of {token, logprob}) or a legacy {token: logprob} dict."""
    out: dict[str, float] = {}
    items: Iterable[tuple[object, object]]
    if isinstance(top, dict):
        items = top.items()
    elif isinstance(top, list):
        items = [(t.get("token"), t.get("logprob")) for t in top if isinstance(t, dict)]
    else:
        return out
    for tok, lp in items:
        if tok is None or lp is None:
            continue
        tok = str(tok)
        if not isinstance(lp, str | SupportsFloat):
            raise TypeError(f"top_logprobs: log-prob {lp!r} of token {tok!r} is not a number")
        lp = float(lp)
        # Distinct token ids can decode to the same string (partial UTF-8 bytes): merge them, as
        # label matching does (and as the hf backend does for its top alternatives).
        out[tok] = float(np.logaddexp(out[tok], lp)) if tok in out else lp
    return out
