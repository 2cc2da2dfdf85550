"""Learned ensembles (UPHELD App. I): scikit-learn models over individual metric scores.

:mod:`~harness.judges.learned.fit` (estimators, features, seeded k-fold cross-validation),
:mod:`~harness.judges.learned.model` (fit, save with checksums, load, transfer) and
:mod:`~harness.judges.learned.judge` (the ``ensemble:`` judge kind: a saved ensemble applied
unchanged to new items).
"""
