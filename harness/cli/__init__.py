"""Command line of dialeval-harness (``harness …``): the only part of the core that may import the
plug-in packages (``dataset_builders``, ``tasks``, ``finetune``)."""

from harness.cli.app import app, main

__all__ = ["app", "main"]
