"""Stop signals in this process (real signals, sent with os.kill): what the first one does inside and
outside a graceful block, the grace period of a cancellable call, the handlers restored afterwards;
and temporary names that carry their owner, swept only when the owner is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from harness import interrupt
from harness.interrupt import Interrupted


def _wait_for_signal(seconds: float = 2.0) -> None:
    """Run Python bytecode for a while: a pending signal's handler runs in between."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_outside_a_graceful_block_the_first_signal_raises_with_its_exit_status(sig, status):
    with interrupt.stop_signals(), pytest.raises(Interrupted) as ei:
        os.kill(os.getpid(), sig)
        _wait_for_signal()
    assert ei.value.exit_status == status and ei.value.signal == sig.name
    assert str(ei.value) == f"stopped by {sig.name}" and isinstance(ei.value, KeyboardInterrupt)


def test_inside_a_graceful_block_the_first_signal_only_asks_to_stop():
    with interrupt.stop_signals(grace_seconds=5), interrupt.graceful():
        assert interrupt.stop_requested() is None
        os.kill(os.getpid(), signal.SIGTERM)
        _wait_for_signal(0.2)  # nothing raised
        assert interrupt.stop_requested() == signal.SIGTERM
    assert interrupt.stop_requested() is None  # reset once the handlers are gone


def test_a_cancellable_call_outliving_the_grace_period_is_cancelled():
    with interrupt.stop_signals(grace_seconds=0.2), interrupt.graceful():
        t0 = time.monotonic()
        with pytest.raises(Interrupted) as ei, interrupt.cancellable():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)  # a model call that would take far longer: the grace timer interrupts it
        assert ei.value.cancelled and ei.value.exit_status == 130
        assert 0.15 < time.monotonic() - t0 < 5
        with pytest.raises(Interrupted):  # once the grace period is over, no new call starts
            with interrupt.cancellable():
                pytest.fail("a cancellable call started after the grace period")


def test_a_call_that_finishes_within_the_grace_period_is_not_cancelled():
    with interrupt.stop_signals(grace_seconds=5), interrupt.graceful():
        with interrupt.cancellable():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
        assert interrupt.stop_requested() == signal.SIGINT


def test_previous_handlers_are_restored():
    before = {s: signal.getsignal(s) for s in interrupt.STOP_SIGNALS}
    with interrupt.stop_signals():
        assert all(signal.getsignal(s) is not before[s] for s in interrupt.STOP_SIGNALS)
    assert {s: signal.getsignal(s) for s in interrupt.STOP_SIGNALS} == before


def test_grace_period_from_the_environment(monkeypatch):
    monkeypatch.setenv(interrupt.GRACE_ENV, "0.5")
    assert interrupt.grace() == 0.5
    monkeypatch.delenv(interrupt.GRACE_ENV)
    assert interrupt.grace() == interrupt.DEFAULT_GRACE
    for bad in ("soon", "-1", "inf", "nan"):
        monkeypatch.setenv(interrupt.GRACE_ENV, bad)
        with pytest.raises(ValueError, match=f"{interrupt.GRACE_ENV}={bad!r}: expected a number of seconds"):
            interrupt.grace()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temporary_names_carry_their_owner_and_only_orphans_are_swept(tmp_path):
    mine = tmp_path / interrupt.temp_name(".samples.", ".parquet")
    mine.write_bytes(b"PAR1")
    token = interrupt.owner_token()
    host = token.split("-")[0]
    dead = _dead_pid()
    orphan_file = tmp_path / f".samples.{host}-{dead}-0123abcd.parquet"
    orphan_file.write_bytes(b"PAR1")
    orphan_dir = tmp_path / f".staging-1.0.0-{host}-{dead}-89abcdef"
    (orphan_dir / "demo-turn").mkdir(parents=True)
    other_host = tmp_path / f".samples.{'0' * 6 if host != '0' * 6 else '1' * 6}-{dead}-0123abcd.parquet"
    other_host.write_bytes(b"PAR1")
    no_owner = tmp_path / ".samples.0123456789ab.parquet"
    no_owner.write_bytes(b"PAR1")

    assert not interrupt.owner_gone(mine.name)  # this process: alive
    assert interrupt.owner_gone(orphan_file.name) and interrupt.owner_gone(orphan_dir.name)
    assert not interrupt.owner_gone(other_host.name)  # another machine's: never judged from here
    assert not interrupt.owner_gone(no_owner.name)

    removed = interrupt.sweep(tmp_path, ".*")
    assert sorted(p.name for p in removed) == sorted([orphan_file.name, orphan_dir.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, other_host.name, no_owner.name])


def test_tracked_paths_are_removed_when_the_block_raises(tmp_path):
    path = tmp_path / interrupt.temp_name("state.tmp-")
    with pytest.raises(Interrupted), interrupt.tracked(path):
        path.write_text("{}")
        raise Interrupted(signal.SIGTERM)
    assert not path.exists()
    interrupt.track(tmp_path / "x")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("1")
    assert interrupt.remove_tracked() == 1 and not (tmp_path / "x").exists()
