"""The statistics' results as JSON values: the typed entries of :mod:`harness.meta` (TypedDicts,
dataclass dicts, numpy scalars, tuples) turned into the plain JSON a ``results.json`` section holds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from harness.jsontypes import JSON


def to_json(value: object, *, nan_is_null: bool = False) -> JSON:
    """A plain-JSON copy of ``value``: mappings become dicts with string keys, lists, tuples and
    arrays become lists, numpy scalars Python ones; with ``nan_is_null`` a NaN float is None (else it
    is kept, as ``results.json`` writing turns it into null). Anything else is a ``TypeError``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {str(k): to_json(v, nan_is_null=nan_is_null) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [to_json(v, nan_is_null=nan_is_null) for v in value]
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return None if nan_is_null and math.isnan(value) else float(value)
    raise TypeError(f"not a JSON value: {value!r} ({type(value).__name__})")
