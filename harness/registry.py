"""One registry type for every extension point: task families, dataset builders, judge kinds,
backends and scoring methods.

Each :class:`Registry` maps a name to an entry (a :class:`~harness.tasks.TaskSpec`, a builder
class, a :class:`~harness.spec.JudgeKind`, a :class:`~harness.spec.BackendKind`, a
:class:`~harness.scorers.Scorer` class) and follows the same rules:

* **one name, one entry**: registering the same entry again (the same object, or an equal one) is a
  no-op; a *different* entry under a taken name is a :class:`DuplicateError` naming both and where
  each came from — whether it comes from the core, this project's plug-ins or another package;
* **discovery from entry points**: the first lookup registers the core's built-in entries, then
  loads every entry point of the registry's group (:mod:`harness.plugins`), in name order. An entry
  point names either an entry (registered under the entry point's name, which must be the entry's
  own name) or a function called with no arguments that registers entries itself (``tasks:
  register_all``). A failing plug-in is a :class:`~harness.plugins.PluginError` naming it;
* **listing**: :meth:`Registry.listing` gives ``(name, entry, origin)`` rows, which ``harness ls``
  prints (origin: ``core`` or the entry point that registered the entry).

>>> reg = Registry("colour", "example.colours", name_of=str)
>>> reg.register("red")
'red'
>>> reg.register("red")  # the same entry again: a no-op
'red'
>>> reg.names()
['red']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from harness import plugins

T = TypeVar("T")

CORE = "core"
DIRECT = "a register() call"  # the origin of an entry registered outside discovery
#: names of tasks, builders and scorers; judge and backend kinds use a stricter pattern
DEFAULT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class RegistryError(ValueError):
    """An entry cannot be registered (bad name, wrong type)."""


class DuplicateError(RegistryError):
    """A different entry is already registered under the name."""


class UnknownEntryError(KeyError):
    """No entry is registered under the name (the message lists the known ones)."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """Name -> entry, filled by the core's built-ins and by the entry points of ``group``.

    ``name_of`` reads an entry's name; ``accepts`` tells an entry from a registrar function (an
    entry point may name either); ``builtins`` returns the core's own entries; ``requires`` are
    registries discovered before this one (a backend kind also registers a judge kind); ``on_register``
    runs after a new entry is registered; ``pattern`` is the allowed form of names."""

    def __init__(
        self,
        what: str,
        group: str,
        *,
        name_of: Callable[[T], object] = lambda obj: obj.name,  # type: ignore[attr-defined]  # any T
        accepts: Callable[[object], bool] | None = None,
        builtins: Callable[[], Iterable[T]] | None = None,
        requires: tuple[Registry[Any], ...] = (),
        on_register: Callable[[T], None] | None = None,
        pattern: re.Pattern[str] = DEFAULT_NAME,
        summary: Callable[[T], str] | None = None,
    ) -> None:
        self.what = what
        self.group = group
        self._name_of = name_of
        self._accepts = accepts or (lambda obj: True)
        self._builtins = builtins
        self._requires = requires
        self._on_register = on_register
        self._pattern = pattern
        self._summary = summary or (lambda obj: "")
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._origin = DIRECT
        self._discovered = False

    # -- registering ------------------------------------------------------------------------------
    def register(self, entry: T, *, origin: str | None = None) -> T:
        """Register ``entry`` under its name (usable as a class decorator); returns it.

        The same (or an equal) entry again is a no-op; another entry under a taken name is a
        :class:`DuplicateError`; a name of the wrong form or an entry of the wrong kind a
        :class:`RegistryError` / :class:`TypeError`."""
        if not self._accepts(entry):
            raise TypeError(f"a {self.what} registry entry cannot be {entry!r}")
        name = self._name_of(entry)
        if not isinstance(name, str) or not self._pattern.fullmatch(name):
            raise RegistryError(
                f"{self.what} name {name!r} of {entry!r} must match {self._pattern.pattern!r}"
            )
        where = origin or self._origin
        existing = self._entries.get(name)
        if existing is not None:
            if existing is entry or existing == entry:
                return existing
            raise DuplicateError(
                f"{self.what} {name!r} is already registered (from {self._origins[name]}: {_show(existing)}); "
                f"{where} tries to register another one ({_show(entry)}). Rename one of them"
            )
        self._entries[name] = entry
        self._origins[name] = where
        if self._on_register is not None:
            self._on_register(entry)
        return entry

    # -- discovery --------------------------------------------------------------------------------
    def discover(self) -> None:
        """Register the built-ins, the required registries and every entry point of the group, once.
        The registry counts as discovered from the start, so a plug-in that looks itself up while it
        registers does not recurse."""
        if self._discovered:
            return
        self._discovered = True
        for builtin in self._builtins() if self._builtins is not None else ():
            self.register(builtin, origin=CORE)
        for other in self._requires:
            other.discover()
        for ep in plugins.group(self.group):
            obj = plugins.load(ep)
            with self._from(f"plug-in {ep.name!r} ({ep.value})"):
                try:
                    self._register_plugin(ep.name, obj)
                except plugins.PluginError:
                    raise
                except Exception as e:  # a broken plug-in must say which one it is
                    raise plugins.PluginError(
                        f"plug-in {ep.name!r} of group {self.group!r} ({ep.value}) failed to register: "
                        f"{type(e).__name__}: {e}"
                    ) from e

    # ``obj`` is whatever the entry point names: ``accepts`` tells an entry from a registrar.
    def _register_plugin(self, ep_name: str, obj: Any) -> None:
        if self._accepts(obj):
            name = self._name_of(obj)
            if name != ep_name:
                raise plugins.PluginError(
                    f"entry point {ep_name!r} of group {self.group!r} names the {self.what} {name!r}; "
                    f"an entry point that names a {self.what} must have the {self.what}'s name"
                )
            self.register(obj)
        elif callable(obj):
            obj()
        else:
            raise plugins.PluginError(
                f"entry point {ep_name!r} of group {self.group!r} names {obj!r}: expected a {self.what} or a "
                "function that registers them"
            )

    @contextmanager
    def _from(self, origin: str) -> Iterator[None]:
        before, self._origin = self._origin, origin
        try:
            yield
        finally:
            self._origin = before

    # -- lookup -----------------------------------------------------------------------------------
    def get(self, name: str) -> T:
        self.discover()
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self._entries) or plugins.missing_group_hint(self.group)
            raise UnknownEntryError(f"unknown {self.what} {name!r}; known: {known}") from None

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._entries

    def __len__(self) -> int:
        self.discover()
        return len(self._entries)

    def names(self) -> list[str]:
        """Registered names, in registration order (built-ins first)."""
        self.discover()
        return list(self._entries)

    def entries(self) -> dict[str, T]:
        self.discover()
        return dict(self._entries)

    def origin(self, name: str) -> str:
        """Where the entry came from: ``core``, the plug-in (entry point) that registered it, or a
        direct ``register()`` call (a script, a test)."""
        self.discover()
        return self._origins[name]

    def listing(self) -> list[tuple[str, T, str, str]]:
        """``(name, entry, one-line summary, origin)`` per entry, for ``harness ls``."""
        self.discover()
        return [(n, e, self._summary(e), self._origins[n]) for n, e in self._entries.items()]

    # -- tests ------------------------------------------------------------------------------------
    @contextmanager
    def isolated(self) -> Iterator[Registry[T]]:
        """Inside the block, registrations are undone afterwards (tests add entries in it)."""
        self.discover()
        entries, origins = dict(self._entries), dict(self._origins)
        try:
            yield self
        finally:
            self._entries, self._origins = entries, origins

    def __repr__(self) -> str:
        state = f"{len(self._entries)} entries" if self._discovered else "not discovered yet"
        return f"Registry({self.what!r}, group={self.group!r}, {state})"


def _show(entry: object) -> str:
    if isinstance(entry, type):
        return f"{entry.__module__}.{entry.__qualname__}"
    text = repr(entry)
    return text if len(text) <= 100 else text[:97] + "..."
