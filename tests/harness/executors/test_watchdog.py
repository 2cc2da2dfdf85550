"""The reaper of a local Ray cluster, without Ray: a stand-in driver starts a marked "raylet" whose
child (an "agent") no longer shows the marker, and an unmarked helper of its own; SIGKILL of the
driver takes the raylet and the agent down within a second and leaves the helper alone."""

import os
import signal
import subprocess
import sys
import time

import pytest

from harness.executors import watchdog
from tests.fixtures.kill_resume import still_running

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper reads /proc")

VAR, TOKEN = "DIALEVAL_TEST_CLUSTER", "t0k3n"
SLEEP = "import time; time.sleep(120)"
# the "raylet" (marked) starts an "agent" whose environment has lost the marker, as setproctitle
# overwrites the start of the agents' environment in a real cluster
RAYLET = (
    f"import os, subprocess, sys, time; env = {{k: v for k, v in os.environ.items() if k != {VAR!r}}}; "
    f"subprocess.Popen([sys.executable, '-c', {SLEEP!r}], env=env); time.sleep(120)"
)
DRIVER = f"""
import os, subprocess, sys, time
reaper = subprocess.Popen([sys.executable, {watchdog.__file__!r}, {VAR!r}, {TOKEN!r}, str(os.getpid())],
                          stdin=subprocess.PIPE, start_new_session=True)
raylet = subprocess.Popen([sys.executable, "-c", {RAYLET!r}], env={{**os.environ, {VAR!r}: {TOKEN!r}}})
helper = subprocess.Popen([sys.executable, "-c", {SLEEP!r}])
print(reaper.pid, raylet.pid, helper.pid, flush=True)
time.sleep(120)
"""


def _children(pid):
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == pid]


def _ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError):
        return None


def _start(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def test_a_killed_driver_takes_its_cluster_down_and_nothing_else():
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE)
    helper = None
    try:
        reaper, raylet, helper = map(int, driver.stdout.readline().split())
        deadline = time.time() + 20
        while not _children(raylet) and time.time() < deadline:
            time.sleep(0.05)
        (agent,) = _children(raylet)
        tree = {p: _start(p) for p in (raylet, agent, helper, reaper)}
        time.sleep(2 * watchdog.POLL_S)  # the reaper has seen the agent under the raylet
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        t0 = time.monotonic()
        while time.monotonic() - t0 < watchdog.GRACE_S + 3 and len(still_running(tree)) > 1:
            time.sleep(0.05)
        assert [p.split()[0] for p in still_running(tree)] == [str(helper)]  # the reaper is done, too
        assert (
            time.monotonic() - t0 < watchdog.GRACE_S + 1
        )  # the grace: its workers save their last responses
    finally:
        driver.kill()
        if helper:
            os.kill(helper, signal.SIGKILL)
