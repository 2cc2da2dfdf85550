"""Commands that are told to stop: Ctrl-C (SIGINT), SIGTERM (``timeout``, a job scheduler, ``kill``)
or SIGHUP (the terminal was closed) — what they keep, and the temporary files they never leave.

The ``harness`` command installs :func:`stop_signals` around every command. Without more, the
first signal raises :class:`Interrupted` (a :class:`KeyboardInterrupt` that knows its signal and
exit status, 128 + the signal's number: 130, 143, 129) wherever the command is, so its ``finally``
blocks remove what is half-written. Work that can stop at a good point says so:

* inside :func:`graceful` the first signal only asks to stop: the work polls :func:`stop_requested`
  between units (a batch of items, a generation phase) and ends as it ends when it runs out of
  input, keeping what it did;
* inside :func:`cancellable` (a model call within a graceful block) work still running
  :func:`grace` seconds after the signal is cancelled: :class:`Interrupted` is raised there, so a
  stop takes seconds, not the length of a batch (``DIALEVAL_STOP_GRACE`` sets the seconds);
* a second signal ends the process at once, with the same exit status, after removing every
  temporary path registered with :func:`track`.

Temporary files and folders are named by :func:`temp_name`, which puts their owner in the name (a
hash of the host name and the process id), so a later command tells one left by a process that no
longer exists (``kill -9``, a power cut) from one still being written: :func:`sweep` removes the
first kind and never the second.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

#: the signals a command stops on (SIGHUP: its terminal was closed)
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: seconds work in flight may go on after a stop signal before it is cancelled
DEFAULT_GRACE = 5.0
GRACE_ENV = "DIALEVAL_STOP_GRACE"


def exit_status(signum: int) -> int:
    """The exit status of a command stopped by ``signum``: 128 + its number, as a shell reports a
    process the signal killed (SIGINT 130, SIGTERM 143, SIGHUP 129)."""
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Interrupted(KeyboardInterrupt):
    """A stop signal ended the work here. ``signum`` is the signal, ``exit_status`` the status the
    command exits with; ``cancelled`` is true when work in flight outlived its grace period."""

    def __init__(self, signum: int, *, cancelled: bool = False) -> None:
        self.signum = int(signum)
        self.cancelled = cancelled
        super().__init__(f"stopped by {signal_name(self.signum)}")

    @property
    def exit_status(self) -> int:
        return exit_status(self.signum)

    @property
    def signal(self) -> str:
        return signal_name(self.signum)


def grace() -> float:
    """Seconds work in flight may go on after a stop signal (``DIALEVAL_STOP_GRACE``, else
    :data:`DEFAULT_GRACE`); a value that is not a number ≥ 0 is an error naming the variable."""
    raw = os.environ.get(GRACE_ENV, "").strip()
    if not raw:
        return DEFAULT_GRACE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError(
            f"{GRACE_ENV}={raw!r}: expected a number of seconds >= 0 (default {DEFAULT_GRACE:g})"
        )
    return value


@dataclass
class _State:
    installed: bool = False
    requested: int | None = None  # the first stop signal received
    graceful: int = 0  # depth of graceful() blocks
    cancellable: int = 0  # depth of cancellable() blocks
    deadline_due: bool = False  # the grace timer sent its signal, not yet handled
    deadline_passed: bool = False
    grace: float = DEFAULT_GRACE
    timer: threading.Timer | None = None
    previous: dict[int, object] = field(default_factory=dict)  # signal -> handler before ours
    temps: dict[str, None] = field(default_factory=dict)  # tracked temporary paths, in order


_STATE = _State()


def _say(text: str) -> None:
    """One line on stderr from a signal handler: straight to the file descriptor (a handler may run
    while the main thread is inside a write to ``sys.stderr``); a closed terminal is not an error."""
    with contextlib.suppress(OSError):
        os.write(2, ("\n" + text + "\n").encode("utf-8", "replace"))


def _detach_terminal() -> None:
    """After SIGHUP the terminal is gone: output meant for it goes nowhere instead of failing."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (0, 1, 2):
            with contextlib.suppress(OSError):
                if os.isatty(fd):
                    os.dup2(devnull, fd)
        os.close(devnull)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    st = _STATE
    if st.deadline_due and st.requested is not None:  # the grace timer, not the user
        st.deadline_due = False
        st.deadline_passed = True
        if st.cancellable:
            raise Interrupted(st.requested, cancelled=True)
        return
    if signum == signal.SIGHUP:
        _detach_terminal()
    if st.requested is not None:
        _exit_now(signum)
    st.requested = signum
    if not st.graceful:
        raise Interrupted(signum)
    again = "Ctrl-C" if signum == signal.SIGINT else signal_name(signum)
    _say(
        f"{signal_name(signum)}: stopping — no new work; work in flight gets {st.grace:g}s to finish, "
        f"then what is done is written ({again} again to quit at once)"
    )
    if st.cancellable and st.grace <= 0:
        st.deadline_passed = True
        raise Interrupted(signum, cancelled=True)
    _arm_deadline(st)


def _arm_deadline(st: _State) -> None:
    main = threading.main_thread().ident

    def fire() -> None:
        if not st.installed or st.requested is None or main is None:
            return
        st.deadline_due = True
        signal.pthread_kill(main, st.requested)  # a real signal: it interrupts a blocking call

    st.timer = threading.Timer(st.grace, fire)
    st.timer.daemon = True
    st.timer.start()


def _disarm(st: _State) -> None:
    timer, st.timer = st.timer, None
    if timer is not None:
        timer.cancel()
        if timer is not threading.current_thread():
            timer.join()


