"""The ``harness`` command: one Typer app; each command group lives in its own module of this
package and is registered here (the modules import only :mod:`harness.cli.console`, never each other).

``harness run | stability | ls | validate | report | view | runs publish | chatbot-eval | robustness inject|pairwise |
datasets build|ls|show|verify|diff|publish|qa | cache check|repair | finetune … | models materialize|ls |
reproduce upheld | annotate start|serve|status|export|token|revoke|export-ls|import-ls``.

The top-level group is the CLI's guard: a usage error (an unknown option or command, a value of
the wrong type, a missing value or argument) is one ``error:`` line naming the command, the option
and the value, exit 2; any other exception no command handled is one line as well (with ``--debug``
for the traceback).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from harness.cli import chatbot, ls, report, run
from harness.cli.annotate import annotate_app
from harness.cli.console import err, error_line, error_message, stopped
from harness.cli.datasets import datasets_app
from harness.cli.finetune import finetune_app
from harness.cli.reproduce import reproduce_app
from harness.cli.robustness import robustness_app
from harness.cli.usage import ClickException, UsageError, is_help_request, usage_error
from harness.interrupt import Interrupted, exit_status, grace, stop_signals

DEBUG_FLAG, DEBUG_ENV = "--debug", "DIALEVAL_DEBUG"


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


class GuardedGroup(TyperGroup):
    """The top-level command group: ``--debug`` anywhere on the line turns on tracebacks; a usage
    error (unknown option or command, a value of the wrong type, a missing value) is one ``error:``
    line naming the option and value, exit 2 (:func:`usage_message`); an exception no command
    handled becomes one ``error:`` line on stderr (exit 2 for bad input or an unusable file —
    ``ValueError``/``KeyError``/``OSError`` — else exit 1) with the ``--debug`` hint; with
    ``--debug`` or ``DIALEVAL_DEBUG=1`` the traceback is printed as well."""

    debug = False

    def main(self, args: Sequence[str] | None = None, *a: Any, **kw: Any) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        if DEBUG_FLAG in args:
            args = [x for x in args if x != DEBUG_FLAG]
            self.debug = True
        if not a and kw.get("prog_name") is None:  # `python -m harness.cli` is the harness command too
            kw["prog_name"] = "harness"
        return super().main(args, *a, **kw)

    # The group's own options are parsed before invoke (``harness --nosuchflag``).
    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        try:
            return super().parse_args(ctx, args)
        except UsageError as e:
            if is_help_request(e):
                raise
            raise usage_error(e) from None

    # TyperGroup declares the Context of typer's private click copy (typer._click); the context it
    # passes is the public subclass typer.Context.
    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:  # a stop signal the command did not report itself
            status = e.exit_status if isinstance(e, Interrupted) else exit_status(signal.SIGINT)
            what = f"harness {ctx.invoked_subcommand}" if ctx.invoked_subcommand else "harness"
            stopped(f"{str(e) or 'stopped by SIGINT'} before `{what}` finished", status)
        except UsageError as e:  # a subcommand's line: parsed inside this invoke
            if is_help_request(e):
                raise
            raise usage_error(e) from None
        except (typer.Exit, typer.Abort, ClickException, BrokenPipeError):
            raise  # Click shows these itself (a closed pipe: `harness ... --help | head`)
        except Exception as e:  # noqa: BLE001 - the guard: one line instead of a traceback
            debug = self.debug or debug_enabled()
            if debug:
                traceback.print_exc(file=sys.stderr)
            bad_input = isinstance(e, ValueError | KeyError | OSError)
            what = error_message(e) or type(e).__name__
            if not bad_input:
                what = f"unexpected {type(e).__name__}: {what}"
            hint = "" if debug else f" (rerun with {DEBUG_FLAG} or {DEBUG_ENV}=1 for the traceback)"
            error_line(f"{' '.join(what.split())}{hint}")
            raise typer.Exit(2 if bad_input else 1) from None


app = typer.Typer(
    cls=GuardedGroup,
    name="harness",
    help="dialeval-harness: multilingual open-domain dialogue evaluation and meta-evaluation. "
    f"Add {DEBUG_FLAG} to any command (or set {DEBUG_ENV}=1) to see the traceback of an unexpected error.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # help text as written: "[topical_chat/]" is not markup
)

app.command("run")(run.run)
app.command("ls")(ls.ls)
app.command("validate")(ls.validate)
app.add_typer(ls.cache_app, name="cache")
app.command("stability")(run.stability)
app.command("report")(report.report_command)
app.command("view")(report.view_command)
app.add_typer(report.runs_app, name="runs")
app.command("chatbot-eval")(chatbot.chatbot_eval)
app.add_typer(robustness_app, name="robustness")
app.add_typer(datasets_app, name="datasets")
app.add_typer(finetune_app, name="finetune")
app.add_typer(ls.models_app, name="models")
app.add_typer(reproduce_app, name="reproduce")
app.add_typer(annotate_app, name="annotate")


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        seconds = grace()  # DIALEVAL_STOP_GRACE
    except ValueError as e:
        err.print(f"error: {e}", markup=False, highlight=False)
        sys.exit(2)
    # Ctrl-C, SIGTERM and SIGHUP stop a command cleanly (harness.interrupt): exit 130 / 143 / 129
    with stop_signals(seconds):
        try:
            app()
        except KeyboardInterrupt as e:  # outside a command (while parsing the command line)
            status = e.exit_status if isinstance(e, Interrupted) else exit_status(signal.SIGINT)
            with contextlib.suppress(OSError):
                err.print(f"{str(e) or 'stopped by SIGINT'}; nothing was done", markup=False, highlight=False)
            sys.exit(status)


if __name__ == "__main__":
    main()
