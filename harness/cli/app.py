"""The ``harness`` command: one Typer app; each command group lives in its own module of this
package and is registered here (the modules import only :mod:`harness.cli.console`, never each other).

``harness run | stability | ls | validate | report | chatbot-eval | robustness inject|pairwise |
datasets build|ls|show|diff|publish | finetune … | models materialize|ls | reproduce upheld``.
"""

from __future__ import annotations

import logging
import sys

import typer

from harness.cli import chatbot, ls, report, run
from harness.cli.console import err
from harness.cli.datasets import datasets_app
from harness.cli.finetune import finetune_app
from harness.cli.models import models_app
from harness.cli.reproduce import reproduce_app
from harness.cli.robustness import robustness_app

app = typer.Typer(
    help="dialeval-harness: multilingual open-domain dialogue evaluation and meta-evaluation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

app.command("run")(run.run)
app.command("ls")(ls.ls)
app.command("validate")(ls.validate)
app.command("stability")(run.stability)
app.command("report")(report.report_command)
app.command("chatbot-eval")(chatbot.chatbot_eval)
app.add_typer(robustness_app, name="robustness")
app.add_typer(datasets_app, name="datasets")
app.add_typer(finetune_app, name="finetune")
app.add_typer(models_app, name="models")
app.add_typer(reproduce_app, name="reproduce")


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted; completed judge calls are in the request cache — rerun to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()
