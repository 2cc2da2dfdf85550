"""The reaper of a local Ray cluster started for one command (Linux).

``ray.init()`` starts the GCS and the raylet as children of the driver that die with it (Ray sets
``PR_SET_PDEATHSIG`` on them), but the raylet's agents (DashboardAgent, RuntimeEnvAgent) and the
worker processes are the raylet's children: after a ``kill -9`` of the driver the agents lingered
for a minute (they report the raylet's death to the dead GCS first, with a 60 s timeout,
``ray._private.utils.publish_error_to_driver``), and a worker kept running its shard meanwhile.

:func:`harness.executors.session.ray_session` therefore starts this script (by path: it imports
nothing but the standard library) in its own session *before* the cluster, and starts the cluster
with a marker variable ``VAR=TOKEN`` in its environment. The script

* follows the cluster's process tree every 0.5 s: the driver's children that carry the marker (the
  GCS, the raylet, the dashboard, the log monitor) and all their descendants (agents, workers),
  remembered by pid and start time — the agents' titles overwrite the start of their environment,
  so the marker alone does not find them;
* waits for end-of-file on its stdin — the driver closes the pipe after ``ray.shutdown()``, and the
  kernel closes it when the driver dies, however it dies — then (after ``GRACE_S`` if the driver
  died: its workers save its last responses first) SIGKILLs every remembered process still alive,
  their descendants, and any process whose environment carries the marker, until none is left::

    python watchdog.py VAR TOKEN DRIVER_PID
"""

from __future__ import annotations

import os
import selectors
import signal
import sys
import time
from collections.abc import Iterator

POLL_S = 0.5
#: after the driver died, the workers write its last responses to the cache and exit by themselves
#: (harness.executors.worker); the reaper gives them this long before it kills what is left
GRACE_S = 1.0


def processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time in clock ticks) of every process readable in /proc."""
    out: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z":  # zombies are already dead
            out[int(name)] = (int(fields[1]), int(fields[19]))
    return out


def has_marker(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:  # gone, or not ours to read
        return False
    return env.startswith(needle) or b"\0" + needle in env


def descendants(procs: dict[int, tuple[int, int]], roots: set[int]) -> Iterator[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(roots)
    while todo:
        pid = todo.pop()
        yield pid
        todo += children.get(pid, [])


class Tracker:
    def __init__(self, var: str, token: str, driver: int) -> None:
        self.needle = f"{var}={token}".encode() + b"\0"
        self.driver = driver
        self.exclude = {os.getpid(), driver}
        self.seen: dict[int, int] = {}  # pid -> start time of the cluster's processes

    def update(self) -> dict[int, tuple[int, int]]:
        procs = processes()
        roots = {p for p, (ppid, _) in procs.items() if ppid == self.driver and has_marker(p, self.needle)}
        roots |= {p for p in self.seen if p in procs and procs[p][1] == self.seen[p]}
        for pid in descendants(procs, roots):
            if pid not in self.exclude:
                self.seen[pid] = procs[pid][1]
        return procs

    def alive(self) -> list[int]:
        """The cluster's processes still running: remembered ones (same start time), their
        descendants, and every process carrying the marker."""
        procs = self.update()
        marked = {p for p in procs if p not in self.exclude and has_marker(p, self.needle)}
        for pid in marked:
            self.seen[pid] = procs[pid][1]
        return [p for p, start in self.seen.items() if p in procs and procs[p][1] == start]

    def reap(self, timeout_s: float = 15.0) -> int:
        """SIGKILL the cluster's processes until none has been seen for 0.3 s; the number killed."""
        deadline = time.monotonic() + timeout_s
        killed = quiet = 0
        while time.monotonic() < deadline and quiet < 3:
            pids = self.alive()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except (ProcessLookupError, PermissionError):
                    pass
            quiet = 0 if pids else quiet + 1
            time.sleep(0.1)
        return killed


def main(argv: list[str]) -> int:
    var, token, driver = argv[1], argv[2], int(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the driver must not stop the reaper
    tracker = Tracker(var, token, driver)
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin.buffer, selectors.EVENT_READ)
    while True:  # until end-of-file: the run is over or its driver is dead
        if sel.select(timeout=POLL_S) and not os.read(sys.stdin.fileno(), 4096):
            break
        tracker.update()
    if driver not in processes():  # died (a zombie counts as dead), rather than closing the pipe itself
        time.sleep(GRACE_S)
    tracker.reap()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
