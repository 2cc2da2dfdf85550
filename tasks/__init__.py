"""Task families (one sub-package per family) and their `evaluate` module folders.

Each sub-package registers typed :class:`harness.tasks.TaskSpec` objects on import, and holds
the family's paper-specific logic (prompts, scoring protocols, reproduction tables) next to its
`evaluate` module (``<folder>/<folder>.py`` + ``README.md``) that wraps the same library judge
for users of ``evaluate.load(<path>)``.

The core finds the families through the entry point ``dialeval_harness.tasks: builtin =
tasks:register_all`` (see :mod:`harness.plugins`); a new family is a new sub-package here.
"""

from __future__ import annotations

import importlib
import pkgutil


def register_all() -> None:
    """Import every task-family sub-package so its tasks register (idempotent)."""
    for mod in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        if mod.ispkg:
            importlib.import_module(mod.name)
