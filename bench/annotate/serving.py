"""`harness annotate` serving: 10 annotators submitting at once against a 1,000,000-item project,
with a kill -9 of the server mid-run.

The project: the demo benchmark's turn config scaled to ``--items`` rows (its rows repeated with new
ids; built once under bench/out/annotate_serving/, git-ignored), every item assigned to ``--per-item``
of the annotators. The server: ``python -m harness.annotate.server`` (the app ``harness annotate
serve`` runs) in a subprocess on 127.0.0.1. Each annotator is a thread with its own HTTP client
that loops "GET next item, POST its labels" as fast as the server answers; every submission carries
a fresh submission id and is retried with the *same* id until the server acknowledges it (a
connection refused, reset or timed out is retried; tenacity, exponential back-off). Halfway through
the run the server gets SIGKILL and is started again on the same port.

Counted afterwards, from the project file: submissions sent (distinct ids), acknowledged, stored,
lost (acknowledged but not stored) and duplicated (an annotator's item stored twice, or an id stored
twice). Timed: the next-item and submit requests that the server answered (wall time in the client,
HTTP + JSON), p50/p95/p99. Goal: next-item p95 < 100 ms; nothing lost, nothing duplicated.

    .venv/bin/python bench/annotate/serving.py                    # 1,000,000 items, 60 s
    .venv/bin/python bench/annotate/serving.py --items 100000 --seconds 20   # quicker
    .venv/bin/python bench/annotate/serving.py --docs-only        # rewrite the table from the JSON

Writes bench/results/annotate_serving.json (with --write-docs, also the table in bench/README.md);
exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.docs_tables import (  # noqa: E402
    add_docs_options,
    handle_docs_only,
    machine,
    machine_line,
    save_results,
    write_blocks,
)

RESULTS = ROOT / "bench" / "results" / "annotate_serving.json"
OUT = ROOT / "bench" / "out" / "annotate_serving"
GOAL_NEXT_P95_MS = 100.0
MODULE = "bench.annotate.serving"


def build_items(n: int) -> Path:
    """The demo dataset with its turn config's rows repeated to ``n`` rows (new ids); built once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.data.builders import build_dataset
    from harness.data.layout import data_file

    folder = OUT / f"demo-{n}"
    marker = folder / ".complete"
    if marker.is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    build_dataset("demo", None, folder, show_progress=False)
    path = folder / data_file("demo-turn")
    base = pq.read_table(path)
    reps = -(-n // base.num_rows)
    table = pa.concat_tables([base] * reps).slice(0, n)
    ids = pa.array([f"{i:07d}-{rid}" for i, rid in enumerate(table.column("id").to_pylist())])
    table = table.set_column(table.schema.get_field_index("id"), "id", ids)
    pq.write_table(table, path, row_group_size=50_000)
    marker.write_text(str(n))
    return folder


def reuse_project() -> tuple[Path, dict[str, str], float] | None:
    """The project of an earlier run, with a new token per annotator (None: there is none)."""
    from harness.annotate.store import Project

    path = OUT / "serving.sqlite"
    if not path.is_file():
        return None
    with Project.open(path) as project:
        return path, {a: project.issue_token(a) for a in project.annotators()}, 0.0


def create_project(dataset: Path, n_annotators: int, per_item: int) -> tuple[Path, dict[str, str], float]:
    from harness.annotate.store import Project

    path = OUT / "serving.sqlite"
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)
    t0 = time.perf_counter()
    project = Project.create(
        path,
        name="serving",
        dataset_ref=f"demo-scaled@{dataset.name}",
        dataset_dir=dataset,
        config="demo-turn",
        task=None,
        annotators=[f"ann-{i:02d}" for i in range(n_annotators)],
        per_item=per_item,
        languages=None,
    )
    seconds = time.perf_counter() - t0
    tokens = project.tokens()
    project.close()
    return path, tokens, seconds


class Server:
    """The annotation server in a subprocess, restartable on the same port."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> float:
        t0 = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.annotate.server", str(self.project), "--port", str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise SystemExit(f"the annotation server did not start: {err}")
        self.port = urlsplit(self.url).port or 0
        return time.perf_counter() - t0

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@dataclass
class Annotator:
    """One client thread's record of what it sent and what the server acknowledged."""

    name: str
    token: str
    next_ms: list[float] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    sent: set[str] = field(default_factory=set)
    acknowledged: set[str] = field(default_factory=set)
    retries: int = 0
    errors: list[str] = field(default_factory=list)


