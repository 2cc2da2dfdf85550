"""A ``harness run --executor ray`` driver that starts its own local cluster (no ``RAY_ADDRESS``),
stopped mid-run by SIGKILL, SIGTERM or SIGINT: the only calls its rerun repeats are those in flight
when it stopped (2 workers × concurrency 8 against an OpenAI-compatible stand-in that counts every
call): every response that finished is in the request cache, written by the driver or, for those
still on their way to it, by the workers; and every process of its Ray cluster — GCS, raylet,
agents, workers — is gone right after.

Before the fix the workers kept running their 32-request shards after the driver died (41-42 calls
repeated instead of ≤ 16 in flight) and the DashboardAgent / RuntimeEnvAgent outlived a killed
driver by a minute."""

import os
import signal
import subprocess
import sys
import time

import pytest
import ray  # noqa: F401  (a dev dependency: a broken Ray install fails these tests, never skips them)

from tests.fixtures.kill_resume import cache_rows, process_tree, still_running, wait_for_rows
from tests.fixtures.servers.openai import OpenAIStandIn

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the process tree from /proc"
)

WORKERS, CONCURRENCY = 2, 8


def _calls(srv: OpenAIStandIn) -> int:
    return sum(isinstance(r.body, dict) for r in srv.requests)  # a connection cut mid-request has no body


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_a_stopped_driver_repeats_only_calls_in_flight_and_leaves_no_ray_process(tmp_path, sig):
    with OpenAIStandIn(delay=0.1) as srv:
        env = {**os.environ, "DIALEVAL_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"}
        env.pop("RAY_ADDRESS", None)  # the driver starts (and owns) a local cluster
        cache = tmp_path / "cache.sqlite"
        args = [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--judge",
            f"openai:stand-in,base_url={srv.base_url},concurrency={CONCURRENCY}",
            "--task",
            "demo-turn",
            "--limit",
            "8",
            "--batch-size",
            "32",
            "--bootstrap",
            "20",
            "--quiet",
            "--cache",
            str(cache),
            "--executor",
            "ray",
            "--workers",
            str(WORKERS),
        ]
        proc = subprocess.Popen(
            [*args, "--output", str(tmp_path / "stopped")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert wait_for_rows(proc, cache, 20, 180) >= 20 and proc.poll() is None
            tree = process_tree(proc.pid)
            assert any("raylet" in p for p in still_running(tree)), still_running(tree)
            proc.send_signal(getattr(signal, sig))
            if sig == "SIGKILL":
                proc.wait()
            calls_then, rows_then = _calls(srv), cache_rows(cache)
            proc.wait(timeout=60)
        finally:
            proc.kill()
        stopped = time.monotonic()
        left = still_running(tree)
        while left and time.monotonic() - stopped < 5:  # after SIGKILL the reaper needs a moment
            time.sleep(0.1)
            left = still_running(tree)
        assert not left, f"Ray processes left after {sig}: {left}"
        assert time.monotonic() - stopped < (5 if sig == "SIGKILL" else 1)
        lost = _calls(srv) - cache_rows(cache)  # calls made whose response never reached the cache
        # every response that finished is in the cache (from the driver, or saved by its workers):
        # only the calls the 2 workers × concurrency 8 had in flight are lost
        assert lost <= WORKERS * CONCURRENCY, (lost, {"calls then": calls_then, "cached then": rows_then})
