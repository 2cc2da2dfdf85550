"""Quality gates of CI: the source trees are ``ruff format``-clean and ``ruff check``-clean, no
formatter suppression comment (``fmt`` ``skip`` / ``off``) packs code past the formatter, and mypy
(``[tool.mypy]`` of pyproject.toml: ``harness/`` and what it imports) reports no error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_TREES = ("harness", "dataset_builders", "tasks", "finetune", "tests", "bench", "scripts")
# Built from pieces so that this file does not match itself.
SUPPRESSION = re.compile("#" + r"\s*fmt:\s*(skip|off)\b")


def _tool(name: str) -> Path:
    """The ``dev`` extra's command-line tool installed next to this interpreter; fail when missing."""
    path = Path(sys.executable).parent / name
    if not path.is_file():
        pytest.fail(
            f"{name} is not installed next to {sys.executable}; it is in the dev extra: "
            "pip install -c constraints.txt -e '.[dev]'"
        )
    return path


def _run(*args: str | Path, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_ruff_format_is_clean():
    res = _run(_tool("ruff"), "format", "--check", *SOURCE_TREES)
    assert res.returncode == 0, f"ruff format --check failed (run `ruff format`):\n{res.stdout}{res.stderr}"


def test_ruff_check_is_clean():
    res = _run(_tool("ruff"), "check", *SOURCE_TREES)
    assert res.returncode == 0, f"ruff check failed:\n{res.stdout}{res.stderr}"


def test_no_formatter_suppression_comments():
    found = []
    for top in SOURCE_TREES:
        for path in sorted((ROOT / top).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if SUPPRESSION.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "formatter suppression comments (let ruff format the code):\n" + "\n".join(found)


def test_mypy_is_clean():
    """``mypy`` with the pyproject configuration (files, plug-ins, per-package overrides)."""
    res = _run(_tool("mypy"), "--config-file", ROOT / "pyproject.toml", timeout=600)
    assert res.returncode == 0, f"mypy found errors:\n{res.stdout}{res.stderr}"
