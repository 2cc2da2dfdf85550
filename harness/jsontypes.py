"""Types of JSON-shaped values: what a record written to JSON (an identity, a payload, a provenance
block, a backend's raw answer) holds, checked by mypy instead of being left untyped.

Arrays and objects inside a value are read-only (``Sequence`` / ``Mapping``), so a ``list[int]`` or
a ``dict[str, str]`` is a JSON value as it is; a :data:`JSONObject` itself is a ``dict`` that its
builder fills in. Narrow a value with ``isinstance`` before reading into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

#: a JSON value: an object, an array, a string, a number, a boolean or null
JSON: TypeAlias = Mapping[str, "JSON"] | Sequence["JSON"] | str | int | float | bool | None
#: a JSON object (string keys)
JSONObject: TypeAlias = dict[str, JSON]
