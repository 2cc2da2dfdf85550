"""The README's main command (``harness run``: the embedded default judge on the embedded demo
benchmark, offline, on a first run) prints the harness's own progress, tables and summary and
nothing from the libraries underneath: no transformers load report ("MISSING … newly
initialized … Consider training"), no "Loading weights" or other library progress bar, no
Python warnings, no Hub messages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

NOISE = re.compile(
    r"newly initiali[sz]ed|Consider training|LOAD REPORT|\bMISSING\b|\bUNEXPECTED\b|Some weights"
    r"|Warning\b|warnings\.warn|Loading weights|Loading checkpoint|Generating \w+ split|it/s\]|\d+%\|"
    r"|huggingface|HF_HUB|offline mode|tokenizers|TOKENIZERS_PARALLELISM|torch_dtype|deprecated",
    re.IGNORECASE,
)
# the run's own progress bars (rich), the only thing on stderr
OURS = re.compile(r"^(building demo|demo-turn|demo-dialogue)\s")


@pytest.mark.slow
def test_the_main_command_prints_no_library_noise(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "TRANSFORMERS_", "DIALEVAL_", "PYTHONWARNINGS", "TOKENIZERS_"))
    }
    env.update(
        PYTHONPATH=str(ROOT),
        DIALEVAL_HOME=str(tmp_path / "home"),  # nothing built yet: the first run of a fresh set-up
        HF_HOME=str(tmp_path / "hf"),
        HF_DATASETS_CACHE=str(tmp_path / "hf-datasets"),
        HF_HUB_OFFLINE="1",  # the set-up is offline: no model or data comes from the Hub
    )
    # the README's `harness run`, on 2 items per dataset and language to keep the test short
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--limit", "2", "--bootstrap", "0", "-o", "out"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert "wrote out/results.json" in p.stdout and "demo-turn" in p.stdout
    for stream in (p.stdout, p.stderr):
        found = NOISE.search(stream)
        assert found is None, (found.group(0), stream)
    lines = [line.strip() for line in re.split(r"[\r\n]+", p.stderr) if line.strip()]
    assert lines, "the run shows its progress"
    strange = [line for line in lines if not OURS.match(line)]
    assert not strange, strange
