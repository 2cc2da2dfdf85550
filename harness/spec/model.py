"""The parsed form of a judge spec (:class:`JudgeSpec`), its canonical string, and the error type
that points at the offending column (:class:`SpecError`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from harness.jsontypes import JSONObject
from harness.types import GenerationConfig

#: an option value as a spec string writes it (:func:`coerce`)
OptionValue: TypeAlias = bool | int | float | str | None

#: characters that separate composite members / routes or group them; a member whose canonical
#: string holds one is written in brackets
_GROUPING = set("+;[]")
_GEN_FIELDS = {f.name for f in dataclasses.fields(GenerationConfig)}


class SpecError(ValueError):
    """A judge spec could not be parsed. ``message`` says what is wrong; ``column`` (1-based) and
    ``text`` say where. ``str(error)`` stays one line (the CLI prints errors as one line): the
    message, the column, and the spec around it with a caret ``‸`` where the column is::

        unknown judge kind 'gguf' in 'gguf:x'; ... (column 14: mean:embed:a+‸gguf:x)

    :meth:`caret` gives the classic two-line form (the spec, and ``^`` under the column)."""

    WINDOW = 40  # characters shown on each side of the column

    def __init__(self, message: str, text: str | None = None, column: int | None = None) -> None:
        self.message = message
        self.text = text
        self.column = column
        super().__init__(message)

    def _shown(self) -> tuple[str, int]:
        shown = "".join(c if c.isprintable() else "?" for c in self.text or "")
        return shown, max(1, min(self.column or 1, len(shown) + 1))

    def __str__(self) -> str:
        if self.text is None or self.column is None:
            return self.message
        shown, col = self._shown()
        lo, hi = max(0, col - 1 - self.WINDOW), min(len(shown), col - 1 + self.WINDOW)
        before = ("…" if lo else "") + shown[lo : col - 1]
        after = shown[col - 1 : hi] + ("…" if hi < len(shown) else "")
        return f"{self.message} (column {col}: {before}‸{after})"

    def caret(self) -> str:
        """The spec on one line and a ``^`` under the column on the next (empty without a position)."""
        if self.text is None or self.column is None:
            return ""
        shown, col = self._shown()
        return f"{shown}\n{' ' * (col - 1)}^"


@dataclass(frozen=True)
class JudgeSpec:
    """One judge: ``kind:target[@revision][,key=value...]``; a composite kind (``mean:``,
    ``panel:``, ``bylang:``) has ``members`` (``mean`` / ``panel``) or ``routes`` (``bylang``:
    language codes -> member) instead, parsed when the spec is, and its own options (``vote=``)."""

    kind: str
    target: str
    revision: str | None = None
    decoding: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    members: tuple[JudgeSpec, ...] = ()
    routes: tuple[tuple[tuple[str, ...], JudgeSpec], ...] = ()

    @property
    def composite(self) -> bool:
        return bool(self.members or self.routes)

    def generation_config(self, base: GenerationConfig | None = None) -> GenerationConfig:
        base = base or GenerationConfig()
        return base.replace(**self.decoding) if self.decoding else base

    def __str__(self) -> str:
        return self.raw or self.to_string()

    def to_string(self) -> str:
        """The canonical spec string: it parses back to the same judge (composite members that are
        composites themselves, or hold a separator, are written in brackets)."""
        opts = "".join(f",{k}={_value(k, v)}" for k, v in {**self.decoding, **self.options}.items())
        if self.routes:
            body = ";".join(f"{','.join(codes)}={_member(m, ())}" for codes, m in self.routes)
            return f"{self.kind}:{body}{opts}"
        if self.members:
            own = tuple(self.options)
            return f"{self.kind}:" + "+".join(_member(m, own) for m in self.members) + opts
        s = f"{self.kind}:{self.target}"
        if self.revision:
            s += f"@{self.revision}"
        return s + opts

    def structure(self) -> JSONObject:
        """What makes two specs the same judge (the text they were written as aside)."""
        out: JSONObject = {"kind": self.kind}
        if self.routes:
            out["routes"] = [[list(codes), m.structure()] for codes, m in self.routes]
        elif self.members:
            out["members"] = [m.structure() for m in self.members]
        else:
            out.update(target=self.target, revision=self.revision, decoding=dict(self.decoding))
        out["options"] = dict(self.options)
        return out


def _value(key: str, value: object) -> str:
    if key == "stop" and isinstance(value, tuple | list):
        return "|".join(str(v) for v in value)  # stop=a|b
    return str(value)


def _member(m: JudgeSpec, parent_options: tuple[str, ...]) -> str:
    text = m.to_string()
    keys = set(m.options) | set(m.decoding)
    if m.composite or _GROUPING & set(text) or keys & set(parent_options):
        return f"[{text}]"
    return text


def coerce(value: str) -> OptionValue:
    """An option value as written -> bool / None / int / float / the string itself."""
    low = value.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def is_decoding(key: str) -> bool:
    """Whether option ``key`` is a :class:`~harness.types.GenerationConfig` field (a decoding override)."""
    return key in _GEN_FIELDS
