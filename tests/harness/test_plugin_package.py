"""A separate installed package extends the harness at all six extension points — a scoring
method, a backend, a judge kind, a dataset builder, a task family and a meta-metric — with no change
to the core: ``tests/fixtures/plugin_pkg`` (its own ``pyproject.toml`` and entry points) is
pip-installed offline into a folder, which ``importlib.metadata`` finds on ``PYTHONPATH``, and the
real ``harness`` CLI lists, validates and runs its task with its judges; its meta-metric
(``pairwise_accuracy``) is in the run's table, ``results.json`` (schema-valid), ``harness report``,
the published card and the viewer's overview and compare pages (a static bundle in chromium)."""

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
        ("pairwise_accuracy", "plug-in 'pairwise_accuracy'"),
    ]:
        assert f"│ {name} " in out, name
        assert origin is None or origin in out
    r = _harness(plugin_site, tmp_path, "validate")
    assert r.returncode == 0 and "task definitions valid" in r.stdout, r.stdout + r.stderr


PANEL = "panel:overlap:v1+[lenratio:words]"  # the plug-in backend (an LLM judge) and judge kind


def test_harness_run_scores_the_plugin_task_with_the_plugin_judges(plugin_site, tmp_path):
    judge = PANEL
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


@pytest.fixture(scope="module")
def plugin_runs(plugin_site, tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    """Two runs of the plug-in task (the panel and the plug-in judge kind alone), their stdout."""
    tmp = tmp_path_factory.mktemp("plugin_runs")
    outs = {}
    for name, judge in (("panel", PANEL), ("lenratio", "lenratio:words")):
        r = _harness(
            plugin_site, tmp, "run", "-t", "plugdemo", "-j", judge, "-o", name, "-q", "--bootstrap", "200"
        )
        assert r.returncode == 0, r.stdout + r.stderr
        (tmp / f"{name}.stdout").write_text(r.stdout)
        outs[name] = tmp / name
    return tmp, outs


def test_the_plugin_meta_metric_is_in_the_table_and_results_json(plugin_runs):
    from jsonschema import Draft202012Validator

    from harness.run.document import shipped_schema

    tmp, outs = plugin_runs
    table = " ".join((tmp / "panel.stdout").read_text().split())
    assert "pairwise acc. [95% CI]" in table  # the header the metric declares
    results = json.loads((outs["panel"] / "results.json").read_text())
    Draft202012Validator(shipped_schema("results")).validate(results)
    task = results["tasks"]["plugdemo-turn"]
    assert task["meta_metrics"] == ["spearman", "pearson", "pairwise_accuracy"]
    samples = pd.read_parquet(outs["panel"] / "samples.parquet")
    x, h = samples["score"].tolist(), samples["human_rating"].tolist()
    agree = [
        (x[i] > x[j]) - (x[i] < x[j]) == (h[i] > h[j]) - (h[i] < h[j]) for i in range(12) for j in range(i)
    ]
    en = results["results"]["plugdemo-turn"]["en"]["pairwise_accuracy"]
    assert en["value"] == pytest.approx(sum(agree) / len(agree))  # 66 pairs of 12 items
    assert en["per_dataset"]["plugdemo-turn"]["n_pairs"] == 66
    lo, hi = en["ci"]
    assert 0 <= lo <= en["value"] <= hi <= 1
    assert results["results"]["plugdemo-turn"]["all"]["pairwise_accuracy"]["value"] == pytest.approx(
        en["value"]
    )


def test_the_plugin_meta_metric_is_in_the_report_and_the_published_card(plugin_site, plugin_runs):
    tmp, outs = plugin_runs
    r = _harness(
        plugin_site, tmp, "report", str(outs["panel"]), str(outs["lenratio"]), "-o", "report", "--no-html"
    )
    assert r.returncode == 0, r.stdout + r.stderr
    md = (tmp / "report" / "report.md").read_text()
    assert "pairwise acc. per language (higher is better):" in md
    assert "| pairwise acc. |" in md.split("## Leaderboard")[1].split("##")[0].replace("  ", " ")
    code = (
        "from harness.view.data import read_run; from harness.view.publish import results_markdown; "
        f"print(results_markdown(read_run({str(outs['panel'])!r})))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), str(ROOT)])}
    card = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert card.returncode == 0, card.stderr
    assert "| language | n | Spearman | Pearson | pairwise acc. | parse failures |" in card.stdout


@pytest.mark.browser
def test_the_plugin_meta_metric_is_in_the_viewer(plugin_site, plugin_runs):
    """The static bundle of both runs in chromium: the overview's task table has the metric's column
    and the compare page tests it (paired bootstrap) next to the correlations."""
    from tests.fixtures.browser import CHROMIUM
    from tests.harness.view.test_browser import READY

    tmp, outs = plugin_runs
    r = _harness(plugin_site, tmp, "view", str(outs["lenratio"]), str(outs["panel"]), "--bundle", "site")
    assert r.returncode == 0, r.stdout + r.stderr
    from playwright.sync_api import sync_playwright

    from harness.view.data import read_runs

    keys = [r.key for r in read_runs([outs["lenratio"], outs["panel"]])]
    index = (tmp / "site" / "index.html").as_uri()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(90_000)
            page.goto(f"{index}#/run/{keys[1]}")
            page.wait_for_function(READY)
            headers = page.locator("table th").all_inner_texts()
            assert "pairwise acc." in headers, headers
            page.goto(f"{index}#/compare?runs={keys[0]},{keys[1]}")
            page.wait_for_function(READY)
            page.wait_for_selector("table.deltas")
            headers = page.locator("table.deltas th").all_inner_texts()
            assert "pairwise acc.: baseline → other" in headers, headers
        finally:
            browser.close()
