"""Running judges over tasks: :mod:`~harness.run.runner` (``harness run``: items → judge →
meta-evaluation), :mod:`~harness.run.results` (versioned results.json + samples.parquet),
:mod:`~harness.run.stability` (repeated runs, MEDAL App. D)."""
