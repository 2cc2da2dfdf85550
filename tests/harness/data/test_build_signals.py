"""`harness datasets build` stopped by real signals sent to the CLI in a subprocess mid-build: no
version is ever half-registered, no temporary folder stays behind after SIGTERM, and one that
``kill -9`` left is removed by the next build."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.data.builders import build_dataset, get_builder
from harness.data.registry import DatasetRegistry
from tests.fixtures.demo_source import write_demo_source

ROOT = Path(__file__).resolve().parents[3]
N_ROWS = 15000  # a build of a few seconds: long enough to be caught in the middle


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return write_demo_source(tmp_path_factory.mktemp("build_signals"), N_ROWS)


def _build(*args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "harness.cli", "datasets", "build", "demo", *args, "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".")) if directory.is_dir() else []


def _signal_when_writing(proc: subprocess.Popen[str], folder: Path, sig: int, timeout: float = 120) -> None:
    """Send ``sig`` once the build has its temporary folder in ``folder`` (it is writing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the build ended (exit {proc.returncode}) before it was signalled:\n{out}\n{err}")
        if _hidden(folder):
            proc.send_signal(sig)
            return
        time.sleep(0.005)
    proc.kill()
    pytest.fail("the build never started writing")


def test_sigterm_mid_build_registers_nothing_and_leaves_no_staging_folder(source, tmp_path):
    reg = tmp_path / "registry"
    proc = _build("--source", str(source), "--registry", str(reg))
    _signal_when_writing(proc, reg / "demo", signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "stopped by SIGTERM while building: no version registered" in stderr
    assert DatasetRegistry(reg).versions("demo") == []
    assert not (reg / "demo").exists()  # its first version: not even the dataset's folder is left


def test_after_kill_9_the_next_build_removes_the_stale_folders(source, tmp_path):
    reg = tmp_path / "registry"
    proc = _build("--source", str(source), "--registry", str(reg))
    _signal_when_writing(proc, reg / "demo", signal.SIGKILL)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    left = _hidden(reg / "demo")
    assert left  # what kill -9 leaves: a temporary folder, never a version
    assert DatasetRegistry(reg).versions("demo") == []

    small = tmp_path / "small"
    small.mkdir()
    lines = (source / "turn.jsonl").read_text(encoding="utf-8").splitlines()[:20]
    (small / "turn.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    builder = get_builder("demo")
    registry = DatasetRegistry(reg)
    rv = registry.register(
        "demo",
        "1.0.0",
        lambda staging, release: builder.build(small, staging, release=release, show_progress=False),
    )
    assert registry.versions("demo") == ["1.0.0"] and rv.manifest["configs"]["demo-turn"]["rows"] == 20
    assert _hidden(reg / "demo") == []


def test_sigint_mid_build_into_an_output_folder_keeps_the_previous_build(source, tmp_path):
    """--output: the previous build stays in place, untouched, and no temporary folder is left."""
    out = tmp_path / "out"
    small = tmp_path / "small"
    small.mkdir()
    lines = (source / "turn.jsonl").read_text(encoding="utf-8").splitlines()[:20]
    (small / "turn.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = build_dataset("demo", small, out, show_progress=False).fingerprint
    proc = _build("--source", str(source), "--output", str(out))
    _signal_when_writing(proc, tmp_path, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert f"{out} is left as it was" in stderr
    assert json.loads((out / "build_manifest.json").read_text("utf-8"))["fingerprint"] == before
    assert _hidden(tmp_path) == []
