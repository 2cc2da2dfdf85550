"""results.json is written through an owned temporary file: nothing is left behind when the write
fails, a temporary file left by a killed writer is swept by the next write, and one whose writer
still runs is never touched."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness import interrupt
from harness.run import results as results_mod


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_killed_writers_results_temp_is_swept_and_a_live_one_kept(tmp_path):
    host = interrupt.owner_token().split("-")[0]
    stale = tmp_path / f".results.json.{host}-{_dead_pid()}-0123abcd"
    live = tmp_path / f".results.json.{host}-{1}-89abcdef"  # pid 1 is always alive
    stale.write_bytes(b"{")
    live.write_bytes(b"{")
    results_mod._atomic_write_bytes(tmp_path / "results.json", b'{"ok": true}')
    assert json.loads((tmp_path / "results.json").read_text()) == {"ok": True}
    assert not stale.exists()
    assert live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["results.json", live.name])


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(results_mod.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        results_mod._atomic_write_bytes(tmp_path / "results.json", b"{}")
    assert list(tmp_path.iterdir()) == []
