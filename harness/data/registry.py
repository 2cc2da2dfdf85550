"""The local dataset registry: immutable semantic versions of each dataset.

Layout (the root is ``$DIALEVAL_REGISTRY``, else ``$DIALEVAL_HOME/registry``, else
``~/.cache/dialeval-harness/registry``; every command takes ``--registry``)::

    <root>/<name>/<X.Y.Z>/README.md             dataset card (YAML configs -> load_dataset)
                          build_manifest.json   builder + version, inputs (source URL/path + sha256),
                                                row counts, dimensions, skips, warnings, created-at,
                                                and the registry release {name, version, registered_at}
                          <config>/test-00000-of-00001.parquet

A version is written into a staging directory next to its final place and then renamed into place;
``rename`` refuses to replace a non-empty directory, so an existing version is never overwritten,
and a failed build leaves every existing version as it was. ``load_dataset(str(path), config)``
works on any version directory; :func:`resolve` turns ``name@version`` (or ``name`` = the latest
version) into that directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data.layout import MANIFEST_NAME as MANIFEST
from harness.provenance import utc_now

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class RegistryError(ValueError):
    """A registry operation was refused (unknown dataset/version, existing version, bad name)."""


class VersionExistsError(RegistryError):
    """The version is already registered; versions are immutable."""


def default_registry() -> Path:
    env = os.environ.get("DIALEVAL_REGISTRY")
    if env:
        return Path(env).expanduser()
    from harness.cache import default_home

    return default_home() / "registry"


def parse_semver(version: str) -> tuple[int, int, int]:
    m = _SEMVER.match(version.strip().removeprefix("v"))
    if not m:
        raise RegistryError(f"version {version!r} is not a semantic version X.Y.Z (e.g. 1.0.0)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def bump(version: str, part: str) -> str:
    major, minor, patch = parse_semver(version)
    if part == "major":
        return f"{major + 1}.0.0"
    if part == "minor":
        return f"{major}.{minor + 1}.0"
    if part == "patch":
        return f"{major}.{minor}.{patch + 1}"
    raise RegistryError(f"unknown version part {part!r}; use major, minor or patch")


def split_ref(ref: str) -> tuple[str, str | None]:
    """``"name@1.2.0"`` -> ``("name", "1.2.0")``; ``"name"`` or ``"name@latest"`` -> ``("name", None)``."""
    name, _, version = ref.partition("@")
    if not name or not _NAME.match(name):
        raise RegistryError(f"invalid dataset reference {ref!r}; expected NAME or NAME@X.Y.Z")
    if version in ("", "latest"):
        return name, None
    return name, ".".join(map(str, parse_semver(version)))


@dataclass(frozen=True)
class RegisteredVersion:
    name: str
    version: str
    path: Path

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def manifest(self) -> dict[str, Any]:
        return json.loads((self.path / MANIFEST).read_text(encoding="utf-8"))

    @property
    def configs(self) -> list[str]:
        return list(self.manifest.get("configs", {}))


class Registry:
    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_registry()

    # -- queries ---------------------------------------------------------------------------------
    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if p.is_dir() and not p.name.startswith(".") and self.versions(p.name)
        )

    def versions(self, name: str) -> list[str]:
        """Registered versions of ``name``, oldest first."""
        d = self.root / name
        if not d.is_dir():
            return []
        found = [
            p.name for p in d.iterdir() if p.is_dir() and _SEMVER.match(p.name) and (p / MANIFEST).is_file()
        ]
        return sorted(found, key=parse_semver)

    def latest(self, name: str) -> str | None:
        versions = self.versions(name)
        return versions[-1] if versions else None

    def get(self, name: str, version: str | None = None) -> RegisteredVersion:
        versions = self.versions(name)
        if not versions:
            known = ", ".join(self.names()) or "none"
            raise RegistryError(f"no dataset {name!r} in the registry {self.root} (registered: {known})")
        if version is None:
            version = versions[-1]
        if version not in versions:
            raise RegistryError(
                f"{name}@{version} is not registered in {self.root}; versions: {', '.join(versions)}"
            )
        return RegisteredVersion(name, version, self.root / name / version)

    def resolve(self, ref: str) -> RegisteredVersion:
        """``name@version`` (or ``name`` for the latest version) -> the registered version."""
        return self.get(*split_ref(ref))

    # -- writes ----------------------------------------------------------------------------------
    def next_version(self, name: str, part: str = "minor") -> str:
        latest = self.latest(name)
        return "1.0.0" if latest is None else bump(latest, part)

    def register(
        self,
        name: str,
        version: str,
        write: Callable[[Path, dict[str, Any]], Any],
    ) -> RegisteredVersion:
        """Create ``name@version`` by calling ``write(staging_dir, release)``, which must produce a
        dataset directory (README.md + build_manifest.json + Parquet) at ``staging_dir``; then
        move it into place. Refuses an existing version; on any failure nothing is left behind."""
        if not _NAME.match(name):
            raise RegistryError(f"invalid dataset name {name!r}")
        version = ".".join(map(str, parse_semver(version)))
        final = self.root / name / version
        if final.exists():
            raise VersionExistsError(self._exists_message(name, version))
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.parent / f".staging-{version}-{uuid.uuid4().hex[:12]}"
        release = {"name": name, "version": version, "registered_at": utc_now()}
        try:
            write(staging, release)
            if not (staging / MANIFEST).is_file():
                raise RegistryError(f"the build wrote no {MANIFEST}; nothing registered")
            try:
                os.rename(staging, final)  # fails if ``final`` appeared meanwhile (non-empty)
            except OSError as e:
                raise VersionExistsError(self._exists_message(name, version)) from e
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return RegisteredVersion(name, version, final)

    def _exists_message(self, name: str, version: str) -> str:
        existing = self.root / name / version
        created = ""
        try:
            man = json.loads((existing / MANIFEST).read_text(encoding="utf-8"))
            created = f" (built {man.get('created_at')}, fingerprint {str(man.get('fingerprint'))[:16]})"
        except (OSError, ValueError):
            pass
        return (
            f"{name}@{version} is already registered{created}; versions are immutable. "
            f"Build a new version with --version X.Y.Z or --bump patch|minor|major "
            f"(next minor: {bump(self.latest(name) or version, 'minor')})"
        )


def resolve(ref: str, registry: str | os.PathLike[str] | None = None) -> Path:
    """Directory of ``name@version`` (``name`` = latest) in the registry, for ``load_dataset``."""
    return Registry(registry).resolve(ref).path
