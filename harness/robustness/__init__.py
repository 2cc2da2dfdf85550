"""Judge robustness: :mod:`~harness.robustness.injection` (verdicts injected through the evaluated
dialogue) and :mod:`~harness.robustness.pairwise` (position bias of pairwise preferences)."""
