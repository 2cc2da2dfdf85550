"""A separate installed package extends the harness at all five extension points — a scoring
method, a backend, a judge kind, a dataset builder and a task family — with no change to the core:
``tests/fixtures/plugin_pkg`` (its own ``pyproject.toml`` and entry points) is pip-installed offline
into a folder, which ``importlib.metadata`` finds on ``PYTHONPATH``, and the real ``harness`` CLI
lists, validates and runs its task with its judges."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tests" / "fixtures" / "plugin_pkg"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The plug-in installed with pip (no network, no build isolation: setuptools is a dependency of
    the harness) into a site folder, from a copy so no build output lands in the source tree."""
    tmp = tmp_path_factory.mktemp("plugin")
    src = shutil.copytree(PACKAGE, tmp / "src")
    site = tmp / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (site / "dialeval_plugin_demo-0.1.0.dist-info" / "entry_points.txt").is_file()
    return site


def _harness(site: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "DIALEVAL_HOME": str(tmp_path / "home"),
        "COLUMNS": "250",
    }
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_an_installed_package_adds_to_every_registry(plugin_site, tmp_path):
    r = _harness(plugin_site, tmp_path, "ls")
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    for name, origin in [
        ("plugdemo-turn", None),
        ("lenratio", "plug-in 'lenratio'"),
        ("overlap", "plug-in 'overlap'"),
        ("letter_grade", "plug-in 'letter_grade'"),
        ("plugdemo", "plug-in 'plugdemo'"),
    ]:
        assert f"│ {name} " in out, name
        assert origin is None or origin in out
    r = _harness(plugin_site, tmp_path, "validate")
    assert r.returncode == 0 and "task definitions valid" in r.stdout, r.stdout + r.stderr


def test_harness_run_scores_the_plugin_task_with_the_plugin_judges(plugin_site, tmp_path):
    judge = "panel:overlap:v1+[lenratio:words]"  # the plug-in backend (an LLM judge) and judge kind
    r = _harness(
        plugin_site,
        tmp_path,
        "run",
        "--task",
        "plugdemo",
        "--judge",
        judge,
        "--output",
        "out",
        "-q",
        "--bootstrap",
        "100",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    task = results["tasks"]["plugdemo-turn"]
    assert task["builder"] == "plugdemo" and task["scoring"] == "letter_grade"
    assert task["scorer"] == {"name": "letter_grade", "grades": "EDCBA"} and task["grades"] == "EDCBA"
    assert results["judge"]["spec"] == judge and results["parse_failures"]["plugdemo-turn"] == 0
    assert results["datasets"]["plugdemo-turn"]["builder"] == "plugdemo"
    samples = pd.read_parquet(tmp_path / "out" / "samples.parquet")
    assert len(samples) == 12 and (samples.parse_status == "ok").all()
    members = [json.loads(x)["members"] for x in samples.extra]
    grades = {m[0]["score"] for m in members}  # the overlap backend's 'Grade: X', read by letter_grade
    assert grades <= {1.0, 2.0, 3.0, 4.0, 5.0} and len(grades) > 1
    assert all(0 <= m[1]["score"] <= 1 for m in members)  # lenratio
    assert all(
        m[0]["normalised"] == pytest.approx((m[0]["score"] - 1) / 4) for m in members
    )  # letter_grade's range
    rho = results["results"]["plugdemo-turn"]["en"]["spearman"]["value"]
    assert rho is not None and rho > 0  # the rule grades relevant responses higher, as the ratings do
