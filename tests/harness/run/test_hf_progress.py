"""The HF libraries' own progress bars follow the run's progress setting and come back after it."""

from __future__ import annotations

import datasets
import huggingface_hub.utils as hub
from transformers.utils import logging as tf_logging

from harness.run.hf_progress import library_progress_bars


def _state() -> tuple[bool, bool, bool]:
    return (
        not datasets.are_progress_bars_disabled(),
        not hub.are_progress_bars_disabled(),
        tf_logging.is_progress_bar_enabled(),
    )


def test_off_inside_a_quiet_block_on_inside_a_loud_one_and_as_before_after():
    before = _state()
    with library_progress_bars(False):
        assert _state() == (False, False, False)
        with library_progress_bars(True):
            assert _state() == (True, True, True)
        assert _state() == (False, False, False)
    assert _state() == before


def test_restored_when_the_block_raises():
    before = _state()
    try:
        with library_progress_bars(not before[0]):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert _state() == before
