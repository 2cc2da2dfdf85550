"""`harness run` stopped by real signals (SIGTERM, SIGINT, SIGHUP, a second SIGINT, SIGKILL) sent to
the CLI in a subprocess while it scores a 1,000-item task through a slow scripted judge: the exit
status of the signal, partial results marked incomplete with their samples, no temporary file left
behind, and a rerun that sends only the requests that had not finished."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datasets import load_dataset

from harness.data.builders import build_dataset
from harness.run.results import load_results
from harness.run.runner import RunConfig, run
from tests.fixtures.demo_source import write_demo_source

ROOT = Path(__file__).resolve().parents[3]
N_ITEMS = 1000


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """A built demo-format dataset of 1,000 turn-level items (500 English, 500 German)."""
    root = tmp_path_factory.mktemp("signals")
    src = write_demo_source(root / "src", N_ITEMS)
    out = root / "dataset"
    build_dataset("demo", src, out, show_progress=False)
    return out


@pytest.fixture
def judge(tmp_path) -> Path:
    path = tmp_path / "judge.jsonl"
    path.write_text(json.dumps({"default": {"hashed_p_yes": True}}) + "\n", encoding="utf-8")
    return path


def _cached(cache: Path) -> int:
    """Finished requests in the request cache (read-only: the run owns the file)."""
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
    except sqlite3.Error:
        return 0


def _start(dataset, judge, out, cache, *, delay, batch, grace=None):
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "run",
        "-t",
        "demo-turn",
        "--dataset",
        str(dataset),
        "--judge",
        f"replay:{judge},delay={delay}",
        "-b",
        str(batch),
        "--bootstrap",
        "20",
        "-q",
        "--cache",
        str(cache),
        "-o",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if grace is not None:
        env["DIALEVAL_STOP_GRACE"] = str(grace)
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(proc, cache: Path, n: int, timeout: float = 120) -> int:
    """Wait until the run has ``n`` finished requests in its cache; return how many it has."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended (exit {proc.returncode}) before it was signalled:\n{out}\n{err}")
        if (k := _cached(cache)) >= n:
            return k
        time.sleep(0.01)
    proc.kill()
    pytest.fail(f"no {n} finished requests within {timeout}s")


def _hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def _rerun(dataset, judge, out, cache, *, delay, batch):
    return run(
        RunConfig(
            judge=f"replay:{judge},delay={delay}",
            tasks=["demo-turn"],
            dataset=str(dataset),
            batch_size=batch,
            n_bootstrap=20,
            cache_path=cache,
            output_dir=out,
            show_progress=False,
        )
    )


def test_sigterm_keeps_partial_results_and_the_rerun_sends_only_the_unfinished_requests(
    dataset, judge, tmp_path, hf_cache
):
    out, cache = tmp_path / "out", tmp_path / "c.sqlite"
    proc = _start(dataset, judge, out, cache, delay=0.004, batch=50)
    _wait_for(proc, cache, 200)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("stopped by SIGTERM: ") and f"of {N_ITEMS} items scored" in line, stderr
    assert "rerun the same command" in line and str(out) in line

    # results.json marked incomplete, with what was scored and what was not
    inc = load_results(out).incomplete
    assert inc is not None and inc.signal == "SIGTERM" and inc.reason == "stopped by SIGTERM"
    scored = inc.n_items_scored
    assert 200 <= scored < N_ITEMS and scored % 50 == 0  # whole batches: the one in flight finished
    assert inc.n_items_total == N_ITEMS and inc.n_items_unscored == N_ITEMS - scored
    assert inc.by_task == {"demo-turn": {"total": N_ITEMS, "scored": scored}}
    assert inc.stopped_at == {"task": "demo-turn", "item": scored}
    # the samples so far, readable by pyarrow and datasets
    assert pq.read_table(out / "samples.parquet").num_rows == scored
    ds = load_dataset(
        "parquet", data_files=str(out / "samples.parquet"), split="train", cache_dir=str(hf_cache)
    )
    assert len(ds) == scored and all(s is not None for s in ds["score"])
    # nothing else in the output folder: no temporary file
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "samples.parquet"]
    finished = _cached(cache)
    assert finished == scored  # the batch in flight finished before the run stopped

    # the same run again: the finished requests come from the cache, only the rest reach the judge
    done = _rerun(dataset, judge, out, cache, delay=0.0, batch=50)
    assert done.incomplete is None and len(done.samples) == N_ITEMS
    c = done.results["cache"]
    assert (c["hits"], c["misses"]) == (finished, N_ITEMS - finished)
    assert done.results["usage"]["backend"]["requests"] == N_ITEMS - finished
    assert _hidden(out) == []


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_batch_still_running_after_the_grace_period_is_cancelled(dataset, judge, tmp_path, sig, status):
    """Batches of 250 items take about a second; the stop comes early in the second one and the
    grace period is 0.2 s: that batch is cancelled, its finished requests stay in the cache."""
    out, cache = tmp_path / "out", tmp_path / "c.sqlite"
    proc = _start(dataset, judge, out, cache, delay=0.004, batch=250, grace=0.2)
    _wait_for(proc, cache, 290)
    t0 = time.monotonic()
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == status, stderr
    assert f"stopped by {sig.name}: 250 of {N_ITEMS} items scored" in stderr
    inc = load_results(out).incomplete
    assert inc is not None and inc.signal == sig.name and inc.n_items_scored == 250
    assert pq.read_table(out / "samples.parquet").num_rows == 250
    finished = _cached(cache)
    assert 290 <= finished < 500  # part of the cancelled batch, kept for the rerun
    assert time.monotonic() - t0 < 30
    assert _hidden(out) == []