def work(ann: Annotator, base_url: str, stop: threading.Event) -> None:
    import httpx
    from tenacity import retry, retry_if_exception, stop_after_delay, wait_exponential

    def transient(e: BaseException) -> bool:
        if isinstance(e, httpx.TransportError):
            ann.retries += 1
            return True
        return False

    persist = retry(
        retry=retry_if_exception(transient),
        wait=wait_exponential(multiplier=0.05, max=1.0),
        stop=stop_after_delay(120),
        reraise=True,
    )

    with httpx.Client(base_url=base_url, timeout=10) as client:

        @persist
        def timed(method: str, path: str, out: list[float], **kw: object) -> httpx.Response:
            t0 = time.perf_counter()
            resp = client.request(method, path, **kw)  # type: ignore[arg-type]
            out.append((time.perf_counter() - t0) * 1000)
            return resp

        while not stop.is_set():
            resp = timed("GET", f"/api/{ann.token}/next", ann.next_ms)
            item = resp.json().get("item")
            if item is None:
                break
            body = {
                "item_id": item["item_id"],
                "submission_id": str(uuid.uuid4()),
                "labels": {"relevance": float(1 + len(ann.sent) % 5)},
            }
            ann.sent.add(str(body["submission_id"]))
            resp = timed(
                "POST", f"/api/{ann.token}/submit", ann.submit_ms, json=body
            )  # same id on every retry
            if resp.status_code == 200:
                ann.acknowledged.add(str(body["submission_id"]))
            else:
                ann.errors.append(f"{resp.status_code}: {resp.text[:200]}")


def percentiles(ms: list[float]) -> dict[str, float]:
    import numpy as np

    if not ms:
        return {"n": 0}
    a = np.asarray(ms)
    return {
        "n": int(a.size),
        "p50_ms": round(float(np.percentile(a, 50)), 2),
        "p95_ms": round(float(np.percentile(a, 95)), 2),
        "p99_ms": round(float(np.percentile(a, 99)), 2),
        "max_ms": round(float(a.max()), 2),
    }


def count_stored(project: Path, sent: set[str]) -> dict[str, int]:
    """What the project file holds: stored submissions, and duplicates of an id or of an annotator's item."""
    with sqlite3.connect(f"file:{project}?mode=ro", uri=True) as conn:
        ids = [r[0] for r in conn.execute("SELECT submission_id FROM submissions WHERE retracted = 0")]
        twice = conn.execute(
            "SELECT COUNT(*) FROM (SELECT annotator, item FROM submissions WHERE retracted = 0 "
            "GROUP BY annotator, item HAVING COUNT(*) > 1)"
        ).fetchone()[0]
    stored = set(ids)
    return {
        "stored": len(ids),
        "stored_of_sent": len(stored & sent),
        "stored_not_sent": len(stored - sent),
        "duplicated_ids": len(ids) - len(stored),
        "duplicated_items": int(twice),
    }


def run(items: int, annotators: int, per_item: int, seconds: float, reuse: bool = False) -> dict[str, object]:
    import os as _os

    OUT.mkdir(parents=True, exist_ok=True)
    where = machine()
    load_before = list(_os.getloadavg())
    t0 = time.perf_counter()
    dataset = build_items(items)
    dataset_s = time.perf_counter() - t0
    reused = reuse_project() if reuse else None
    project, tokens, create_s = reused or create_project(dataset, annotators, per_item)
    print(f"dataset {dataset_s:.1f} s, project {create_s:.1f} s ({items:,} items)", flush=True)
    store_ms = store_costs(project, sorted(tokens)[0])
    server = Server(project)
    start_s = server.start()
    clients = [Annotator(name, token) for name, token in sorted(tokens.items())]
    stop = threading.Event()
    threads = [threading.Thread(target=work, args=(c, server.url, stop), daemon=True) for c in clients]
    began = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds / 2)
    acked_before_kill = sum(len(c.acknowledged) for c in clients)
    server.kill9()
    killed_at = time.perf_counter() - began
    downtime_s = server.start()  # from the kill until the new process listens
    time.sleep(seconds / 2)
    stop.set()
    for t in threads:
        t.join(180)
    elapsed = time.perf_counter() - began
    server.stop()
    load_after = list(_os.getloadavg())

    sent = set().union(*(c.sent for c in clients))
    acked = set().union(*(c.acknowledged for c in clients))
    counts = count_stored(project, sent)
    nexts = [x for c in clients for x in c.next_ms]
    submits = [x for c in clients for x in c.submit_ms]
    result: dict[str, object] = {
        "items": items,
        "annotators": annotators,
        "per_item": per_item,
        "seconds": round(elapsed, 1),
        "dataset_build_s": round(dataset_s, 1),
        "project_create_s": round(create_s, 1),
        "project_reused": reused is not None,
        "server_start_s": round(start_s, 2),
        "kill9_at_s": round(killed_at, 1),
        "acknowledged_before_kill": acked_before_kill,
        "downtime_s": round(downtime_s, 2),
        "store_ms": store_ms,
        "next_item": percentiles(nexts),
        "submit": percentiles(submits),
        "sent": len(sent),
        "acknowledged": len(acked),
        "lost": len(acked - set(_stored_ids(project))),
        "retries": sum(c.retries for c in clients),
        "refused": sum(len(c.errors) for c in clients),
        "refusals": [e for c in clients for e in c.errors][:5],
        "submissions_per_s": round(len(acked) / elapsed, 1),
        **counts,
        "machine": {**where, "load_before": load_before, "load_after": load_after},
    }
    result["duplicated"] = counts["duplicated_ids"] + counts["duplicated_items"]
    result["goals"] = {
        "next_p95_ms": GOAL_NEXT_P95_MS,
        "next_p95_met": bool(percentiles(nexts).get("p95_ms", 1e9) < GOAL_NEXT_P95_MS),
        "nothing_lost_or_duplicated": result["lost"] == 0 and result["duplicated"] == 0,
    }
    return result


