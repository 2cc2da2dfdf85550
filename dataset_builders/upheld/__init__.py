"""UPHELD (Subasic et al.): reference-full labels of model continuations, 5 annotators per item.

:mod:`~dataset_builders.upheld.builder` (the ``upheld`` builder), :mod:`~dataset_builders.upheld.labels`
(score strings → labels), :mod:`~dataset_builders.upheld.merge` (annotator files → items),
:mod:`~dataset_builders.upheld.paper` (the paper's counts and Table 3a next to a built version).
"""
