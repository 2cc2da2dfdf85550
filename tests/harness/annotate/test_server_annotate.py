"""The annotator web app over HTTP: tokens, served paths, bad input, idempotence, kill -9.

A real uvicorn server (in a thread, or a subprocess where it is killed) over a real project file.
Every refused request must answer 4xx JSON ``{"error": ...}`` and leave the project as it was.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from harness.annotate.server import MAX_BODY, AnnotationServer
from harness.annotate.store import Project
from tests.fixtures.annotate_projects import xdial_project

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("annotate-server")
    project = xdial_project(root, "xdial", annotators=("ann-a", "ann-b", "ann-c"))
    tokens = project.tokens()
    with AnnotationServer(project) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        yield srv, project, tokens, client


def raw_get(url: str, path: str) -> tuple[int, str, str]:
    """GET a path exactly as written (no client-side normalisation of ``..`` or ``%2e``)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.getheader("content-type") or "", resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def labels_now(project: Project) -> int:
    return len(project.labels())


def body(item_id: str, labels: dict[str, object], **kw: object) -> dict[str, object]:
    return {"item_id": item_id, "submission_id": str(uuid.uuid4()), "labels": labels, **kw}


def next_id(client: httpx.Client, token: str) -> str:
    answer = client.get(f"/api/{token}/next")
    assert answer.status_code == 200, answer.text
    return answer.json()["item"]["item_id"]