def store_costs(project_file: Path, annotator: str, repeats: int = 20) -> dict[str, float]:
    """Milliseconds of one store call, in process (no HTTP): what each request costs the server
    before any queueing behind other annotators' requests."""
    from harness.annotate.store import Project

    out: dict[str, float] = {}
    with Project.open(project_file) as project:
        calls = {
            "next_item": lambda: project.next_item(annotator),
            "progress": lambda: project.progress(annotator),
        }
        for name, call in calls.items():
            call()
            t0 = time.perf_counter()
            for _ in range(repeats):
                call()
            out[name] = round((time.perf_counter() - t0) / repeats * 1000, 2)
    return out


def _stored_ids(project: Path) -> list[str]:
    with sqlite3.connect(f"file:{project}?mode=ro", uri=True) as conn:
        return [r[0] for r in conn.execute("SELECT submission_id FROM submissions WHERE retracted = 0")]


def markdown(r: dict) -> str:
    m = r["machine"]
    nx, sb = r["next_item"], r["submit"]
    goals = r["goals"]
    lines = [
        f"{r['items']:,}-item project, {r['annotators']} annotators submitting at once ({r['per_item']} per item), "
        f"{r['seconds']:.0f} s; the server killed with SIGKILL at {r['kill9_at_s']:.0f} s and started again "
        f"({r['downtime_s']:.1f} s from the kill to listening again). {machine_line(m)}, "
        f"{m['load_after'][0]:.1f} at the end (a shared machine: other jobs were running).",
        "",
        "| request | n | p50 (ms) | p95 (ms) | p99 (ms) | goal |",
        "|---|---:|---:|---:|---:|---|",
        f"| next item | {nx['n']:,} | {nx['p50_ms']:.1f} | {nx['p95_ms']:.1f} | {nx['p99_ms']:.1f} | "
        f"p95 < {goals['next_p95_ms']:.0f} ms: {'met' if goals['next_p95_met'] else 'missed'} |",
        f"| submit | {sb['n']:,} | {sb['p50_ms']:.1f} | {sb['p95_ms']:.1f} | {sb['p99_ms']:.1f} | |",
        "",
        "| submissions sent | acknowledged | stored | lost | duplicated | client retries |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {r['sent']:,} | {r['acknowledged']:,} | {r['stored_of_sent']:,} | {r['lost']} | {r['duplicated']} | {r['retries']:,} |",
        "",
        (
            "The project of an earlier run, served again. "
            if r.get("project_reused")
            else f"Creating the project (reading {r['items']:,} items, assigning them): {r['project_create_s']:.0f} s. "
        )
        + f"One store call in process, before the run: next item {r['store_ms']['next_item']:.1f} ms, progress "
        f"{r['store_ms']['progress']:.1f} ms (a next-item request makes both); the server answers reads on "
        "four connections and writes one at a time, so with ten annotators a request also waits for the others'.",
    ]
    return "\n".join(lines)


def sentence(r: dict) -> str:
    """One line for docs/annotation.md."""
    nx = r["next_item"]
    return (
        f"Measured ({r['machine']['date']}, a {r['machine']['cpus']}-core machine shared with other jobs): "
        f"{r['annotators']} annotators at once on a {r['items']:,}-item project sent {r['sent']:,} submissions "
        f"through a kill -9 of the server; {r['stored_of_sent']:,} were stored, {r['lost']} lost, "
        f"{r['duplicated']} duplicated; the next item came in {nx['p50_ms']:.0f} ms (median), "
        f"{nx['p95_ms']:.0f} ms (p95)."
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--annotators", type=int, default=10)
    ap.add_argument("--per-item", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=60.0, help="length of the run (the kill comes halfway)")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="serve the project of the last run again (its queues go on; new tokens) instead of creating one",
    )
    add_docs_options(ap, MODULE)
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return 0
    result = run(args.items, args.annotators, args.per_item, args.seconds, reuse=args.reuse)
    out = save_results(args.results or RESULTS, result)
    print(markdown(result))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if args.write_docs:
        for done in write_blocks(MODULE, result):
            print(f"updated {done}")
    goals = result["goals"]
    assert isinstance(goals, dict)
    return 0 if goals["next_p95_met"] and goals["nothing_lost_or_duplicated"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
