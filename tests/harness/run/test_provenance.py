"""results.json names what built the dataset a run read: for an imported dataset the importer and
its mapping, not the task's own builder."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dataset_builders.importer.generic import IMPORTER_VERSION
from harness.cli.app import app
from harness.run.document import load_results
from tests.dataset_builders.importer.test_importer import CD_DIAL, CD_TURN


def test_an_imported_comperdial_run_records_the_importer_and_mapping(tmp_path, monkeypatch):
    monkeypatch.setenv("DIALEVAL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DIALEVAL_REGISTRY", str(tmp_path / "registry"))
    src = tmp_path / "cd"
    src.mkdir()
    (src / "ComperDial_turn_level_evaluation.json").write_text(json.dumps(CD_TURN))
    (src / "ComperDial_dialogue_level_evaluation.json").write_text(json.dumps(CD_DIAL))
    runner = CliRunner()
    r = runner.invoke(app, ["datasets", "build", "import", "--mapping", "comperdial", "--source", str(src)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "run"
    r = runner.invoke(
        app,
        [
            "run",
            "--task",
            "cpdscore-d-ref",
            "--judge",
            "metric:rougeL",
            "--dataset",
            "comperdial@1.0.0",
            "--limit",
            "5",
            "-q",
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output  # the ceilings of 3 units with anti-correlated halves end in a note
    res = load_results(out)
    ds = res.datasets["cpdscore-d-ref"]
    assert ds.builder == "comperdial"
    assert ds.built_by is not None
    assert ds.built_by.importer == f"import@{IMPORTER_VERSION}" and ds.built_by.mapping == "comperdial"
    assert ds.built_by.task_builder == "upheld" and len(ds.built_by.mapping_sha256 or "") == 64
