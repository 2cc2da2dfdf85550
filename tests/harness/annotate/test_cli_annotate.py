"""`harness annotate`: a project created from a registered dataset, its status, the export as a
registered version that `load_dataset` reads and `harness run` evaluates a judge on, active
selection over a judge run, and bad input answered in one `error:` line."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.annotate.store import Project, Submission, project_path
from harness.cli.app import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Path:
    """A registry holding demo@1.0.0."""
    reg = tmp_path_factory.mktemp("registry")
    r = runner.invoke(app, ["datasets", "build", "demo", "--registry", str(reg), "-q"])
    assert r.exit_code == 0, r.output
    return reg


@pytest.fixture(scope="module")
def judge_run(tmp_path_factory, registry) -> Path:
    """A replay judge's run of demo-turn on demo@1.0.0 (P(Yes) from a hash of the prompt)."""
    root = tmp_path_factory.mktemp("run")
    replay = root / "replay.jsonl"
    replay.write_text(json.dumps({"default": {"hashed_p_yes": True}}) + "\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DIALEVAL_REGISTRY", str(registry))
        r = runner.invoke(
            app,
            [
                "run",
                "--judge",
                f"replay:{replay}",
                "--task",
                "demo-turn",
                "--dataset",
                "demo@1.0.0",
                "-o",
                str(root / "out"),
                "-q",
                "--bootstrap",
                "20",
                "--no-cache",
                "--no-human-meta",
            ],
        )
    assert r.exit_code == 0, r.output
    return root / "out"


@pytest.fixture
def env(registry, monkeypatch, tmp_path):
    monkeypatch.setenv("DIALEVAL_REGISTRY", str(registry))
    return tmp_path


def _error_line(r) -> str:
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def _label(project: Project, per_annotator: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    for a in project.annotators():
        for n in range(per_annotator):
            view = project.next_item(a)
            if view is None:
                break
            labels = {f.dimension: float(rng.randint(int(f.min), int(f.max))) for f in project.form.fields}
            project.submit(a, Submission(view.item_id, f"{a}-{n}", labels))


def test_start_status_export_and_run_on_the_export(env, judge_run, tmp_path):
    r = runner.invoke(
        app,
        [
            "annotate",
            "start",
            "rel",
            "--dataset",
            "demo@1.0.0",
            "--task",
            "demo-turn",
            "--annotators",
            "ann-a,ann-b,ann-c",
            "--per-item",
            "2",
            "--languages",
            "en,ar",
            "--no-serve",
            "-q",
        ],
    )
    assert r.exit_code == 0, r.output
    urls = re.findall(r"http://127\.0\.0\.1:8765/a/[A-Za-z0-9_-]+", r.output)
    assert len(set(urls)) == 3
    path = project_path("rel")
    assert path.is_file()  # under $DIALEVAL_HOME/annotations
    project = Project.open(path)
    assert project.annotator_for(urls[0].rsplit("/", 1)[-1]) == "ann-a"
    assert set(project.items()["language"]) == {"en", "ar"} and len(project.items()) == 32
    _label(project, per_annotator=14)

    r = runner.invoke(
        app, ["annotate", "status", "rel", "--json", "--bootstrap", "20", "--judge-run", str(judge_run)]
    )
    assert r.exit_code == 0, r.output
    status = json.loads(r.output)
    assert sum(row["done"] for row in status["progress"]) == 42
    assert {row["language"] for row in status["progress"]} == {"en", "ar"}
    (relevance,) = status["agreement"]
    assert relevance["dimension"] == "relevance" and relevance["n_items"] >= 5
    assert relevance["alpha_level"] == "ordinal" and len(relevance["kappa"]) == 3
    assert status["judge"]["task"] == "demo-turn" and status["judge"]["n_items"] == len(
        set(project.labels()["item_id"])
    )
    assert "pearson" in status["judge"]["entries"]["en"]
    r = runner.invoke(app, ["annotate", "status", "rel", "--bootstrap", "20"])
    assert r.exit_code == 0 and "Krippendorff" in r.output and "ann-a – ann-b" in r.output, r.output

    r = runner.invoke(app, ["annotate", "export", "rel", "--as", "demo-humans@1.0.0"])
    assert r.exit_code == 0, r.output
    assert "registered demo-humans@1.0.0" in r.output
    from datasets import load_dataset

    from harness.data.registry import DatasetRegistry

    rv = DatasetRegistry().resolve("demo-humans@1.0.0")
    ds = load_dataset(str(rv.path), "demo-turn", split="test", cache_dir=str(tmp_path / "hf"))
    labels = project.labels()
    assert len(ds) == labels["item_id"].nunique()
    by_record = labels.groupby("record_id")["value"].apply(lambda v: sorted(v.tolist()))
    for row in ds:
        assert sorted(lab["value"] for lab in row["labels"]) == pytest.approx(by_record[row["id"]])
        assert row["rating"] == pytest.approx(sum(by_record[row["id"]]) / len(by_record[row["id"]]))
        assert row["system"] is None and row["language"] in ("en", "ar")
    shown = runner.invoke(app, ["datasets", "show", "demo-humans@1.0.0", "--agreement"])
    assert shown.exit_code == 0 and "annotation project rel" in shown.output, shown.output
    card = (rv.path / "README.md").read_text()
    assert "Inter-annotator agreement" in card and "Guideline used" in card
    r = runner.invoke(app, ["annotate", "export", "rel", "--as", "demo-humans@1.0.0"])
    assert "already registered" in _error_line(r)

    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"default": {"hashed_p_yes": True}}) + "\n")
    out = tmp_path / "run-on-export"
    r = runner.invoke(
        app,
        [
            "run",
            "--judge",
            f"replay:{replay}",
            "--task",
            "demo-turn",
            "--dataset",
            "demo-humans@1.0.0",
            "-o",
            str(out),
            "-q",
            "--bootstrap",
            "20",
            "--no-cache",
        ],
    )
    assert r.exit_code == 0, r.output
    results = json.loads((out / "results.json").read_text())
    assert results["results"]["demo-turn"]["all"]["pearson"]["n"] == len(ds)


