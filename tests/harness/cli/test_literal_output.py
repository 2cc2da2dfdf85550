"""The CLI prints text as written: a user's input in an error message, a help text, a table cell
are never read as rich markup (``[bold]``, ``[topical_chat/]``) or emoji codes (``:x:``)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from harness.cli.app import app
from harness.cli.console import console, err, frame_table, literal_console

runner = CliRunner()
TRICKY = "a:x:b [bold]loud[/bold] [topical_chat/] :thumbs_up: [red]"


def _walk(command, path):
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, [*path, name])


TREE = list(_walk(typer.main.get_command(app), []))


def _squash(text: str) -> str:
    return "".join(text.split())  # help is re-wrapped: compare without whitespace


@pytest.mark.parametrize("path, command", TREE, ids=[" ".join(p) or "harness" for p, _ in TREE])
def test_every_help_text_is_printed_as_written(path, command):
    r = runner.invoke(app, [*path, "--help"])
    assert r.exit_code == 0, r.output
    shown = _squash(r.output)
    texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
    for text in texts:
        assert _squash(text.split("\f")[0]) in shown, (text, r.output)


def test_a_help_text_with_brackets_keeps_them():
    r = runner.invoke(app, ["reproduce", "upheld", "--help"])
    assert r.exit_code == 0
    assert "[topical_chat/]" in r.output  # rich markup would have eaten it


@pytest.mark.parametrize("task", ["a:x:b", "[bold]loud[/bold]", "x[/]y", ":thumbs_up:"])
def test_an_error_message_shows_the_users_input_as_written(task):
    r = runner.invoke(app, ["run", "--task", task, "-q"])
    assert r.exit_code == 2
    line = r.stderr.strip()
    assert line.startswith(f"error: unknown task '{task}'"), line
    assert "❌" not in line and "👍" not in line


def test_a_judge_file_is_quoted_as_written(tmp_path):
    f = tmp_path / "judge.yaml"
    f.write_text("root:x:0:0 [bold]root[/bold]\n", encoding="utf-8")
    r = runner.invoke(app, ["run", "--task", "demo-turn", "--judge", f"@{f}", "-q"])
    assert r.exit_code == 2
    assert "'root:x:0:0 [bold]root[/bold]'" in r.stderr and "❌" not in r.stderr


def test_the_consoles_and_tables_print_literally():
    for c in (console, err, literal_console()):
        with c.capture() as cap:
            c.print(TRICKY)
        assert cap.get().strip() == TRICKY
    with console.capture() as cap:
        console.print(frame_table(f"title {TRICKY}", pd.DataFrame({"judge": [TRICKY], "x": [0.5]})))
    out = cap.get()
    assert f"title {TRICKY}" in out.replace("\n", " ") or TRICKY in out
    assert "[bold]loud[/bold]" in out and "a:x:b" in out and "\\[" not in out


def test_a_run_prints_a_bracketed_judge_spec_as_written(tmp_path):
    """Result tables are titled with the judge spec; a panel's ``[member]`` brackets stay."""
    specs = []
    for name in ("a", "b"):
        f = tmp_path / f"{name}.jsonl"
        f.write_text(json.dumps({"default": {"hashed_p_yes": True}}) + "\n")
        specs.append(f"[replay:{f}]")
    spec = "panel:" + "+".join(specs)
    args = ["run", "--judge", spec, "--task", "demo-turn", "--language", "en", "--limit", "4", "-q"]
    r = runner.invoke(app, [*args, "--bootstrap", "0", "--output", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert spec in r.stdout.replace("\n", "")
