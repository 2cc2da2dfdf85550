"""The Hugging Face libraries' own progress bars (``datasets``' "Generating test split",
``huggingface_hub``'s downloads), switched with the run's progress setting (``transformers``'
"Loading weights" bar is off for every model load anyway: :mod:`harness.model_loading`).

A quiet run (``harness run -q``) shows no progress bars: without this, a cold HF datasets cache
still printed "Generating test split" on stderr, so a run that then failed wrote more than its one
``error:`` line. :func:`library_progress_bars` sets the libraries for a block and restores their
previous settings after it (a library first imported inside the block is restored to the setting
it would have had: ``transformers`` inherits ``huggingface_hub``'s at import).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType


def _transformers_logging() -> ModuleType | None:
    """``transformers.utils.logging`` if transformers is imported already (never imported here:
    a run whose judge does not need it must not pay for it)."""
    if "transformers" not in sys.modules:
        return None
    from transformers.utils import logging as tf_logging

    return tf_logging


def _switch(module: ModuleType, on: bool, singular: bool = False) -> None:
    """Call the module's enable/disable function; a library whose environment variable
    (``HF_DATASETS_DISABLE_PROGRESS_BARS``, ...) pins the setting warns and keeps it: that warning
    is not shown (the variable is the user's explicit choice)."""
    suffix = "progress_bar" if singular else "progress_bars"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        getattr(module, f"{'enable' if on else 'disable'}_{suffix}")()


@contextmanager
def library_progress_bars(enabled: bool) -> Iterator[None]:
    """The HF libraries' progress bars on (``enabled``) or off for the block, then as before."""
    import datasets
    import huggingface_hub.utils as hub

    before_datasets = not datasets.are_progress_bars_disabled()
    before_hub = not hub.are_progress_bars_disabled()
    tf = _transformers_logging()
    before_tf = tf.is_progress_bar_enabled() if tf is not None else before_hub
    _switch(datasets, enabled)
    _switch(hub, enabled)
    if tf is not None:
        _switch(tf, enabled, singular=True)
    try:
        yield
    finally:
        _switch(datasets, before_datasets)
        _switch(hub, before_hub)
        tf = _transformers_logging()  # imported inside the block: it took the block's setting
        if tf is not None:
            _switch(tf, before_tf, singular=True)
