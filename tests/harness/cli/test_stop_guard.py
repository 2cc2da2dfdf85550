"""A stop signal that reaches the top-level command group (the command did not report it itself):
one line naming the signal and the command, and the signal's exit status (not Click's "Aborted!",
not 130 for every signal)."""

from __future__ import annotations

import signal

import pytest
import typer.main

from harness.cli.app import app
from harness.interrupt import Interrupted


@pytest.mark.parametrize(
    ("exc", "status", "line"),
    [
        (Interrupted(signal.SIGTERM), 143, "stopped by SIGTERM before `harness ls` finished"),
        (Interrupted(signal.SIGHUP), 129, "stopped by SIGHUP before `harness ls` finished"),
        (KeyboardInterrupt(), 130, "stopped by SIGINT before `harness ls` finished"),
    ],
)
def test_a_stop_the_command_did_not_report_exits_with_the_signals_status(
    monkeypatch, capsys, exc, status, line
):
    group = typer.main.get_command(app)

    def stopped_here(*args, **kwargs):
        raise exc

    monkeypatch.setattr(group.commands["ls"], "callback", stopped_here)
    with pytest.raises(SystemExit) as ei:
        group.main(["ls"], standalone_mode=True)
    assert ei.value.code == status
    assert capsys.readouterr().err.strip() == line


def test_a_bad_grace_period_is_one_error_line(monkeypatch, capsys):
    from harness.cli.app import main

    monkeypatch.setenv("DIALEVAL_STOP_GRACE", "soon")
    monkeypatch.setattr("sys.argv", ["harness", "ls", "tasks"])
    with pytest.raises(SystemExit) as ei:
        main()
    assert ei.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "error: DIALEVAL_STOP_GRACE='soon': expected a number of seconds >= 0 (default 5)"
    )
