"""The generic registry: one duplicate rule, entry-point discovery (an entry or a registrar function),
errors that name the plug-in, and the listing ``harness ls`` prints — the same for task families,
builders, judge kinds, backends and scorers."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint

import pytest

from harness import plugins
from harness.data.builders import BUILDERS
from harness.registry import DuplicateError, Registry, RegistryError, UnknownEntryError
from harness.scorers import SCORERS
from harness.spec import BACKEND_KINDS, JUDGE_KINDS, BackendKind, judge_kinds
from harness.tasks import TASKS

GROUP = "dialeval_harness.test_things"


@dataclass(frozen=True)
class Thing:
    name: str
    colour: str = "red"


A, B = Thing("a"), Thing("b", "blue")
FIXED: list[Thing] = []


def register_b_and_c() -> None:
    REG.register(B)
    REG.register(Thing("c"))


def broken_registrar() -> None:
    REG.register(Thing("a", "green"))  # a different entry under a taken name


REG: Registry[Thing] = Registry(
    "thing", GROUP, accepts=lambda t: isinstance(t, Thing), builtins=lambda: [A], summary=lambda t: t.colour
)


def _eps(monkeypatch, **targets: str) -> Registry[Thing]:
    """A fresh registry whose group holds ``name=value`` entry points of this module."""
    global REG
    REG = Registry(
        "thing",
        GROUP,
        accepts=lambda t: isinstance(t, Thing),
        builtins=lambda: [A],
        summary=lambda t: t.colour,
    )
    eps = [EntryPoint(name=n, value=f"{__name__}:{v}", group=GROUP) for n, v in sorted(targets.items())]
    real = plugins.group
    monkeypatch.setattr(plugins, "group", lambda g: eps if g == GROUP else real(g))
    return REG


def test_builtins_then_entry_points_with_their_origin(monkeypatch):
    reg = _eps(monkeypatch, b="B", more="register_b_and_c")
    assert reg.names() == ["a", "b", "c"]  # built-ins first, then entry points in name order
    assert reg.origin("a") == "core" and reg.origin("b") == f"plug-in 'b' ({__name__}:B)"
    assert reg.origin("c") == f"plug-in 'more' ({__name__}:register_b_and_c)"
    assert [(n, s, o) for n, _, s, o in reg.listing()][:2] == [
        ("a", "red", "core"),
        ("b", "blue", reg.origin("b")),
    ]
    assert reg.register(Thing("a")) is A  # an equal entry again: a no-op


def test_one_duplicate_rule_for_every_registry(monkeypatch):
    reg = _eps(monkeypatch)
    assert reg.names() == ["a"]
    with pytest.raises(
        DuplicateError, match=r"thing 'a' is already registered \(from core: .*\); a register\(\) call tries"
    ):
        reg.register(Thing("a", "green"))
    early = _eps(monkeypatch)
    early.register(Thing("a", "green"))  # before discovery: the built-in then clashes with it
    with pytest.raises(DuplicateError, match="thing 'a' is already registered \\(from a register\\(\\) call"):
        early.discover()
    for registry in (TASKS, BUILDERS, JUDGE_KINDS, BACKEND_KINDS, SCORERS):  # the five extension points
        assert isinstance(registry, Registry) and registry.names()
        name = registry.names()[0]
        with registry.isolated(), pytest.raises((DuplicateError, TypeError)):
            registry.register(object())  # type: ignore[arg-type]
        assert registry.get(name) is registry.entries()[name]


def test_plugin_errors_name_the_entry_point(monkeypatch):
    reg = _eps(monkeypatch, clash="broken_registrar")
    with pytest.raises(
        plugins.PluginError, match=r"plug-in 'clash' of group .* failed to register: DuplicateError"
    ):
        reg.discover()
    reg = _eps(monkeypatch, wrong="B")
    with pytest.raises(plugins.PluginError, match="entry point 'wrong' .* names the thing 'b'"):
        reg.names()
    reg = _eps(monkeypatch, x="GROUP")
    with pytest.raises(plugins.PluginError, match="expected a thing or a function that registers them"):
        reg.names()
    reg = _eps(monkeypatch, gone="no_such_attribute")
    with pytest.raises(plugins.PluginError, match="plug-in 'gone' .* failed to load"):
        reg.names()


def test_unknown_names_and_bad_names(monkeypatch):
    reg = _eps(monkeypatch)
    with pytest.raises(UnknownEntryError, match="unknown thing 'zz'; known: a") as ei:
        reg.get("zz")
    assert isinstance(ei.value, KeyError) and str(ei.value) == "unknown thing 'zz'; known: a"
    with pytest.raises(RegistryError, match="must match"):
        reg.register(Thing("bad name"))
    with reg.isolated():
        reg.register(Thing("tmp"))
        assert "tmp" in reg
    assert "tmp" not in reg


def test_a_backend_kind_brings_its_llm_judge_kind():
    with BACKEND_KINDS.isolated(), JUDGE_KINDS.isolated():
        BACKEND_KINDS.register(
            BackendKind("echo2", "harness.backends.replay:ReplayBackend", "echo2:x", "test")
        )
        kind = judge_kinds()["echo2"]
        assert kind.judge == "harness.judges.llm:LLMJudge" and kind.example == "echo2:x"
        with pytest.raises(DuplicateError, match="backend kind 'echo2' is already registered"):
            BACKEND_KINDS.register(BackendKind("echo2", "elsewhere:Other", "echo2:y"))
    assert "echo2" not in judge_kinds()
