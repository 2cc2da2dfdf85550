"""Typed, range-checked options: every judge / backend / decoding option a spec string can set goes
through :func:`check_option`, so a bad value is an error naming the owner, the option, the value,
the expected type and the allowed range — never a raw ``int()`` error, a comparison between a
string and a number, or a value (``nan``, ``inf``, ``1e30``) accepted silently.

>>> check_option("openai backend", "concurrency", 8, int, lo=1, hi=1024)
8
>>> check_option("openai backend", "concurrency", "abc", int, lo=1, hi=1024)
Traceback (most recent call last):
...
harness.options.OptionError: openai backend: option concurrency='abc' must be an integer from 1 to 1024

Spec strings are parsed by :func:`harness.spec.parse_spec`, which turns ``"8"`` into ``8`` and
``"1e9"`` into ``1e9`` (a float): an integer option accepts a float only when it is a whole number,
and then still checks the range.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal, TypeVar, overload

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


#: the kinds of option value: what :func:`check_option` returns for ``kind``
OptionKind = TypeVar("OptionKind", bool, int, float, str)


class OptionError(ValueError):
    """An option has a value of the wrong type or outside its allowed range."""


def _bounds(lo: float | None, hi: float | None, lo_open: bool, kind: str) -> str:
    if lo is not None and hi is not None and not lo_open:
        return f"{kind} from {_fmt(lo)} to {_fmt(hi)}"
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {_fmt(lo)}")
    if hi is not None:
        parts.append(f"<= {_fmt(hi)}")
    return f"{kind} {' and '.join(parts)}" if parts else kind


def _fmt(x: float) -> str:
    return f"{x:,}".replace(",", "_") if isinstance(x, int) and abs(x) >= 100_000 else f"{x:g}"


@overload
def check_option(
    owner: str,
    name: str,
    value: object,
    kind: type[OptionKind],
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    choices: Iterable[str] | None = None,
    allow_none: Literal[False] = False,
) -> OptionKind: ...


@overload
def check_option(
    owner: str,
    name: str,
    value: object,
    kind: type[OptionKind],
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    choices: Iterable[str] | None = None,
    allow_none: Literal[True],
) -> OptionKind | None: ...


def check_option(
    owner: str,
    name: str,
    value: object,
    kind: type,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    choices: Iterable[str] | None = None,
    allow_none: bool = False,
) -> bool | int | float | str | None:
    """``value`` as ``kind`` (``int``, ``float``, ``bool`` or ``str``), checked against
    ``lo``/``hi`` (``lo_open``: strictly above ``lo``) or ``choices``; else :class:`OptionError`.

    Floats must be finite (``nan``/``inf`` are refused); ints accept whole-number floats and
    numeric strings; bools accept ``true/false/yes/no/on/off/1/0``."""
    if value is None and allow_none:
        return None
    if kind is bool:
        what = "true or false"
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in (*_TRUE, *_FALSE):
            return value.strip().lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise _error(owner, name, value, what, allow_none)
    if kind is str:
        allowed = tuple(choices) if choices is not None else None
        what = f"one of {', '.join(allowed)}" if allowed else "a non-empty string"
        if isinstance(value, str) and value and (allowed is None or value in allowed):
            return value
        raise _error(owner, name, value, what, allow_none)
    number: float | None  # an int for kind int
    if kind is int:
        what = _bounds(lo, hi, lo_open, "an integer")
        number = _as_int(value)
    elif kind is float:
        what = _bounds(lo, hi, lo_open, "a finite number")
        number = _as_float(value)
    else:  # pragma: no cover - a programming error, not user input
        raise TypeError(f"check_option: unsupported kind {kind!r}")
    if (
        number is None
        or (lo is not None and (number <= lo if lo_open else number < lo))
        or (hi is not None and number > hi)
    ):
        raise _error(owner, name, value, what, allow_none)
    return number


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            f = _as_float(value)
            return _as_int(f) if f is not None else None
    return None


def _as_float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            f = float(value)
        except OverflowError:  # an int too large for a float
            return None
        return f if math.isfinite(f) else None
    if isinstance(value, str):
        try:
            return _as_float(float(value.strip()))
        except ValueError:
            return None
    return None


def _error(owner: str, name: str, value: object, what: str, allow_none: bool) -> OptionError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    none = " (or none)" if allow_none else ""
    return OptionError(f"{owner}: option {name}={shown} must be {what}{none}")
