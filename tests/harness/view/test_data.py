"""harness.view.data: which directories are runs, their keys, and clear errors for what is not."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.view.data import discover, read_run, read_runs


def test_a_run_directory_a_runs_folder_and_results_json(view_runs, tmp_path):
    a = view_runs["demo_a"]
    assert discover([a]) == [a.resolve()]
    assert discover([a / "results.json"]) == [a.resolve()]
    folder = a.parent  # runs/: three runs below it
    assert [p.name for p in discover([folder])] == ["demo-a", "demo-b", "upheld-rouge"]
    nested = tmp_path / "all" / "group"
    nested.mkdir(parents=True)
    shutil.copytree(a, nested / "copy")
    assert discover([tmp_path / "all"]) == [(nested / "copy").resolve()]
    assert discover([a, folder]) == discover([folder])  # the same run once


def test_keys_are_run_ids_made_unique(view_runs, tmp_path):
    shutil.copytree(view_runs["demo_a"], tmp_path / "one")
    shutil.copytree(view_runs["demo_a"], tmp_path / "two")
    runs = read_runs([tmp_path / "one", tmp_path / "two", view_runs["demo_b"]])
    rid = runs[0].run_id
    assert [r.key for r in runs] == [rid, f"{rid}-2", runs[2].run_id]
    assert runs[0].samples is not None and runs[0].items is None
    assert runs[0].judge.startswith("replay:") and runs[0].tasks == ["demo-turn", "demo-dialogue"]


def test_bad_arguments_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such run directory"):
        discover([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no results.json in it or in its sub-folders"):
        discover([tmp_path / "empty"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text(json.dumps({"schema_version": "9.0", "results": {}}))
    with pytest.raises(ValueError, match=r"bad/results.json: .*schema version '9.0'"):
        read_run(bad)
    (bad / "results.json").write_text(json.dumps({"schema_version": "2.0"}))
    with pytest.raises(ValueError, match=r"bad/results.json: not a valid results document .*field 'run'"):
        read_run(bad)
    with pytest.raises(ValueError, match="hub:namespace/name"):
        discover(["hub:justaname"])
