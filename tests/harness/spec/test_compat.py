"""Every judge spec that parsed with the old hand-written parsers parses to the same judge with the recursive grammar:
each example in README.md and docs/*.md (and the default judge, and each kind's ``harness ls``
example), checked against the old parser kept as an oracle (tests/harness/spec/legacy_spec.py), and
random specs (hypothesis) with the same outcome from both; every parsed spec survives a round trip
through its canonical string and through its mapping (the ``--judge @file.yaml`` form)."""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.judges.loader import DEFAULT_JUDGE
from harness.spec import (
    SpecError,
    from_mapping,
    judge_kinds,
    known_kinds,
    language_routes,
    mean_members,
    panel_members,
    parse_spec,
    to_mapping,
)
from tests.harness.spec import legacy_spec

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
JUDGE_ARG = re.compile(r"(?:--judge|-j)[ =]+(\"[^\"\n]*\"|'[^'\n]*'|[^\s`'\"]+)")
INLINE = re.compile(r"`([^`\n]+)`")
PLACEHOLDERS = ("<", "…", "...", "SPEC")


def doc_examples() -> dict[str, str]:
    """spec -> where it was found: ``--judge``/``-j`` arguments and inline code that starts with a
    judge kind, in README.md and docs/*.md (placeholders such as ``<spec>`` or ``…`` left out), the
    default judge and the ``harness ls judges`` examples."""
    kinds = set(known_kinds())
    out: dict[str, str] = {DEFAULT_JUDGE: "DEFAULT_JUDGE"}
    for kind in judge_kinds().values():
        for ex in kind.example.split("  ·  "):
            out.setdefault(ex.strip(), f"harness ls judges ({kind.name})")
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        found = [m.group(1).strip("'\"") for m in JUDGE_ARG.finditer(text)]
        found += [m.group(1) for m in INLINE.finditer(text) if m.group(1).split(":", 1)[0] in kinds]
        for cand in found:
            if cand.partition(":")[2].strip() and not any(
                p in cand for p in PLACEHOLDERS
            ):  # not just `kind:`
                out.setdefault(cand, str(doc.relative_to(REPO)))
    return out


EXAMPLES = doc_examples()


def legacy_judge(spec: str, mod: Any = legacy_spec) -> dict[str, Any]:
    """What makes a judge, read with the parser module ``mod`` (the legacy one or harness.spec):
    kind and target, and the members / routes / panel options the judge classes ask for."""
    return _norm(mod.parse_spec(spec), mod, top=True)


def _norm(js: Any, mod: Any, top: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": js.kind, "target": js.target}
    if not top:
        out["raw"] = js.raw  # a member's name in results (panel members are keyed by it)
    if js.kind == "mean":
        out["members"] = [_norm(m, mod) for m in mod.mean_members(js)]
    elif js.kind == "panel":
        members, opts = mod.panel_members(js)
        out.update(members=[_norm(m, mod) for m in members], **opts)
    elif js.kind == "bylang":
        out["routes"] = {code: _norm(m, mod) for code, m in mod.language_routes(js).items()}
    else:
        out.update(revision=js.revision, decoding=dict(js.decoding), options=dict(js.options))
    return out


class _New:
    parse_spec = staticmethod(parse_spec)
    mean_members = staticmethod(mean_members)
    panel_members = staticmethod(panel_members)
    language_routes = staticmethod(language_routes)


def test_the_docs_have_judge_examples_of_every_builtin_kind():
    kinds = {s.split(":", 1)[0].lower() for s in EXAMPLES}
    assert {
        "embed",
        "hf",
        "vllm",
        "openai",
        "replay",
        "metric",
        "ensemble",
        "mean",
        "bylang",
        "panel",
        "evaluator",
    } <= kinds
    assert len(EXAMPLES) >= 40, sorted(EXAMPLES)
    assert any("[" in s and s.startswith("panel:") for s in EXAMPLES), "docs show a nested panel"


@pytest.mark.parametrize("spec", sorted(EXAMPLES), ids=lambda s: s[:60])
def test_every_documented_spec_parses_to_the_same_judge_as_before(spec):
    new = legacy_judge(spec, _New)
    try:
        old = legacy_judge(spec)
    except SpecError:  # only specs written with the new brackets may be new
        assert "[" in spec and "]" in spec, f"{spec!r} ({EXAMPLES[spec]}) parses now but did not before"
        return
    assert new == old, EXAMPLES[spec]


@pytest.mark.parametrize("spec", sorted(EXAMPLES), ids=lambda s: s[:60])
def test_every_documented_spec_round_trips(spec):
    js = parse_spec(spec)
    again = parse_spec(js.to_string())
    assert again.structure() == js.structure()
    assert again.to_string() == js.to_string()  # the canonical string is a fixed point
    assert from_mapping(to_mapping(js)).structure() == js.structure()
    assert str(js) == spec  # results keep the judge as written


# -- random specs: both parsers agree (the alphabet has no brackets, the only new syntax) ----------
SPEC_CHARS = string.ascii_letters + string.digits + ":,=@+;*./-_ \t|é"
MEMBERS = [
    "embed:a",
    "embed:b",
    "metric:rougeL",
    "hf:m,temperature=2",
    "mean:x:y+z:w",
    "panel:a:b+c:d",
    "bylang:en=embed:a",
    "bylang:en,de=embed:a;*=metric:rouge1",
    "embed:a,vote=mean",
    "",
    "hf:m,top_p=0",
    "openai:m@rev,max_tokens=8",
    " embed:c ",
    "EMBED:d",
]
SOME = settings(max_examples=300, deadline=None, derandomize=True, database=None)


def _same_outcome(spec: str) -> None:
    try:
        old = legacy_judge(spec)
    except SpecError:
        with pytest.raises(SpecError):
            legacy_judge(spec, _New)
        return
    try:
        new = legacy_judge(spec, _New)
    except SpecError as e:  # an option given twice (the old parser kept the last) is refused now
        assert "is given twice" in e.message, (spec, e.message)
        return
    assert new == old
    js = parse_spec(spec)
    assert parse_spec(js.to_string()).structure() == js.structure()


@SOME
@given(st.text(SPEC_CHARS, max_size=50))
def test_any_text_parses_as_before(text):
    _same_outcome(text)


@SOME
@given(
    kind=st.sampled_from(["mean", "panel", "bylang", "MEAN"]),
    members=st.lists(st.sampled_from(MEMBERS), max_size=4),
    tail=st.sampled_from(
        ["", ",vote=median", ",vote=bogus", ",quorum=1", ",quorum=9", ",batch_size=2", ",vote=MEAN"]
    ),
    codes=st.lists(
        st.sampled_from(["en", "de", "*", "zz-Latn", "EN", "e", "pt-BR", "en,fr", ""]), min_size=1, max_size=4
    ),
)
def test_composite_specs_parse_as_before(kind, members, tail, codes):
    if kind == "bylang":
        spec = "bylang:" + ";".join(f"{c}={m}" for c, m in zip(codes, members, strict=False)) + tail
    else:
        spec = f"{kind}:" + "+".join(members) + tail
    _same_outcome(spec)