def test_a_second_ctrl_c_exits_at_once_and_leaves_no_temporary_file(dataset, judge, tmp_path):
    """One batch of all items (about 10 s) and the default grace period (5 s): the second Ctrl-C
    does not wait for either."""
    out, cache = tmp_path / "out", tmp_path / "c.sqlite"
    proc = _start(dataset, judge, out, cache, delay=0.01, batch=N_ITEMS)
    _wait_for(proc, cache, 20)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 3
    assert proc.returncode == 130, stderr
    assert "stopped at once by a second SIGINT" in stderr
    assert not out.exists()  # the run made the folder; nothing of it is left
    assert _cached(cache) > 0  # what finished is kept


def test_after_kill_9_the_next_run_removes_the_stale_file_and_resumes(dataset, judge, tmp_path):
    runs = tmp_path / "runs"
    out, cache = runs / "killed", tmp_path / "c.sqlite"
    proc = _start(dataset, judge, out, cache, delay=0.004, batch=50)
    _wait_for(proc, cache, 200)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    left = _hidden(out)
    assert len(left) == 1 and left[0].startswith(".samples.")  # what kill -9 leaves
    assert not (out / "results.json").exists()
    finished = _cached(cache)

    # the next run (its own folder beside the killed one's, as default output folders are) removes
    # the stale file and the folder it leaves empty, and resumes from the cache
    done = _rerun(dataset, judge, runs / "next", cache, delay=0.0, batch=50)
    assert not out.exists()
    assert done.incomplete is None and len(done.samples) == N_ITEMS
    assert done.results["cache"]["misses"] == N_ITEMS - finished
    assert done.results["usage"]["backend"]["requests"] == N_ITEMS - finished


def test_a_samples_file_whose_writer_is_gone_is_removed_one_still_written_is_kept(tmp_path):
    from harness import interrupt
    from harness.run.samples import SampleWriter

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = interrupt.owner_token().split("-")[0]
    out = tmp_path / "out"
    out.mkdir()
    stale = out / f".samples.{host}-{dead.pid}-0123abcd.parquet"
    legacy = out / ".samples.0123456789ab.parquet"  # written before names carried their owner
    live = out / interrupt.temp_name(".samples.", ".parquet")  # this process: still writing
    for p in (stale, legacy, live):
        p.write_bytes(b"PAR1")
    with SampleWriter(out) as writer:
        assert sorted(_hidden(out)) == sorted([live.name, writer.path.name])
        writer.commit()
    assert _hidden(out) == [live.name]


def test_sigterm_while_the_run_builds_its_dataset_writes_nothing_and_leaves_nothing(judge, tmp_path):
    """Before scoring there is nothing to keep: the run stops at once, the dataset it was building
    from --source is not left half-written, no output folder is made."""
    src = tmp_path / "src"
    src.mkdir()
    rows = (
        {
            "item": f"t{i // 2:05d}",
            "language": "en" if i % 2 == 0 else "de",
            "context": [f"I planted {i} tomatoes.", "How are they doing?"],
            "response": f"Flowers after {i} days.",
            "rating": float(1 + (i // 2) % 5),
        }
        for i in range(15000)
    )
    (src / "turn.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    building = Path(os.environ["DIALEVAL_HOME"]) / "datasets" / "demo"
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "harness.cli", "run", "-t", "demo-turn", "--source", str(src)]
    cmd += ["--judge", f"replay:{judge}", "-q", "-o", str(out)]
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (building.is_dir() and _hidden(building)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the dataset build never started"
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1].startswith("stopped by SIGTERM before any results were written")
    assert list(building.iterdir()) == [] and not out.exists()