def test_the_page_and_its_assets_are_served_with_headers_that_keep_the_token_private(served):
    srv, _, tokens, client = served
    page = client.get(f"/a/{tokens['ann-a']}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "http" not in page.text.replace("http-equiv", "")  # nothing from another origin
    for name in ("annotate.js", "annotate.css"):
        assert client.get(f"/assets/{name}").status_code == 200
    form = client.get(f"/api/{tokens['ann-a']}/form").json()
    assert [f["dimension"] for f in form["fields"]] == ["relevance"]
    assert "<table>" in form["guideline_html"]  # the guideline's markdown table, rendered


@pytest.mark.parametrize(
    "path",
    [
        "/assets/../server.py",
        "/assets/%2e%2e/server.py",
        "/assets/%2e%2e%2fserver.py",
        "/assets/..%2fstore.py",
        "/assets/..%5cserver.py",
        "/assets/annotate.js/../../server.py",
        "/assets/../../../../../../etc/passwd",
        "/assets//etc/passwd",
        "/assets/%2Fetc%2Fpasswd",
        "/assets/",
        "/etc/passwd",
        "/server.py",
        "/a/../harness/annotate/server.py",
    ],
)
def test_no_file_outside_the_assets_folder_is_served(served, path):
    srv, *_ = served
    status, ctype, text = raw_get(srv.url, path)
    assert status == 404, (path, status, text[:200])
    assert ctype.startswith("application/json") and "error" in json.loads(text)
    assert "import" not in text and "root:" not in text


def test_a_token_reaches_only_its_own_queue(served):
    _, project, tokens, client = served
    a, b = tokens["ann-a"], tokens["ann-b"]
    item_b = next_id(client, b)
    before, progress_b = labels_now(project), client.get(f"/api/{b}/progress").json()
    # A writes B's item: not in A's queue
    answer = client.post(f"/api/{a}/submit", json=body(item_b, {"relevance": 5}))
    assert answer.status_code == 404 and "error" in answer.json()
    assert labels_now(project) == before
    assert client.get(f"/api/{b}/progress").json() == progress_b
    assert next_id(client, b) == item_b
    # nothing of A's answers shows B's item, and A's undo never reopens B's work
    assert next_id(client, a) != item_b
    done = client.post(f"/api/{b}/submit", json=body(item_b, {"relevance": 4}))
    assert done.status_code == 200
    undone = client.post(f"/api/{a}/undo").json()
    assert undone["item"] is None or undone["item"]["item_id"] != item_b
    assert client.get(f"/api/{b}/progress").json()["done"] == progress_b["done"] + 1


def test_forged_and_revoked_tokens_are_refused_on_every_route(served):
    _, project, tokens, client = served
    forged = tokens["ann-a"][:-4] + "AAAA"
    routes = [
        ("GET", "/a/{t}"),
        ("GET", "/api/{t}/form"),
        ("GET", "/api/{t}/next"),
        ("GET", "/api/{t}/progress"),
        ("POST", "/api/{t}/submit"),
        ("POST", "/api/{t}/undo"),
    ]
    item = next_id(client, tokens["ann-c"])
    before = labels_now(project)
    project.revoke("ann-c")
    for token in (forged, "", "x" * 300, tokens["ann-c"]):
        for method, route in routes:
            path = route.format(t=token)
            kw = {"json": body(item, {"relevance": 3})} if method == "POST" else {}
            answer = client.request(method, path, **kw)
            expected = 404 if token == "" else 403  # no token: no such page
            assert answer.status_code == expected, (path, answer.status_code, answer.text)
            assert "error" in answer.json()
    assert labels_now(project) == before


@pytest.mark.parametrize(
    "labels, status, says",
    [
        ({"relevance": 6}, 400, "relevance"),
        ({"relevance": 0}, 400, "relevance"),
        ({"relevance": 5, "fluency": 3}, 400, "fluency"),
        ({}, 400, "relevance"),
        ({"relevance": "5"}, 400, "relevance"),
        ({"relevance": True}, 400, "relevance"),
    ],
)
def test_a_label_outside_the_form_is_refused_and_changes_nothing(served, labels, status, says):
    _, project, tokens, client = served
    a = tokens["ann-a"]
    item = next_id(client, a)
    before, progress = labels_now(project), client.get(f"/api/{a}/progress").json()
    answer = client.post(f"/api/{a}/submit", json=body(item, labels))
    assert answer.status_code == status, answer.text
    assert says in answer.json()["error"]
    assert labels_now(project) == before
    assert client.get(f"/api/{a}/progress").json() == progress
    assert next_id(client, a) == item


@pytest.mark.parametrize(
    "content, says",
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "object"),
        (json.dumps({"item_id": "x", "submission_id": "y", "labels": {}, "extra": 1}).encode(), "extra"),
        (json.dumps({"submission_id": "y", "labels": {"relevance": 3}}).encode(), "item_id"),
        (json.dumps({"item_id": "x", "submission_id": "y", "labels": [3]}).encode(), "labels"),
    ],
)
def test_a_malformed_body_is_a_400_that_changes_nothing(served, content, says):
    _, project, tokens, client = served
    before = labels_now(project)
    answer = client.post(
        f"/api/{tokens['ann-a']}/submit", content=content, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400 and says in answer.json()["error"], answer.text
    assert labels_now(project) == before


def test_an_item_not_in_the_project_is_a_404(served):
    _, project, tokens, client = served
    before = labels_now(project)
    answer = client.post(f"/api/{tokens['ann-a']}/submit", json=body("no-such-item", {"relevance": 3}))
    assert answer.status_code == 404 and "error" in answer.json()
    assert labels_now(project) == before


def test_a_double_submit_is_stored_once(served):
    _, project, tokens, client = served
    a = tokens["ann-a"]
    item = next_id(client, a)
    done = client.get(f"/api/{a}/progress").json()["done"]
    once = body(item, {"relevance": 2})
    answers: list[int] = []

    def send() -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=30) as c:
            answers.append(c.post(f"/api/{a}/submit", json=once).status_code)

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [200] * 4
    assert client.post(f"/api/{a}/submit", json=once).status_code == 200
    assert client.get(f"/api/{a}/progress").json()["done"] == done + 1
    rows = project.labels()
    mine = rows[(rows["item_id"] == item) & (rows["annotator"] == "ann-a")]
    assert len(mine) == 1 and float(mine["value"].iloc[0]) == pytest.approx(2.0)


