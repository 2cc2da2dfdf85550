"""The ``harness`` command: one Typer app; each command group lives in its own module of this
package and is registered here (the modules import only :mod:`harness.cli.console`, never each other).

``harness run | stability | ls | validate | report | view | runs publish | chatbot-eval | robustness inject|pairwise |
datasets build|ls|show|verify|diff|publish|qa | cache check|repair | finetune … | models materialize|ls |
reproduce upheld``.

The top-level group is the CLI's guard: a usage error (an unknown option or command, a value of
the wrong type, a missing value or argument) is one ``error:`` line naming the command, the option
and the value, exit 2; any other exception no command handled is one line as well (with ``--debug``
for the traceback).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import typer
from typer.core import TyperGroup

from harness.cli import chatbot, ls, report, run
from harness.cli.console import err, error_line, error_message, stopped
from harness.cli.datasets import datasets_app
from harness.cli.finetune import finetune_app
from harness.cli.reproduce import reproduce_app
from harness.cli.robustness import robustness_app
from harness.interrupt import Interrupted, exit_status, grace, stop_signals

DEBUG_FLAG, DEBUG_ENV = "--debug", "DIALEVAL_DEBUG"

# -- usage errors -------------------------------------------------------------------------------------
# Typer parses the command line with its own copy of Click (``typer._click`` in typer 0.29; older
# typers used the ``click`` package): the exception classes are taken from the Click that the
# installed typer raises (the bases of :class:`typer.BadParameter`), never from a separately
# imported ``click``, whose classes the parser does not raise.


def _exceptions_module() -> ModuleType:
    """The ``exceptions`` module of the Click that typer's parser raises from."""
    return importlib.import_module(typer.BadParameter.__module__)


_EXC = _exceptions_module()
ClickException: type[Exception] = _EXC.ClickException
UsageError: type[Exception] = _EXC.UsageError
BadParameter: type[Exception] = _EXC.BadParameter
MissingParameter: type[Exception] = _EXC.MissingParameter
NoSuchOption: type[Exception] = _EXC.NoSuchOption
BadOptionUsage: type[Exception] = _EXC.BadOptionUsage
# raised when a group is called without a command: it carries the help text, which is shown
NoArgsIsHelpError: type[Exception] | None = getattr(_EXC, "NoArgsIsHelpError", None)


def usage_error_classes() -> set[type[Exception]]:
    """Every usage error class of typer's Click (the tests check each is answered in one line)."""
    out: set[type[Exception]] = set()
    todo = [UsageError]
    while todo:
        cls = todo.pop()
        out.add(cls)
        todo.extend(cls.__subclasses__())
    return out


def is_help_request(e: BaseException) -> bool:
    """A group called without a command: Click shows its help (not an error line)."""
    return NoArgsIsHelpError is not None and isinstance(e, NoArgsIsHelpError)


def _context(e: BaseException) -> Any:
    """The context of the command whose line is wrong: the error's own, else (Click's parser raises
    some errors without one) the innermost ``ctx`` on the way to the error."""
    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        return ctx
    tb = e.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("ctx")
        if hasattr(candidate, "command_path"):
            ctx = candidate
        tb = tb.tb_next
    return ctx


def _option_name(param: Any) -> str | None:
    """``--limit`` for an option (its first long name), ``NAME`` for an argument."""
    if param is None:
        return None
    opts = [str(o) for o in (getattr(param, "opts", None) or [])]
    if getattr(param, "param_type_name", "") == "argument":
        return str(getattr(param, "human_readable_name", None) or (opts[0] if opts else param.name)).upper()
    long = [o for o in opts if o.startswith("--")]
    return (long or opts or [str(getattr(param, "name", "") or "")])[0] or None


def _bad_value(e: BaseException) -> tuple[bool, Any]:
    """(found, value): the value the user gave, from the validation error typer raised it from."""
    cause = e.__cause__
    errors = getattr(cause, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (IndexError, KeyError, TypeError):
            return False, None
        if isinstance(first, dict) and "input" in first:
            return True, first["input"]
    return False, None


def _sentence(text: str) -> str:
    """``Input should be …`` → ``input should be …``, without the final period."""
    text = " ".join(str(text).split()).rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def usage_message(e: BaseException) -> str:
    """The one-line message of a usage error (without ``error:``): what is wrong, the option and
    the value, and where the options are listed."""
    ctx = _context(e)
    where = ctx.command_path if ctx is not None else "harness"
    see = f"see '{where} --help'"
    message = str(getattr(e, "message", "") or "").replace(". Did you mean", "; did you mean")
    if isinstance(e, MissingParameter):
        name = _option_name(getattr(e, "param", None))
        kind = getattr(getattr(e, "param", None), "param_type_name", "option")
        text = f"missing {kind} {name}" if name else _sentence(e.format_message())  # type: ignore[attr-defined]
        return f"{where}: {text} ({see})"
    if isinstance(e, BadParameter):
        name = _option_name(getattr(e, "param", None)) or getattr(e, "param_hint", None) or "a parameter"
        found, value = _bad_value(e)
        shown = f" {value!r}" if found else ""
        return f"{where}: invalid value{shown} for {name}: {_sentence(message)} ({see})"
    if isinstance(e, NoSuchOption):
        text = f"{where}: no such option {getattr(e, 'option_name', message)}"
        possibilities = sorted(getattr(e, "possibilities", None) or [])
        if possibilities:
            text += f" (did you mean {' or '.join(possibilities)}?)"
        return f"{text} ({see})"
    if isinstance(e, BadOptionUsage):
        return f"{where}: {_sentence(message)} ({see})"
    if ctx is not None and message.startswith("No such command") and "Did you mean" not in message:
        commands = list(ctx.command.list_commands(ctx)) if hasattr(ctx.command, "list_commands") else []
        listed = f"; the commands are {', '.join(commands)}" if commands else ""
        return f"{where}: {_sentence(message)}{listed} ({see})"
    return f"{where}: {_sentence(message or str(e))} ({see})"


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def usage_error(e: BaseException) -> typer.Exit:
    """Print a command-line usage error as one ``error:`` line; the exit (status 2) to raise."""
    error_line(usage_message(e))
    return typer.Exit(2)


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
