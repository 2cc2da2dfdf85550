"""OpenAI Batch API mode of the ``openai`` backend (``batch_api=true``).

``openai:gpt-4o-mini,batch_api=true[,batch_poll_seconds=30,batch_completion_window=24h,
batch_max_requests=50000,batch_state_dir=PATH]``

The request bodies are exactly the online ones (:meth:`OpenAIBackend._payload`), written one per
line into an in-memory JSONL file (``custom_id`` ``req-<i>``, ``i`` = the request's index in the
``generate`` call), uploaded (``POST /files``, purpose ``batch``), and run as one batch
(``POST /batches``) per ``batch_max_requests`` requests (and per ~190 MB of JSONL). All batches
are submitted first and then polled every ``batch_poll_seconds`` until each is ``completed``,
``failed``, ``expired`` or ``cancelled``; output and error files are downloaded, lines are mapped
back by ``custom_id`` and parsed with :meth:`OpenAIBackend._parse`. Every successful response is
emitted before any error is raised (per-request errors name their custom id and the server's
message; a failed batch names its id and validation errors), so a write-through cache keeps them
and a rerun only sends the rest.

Resumability: once a batch exists, ``{state_dir}/<sha256>.json`` records its id (plus model,
sanitized base URL, request count — never the key). The sha256 covers the sanitized base URL and
the input JSONL, so rerunning the same requests after a crash polls the existing batch instead of
paying for a second one. The file is removed once the batch's results were handed out.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from harness.backends.openai_http import (
    RETRYABLE_STATUS,
    _is_retryable,
    _RetryableHTTPError,
    _server_message,
    parse_retry_after,
)
from harness.cache import default_home
from harness.jsontypes import JSON, JSONObject
from harness.types import BackendConfigError, BackendError, LogprobsUnavailableError, Request, Response

if TYPE_CHECKING:  # the backend passes itself in; only annotations name its class
    from harness.backends.openai_api import OpenAIBackend

log = logging.getLogger(__name__)

ENDPOINT = "/v1/chat/completions"
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
OPENAI_MAX_BATCH_REQUESTS = 50_000
MAX_FILE_BYTES = 190 * 1024 * 1024  # OpenAI's limit is 200 MB per input file
_MAX_LISTED_ERRORS = 5


def default_state_dir() -> Path:
    return default_home() / "openai-batches"


class _NotFound(BackendError):
    """HTTP 404: e.g. a remembered batch id this key / server does not know."""


def _creation_safe(exc: BaseException) -> bool:
    """Retry creating a batch only when the server cannot have created it (no double billing)."""
    return isinstance(exc, _RetryableHTTPError | httpx.ConnectError | httpx.ConnectTimeout)


class _Chunk:
    """One batch: the indices of its requests, its JSONL input and the state-file key."""

    def __init__(self, indices: list[int], lines: list[bytes], url: str) -> None:
        self.indices = indices
        self.jsonl = b"".join(lines)
        self.sha = hashlib.sha256(url.encode() + b"\n" + self.jsonl).hexdigest()
        self.batch_id: str | None = None
        self.batch: JSONObject = {}
        #: the (status, request_counts) last logged
        self.counts: tuple[JSON, JSONObject] | None = None


def _object(value: JSON) -> JSONObject:
    """A JSON object of an answer, ``{}`` when the field is missing (or not an object)."""
    return dict(value) if isinstance(value, Mapping) else {}


class BatchRunner:
    """Runs one ``generate`` call of an :class:`OpenAIBackend` through the Batch API."""

    def __init__(self, backend: OpenAIBackend, transport: httpx.BaseTransport | None = None) -> None:
        self.b = backend
        self.transport = transport
        self.state_dir = Path(backend.batch_state_dir) if backend.batch_state_dir else default_state_dir()
        self.key: str | None = None
        self.where = f"model {backend.model} at {backend.display_url}"

    # -- HTTP ---------------------------------------------------------------------------------
    def _call(
        self,
        client: httpx.Client,
        method: str,
        path: str,
        *,
        create: bool = False,
        data: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        json_body: JSONObject | None = None,
    ) -> httpx.Response:
        retrying = Retrying(
            stop=stop_after_attempt(self.b.max_retries + 1),
            wait=self.b._wait,
            retry=retry_if_exception(_creation_safe if create else _is_retryable),
            before_sleep=self.b._before_sleep,
            reraise=True,
        )
        what = f"{method} {path}"
        try:
            for attempt in retrying:
                with attempt:
                    resp = self._once(client, method, path, data=data, files=files, json_body=json_body)
        except BackendError:
            raise
        except _RetryableHTTPError as e:
            raise BackendError(
                f"openai batch API: {what} failed ({self.where}) after {self.b.max_retries + 1} attempts: "
                f"HTTP {e.status}: {e.message}"
            ) from None
        except httpx.HTTPError as e:
            raise BackendError(
                f"openai batch API: {what} failed ({self.where}): {type(e).__name__}: "
                f"{self.b._redact_text(str(e), self.key)}"
            ) from None
        return resp

    def _once(
        self,
        client: httpx.Client,
        method: str,
        path: str,
        *,
        data: Mapping[str, str] | None,
        files: Mapping[str, tuple[str, bytes, str]] | None,
        json_body: JSONObject | None,
    ) -> httpx.Response:
        resp = client.request(method, f"{self.b.base_url}{path}", data=data, files=files, json=json_body)
        status = resp.status_code
        if 200 <= status < 300:
            return resp
        message = self.b._redact_text(_server_message(resp), self.key)
        if status in RETRYABLE_STATUS or status >= 500:
            raise _RetryableHTTPError(status, message, parse_retry_after(resp.headers))
        cls = _NotFound if status == 404 else BackendConfigError if status in (401, 403) else BackendError
        auth = (
            " — authentication failed: check the API key (api_key_env) and base_url"
            if status in (401, 403)
            else ""
        )
        raise cls(f"openai batch API: {method} {path}: HTTP {status} ({self.where}): {message}{auth}")

    def _json(self, resp: httpx.Response) -> JSONObject:
        try:
            data = resp.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise BackendError(
                f"openai batch API: non-JSON answer from {resp.request.url.path} ({self.where}): "
                f"{self.b._redact_text(resp.text[:300], self.key)!r}"
            )
        return self.b._redact_object(data, self.key)

    # -- state files ----------------------------------------------------------------------------
    def _state_path(self, chunk: _Chunk) -> Path:
        return self.state_dir / f"{chunk.sha}.json"

    def _load_state(self, chunk: _Chunk) -> str | None:
        try:
            data = json.loads(self._state_path(chunk).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        bid = data.get("batch_id") if isinstance(data, dict) else None
        return str(bid) if bid else None

    def _save_state(self, chunk: _Chunk) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "batch_id": chunk.batch_id,
            "model": self.b.model,
            "base_url": self.b.display_url,
            "n_requests": len(chunk.indices),
            "input_sha256": chunk.sha,
            "created_at": time.time(),
        }
        fd, tmp = tempfile.mkstemp(dir=self.state_dir, prefix=".batch-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f, indent=1)
        os.replace(tmp, self._state_path(chunk))

    def _drop_state(self, chunk: _Chunk) -> None:
        self._state_path(chunk).unlink(missing_ok=True)

    # -- steps ----------------------------------------------------------------------------------
    def _chunks(self, requests: list[Request]) -> list[_Chunk]:
        chunks: list[_Chunk] = []
        idx: list[int] = []
        lines: list[bytes] = []
        size = 0
        for i, req in enumerate(requests):
            line = {"custom_id": f"req-{i}", "method": "POST", "url": ENDPOINT, "body": self.b._payload(req)}
            raw = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
            if idx and (len(idx) >= self.b.batch_max_requests or size + len(raw) > MAX_FILE_BYTES):
                chunks.append(_Chunk(idx, lines, self.b.display_url))
                idx, lines, size = [], [], 0
            idx.append(i)
            lines.append(raw)
            size += len(raw)
        chunks.append(_Chunk(idx, lines, self.b.display_url))
        return chunks

    def _submit(self, client: httpx.Client, chunk: _Chunk) -> None:
        bid = self._load_state(chunk)
        if bid:
            try:
                chunk.batch = self._json(self._call(client, "GET", f"/batches/{bid}"))
                chunk.batch_id = bid
                log.info(
                    "openai batch API: resuming batch %s (%d requests, %s)",
                    bid,
                    len(chunk.indices),
                    chunk.batch.get("status"),
                )
                return
            except _NotFound as e:  # other errors propagate: the state is kept for a later rerun
                log.warning("openai batch API: cannot resume batch %s (%s); submitting a new one", bid, e)
                self._drop_state(chunk)
        files = {"file": (f"batch-{chunk.sha[:16]}.jsonl", chunk.jsonl, "application/jsonl")}
        up = self._json(self._call(client, "POST", "/files", data={"purpose": "batch"}, files=files))
        if not up.get("id"):
            raise BackendError(f"openai batch API: file upload returned no id ({self.where}): {up}")
        body: JSONObject = {
            "input_file_id": up["id"],
            "endpoint": ENDPOINT,
            "completion_window": self.b.batch_completion_window,
            "metadata": {"dialeval_input_sha256": chunk.sha},
        }
        chunk.batch = self._json(self._call(client, "POST", "/batches", json_body=body, create=True))
        chunk.batch_id = str(chunk.batch.get("id") or "")
        if not chunk.batch_id:
            raise BackendError(
                f"openai batch API: batch creation returned no id ({self.where}): {chunk.batch}"
            )
        self._save_state(chunk)
        log.info(
            "openai batch API: submitted batch %s (%d requests, %s)",
            chunk.batch_id,
            len(chunk.indices),
            self.where,
        )

    def _lines(self, client: httpx.Client, file_id: JSON) -> list[JSONObject]:
        if not file_id:
            return []
        text = self._call(client, "GET", f"/files/{file_id}/content").text
        out = []
        for line in text.splitlines():
            if line.strip():
                try:
                    obj = json.loads(line)
                except ValueError:
                    obj = None
                if isinstance(obj, dict):
                    out.append(self.b._redact_object(obj, self.key))
                else:
                    log.warning("openai batch API: skipping a malformed line of file %s", file_id)
        return out

    def _collect(
        self,
        client: httpx.Client,
        chunk: _Chunk,
        requests: list[Request],
        emit: Callable[[int, Response], None],
        results: dict[int, Response],
        errors: dict[int, BackendError],
    ) -> str | None:
        """Emit a finished batch's results; per-request errors go to ``errors``. Returns a batch-level
        problem (failed / expired / cancelled) or None."""
        batch, bid = chunk.batch, chunk.batch_id
        status = batch.get("status")
        wanted = {f"req-{i}": i for i in chunk.indices}
        lines = self._lines(client, batch.get("output_file_id")) + self._lines(
            client, batch.get("error_file_id")
        )
        for line in lines:
            i = wanted.get(str(line.get("custom_id")))
            if i is None or i in results:
                continue
            resp_obj = _object(line.get("response"))
            body = resp_obj.get("body")
            code = resp_obj.get("status_code")
            err = line.get("error") or (body.get("error") if isinstance(body, dict) else None)
            if err or code != 200:
                msg = err.get("message") if isinstance(err, dict) else err
                errors[i] = BackendError(
                    f"openai batch API: request req-{i} failed in batch {bid} (HTTP {code}): "
                    f"{str(msg or body)[:1000]}"
                )
                continue
            try:
                resp = self.b._parse(requests[i], body)
            except BackendError as e:
                errors[i] = type(e)(f"req-{i} (batch {bid}): {e}")
                continue
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
                errors[i] = BackendError(
                    f"openai batch API: malformed result for req-{i} in batch {bid}: {type(e).__name__}: {e}"
                )
                continue
            if requests[i].json_schema is not None and resp.raw is not None:  # raw: the result's body
                resp.raw["guided"] = True
            errors.pop(i, None)
            results[i] = resp
            emit(i, resp)
        problem = None
        if status != "completed":
            errs = _object(batch.get("errors")).get("data")
            errs = errs if isinstance(errs, list) else []
            detail = "; ".join(
                f"{e.get('code') or 'error'}: {e.get('message')}"
                + (f" (line {e['line']})" if e.get("line") else "")
                for e in errs[:_MAX_LISTED_ERRORS]
                if isinstance(e, dict)
            )
            problem = f"batch {bid} {status}" + (f": {detail}" if detail else "")
        for i in chunk.indices:
            if i not in results and i not in errors:
                why = problem or f"batch {bid} completed without a result for it"
                errors[i] = BackendError(f"openai batch API: no result for req-{i} ({why})")
        # Results are out (emitted to the caller / cache): the batch is no longer worth resuming.
        self._drop_state(chunk)
        return problem

    # -- the whole run --------------------------------------------------------------------------
    def run(self, requests: list[Request], emit: Callable[[int, Response], None]) -> list[Response]:
        self.key = self.b._api_key()
        headers = {"Accept": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        chunks = self._chunks(requests)
        results: dict[int, Response] = {}
        errors: dict[int, BackendError] = {}
        problems: list[str] = []
        with httpx.Client(
            headers=headers, timeout=httpx.Timeout(self.b.timeout), transport=self.transport
        ) as client:
            for chunk in chunks:
                self._submit(client, chunk)
            pending = list(chunks)
            while pending:
                still: list[_Chunk] = []
                for chunk in pending:
                    if chunk.batch.get("status") not in TERMINAL:
                        chunk.batch = self._json(self._call(client, "GET", f"/batches/{chunk.batch_id}"))
                    counts = _object(chunk.batch.get("request_counts"))
                    status = chunk.batch.get("status")
                    if (status, counts) != chunk.counts:
                        chunk.counts = (status, counts)
                        log.info(
                            "openai batch API: batch %s %s: %s/%s done, %s failed (%s)",
                            chunk.batch_id,
                            status,
                            counts.get("completed", 0),
                            counts.get("total", len(chunk.indices)),
                            counts.get("failed", 0),
                            self.where,
                        )
                    if status in TERMINAL:
                        problem = self._collect(client, chunk, requests, emit, results, errors)
                        if problem:
                            problems.append(problem)
                    else:
                        still.append(chunk)
                pending = still
                if pending and self.b.batch_poll_seconds > 0:
                    time.sleep(self.b.batch_poll_seconds)
        if errors:
            self._raise(errors, problems, len(requests))
        return [results[i] for i in range(len(requests))]

    def _raise(self, errors: dict[int, BackendError], problems: list[str], total: int) -> None:
        ordered = [errors[i] for i in sorted(errors)]
        if len(ordered) == 1 and not problems:
            raise ordered[0]
        all_lp = all(isinstance(e, LogprobsUnavailableError) for e in ordered)
        # Requests of a failed / expired batch are covered by the batch's own problem line.
        own = [str(e) for e in ordered if not (problems and "no result for req-" in str(e))]
        listed = problems[:_MAX_LISTED_ERRORS] + own[:_MAX_LISTED_ERRORS]
        more = len(own) - _MAX_LISTED_ERRORS
        msg = (
            f"openai batch API ({self.where}): {len(ordered)} of {total} requests failed "
            f"({total - len(ordered)} were returned): "
            + "; ".join(listed)
            + (f"; ... {more} more" if more > 0 else "")
        )
        raise (LogprobsUnavailableError if all_lp else BackendError)(msg)


def run_batch_api(
    backend: OpenAIBackend,
    requests: list[Request],
    emit: Callable[[int, Response], None],
    transport: httpx.BaseTransport | None = None,
) -> list[Response]:
    """Generate ``requests`` with ``backend`` through the Batch API (see the module docstring)."""
    return BatchRunner(backend, transport).run(requests, emit)