def test_undo_reopens_the_last_item_with_its_labels(served):
    _, _, tokens, client = served
    b = tokens["ann-b"]
    item = next_id(client, b)
    assert client.post(f"/api/{b}/submit", json=body(item, {"relevance": 1})).status_code == 200
    done = client.get(f"/api/{b}/progress").json()["done"]
    assert next_id(client, b) != item
    undone = client.post(f"/api/{b}/undo").json()
    assert undone["item"]["item_id"] == item
    assert undone["item"]["previous"] == {"relevance": 1.0}
    assert undone["progress"]["done"] == done - 1
    assert next_id(client, b) == item


def _raw_post(url: str, head: str, parts: list[bytes]) -> tuple[int, bytes]:
    """Send a request head and the given body parts, then read the answer without sending more."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        s.sendall(head.encode("latin-1"))
        try:
            for part in parts:
                s.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the rest: what a refusal should do
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head_end = data.index(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":", 1)[1]
                for line in data[:head_end].split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        rest = data[head_end + 4 :]
        while len(rest) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return int(data.split(b" ", 2)[1]), rest


def test_a_body_of_10_mb_is_refused_without_reading_it(served):
    srv, project, tokens, _ = served
    before = labels_now(project)
    path = f"/api/{tokens['ann-a']}/submit"
    host = urlsplit(srv.url).netloc
    # declared: refused from the Content-Length; only 64 KiB of the 10 MB is ever sent
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {10 << 20}\r\n\r\n"
    status, answer = _raw_post(srv.url, head, [b"{" + b" " * 65535])
    assert status == 413 and "bytes" in json.loads(answer)["error"]
    # undeclared (chunked): refused once the stream passes the cap, long before 10 MB
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n%s\r\n" % (16384, b" " * 16384)
    status, answer = _raw_post(srv.url, head, [chunk] * (MAX_BODY // 16384 + 2))
    assert status == 413 and "error" in json.loads(answer)
    assert labels_now(project) == before


def test_unknown_routes_and_methods_answer_json(served):
    _, _, tokens, client = served
    answer = client.get(f"/api/{tokens['ann-a']}/submit")
    assert answer.status_code == 405 and "error" in answer.json()
    answer = client.get("/nothing/here")
    assert answer.status_code == 404 and "error" in answer.json()


# -- a server process: Ctrl-C, kill -9 -------------------------------------------------------------
def start_server(project_file: Path, port: int = 0) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.annotate.server", str(project_file), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise AssertionError(f"the server did not start: {url!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, url


def test_a_killed_server_loses_nothing_it_acknowledged_and_ctrl_c_stops_it_cleanly(tmp_path):
    project = xdial_project(tmp_path, "kill", annotators=("ann-a",), languages=("ar",))
    token = project.tokens()["ann-a"]
    project.close()
    proc, url = start_server(tmp_path / "kill.sqlite")
    port = urlsplit(url).port
    sent: list[dict[str, object]] = []
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            for value in (5, 3):
                item = c.get(f"/api/{token}/next").json()["item"]
                assert item["direction"] == "rtl"
                sent.append(body(item["item_id"], {"relevance": value}))
                assert c.post(f"/api/{token}/submit", json=sent[-1]).status_code == 200
    finally:
        proc.kill()  # SIGKILL: no shutdown code runs
        proc.wait(30)
    proc, url = start_server(tmp_path / "kill.sqlite", port)
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            assert c.get(f"/api/{token}/progress").json()["done"] == 2
            # a client that never saw the answer sends the same submission again: stored once
            assert c.post(f"/api/{token}/submit", json=sent[-1]).status_code == 200
            assert c.get(f"/api/{token}/progress").json()["done"] == 2
            assert c.get(f"/api/{token}/next").json()["item"]["item_id"] not in {s["item_id"] for s in sent}
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == "" and err == ""  # serve() prints nothing; uvicorn's own lines are silenced
    with Project.open(tmp_path / "kill.sqlite") as again:
        rows = again.labels()
        assert sorted(rows["value"].astype(float).tolist()) == pytest.approx([3.0, 5.0])


def test_a_taken_port_is_a_clear_error(served):
    srv, project, *_ = served
    port = urlsplit(srv.url).port
    with pytest.raises(OSError, match="pick another --port"):
        AnnotationServer(project, port=port)
