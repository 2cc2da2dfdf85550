"""Loading transformers checkpoints without output that does not concern the user.

Two things a load used to print:

* transformers' "Loading weights" progress bar — a load of a second or two; the run's own progress
  bars say what the harness is doing. :func:`quiet_loading` turns it off for the load (the
  Hugging Face Hub's download bars keep their setting: a first download is worth watching).
* the load report of a pooling layer that the checkpoint does not have: "MISSING pooler.dense.* …
  newly initialized … Consider training on your downstream task". BERT-style models add a pooler
  (a dense layer over the first token, a classification head) by default; the harness never uses
  it — sentence embeddings and evaluator inputs are pooled from the hidden states — so the
  report reads as a broken model when nothing is wrong. :func:`pooler_kwargs` loads such a
  checkpoint without the pooler (``add_pooling_layer=False``). A checkpoint that has pooler
  weights (the packaged MiniLM) loads them as before, so nothing is reported either; any other
  missing or unexpected weight is still reported, as it should be. Training keeps the pooler (its
  random initialisation is part of the seeded random stream the LoRA and head weights are drawn
  from); :func:`quiet_unused_pooler` drops a load report that names nothing but the pooler.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

_POOLER_KEY = re.compile(r"(^|\.)pooler\.")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# where transformers logs its load report (transformers.utils.loading_report.log_state_dict_report)
_REPORT_LOGGER = "transformers.modeling_utils"


class _PoolerOnlyReport(logging.Filter):
    """Drops a load report whose every row is a pooler weight; lets every other record through."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = _ANSI.sub("", record.getMessage())
        if "LOAD REPORT" not in text:
            return True
        keys = [
            line.split("|", 1)[0].strip()
            for line in text.splitlines()[1:]
            if "|" in line and not line.lstrip().startswith(("Key", "-"))
        ]
        return not (keys and all(_POOLER_KEY.search(k) for k in keys))


@contextlib.contextmanager
def quiet_unused_pooler() -> Iterator[None]:
    """For the block, no transformers load report that names only pooler weights (a pooler the
    checkpoint lacks, initialised at random and never used); any other report is shown."""
    log = logging.getLogger(_REPORT_LOGGER)
    only_pooler = _PoolerOnlyReport()
    log.addFilter(only_pooler)
    try:
        yield
    finally:
        log.removeFilter(only_pooler)


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers' own progress bars ("Loading weights") off for the block, then as before."""
    import huggingface_hub.utils as hub
    from transformers.utils import logging as tf_logging

    before_tf = tf_logging.is_progress_bar_enabled()
    before_hub = not hub.are_progress_bars_disabled()
    with warnings.catch_warnings():  # an HF_HUB_DISABLE_PROGRESS_BARS setting warns and is kept
        warnings.simplefilter("ignore")
        tf_logging.disable_progress_bar()  # transformers' switch also turns the Hub's off ...
        if before_hub:
            hub.enable_progress_bars()  # ... which keeps its own setting
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if before_tf:
                tf_logging.enable_progress_bar()
            if not before_hub:
                hub.disable_progress_bars()


def checkpoint_keys(path: str | Path) -> set[str] | None:
    """The weight names of a local safetensors checkpoint (read from the file headers), or None
    when they cannot be read cheaply (a Hub id, a ``.bin`` checkpoint)."""
    p = Path(path)
    index = p / "model.safetensors.index.json"
    if index.is_file():
        try:
            return set(json.loads(index.read_text(encoding="utf-8"))["weight_map"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
    single = p / "model.safetensors"
    if not single.is_file():
        return None
    from safetensors import safe_open

    try:
        with safe_open(str(single), framework="numpy") as f:
            return set(f.keys())
    except (OSError, ValueError, RuntimeError):
        return None


@functools.lru_cache(maxsize=64)
def _takes_pooling_flag(path: str) -> bool:
    """Whether ``AutoModel`` builds the checkpoint's architecture with an ``add_pooling_layer``
    argument (BERT, RoBERTa, XLM-R, ...; not DistilBERT, which has no pooler)."""
    from transformers import MODEL_MAPPING, AutoConfig

    try:
        config = AutoConfig.from_pretrained(path)
        cls: object = MODEL_MAPPING[type(config)]
    except (OSError, ValueError, KeyError):
        return False
    return callable(cls) and "add_pooling_layer" in inspect.signature(cls).parameters


def pooler_kwargs(path: str | Path) -> dict[str, bool]:
    """``{"add_pooling_layer": False}`` for ``AutoModel.from_pretrained`` (or sentence-transformers'
    ``model_kwargs``) when the local checkpoint at ``path`` has no pooler weights and its model
    class would otherwise add a freshly initialised one; ``{}`` in every other case."""
    if not Path(path).is_dir():
        return {}
    keys = checkpoint_keys(path)
    if keys is None or any(_POOLER_KEY.search(k) for k in keys):
        return {}
    return {"add_pooling_layer": False} if _takes_pooling_flag(str(Path(path).resolve())) else {}
