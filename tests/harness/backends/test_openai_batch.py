"""The ``openai`` backend's Batch API mode against an in-process fake Batch API (httpx.MockTransport)."""

from __future__ import annotations

import json
import logging
import random
import re

import httpx
import pytest

from harness.backends.base import create_backend
from harness.backends.openai_api import OpenAIBackend
from harness.cache import CachedBackend, RequestCache, default_home
from harness.spec import parse_spec
from harness.types import BackendError, ChatMessage, GenerationConfig, Request

SECRET = "sk-test-DO-NOT-LEAK-batch-9a8b7c6d5e4f"
BASE = "http://batch.test/v1"


class Crash(Exception):
    """Stands in for the process dying mid-batch."""


class FakeBatchAPI:
    """Files upload / content, batches create / retrieve; each batch goes validating -> in_progress
    -> completed over successive polls. Knobs: ``fail_ids`` (custom ids answered with HTTP 400, in
    the error file or, with ``errors_in_output``, in the output file), ``fail_batch`` (validation
    fails), ``shuffle`` (output lines in random order), ``crash_on_poll`` (raise Crash at the first poll)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.uploads: list[list[dict]] = []
        self.creates: list[dict] = []
        self.auth: list[str | None] = []
        self.fail_ids: set[str] = set()
        self.errors_in_output = False
        self.fail_batch = False
        self.shuffle = False
        self.crash_on_poll = False
        self.expire_ids: set[str] = set()  # never run: the batch ends "expired" without them
        self.transport = httpx.MockTransport(self.handle)

    # -- helpers --------------------------------------------------------------------------------
    def _file(self, content: bytes) -> str:
        fid = f"file-{len(self.files)}"
        self.files[fid] = content
        return fid

    @staticmethod
    def completion(body: dict) -> dict:
        user = body["messages"][-1]["content"]
        content = None
        if body.get("logprobs"):
            top = [{"token": "Yes", "logprob": -0.1}, {"token": "No", "logprob": -2.4}]
            content = [{"token": "Yes", "logprob": -0.1, "top_logprobs": top[: body.get("top_logprobs", 2)]}]
        return {
            "id": "chatcmpl-x",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"answer to {user}"},
                    "logprobs": {"content": content} if content else None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        }

    def _finish(self, batch: dict) -> None:
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]].decode().splitlines()]
        out, err = [], []
        for line in lines:
            cid = line["custom_id"]
            if cid in self.expire_ids:
                batch["status"] = "expired"
                continue
            if cid in self.fail_ids:
                body = {"error": {"message": f"context too long for {cid} (key {SECRET})", "type": "x"}}
                rec = {
                    "id": "r",
                    "custom_id": cid,
                    "response": {"status_code": 400, "body": body},
                    "error": None,
                }
                (out if self.errors_in_output else err).append(rec)
            else:
                resp = {"status_code": 200, "request_id": "q", "body": self.completion(line["body"])}
                out.append({"id": "r", "custom_id": cid, "response": resp, "error": None})
        if self.shuffle:
            random.Random(0).shuffle(out)
        batch["output_file_id"] = self._file("".join(json.dumps(x) + "\n" for x in out).encode())
        if err:
            batch["error_file_id"] = self._file("".join(json.dumps(x) + "\n" for x in err).encode())
        n_failed = sum(1 for x in lines if x["custom_id"] in self.fail_ids)
        batch["request_counts"] = {
            "total": len(lines),
            "completed": len(lines) - n_failed,
            "failed": n_failed,
        }

    # -- the transport --------------------------------------------------------------------------
    def handle(self, request: httpx.Request) -> httpx.Response:
        self.auth.append(request.headers.get("authorization"))
        path = request.url.path.removeprefix("/v1")
        if request.method == "POST" and path == "/files":
            boundary = re.search(r"boundary=(\S+)", request.headers["content-type"]).group(1).encode()
            parts = {}
            for part in request.content.split(b"--" + boundary):
                if b"\r\n\r\n" in part:
                    head, data = part.split(b"\r\n\r\n", 1)
                    name = re.search(rb'name="([^"]+)"', head).group(1).decode()
                    parts[name] = data.removesuffix(b"\r\n")
            assert parts["purpose"] == b"batch"
            self.uploads.append([json.loads(x) for x in parts["file"].decode().splitlines()])
            return httpx.Response(200, json={"id": self._file(parts["file"]), "object": "file"})
        if request.method == "POST" and path == "/batches":
            body = json.loads(request.content)
            assert body["endpoint"] == "/v1/chat/completions" and body["input_file_id"] in self.files
            self.creates.append(body)
            bid = f"batch_{len(self.batches)}"
            self.batches[bid] = {"id": bid, "object": "batch", "status": "validating", "polls": 0, **body}
            return httpx.Response(200, json=self.batches[bid])
        m = re.fullmatch(r"/batches/([^/]+)", path)
        if request.method == "GET" and m:
            if self.crash_on_poll:
                raise Crash()
            batch = self.batches.get(m.group(1))
            if batch is None:
                return httpx.Response(404, json={"error": {"message": "No batch found"}})
            batch["polls"] += 1
            if batch["status"] in ("validating", "in_progress"):
                if self.fail_batch:
                    batch["status"] = "failed"
                    batch["errors"] = {"data": [{"code": "invalid_model", "message": "model x not allowed"}]}
                elif batch["polls"] == 1:
                    batch["status"] = "in_progress"
                    batch["request_counts"] = {"total": 0, "completed": 0, "failed": 0}
                else:
                    batch["status"] = "completed"
                    self._finish(batch)
            return httpx.Response(200, json=batch)
        m = re.fullmatch(r"/files/([^/]+)/content", path)
        if request.method == "GET" and m and m.group(1) in self.files:
            return httpx.Response(200, content=self.files[m.group(1)])
        return httpx.Response(404, json={"error": {"message": f"no route {request.method} {path}"}})


@pytest.fixture
def api():
    return FakeBatchAPI()


def req(i: int, *, choices=None, **cfg) -> Request:
    return Request(
        messages=(ChatMessage("system", "You are a judge."), ChatMessage("user", f"question q{i}?")),
        config=GenerationConfig(**cfg),
        choices=choices,
    )


def backend(api: FakeBatchAPI, **kw) -> OpenAIBackend:
    opts = dict(batch_api=True, batch_poll_seconds=0, batch_transport=api.transport, retry_initial=0.001)
    opts.update(kw)
    return OpenAIBackend("gpt-test", base_url=BASE, **opts)


def state_files():
    d = default_home() / "openai-batches"
    return sorted(d.glob("*.json")) if d.is_dir() else []


# -- results --------------------------------------------------------------------------------------
def test_results_in_order_with_shuffled_output(api, caplog):
    api.shuffle = True
    b = backend(api)
    seen: list[int] = []
    with caplog.at_level(logging.INFO, logger="harness.backends.openai_batch"):
        out = b.generate([req(i, max_tokens=4) for i in range(12)], on_result=lambda i, r: seen.append(i))
    assert [r.text for r in out] == [f"answer to question q{i}?" for i in range(12)]
    assert sorted(seen) == list(range(12)) and seen != list(range(12))  # emitted as the file came
    assert out[0].usage.prompt_tokens == 7 and out[0].finish_reason == "stop"
    (lines,) = api.uploads
    assert [x["custom_id"] for x in lines] == [f"req-{i}" for i in range(12)]
    assert {x["url"] for x in lines} == {"/v1/chat/completions"} and {x["method"] for x in lines} == {"POST"}
    assert lines[3]["body"] == b._payload(req(3, max_tokens=4))  # the online request body, unchanged
    assert api.creates[0]["completion_window"] == "24h"
    assert "in_progress" in caplog.text and "12/12 done" in caplog.text
    assert state_files() == []  # done: nothing left to resume


def test_choice_logprobs_bodies_unchanged(api):
    b = backend(api)
    out = b.generate([req(i, max_tokens=1, choices=("Yes", "No")) for i in range(3)])
    body = api.uploads[0][0]["body"]
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    assert out[2].choice_logprobs == {"Yes": pytest.approx(-0.1), "No": pytest.approx(-2.4)}


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("in_output", [False, True])
def test_per_request_error_after_successes_emitted(api, in_output):
    api.fail_ids = {"req-2"}
    api.errors_in_output = in_output
    b = backend(api)
    seen: list[int] = []
    with pytest.raises(BackendError, match=r"req-2.*batch_0.*context too long"):
        b.generate([req(i) for i in range(5)], on_result=lambda i, r: seen.append(i))
    assert sorted(seen) == [0, 1, 3, 4]


def test_rerun_through_cache_sends_only_failed(api, tmp_path):
    api.fail_ids = {"req-1", "req-3"}
    cb = CachedBackend(backend(api), RequestCache(tmp_path / "c.sqlite"))
    reqs = [req(i) for i in range(5)]
    with pytest.raises(BackendError, match=r"2 of 5 requests failed"):
        cb.generate(reqs)
    api.fail_ids = set()
    out = cb.generate(reqs)
    assert sum(r.cached for r in out) == 3 and len(api.uploads) == 2
    assert [x["body"]["messages"][1]["content"] for x in api.uploads[1]] == ["question q1?", "question q3?"]


def test_failed_batch_names_id(api):
    api.fail_batch = True
    with pytest.raises(BackendError, match=r"batch_0 failed: invalid_model: model x not allowed"):
        backend(api).generate([req(0), req(1)])
    assert state_files() == []  # a failed batch is not resumed; a rerun submits a new one


def test_expired_batch_keeps_partial_results(api):
    api.expire_ids = {"req-1", "req-2"}
    seen: list[int] = []
    with pytest.raises(BackendError, match=r"2 of 4 requests failed.*batch_0 expired") as ei:
        backend(api).generate([req(i) for i in range(4)], on_result=lambda i, r: seen.append(i))
    assert sorted(seen) == [0, 3] and "no result" not in str(ei.value)


# -- splitting ------------------------------------------------------------------------------------
def test_split_by_batch_max_requests(api):
    b = backend(api, batch_max_requests=2)
    out = b.generate([req(i) for i in range(5)])
    assert [r.text for r in out] == [f"answer to question q{i}?" for i in range(5)]
    assert [len(u) for u in api.uploads] == [2, 2, 1] and len(api.creates) == 3
    assert [x["custom_id"] for x in api.uploads[2]] == ["req-4"]
    with pytest.raises(ValueError, match="batch_max_requests"):
        backend(api, batch_max_requests=0)


# -- resume -----------------------------------------------------------------------------------------
def test_resume_existing_batch_after_crash(api, tmp_path):
    state = tmp_path / "state"
    reqs = [req(i) for i in range(4)]
    api.crash_on_poll = True
    with pytest.raises(Crash):
        backend(api, batch_state_dir=str(state)).generate(reqs)
    (sf,) = state.glob("*.json")
    assert json.loads(sf.read_text())["batch_id"] == "batch_0"

    api.crash_on_poll = False
    out = backend(api, batch_state_dir=str(state)).generate(reqs)  # a new process, same requests
    assert len(api.uploads) == 1 and len(api.creates) == 1  # no second upload, nobody pays twice
    assert [r.text for r in out] == [f"answer to question q{i}?" for i in range(4)]
    assert list(state.glob("*.json")) == []


def test_resume_unknown_batch_resubmits(api, tmp_path):
    state = tmp_path / "state"
    api.crash_on_poll = True
    with pytest.raises(Crash):
        backend(api, batch_state_dir=str(state)).generate([req(0)])
    api.crash_on_poll = False
    api.batches.clear()  # e.g. another key / organisation: the server answers 404
    out = backend(api, batch_state_dir=str(state)).generate([req(0)])
    assert out[0].text == "answer to question q0?" and len(api.creates) == 2


# -- secrets / spec / identity ----------------------------------------------------------------------
def test_api_key_never_leaks(api, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    api.fail_ids = {"req-0"}
    api.crash_on_poll = True
    with caplog.at_level(logging.DEBUG), pytest.raises(Crash):
        backend(api).generate([req(0), req(1)])
    (sf,) = state_files()
    assert SECRET not in sf.read_text()
    api.crash_on_poll = False
    with caplog.at_level(logging.DEBUG), pytest.raises(BackendError) as ei:
        backend(api).generate([req(0), req(1)])
    assert set(api.auth) == {f"Bearer {SECRET}"}
    assert SECRET not in str(ei.value) and "***" in str(ei.value)
    assert SECRET not in caplog.text and "batch_0" in caplog.text


def test_spec_options_and_shared_identity(api):
    spec = f"openai:gpt-test,base_url={BASE},batch_api=true,batch_poll_seconds=0,batch_max_requests=3"
    b = create_backend(parse_spec(spec))
    assert b.batch_api is True and b.batch_max_requests == 3 and b.batch_completion_window == "24h"
    online = create_backend(parse_spec(f"openai:gpt-test,base_url={BASE}"))
    assert online.batch_api is False and b.identity() == online.identity()
    assert create_backend(parse_spec(f"openai:m,base_url={BASE},batch_api=false")).batch_api is False
    with pytest.raises(ValueError, match="batch_poll_seconds"):
        OpenAIBackend("m", base_url=BASE, batch_poll_seconds=-1)


def test_agenerate_in_batch_mode(api):
    import asyncio

    out = asyncio.run(backend(api).agenerate([req(0), req(1)]))
    assert [r.text for r in out] == ["answer to question q0?", "answer to question q1?"]