def test_active_selection_orders_queues_by_the_plan_and_status_estimates(env, judge_run):
    r = runner.invoke(
        app,
        [
            "annotate",
            "start",
            "act",
            "--dataset",
            "demo@1.0.0",
            "--task",
            "demo-turn",
            "--annotators",
            "a,b",
            "--per-item",
            "1",
            "--select",
            "active",
            "--judge-run",
            str(judge_run),
            "--no-serve",
            "-q",
        ],
    )
    assert r.exit_code == 0, r.output
    project = Project.open(project_path("act"))
    plan = project.active_plan()
    assert plan is not None and plan.n_items == 160 and plan.q.sum() == pytest.approx(1.0)
    assert plan.q.min() >= 0.1 / 160 - 1e-12
    first = [project.next_item(a).item_id for a in ("a", "b")]
    assert set(first) == set(plan.order[:2])  # the queues follow the plan's order
    _label(project, per_annotator=20)
    r = runner.invoke(app, ["annotate", "status", "act", "--json", "--bootstrap", "0"])
    active = json.loads(r.output)["active"]
    assert active["n_labels"] == 40 and active["n_items"] == 160 and active["metric"] == "pearson"
    assert active["value"] is not None and active["ci"][0] <= active["value"] <= active["ci"][1]
    assert active["more_labels"] is None or active["more_labels"] >= 0
    # demo records no system: the items are grouped by their config, and 40 labels calibrate
    assert active["group_by"] == "dataset" and active["estimator"] == "calibrated"
    r = runner.invoke(app, ["annotate", "status", "act", "--bootstrap", "0"])
    assert r.exit_code == 0 and "active calibrated estimate" in r.output, r.output


def test_bad_input_is_one_error_line(env, judge_run):
    base = ["annotate", "start", "p", "--dataset", "demo@1.0.0", "--config", "demo-turn", "--no-serve", "-q"]
    assert "no dataset 'nope'" in _error_line(
        runner.invoke(app, [*base[:3], "--dataset", "nope@1.0.0", "--annotators", "a", "--no-serve"])
    )
    assert "unknown task 'nope'" in _error_line(
        runner.invoke(app, [*base, "--annotators", "a", "--task", "nope"])
    )
    assert "duplicate annotator(s) a" in _error_line(runner.invoke(app, [*base, "--annotators", "a,b,a"]))
    assert "--select active needs --judge-run" in _error_line(
        runner.invoke(app, [*base, "--annotators", "a", "--select", "active"])
    )
    active = ["--select", "active", "--judge-run", str(judge_run), "--annotators", "a"]
    assert "--group-by 'model': use system, dataset or none" in _error_line(
        runner.invoke(app, [*base, *active, "--group-by", "model"])
    )
    assert "records no system" in _error_line(runner.invoke(app, [*base, *active, "--group-by", "system"]))
    assert "--group-by only applies to --select active" in _error_line(
        runner.invoke(app, [*base, "--annotators", "a", "--group-by", "dataset"])
    )
    assert runner.invoke(app, [*base, "--annotators", "a"]).exit_code == 0
    assert "already exists" in _error_line(runner.invoke(app, [*base, "--annotators", "b"]))
    assert "no annotation project" in _error_line(runner.invoke(app, ["annotate", "status", "nope"]))
    assert "nothing to export" in _error_line(
        runner.invoke(app, ["annotate", "export", "p", "--as", "x@1.0.0"])
    )
    assert "did not judge task 'demo-dialogue'" in _error_line(
        runner.invoke(
            app,
            [
                "annotate",
                "start",
                "q",
                "--dataset",
                "demo@1.0.0",
                "--task",
                "demo-dialogue",
                "--annotators",
                "a",
                "--select",
                "active",
                "--judge-run",
                str(judge_run),
                "--no-serve",
                "-q",
            ],
        )
    )


