"""Task definitions (one sub-package per task family) and their `evaluate` module folders.

Each sub-package registers typed :class:`harness.tasks.TaskSpec` objects on import; the folder
also holds the `evaluate` module (``<folder>/<folder>.py`` + ``README.md``) that wraps the same
library judge for users of ``evaluate.load(<path>)``.
"""
