"""Command-line usage errors — an unknown option or command, a value of the wrong type or out of
range, an option without its value, a missing option or argument — are one ``error:`` line that
names the option (and the value given), with exit status 2, at every level of the command tree;
and every usage error class of the Click that typer raises is answered that way."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.cli.app import app
from harness.cli.usage import BadOptionUsage, NoArgsIsHelpError, usage_error_classes, usage_message

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()
cli_usage = importlib.import_module("harness.cli.usage")

# (command line, what the error line must contain)
PROBES: list[tuple[list[str], list[str]]] = [
    (["run", "--task", "demo-turn", "--limit", "abc"], ["harness run", "--limit", "'abc'", "integer"]),
    (["run", "--task", "demo-turn", "--limit", "1e3"], ["--limit", "'1e3'", "integer"]),
    (["run", "--task", "demo-turn", "--batch-size", "xyz"], ["--batch-size", "'xyz'"]),
    (["run", "--task", "demo-turn", "-b", "xyz"], ["--batch-size", "'xyz'"]),
    (["run", "--task", "demo-turn", "--seed", "1.5"], ["--seed", "'1.5'"]),
    (["run", "--task", "demo-turn", "--workers", "abc"], ["--workers", "'abc'"]),
    (["run", "--task", "demo-turn", "--alt-q", "lots"], ["--alt-q", "'lots'", "number"]),
    (["run", "--task", "demo-turn", "--nosuchflag"], ["harness run", "no such option --nosuchflag"]),
    (["run", "--tsak", "demo-turn"], ["no such option --tsak", "did you mean --task?"]),
    (["run", "--no-cache=3"], ["harness run", "'--no-cache' does not take a value"]),
    (["run", "--task"], ["harness run", "'--task' requires an argument"]),
    (["nosuchcommand"], ["harness:", "no such command 'nosuchcommand'", "the commands are run, ls"]),
    (["rnu"], ["no such command 'rnu'", "did you mean 'run'?"]),
    (["--nosuchflag"], ["harness:", "no such option --nosuchflag"]),
    (["view", "RUN", "--port", "99999"], ["harness view", "--port", "'99999'", "65535"]),
    (["view", "RUN", "--port", "-1"], ["--port", "'-1'", "greater than or equal to 0"]),
    (["chatbot-eval", "x", "--limit", "0"], ["--limit", "'0'", "greater than or equal to 1"]),
    (
        ["datasets", "build", "demo", "--version"],
        ["harness datasets build", "'--version' requires an argument"],
    ),
    (["datasets", "build"], ["harness datasets build", "missing argument NAME"]),
    (["stability", "--judge", "replay:x.jsonl"], ["harness stability", "missing option --task"]),
    (["report", "RUN"], ["harness report", "missing option --output"]),
    (["ls", "tasks", "extra"], ["harness ls", "unexpected extra argument", "extra"]),
    (["datasets", "biuld", "demo"], ["harness datasets", "no such command 'biuld'", "did you mean 'build'?"]),
]


def _walk(command, path):
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, [*path, name])


TREE = list(_walk(typer.main.get_command(app), []))
GROUPS = [path for path, c in TREE if hasattr(c, "commands")]
COMMANDS = [path for path, c in TREE if not hasattr(c, "commands")]


def _one_error_line(result) -> str:
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and not lines[0].startswith("error: unexpected"), lines[0]
    assert result.stdout == ""
    return lines[0]


@pytest.mark.parametrize("args, expect", PROBES, ids=[" ".join(a) for a, _ in PROBES])
def test_a_usage_error_is_one_line_naming_the_option_and_value(args, expect):
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    line = _one_error_line(r)
    for part in expect:
        assert part in line, (part, line)
    assert "see 'harness" in line and "--help'" in line  # the way forward


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_an_unknown_option_of_every_command(path):
    r = runner.invoke(app, [*path, "--no-such-option"])
    assert r.exit_code == 2, r.output
    line = _one_error_line(r)
    assert f"harness {' '.join(path)}: no such option --no-such-option" in line


@pytest.mark.parametrize("path", GROUPS, ids=[" ".join(p) or "harness" for p in GROUPS])
def test_an_unknown_command_at_every_group_level(path):
    r = runner.invoke(app, [*path, "no-such-command"])
    assert r.exit_code == 2, r.output
    line = _one_error_line(r)
    assert " ".join(["harness", *path]) + ": no such command 'no-such-command'" in line


def test_every_usage_error_class_is_answered_in_one_line(monkeypatch):
    """Each usage error class of typer's Click is raised by some probe above and answered by the
    one-line handler; a Click upgrade that adds a class makes this test name it."""
    seen: set[type] = set()
    real = cli_usage.usage_message

    def spy(e):
        seen.add(type(e))
        return real(e)

    monkeypatch.setattr(cli_usage, "usage_message", spy)
    for args, _ in PROBES:
        assert runner.invoke(app, args).exit_code == 2
    reachable = usage_error_classes() - {NoArgsIsHelpError}
    # Raised only for an argument of a fixed number > 1 of values, which no command has.
    unreachable = {c for c in reachable if c.__name__ == "BadArgumentUsage"}
    assert reachable - unreachable <= seen, sorted(c.__name__ for c in reachable - unreachable - seen)
    for cls in unreachable:  # answered all the same
        assert usage_message(cls("Argument 'pair' takes 2 values.")).startswith(
            "harness: argument 'pair' takes 2 values"
        )


def test_a_usage_error_without_a_context_names_the_command():
    e = BadOptionUsage("--x", "Option '--x' requires an argument.")
    assert usage_message(e) == "harness: option '--x' requires an argument (see 'harness --help')"


def test_a_group_without_a_command_shows_its_help():
    r = runner.invoke(app, ["datasets"])
    assert "Usage: " in r.output and "build" in r.output and "error:" not in r.output


def test_the_entry_point_itself_answers_a_usage_error_in_one_line(tmp_path):
    """The real process (``python -m harness.cli``), as a user types it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DIALEVAL_HOME": str(tmp_path / "home")}
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--task", "demo-turn", "--limit", "abc"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        "error: harness run: invalid value 'abc' for --limit: input should be a valid integer, unable to "
        "parse string as an integer (see 'harness run --help')"
    ]


def test_the_cli_dependencies_are_pinned_to_what_is_tested():
    """typer and rich are pinned (pyproject.toml) to the ranges these tests run on: typer's private
    Click copy is what raises the usage errors, so a typer outside the range may raise others."""
    import tomllib
    from importlib.metadata import version

    from packaging.requirements import Requirement

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["dependencies"]
    pins = {r.name: r.specifier for r in map(Requirement, deps)}
    for name in ("typer", "rich"):
        assert pins[name] and any(s.operator == "<" for s in pins[name]), (name, pins[name])
        assert pins[name].contains(version(name)), (name, version(name), pins[name])