def test_start_prints_the_addresses_once_the_server_listens(env, tmp_path):
    """`start` prints the addresses once the server listens; the page answers at them."""
    import os
    import signal

    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "annotate",
        "start",
        "live",
        "--dataset",
        "demo@1.0.0",
        "--config",
        "demo-dial",
        "--annotators",
        "x,y",
        "--port",
        "0",
        "-q",
        "--dir",
        str(tmp_path),
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        url = None
        for line in proc.stdout:  # type: ignore[union-attr]
            m = re.search(r"http://127\.0\.0\.1:\d+/a/[A-Za-z0-9_-]+", line)
            if m:
                url = m.group(0)
                break
        assert url, "no address printed"
        token = url.rsplit("/", 1)[-1]
        with urllib.request.urlopen(url.replace(f"/a/{token}", f"/api/{token}/next"), timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["item"]["level"] == "dialogue" and body["progress"]["done"] == 0
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert project_path("live", tmp_path).is_file()


def test_label_studio_export_and_import_commands(env, tmp_path):
    base = [
        "annotate",
        "start",
        "ls",
        "--dataset",
        "demo@1.0.0",
        "--config",
        "demo-turn",
        "--languages",
        "en",
    ]
    assert runner.invoke(app, [*base, "--annotators", "a,b", "--no-serve", "-q"]).exit_code == 0
    r = runner.invoke(app, ["annotate", "export-ls", "ls", "--out", str(tmp_path / "ls")])
    assert r.exit_code == 0, r.output
    tasks = json.loads((tmp_path / "ls" / "tasks.json").read_text(encoding="utf-8"))
    assert len(tasks) == 16 and (tmp_path / "ls" / "config.xml").is_file()
    project = Project.open(project_path("ls"))
    mine = set(project.items().query("annotators.str[0] == 'a'")["item_id"])
    task = next(t for t in tasks if t["data"]["item_id"] in mine)
    result = [
        {"from_name": "relevance", "to_name": "transcript", "type": "choices", "value": {"choices": ["4"]}}
    ]
    annotation = {"id": 7, "completed_by": {"id": 2, "email": "a"}, "result": result}
    export = tmp_path / "export.json"
    export.write_text(
        json.dumps([{"id": 1, "data": task["data"], "annotations": [annotation]}]), encoding="utf-8"
    )
    r = runner.invoke(app, ["annotate", "import-ls", "ls", str(export)])
    assert r.exit_code == 0 and "imported 1 submission(s)" in r.output, r.output
    r = runner.invoke(app, ["annotate", "import-ls", "ls", str(export)])
    assert r.exit_code == 0 and "1 already in the project" in r.output, r.output
    labels = project.labels()
    assert labels[["item_id", "annotator"]].values.tolist() == [[task["data"]["item_id"], "a"]]
    assert labels["value"].tolist() == pytest.approx([4.0])
    export.write_text("not json", encoding="utf-8")
    assert str(export) in _error_line(runner.invoke(app, ["annotate", "import-ls", "ls", str(export)]))


def test_token_and_revoke_commands(env):
    from harness.annotate.store import AnnotationError

    r = runner.invoke(
        app,
        [
            "annotate",
            "start",
            "tok",
            "--dataset",
            "demo@1.0.0",
            "--config",
            "demo-dial",
            "--annotators",
            "a,b",
            "--no-serve",
            "-q",
            "--port",
            "9001",
        ],
    )
    old = dict(re.findall(r"(\w)\s+│?\s*http://127\.0\.0\.1:9001/a/([A-Za-z0-9_-]+)", r.output))
    assert set(old) == {"a", "b"}, r.output
    r = runner.invoke(app, ["annotate", "token", "tok", "a"])
    (new,) = re.findall(r"http://127\.0\.0\.1:9001/a/([A-Za-z0-9_-]+)", r.output)  # the project's port
    project = Project.open(project_path("tok"))
    assert project.annotator_for(new) == "a"
    with pytest.raises(AnnotationError):
        project.annotator_for(old["a"])
    assert runner.invoke(app, ["annotate", "revoke", "tok", "b"]).exit_code == 0
    with pytest.raises(AnnotationError):
        project.annotator_for(old["b"])
    assert "no annotator 'c'" in _error_line(runner.invoke(app, ["annotate", "token", "tok", "c"]))
