"""``openai:<model>`` — any OpenAI-compatible chat-completions server.

Works against api.openai.com and local servers that speak the same protocol (vLLM, TGI,
llama.cpp, LM Studio, ...)::

    openai:gpt-4o-mini,concurrency=8
    openai:Qwen/Qwen2.5-7B-Instruct,base_url=http://localhost:8000/v1

The API key is read from the environment variable named by ``api_key_env`` (default
``OPENAI_API_KEY``) at call time and is never stored on the backend, put in its identity, in a
response, an exception message or a log line. A missing key is an error for api.openai.com; other
servers get no ``Authorization`` header.

Requests of one batch run concurrently (``asyncio.Semaphore(concurrency)``) over one
``httpx.AsyncClient``; each finished request is handed to ``emit`` at once so a write-through
cache keeps it even if the batch later fails. When one request fails permanently, requests not
yet started are skipped, those in flight finish (and are emitted), then the first error is
raised. HTTP 408/429/5xx, timeouts and connection errors
are retried with exponential backoff plus jitter (``Retry-After`` / ``retry-after-ms`` honoured,
capped at ``retry_after_cap`` seconds); other 4xx fail at once with the server's message.

Choice scoring (``Request.choices``) asks for ``logprobs=true`` and ``top_logprobs=
choice_top_logprobs`` and reads the label log-probs from the *first* generated token's
alternatives. By default (``choice_match=exact``) only the token spelled exactly like the label
counts — the xDial-Eval definition, and what the hf and vllm backends score, so P(Yes) is
comparable across backends; ``choice_match=normalized`` merges whitespace/case variants
(:func:`harness.parsing.logprobs.choice_logprobs_from_top`). Labels outside the top-k get ``None``. ``max_tokens`` is sent as the request's config says
(judges that only score set it to 1). OpenAI caps ``top_logprobs`` at 20; local servers may allow
more (vLLM: ``--max-logprobs``), so a larger ``choice_top_logprobs`` is accepted for them.
``Request.json_schema`` goes out as ``response_format`` (``json_schema``, ``strict: false``); a
server answering 400 about ``response_format`` / ``json_schema`` gets the request again without it
(``Response.raw["guided"]``: whether it was guided). Continuation scoring needs prompt log-probs,
which chat completions lack: such requests raise :class:`LogprobsUnavailableError`.

``batch_api=true`` sends each ``generate`` call through the OpenAI Batch API instead (half price,
results within ``batch_completion_window``): see :mod:`harness.backends.openai_batch`. It is not
part of the identity, so batch and online calls share cache entries.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import random
from collections.abc import Callable, Mapping, Sequence

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from harness.backends.base import Backend, Capabilities
from harness.backends.openai_batch import run_batch_api
from harness.backends.openai_http import (
    _FORMAT_REJECTED,
    _MAX_ERROR_CHARS,
    _REDACTED,
    CHOICE_MATCH_MODES,
    DEFAULT_BASE_URL,
    OPENAI_MAX_TOP_LOGPROBS,
    RETRYABLE_STATUS,
    _Aborted,
    _is_openai_host,
    _is_retryable,
    _RetryableHTTPError,
    _server_message,
    _top_to_dict,
    parse_retry_after,
    sanitize_base_url,
    split_base_url,
)
from harness.jsontypes import JSON, JSONObject
from harness.options import check_option
from harness.parsing.logprobs import choice_logprobs_from_top
from harness.types import (
    MAX_TIMEOUT_S,
    MAX_TOP_LOGPROBS,
    BackendConfigError,
    BackendError,
    LogprobsUnavailableError,
    Request,
    Response,
    TokenLogprob,
    Usage,
)

log = logging.getLogger(__name__)

#: requests in flight per batch: more than a server (or httpx's connection pool) usefully takes
MAX_CONCURRENCY = 1024


class OpenAIBackend(Backend):
    kind = "openai"
    capabilities = Capabilities(choice_logprobs=True, token_logprobs=True, guided_json=True)

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        max_retries: int = 6,
        timeout: float = 60.0,
        choice_top_logprobs: int = 20,
        retry_initial: float = 1.0,
        retry_max_wait: float = 60.0,
        retry_after_cap: float = 60.0,
        choice_match: str = "exact",
        batch_api: bool = False,
        batch_poll_seconds: float = 30.0,
        batch_completion_window: str = "24h",
        batch_max_requests: int = 50_000,
        batch_state_dir: str | None = None,
        batch_transport: httpx.BaseTransport | None = None,
        **options: JSON,
    ) -> None:
        if options:
            raise ValueError(
                f"openai backend: unknown option(s) {sorted(options)}; supported: base_url, api_key_env, "
                "concurrency, max_retries, timeout, choice_top_logprobs, choice_match, retry_initial, "
                "retry_max_wait, retry_after_cap, batch_api, batch_poll_seconds, batch_completion_window, "
                "batch_max_requests, batch_state_dir"
            )
        super().__init__(model, revision=revision)
        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        url = str(url).strip().rstrip("/")
        parts = split_base_url(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"openai backend: base_url must be an http(s) URL, got {sanitize_base_url(url)!r}"
            )
        try:
            port = parts.port
        except ValueError:
            port = -1
        if port is not None and not 1 <= port <= 65535:
            shown = parts.netloc.rpartition("@")[2]  # never the credentials
            raise ValueError(
                f"openai backend: base_url {parts.scheme}://{shown}{parts.path} has an invalid port; "
                "a port is a number from 1 to 65535"
            )
        self.base_url = url  # may carry credentials: only ever shown through display_url
        self.display_url = sanitize_base_url(url)
        opt = functools.partial(check_option, "openai backend")
        self.api_key_env = opt("api_key_env", api_key_env, str)
        self.concurrency = opt("concurrency", concurrency, int, lo=1, hi=MAX_CONCURRENCY)
        self.max_retries = opt("max_retries", max_retries, int, lo=0, hi=100)
        self.timeout = float(opt("timeout", timeout, float, lo=0, lo_open=True, hi=MAX_TIMEOUT_S))
        self.choice_top_logprobs = opt(
            "choice_top_logprobs", choice_top_logprobs, int, lo=1, hi=MAX_TOP_LOGPROBS
        )
        if self.choice_top_logprobs > OPENAI_MAX_TOP_LOGPROBS and _is_openai_host(url):
            raise ValueError(
                f"openai backend: choice_top_logprobs={self.choice_top_logprobs} exceeds the OpenAI API "
                f"limit of {OPENAI_MAX_TOP_LOGPROBS}"
            )
        self.retry_initial = float(opt("retry_initial", retry_initial, float, lo=0, hi=MAX_TIMEOUT_S))
        self.retry_max_wait = float(opt("retry_max_wait", retry_max_wait, float, lo=0, hi=MAX_TIMEOUT_S))
        self.retry_after_cap = float(opt("retry_after_cap", retry_after_cap, float, lo=0, hi=MAX_TIMEOUT_S))
        self.choice_match = opt("choice_match", choice_match, str, choices=CHOICE_MATCH_MODES)
        # Batch API mode (harness.backends.openai_batch): same request bodies, same parsing.
        self.batch_api = opt("batch_api", batch_api, bool)
        self.batch_poll_seconds = float(
            opt("batch_poll_seconds", batch_poll_seconds, float, lo=0, hi=MAX_TIMEOUT_S)
        )
        self.batch_completion_window = opt("batch_completion_window", batch_completion_window, str)
        self.batch_max_requests = opt("batch_max_requests", batch_max_requests, int, lo=1, hi=50_000)
        self.batch_state_dir = str(batch_state_dir) if batch_state_dir else None
        self.batch_transport = batch_transport  # an httpx transport (tests, proxies); not a spec option

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, base_url={self.display_url!r})"

    def _identity_extras(self) -> JSONObject:
        # batch_api (and its batch_* settings) is deliberately absent: the Batch API runs the same
        # request bodies on the same model, so batch and online results share cache entries.
        extras: JSONObject = {"base_url": self.display_url}
        # Settings that change choice_logprobs join the identity only when not at their defaults,
        # so default identities (and cache keys) stay stable.
        if self.choice_top_logprobs != OPENAI_MAX_TOP_LOGPROBS:
            extras["choice_top_logprobs"] = self.choice_top_logprobs
        if self.choice_match != "exact":
            extras["choice_match"] = self.choice_match
        return extras

    # -- key handling ---------------------------------------------------------------------------
    def _api_key(self) -> str | None:
        key = os.environ.get(self.api_key_env, "").strip()
        if key:
            return key
        if _is_openai_host(self.base_url):
            raise BackendError(
                f"openai backend: no API key for {self.display_url} (model {self.model}); "
                f"set the environment variable {self.api_key_env}"
            )
        return None

    @staticmethod
    def _redact_text(text: str, key: str | None) -> str:
        """``text`` with the key (servers sometimes echo it) replaced."""
        return text.replace(key, _REDACTED) if key and key in text else text

    @staticmethod
    def _redact_object(obj: Mapping[str, JSON], key: str | None) -> JSONObject:
        """A JSON object with the key replaced in its strings (keys included)."""
        redact, text = OpenAIBackend._redact, OpenAIBackend._redact_text
        return {text(k, key): redact(v, key) for k, v in obj.items()}

    @staticmethod
    def _redact(obj: JSON, key: str | None) -> JSON:
        """Replace any occurrence of the key (servers sometimes echo it) in strings of ``obj``."""
        if not key:
            return obj
        if isinstance(obj, str):
            return obj.replace(key, _REDACTED) if key in obj else obj
        if isinstance(obj, dict):
            return OpenAIBackend._redact_object(obj, key)
        if isinstance(obj, list):
            return [OpenAIBackend._redact(v, key) for v in obj]
        return obj

    # -- payload --------------------------------------------------------------------------------
    def _payload(self, req: Request) -> JSONObject:
        cfg = req.config
        body: JSONObject = {
            "model": self.model,
            "messages": [m.to_dict() for m in req.messages],
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens,
            "presence_penalty": cfg.presence_penalty,
            "frequency_penalty": cfg.frequency_penalty,
        }
        if cfg.stop:
            body["stop"] = list(cfg.stop)
        if cfg.seed is not None:
            body["seed"] = cfg.seed
        if cfg.top_k is not None:  # not OpenAI; vLLM/TGI accept it
            body["top_k"] = cfg.top_k
        if req.json_schema is not None:
            schema: JSONObject = {"name": "verdict", "schema": req.json_schema, "strict": False}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        top = 0
        if req.choices is not None:
            top = self.choice_top_logprobs
        if cfg.logprobs:
            top = max(top, cfg.top_logprobs)
        if req.choices is not None or cfg.logprobs:
            body["logprobs"] = True
            if top > 0:
                body["top_logprobs"] = top
        return body

    # -- response parsing -----------------------------------------------------------------------
    def _unavailable(self, what: str) -> LogprobsUnavailableError:
        return LogprobsUnavailableError(
            f"openai backend: the server at {self.display_url} returned no {what} for model {self.model}; "
            "choice scoring and token log-probs need a server that supports 'logprobs'/'top_logprobs' "
            "(OpenAI chat models, vLLM, TGI >= 2)"
        )

    def _parse(self, req: Request, data: object) -> Response:
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            detail = str(data)[:_MAX_ERROR_CHARS]
            raise BackendError(
                f"openai backend: unexpected response from {self.display_url} for model {self.model} "
                f"(no 'choices'): {detail}"
            )
        ch = data["choices"][0] or {}
        msg = ch.get("message") or {}
        text = msg.get("content") or ""
        content = (ch.get("logprobs") or {}).get("content")

        choice_lp: dict[str, float | None] | None = None
        if req.choices is not None:
            if not content:
                raise self._unavailable("log-probs")
            first = content[0]
            top = _top_to_dict(first.get("top_logprobs"))
            if not top:
                raise self._unavailable("top_logprobs")
            tok, lp = first.get("token"), first.get("logprob")
            if tok is not None and lp is not None and str(tok) not in top:
                top[str(tok)] = float(lp)
            if self.choice_match == "exact":
                choice_lp = {c: top.get(c) for c in req.choices}
            else:
                choice_lp = choice_logprobs_from_top(top, req.choices)

        token_lp: list[TokenLogprob] | None = None
        if req.config.logprobs:
            if content is None:
                raise self._unavailable("token log-probs")
            keep = req.config.top_logprobs
            token_lp = []
            for c in content:
                top = _top_to_dict(c.get("top_logprobs"))
                if keep:
                    top = dict(sorted(top.items(), key=lambda kv: -kv[1])[:keep])
                else:
                    top = {}
                token_lp.append(
                    TokenLogprob(token=str(c.get("token", "")), logprob=float(c.get("logprob")), top=top)
                )

        u = data.get("usage") or {}
        usage = Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0))
        return Response(
            text=text,
            choice_logprobs=choice_lp,  # None marks a label outside the top-k
            token_logprobs=token_lp,
            usage=usage,
            finish_reason=ch.get("finish_reason"),
            raw=data,
        )

    # -- one request with retries ---------------------------------------------------------------
    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, _RetryableHTTPError) and exc.retry_after is not None:
            return min(exc.retry_after, self.retry_after_cap)
        base = min(self.retry_max_wait, self.retry_initial * 2 ** (state.attempt_number - 1))
        return min(self.retry_max_wait, base + random.uniform(0, self.retry_initial))

    def _before_sleep(self, state: RetryCallState) -> None:
        with self._stats_lock:
            self.stats.retries += 1
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "openai backend: %s from %s (model %s); retry %d/%d in %.2fs",
            self._describe(exc),
            self.display_url,
            self.model,
            state.attempt_number,
            self.max_retries,
            wait,
        )

    @staticmethod
    def _describe(exc: BaseException | None) -> str:
        if isinstance(exc, _RetryableHTTPError):
            return f"HTTP {exc.status}: {exc.message}"
        if isinstance(exc, httpx.TimeoutException):
            return f"timeout ({type(exc).__name__})"
        if exc is None:
            return "unknown error"
        return f"{type(exc).__name__}: {exc}"

    async def _post_once(
        self,
        client: httpx.AsyncClient,
        body: JSONObject,
        headers: dict[str, str],
        timeout: float,
        key: str | None,
    ) -> JSON:
        resp = await client.post(
            f"{self.base_url}/chat/completions", json=body, headers=headers, timeout=httpx.Timeout(timeout)
        )
        status = resp.status_code
        if 200 <= status < 300:
            try:
                return resp.json()
            except ValueError as e:
                snippet = self._redact_text(resp.text[:300], key)
                raise BackendError(
                    f"openai backend: non-JSON response (HTTP {status}) from {self.display_url} "
                    f"for model {self.model}: {snippet!r}"
                ) from e
        message = self._redact_text(_server_message(resp), key)
        if status == 400 and "response_format" in body and _FORMAT_REJECTED.search(message):
            log.warning("openai backend: response_format rejected (%s); sending without it", message)
            del body["response_format"]  # the caller's body: later retries go without it, raw["guided"]=False
            return await self._post_once(client, body, headers, timeout, key)
        if status in RETRYABLE_STATUS or status >= 500:
            raise _RetryableHTTPError(status, message, parse_retry_after(resp.headers))
        if status in (401, 403):
            raise BackendConfigError(
                f"openai backend: HTTP {status} from {self.display_url} for model {self.model}: {message} — "
                f"authentication failed: check the API key in ${self.api_key_env} (api_key_env=VAR names another "
                "variable) and base_url; rerunning without fixing it will fail the same way"
            )
        if status == 404:
            raise BackendConfigError(
                f"openai backend: HTTP 404 from {self.display_url} for model {self.model}: {message} — check the "
                "model name and base_url (an OpenAI-compatible server serves <base_url>/chat/completions)"
            )
        raise BackendError(
            f"openai backend: HTTP {status} from {self.display_url} for model {self.model}: {message}"
        )

    async def _one(self, client: httpx.AsyncClient, req: Request, key: str | None) -> Response:
        body = self._payload(req)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        timeout = float(req.config.timeout) if req.config.timeout else self.timeout
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(_is_retryable),
            before_sleep=self._before_sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    data = await self._post_once(client, body, headers, timeout, key)
        except _RetryableHTTPError as e:
            raise BackendError(
                f"openai backend: HTTP {e.status} from {self.display_url} for model {self.model} after "
                f"{self.max_retries + 1} attempts: {e.message}"
            ) from None
        except httpx.TimeoutException:
            raise BackendError(
                f"openai backend: request to {self.display_url} for model {self.model} timed out "
                f"({timeout:g}s) on all {self.max_retries + 1} attempts"
            ) from None
        except (httpx.NetworkError, httpx.RemoteProtocolError) as e:
            raise BackendError(
                f"openai backend: cannot reach {self.display_url} for model {self.model} after "
                f"{self.max_retries + 1} attempts: {type(e).__name__}: {self._redact_text(str(e), key)}"
            ) from None
        except httpx.HTTPError as e:  # e.g. invalid URL / unsupported protocol: not retried
            raise BackendError(
                f"openai backend: request to {self.display_url} for model {self.model} failed: "
                f"{type(e).__name__}: {self._redact_text(str(e), key)}"
            ) from None
        data = self._redact(data, key)
        try:
            resp = self._parse(req, data)
        except BackendError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            raise BackendError(
                f"openai backend: malformed response from {self.display_url} for model {self.model}: "
                f"{type(e).__name__}: {e}; body: {str(data)[:_MAX_ERROR_CHARS]}"
            ) from None
        if req.json_schema is not None and resp.raw is not None:  # raw: the server's JSON object
            resp.raw["guided"] = "response_format" in body
        return resp

    # -- batches --------------------------------------------------------------------------------
    async def _run_batch(
        self, requests: list[Request], emit: Callable[[int, Response], None]
    ) -> list[Response]:
        key = self._api_key()
        sem = asyncio.Semaphore(self.concurrency)
        failures: list[BaseException] = []
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)

        async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(self.timeout)) as client:

            async def task(i: int, req: Request) -> Response:
                async with sem:
                    if failures:
                        raise _Aborted()
                    try:
                        resp = await self._one(client, req, key)
                    except BaseException as e:
                        failures.append(e)
                        raise
                emit(i, resp)
                return resp

            results = await asyncio.gather(
                *(task(i, r) for i, r in enumerate(requests)), return_exceptions=True
            )
        if failures:
            raise failures[0]
        for r in results:
            if isinstance(r, BaseException):  # pragma: no cover - only if emit itself raised
                raise r
        return list(results)  # type: ignore[arg-type]  # no exception is left (raised above)

    def _generate(self, requests: list[Request], emit: Callable[[int, Response], None]) -> list[Response]:
        if self.batch_api:
            return run_batch_api(self, requests, emit, transport=self.batch_transport)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._run_batch(requests, emit))
        # An event loop already runs in this thread (Jupyter): run the batch on a worker thread.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="openai-backend") as ex:
            return ex.submit(asyncio.run, self._run_batch(requests, emit)).result()

    async def agenerate(
        self, requests: Sequence[Request], on_result: Callable[[int, Response], None] | None = None
    ) -> list[Response]:
        """Async twin of :meth:`generate` for callers that already run an event loop."""
        requests = list(requests)
        if not requests:
            return []
        if any(r.continuation is not None for r in requests):  # generate() checks this in the base class
            raise LogprobsUnavailableError(
                f"openai backend ({self.model}): no continuation log-probs; use hf or vllm"
            )
        with self._stats_lock:
            self.stats.requests += len(requests)
            self.stats.batches += 1

        def emit(i: int, resp: Response) -> None:
            if on_result is not None:
                on_result(i, resp)

        if self.batch_api:  # the Batch API client is synchronous (it mostly sleeps between polls)
            return await asyncio.to_thread(self._generate, requests, emit)
        return await self._run_batch(requests, emit)