def _exit_now(signum: int) -> None:
    """The second signal: remove the temporary paths in use, say so, exit with the signal's status."""
    removed = remove_tracked()
    _say(
        f"error: stopped at once by a second {signal_name(signum)}: nothing more written"
        f"{f' ({removed} temporary path(s) removed)' if removed else ''}; what was finished before is "
        "kept (request cache, checkpoints) — rerun the same command to resume"
    )
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(exit_status(_STATE.requested or signum))


@contextlib.contextmanager
def stop_signals(grace_seconds: float | None = None) -> Iterator[None]:
    """Handle SIGINT, SIGTERM and SIGHUP as described in the module docstring while the block runs
    (in the main thread; elsewhere a no-op), then restore the previous handlers."""
    st = _STATE
    if st.installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    st.grace = grace() if grace_seconds is None else grace_seconds
    st.requested, st.deadline_due, st.deadline_passed = None, False, False
    st.previous = {}
    for sig in STOP_SIGNALS:
        st.previous[int(sig)] = signal.signal(sig, _on_signal)
    st.installed = True
    try:
        yield
    finally:
        st.installed = False  # first: a grace timer firing now sends nothing (or waits in _disarm)
        _disarm(st)
        for signum, handler in st.previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]  # what signal.signal returned
        st.previous = {}
        st.requested = None


def reclaim() -> None:
    """Take the stop signals back after a library replaced a handler (``ray.init`` sets a SIGTERM
    handler of its own that exits at once): a no-op unless :func:`stop_signals` is active."""
    st = _STATE
    if st.installed and threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is not _on_signal:
                signal.signal(sig, _on_signal)


def stop_requested() -> int | None:
    """The stop signal received so far (its number), or None."""
    return _STATE.requested


def installed() -> bool:
    """Whether :func:`stop_signals` is active (else signals behave as Python's defaults)."""
    return _STATE.installed


@contextlib.contextmanager
def graceful() -> Iterator[None]:
    """A block whose code polls :func:`stop_requested` and stops by itself: inside it the first
    signal only asks to stop (and starts the grace period of :func:`cancellable` calls)."""
    st = _STATE
    st.graceful += 1
    try:
        yield
    finally:
        st.graceful -= 1
        if not st.graceful:
            _disarm(st)


@contextlib.contextmanager
def cancellable() -> Iterator[None]:
    """A call (a batch of model requests) that a stop may cancel once its grace period is over:
    :class:`Interrupted` is raised inside it then (or on entry, when it is already over)."""
    st = _STATE
    if st.deadline_passed and st.requested is not None:
        raise Interrupted(st.requested, cancelled=True)
    st.cancellable += 1
    try:
        yield
    finally:
        st.cancellable -= 1


# -- temporary paths: owned by a process, removed on a hard stop, swept when their owner is gone ----
_HOST = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]
_OWNER = re.compile(r"(?<![0-9a-f])([0-9a-f]{6})-([0-9]+)-[0-9a-f]{8}(?![0-9a-f])")


def owner_token() -> str:
    """``<host hash>-<pid>-<random>``: who writes a temporary path (see :func:`sweep`)."""
    return f"{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def temp_name(prefix: str, suffix: str = "") -> str:
    """A temporary file or folder name that carries its owner: ``<prefix><owner token><suffix>``."""
    return f"{prefix}{owner_token()}{suffix}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or a number we cannot ask about): not ours to judge
    return True


def owner_gone(name: str) -> bool:
    """Whether the temporary path ``name`` (from :func:`temp_name`) was left by a process of this
    host that no longer runs. A name without an owner, or another host's, is never "gone"."""
    m = _OWNER.search(name)
    if m is None or m.group(1) != _HOST:
        return False
    pid = int(m.group(2))
    return pid != os.getpid() and not _alive(pid)


def _remove(path: Path) -> bool:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    except OSError:
        return False
    return True


def sweep(directory: str | os.PathLike[str], pattern: str) -> list[Path]:
    """Remove the entries of ``directory`` matching the glob ``pattern`` whose owner process is
    gone (:func:`owner_gone`); returns what was removed."""
    d = Path(directory)
    removed: list[Path] = []
    try:
        candidates = sorted(d.glob(pattern))
    except OSError:
        return removed
    for p in candidates:
        if owner_gone(p.name) and _remove(p):
            removed.append(p)
    return removed


def track(path: str | os.PathLike[str]) -> Path:
    """Register a temporary path (file or folder) this process is writing: a hard stop removes it."""
    p = Path(path)
    _STATE.temps[str(p)] = None
    return p


def untrack(path: str | os.PathLike[str]) -> None:
    """The path was renamed into place or removed: no longer this process's to clean up."""
    _STATE.temps.pop(str(Path(path)), None)


@contextlib.contextmanager
def tracked(path: str | os.PathLike[str]) -> Iterator[Path]:
    """:func:`track` for the block; on leaving it the path is untracked and, if the block raised,
    removed."""
    p = track(path)
    try:
        yield p
    except BaseException:
        _remove(p)
        raise
    finally:
        untrack(p)


def remove_tracked() -> int:
    """Remove every tracked path (the hard stop's cleanup); returns how many existed."""
    n = 0
    for raw in list(_STATE.temps):
        n += _remove(Path(raw))
        _STATE.temps.pop(raw, None)
    return n


__all__ = [
    "DEFAULT_GRACE",
    "GRACE_ENV",
    "STOP_SIGNALS",
    "Interrupted",
    "cancellable",
    "exit_status",
    "grace",
    "graceful",
    "installed",
    "owner_gone",
    "owner_token",
    "reclaim",
    "remove_tracked",
    "signal_name",
    "stop_requested",
    "stop_signals",
    "sweep",
    "temp_name",
    "track",
    "tracked",
    "untrack",
]
