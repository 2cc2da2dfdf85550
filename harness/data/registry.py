"""The local dataset registry: immutable semantic versions of each dataset.

Layout (the root is ``$DIALEVAL_REGISTRY``, else ``$DIALEVAL_HOME/registry``, else
``~/.cache/dialeval-harness/registry``; every command takes ``--registry``)::

    <root>/<name>/<X.Y.Z>/README.md             dataset card (YAML configs -> load_dataset)
                          build_manifest.json   builder + version, inputs (source URL/path + sha256),
                                                row counts, dimensions, skips, warnings, created-at,
                                                and the registry release {name, version, registered_at}
                          <config>/test-00000-of-00001.parquet
                          SHA256SUMS            sha256 of every file above (``sha256sum -c`` format)

Registered versions are read-only: :func:`check_writable` refuses a write (``--output``) into a
version's folder or anywhere in a registry, :meth:`DatasetRegistry.verify` checks every file against
``SHA256SUMS`` (``harness datasets verify``), and :meth:`DatasetRegistry.resolve` refuses a version whose
files changed since it was registered (versions registered before ``SHA256SUMS`` existed are not
checked).

A version is written into a staging directory next to its final place and then renamed into place;
``rename`` refuses to replace a non-empty directory, so an existing version is never overwritten,
and a failed or stopped build (Ctrl-C, SIGTERM) leaves every existing version as it was and no
staging directory; one a killed build left (``kill -9``) is removed by the next build of the dataset
(:mod:`harness.interrupt`). Hidden entries are never versions. ``load_dataset(str(path), config)``
works on any version directory; :func:`resolve` turns ``name@version`` (or ``name`` = the latest
version) into that directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import interrupt
from harness.data.layout import MANIFEST_NAME as MANIFEST
from harness.provenance import utc_now

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: a dataset name is one folder of the registry (and a Hub repo name: at most 96 characters)
MAX_NAME_LENGTH = 96
NAME_RULE = (
    f"a dataset name is 1 to {MAX_NAME_LENGTH} characters: letters, digits, '_', '.' or '-', "
    "starting with a letter or digit"
)
CHECKSUMS = "SHA256SUMS"


class DatasetRegistryError(ValueError):
    """A registry operation was refused (unknown dataset/version, existing version, bad name)."""


class VersionExistsError(DatasetRegistryError):
    """The version is already registered; versions are immutable."""


class ReadOnlyError(DatasetRegistryError):
    """A write into a registered version (or anywhere in a registry) outside ``register``."""


class IntegrityError(DatasetRegistryError):
    """A registered version's files differ from the sha256 recorded when it was registered."""


def check_name(name: str) -> str:
    """``name`` if it is a valid dataset name, else :class:`DatasetRegistryError` with the rule."""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not _NAME.match(name):
        shown = repr(name) if len(str(name)) <= 40 else repr(str(name)[:37] + "...")
        raise DatasetRegistryError(f"invalid dataset name {shown} ({len(str(name))} characters): {NAME_RULE}")
    return name


def default_registry() -> Path:
    env = os.environ.get("DIALEVAL_REGISTRY")
    if env:
        return Path(env).expanduser()
    from harness.cache import default_home

    return default_home() / "registry"


def parse_semver(version: str) -> tuple[int, int, int]:
    m = _SEMVER.match(version.strip().removeprefix("v"))
    if not m:
        raise DatasetRegistryError(f"version {version!r} is not a semantic version X.Y.Z (e.g. 1.0.0)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def bump(version: str, part: str) -> str:
    major, minor, patch = parse_semver(version)
    if part == "major":
        return f"{major + 1}.0.0"
    if part == "minor":
        return f"{major}.{minor + 1}.0"
    if part == "patch":
        return f"{major}.{minor}.{patch + 1}"
    raise DatasetRegistryError(f"unknown version part {part!r}; use major, minor or patch")


def split_ref(ref: str) -> tuple[str, str | None]:
    """``"name@1.2.0"`` -> ``("name", "1.2.0")``; ``"name"`` or ``"name@latest"`` -> ``("name", None)``."""
    name, _, version = ref.partition("@")
    if not name or not _NAME.match(name) or len(name) > MAX_NAME_LENGTH:
        shown = repr(ref) if len(ref) <= 60 else repr(ref[:57] + "...")
        raise DatasetRegistryError(
            f"invalid dataset reference {shown}; expected NAME or NAME@X.Y.Z ({NAME_RULE})"
        )
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


class DatasetRegistry:
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
            raise DatasetRegistryError(
                f"no dataset {name!r} in the registry {self.root} (registered: {known}); build it with "
                f"`harness datasets build {name}` (a builder's name; another builder: `harness datasets build "
                f"BUILDER --name {name}`; another registry: --registry DIR)"
            )
        if version is None:
            version = versions[-1]
        if version not in versions:
            raise DatasetRegistryError(
                f"{name}@{version} is not registered in {self.root}; versions: {', '.join(versions)}"
            )
        return RegisteredVersion(name, version, self.root / name / version)

    def resolve(self, ref: str, *, verify: bool = True) -> RegisteredVersion:
        """``name@version`` (or ``name`` for the latest version) -> the registered version; with
        ``verify`` (the default) a version whose files changed since registration is refused."""
        rv = self.get(*split_ref(ref))
        if verify:
            report = verify_version(rv)
            if not report.ok:
                raise IntegrityError(report.message())
        return rv

    # -- writes ----------------------------------------------------------------------------------
    def next_version(self, name: str, part: str = "minor") -> str:
        latest = self.latest(name)
        return "1.0.0" if latest is None else bump(latest, part)

    def register(
        self,
        name: str,
        version: str,
        write: Callable[[Path, dict[str, Any]], object],
    ) -> RegisteredVersion:
        """Create ``name@version`` by calling ``write(staging_dir, release)``, which must produce a
        dataset directory (README.md + build_manifest.json + Parquet) at ``staging_dir``; then
        move it into place. Refuses an existing version; on any failure nothing is left behind (not
        even the dataset's folder when this was to be its first version)."""
        check_name(name)
        version = ".".join(map(str, parse_semver(version)))
        final = self.root / name / version
        if final.exists():
            raise VersionExistsError(self._exists_message(name, version))
        new_folder = not final.parent.exists()
        final.parent.mkdir(parents=True, exist_ok=True)
        interrupt.sweep(final.parent, ".*")  # what a killed build left (kill -9); never a live one's
        staging = interrupt.track(final.parent / interrupt.temp_name(f".staging-{version}-"))
        release = {"name": name, "version": version, "registered_at": utc_now()}
        try:
            write(staging, release)
            if not (staging / MANIFEST).is_file():
                raise DatasetRegistryError(f"the build wrote no {MANIFEST}; nothing registered")
            write_checksums(staging)
            try:
                os.rename(staging, final)  # fails if ``final`` appeared meanwhile (non-empty)
            except OSError as e:
                raise VersionExistsError(self._exists_message(name, version)) from e
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
            interrupt.untrack(staging)
            if new_folder and not final.exists():
                with contextlib.suppress(OSError):  # not empty: another build registered meanwhile
                    final.parent.rmdir()
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
    return DatasetRegistry(registry).resolve(ref).path


# -- integrity: SHA256SUMS of every file of a version ---------------------------------------------
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _version_files(directory: Path) -> list[str]:
    """Relative POSIX paths of the files a checksum covers (hidden entries and SHA256SUMS excluded)."""
    out = []
    for p in sorted(directory.rglob("*")):
        rel = p.relative_to(directory)
        if p.is_file() and rel.as_posix() != CHECKSUMS and not any(s.startswith(".") for s in rel.parts):
            out.append(rel.as_posix())
    return out


def write_checksums(directory: Path) -> None:
    """Write ``SHA256SUMS`` (``<sha256>  <path>`` lines, ``sha256sum -c`` format) for a version."""
    lines = [f"{_sha256(directory / rel)}  {rel}\n" for rel in _version_files(directory)]
    (directory / CHECKSUMS).write_text("".join(lines), encoding="utf-8")


@dataclass
class Verification:
    """The result of checking a registered version's files against its ``SHA256SUMS``."""

    version: RegisteredVersion
    recorded: bool  # False: registered before checksums were recorded, nothing to check against
    checked: int = 0
    mismatched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    unreadable: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.mismatched or self.missing or self.unexpected or self.unreadable)

    def problems(self) -> list[str]:
        return (
            ([f"{CHECKSUMS}: {self.unreadable}"] if self.unreadable else [])
            + [f"{f}: sha256 differs from the one recorded at registration" for f in self.mismatched]
            + [f"{f}: missing" for f in self.missing]
            + [f"{f}: not part of the registered version" for f in self.unexpected]
        )

    def message(self) -> str:
        rv, probs = self.version, self.problems()
        listed = "; ".join(probs[:5]) + (f"; ... ({len(probs)} in all)" if len(probs) > 5 else "")
        return (
            f"{rv.ref} ({rv.path}) was modified after it was registered: {listed}. Registered versions are "
            f"read-only: restore its files, or build a new version (harness datasets build ... --name {rv.name} "
            f"--bump patch); `harness datasets verify {rv.ref}` lists every file"
        )


def verify_version(rv: RegisteredVersion) -> Verification:
    """Check every file of ``rv`` against its ``SHA256SUMS``."""
    sums = rv.path / CHECKSUMS
    if not sums.is_file():
        return Verification(rv, recorded=False)
    recorded: dict[str, str] = {}
    try:
        for n, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), 1):
            digest, sep, rel = line.partition("  ")
            if not sep or not re.fullmatch(r"[0-9a-f]{64}", digest) or ".." in Path(rel).parts:
                return Verification(rv, recorded=True, unreadable=f"line {n} is not '<sha256>  <path>'")
            recorded[rel] = digest
    except (OSError, UnicodeDecodeError) as e:
        return Verification(rv, recorded=True, unreadable=str(e))
    present = set(_version_files(rv.path))
    report = Verification(rv, recorded=True, checked=len(recorded))
    report.missing = sorted(set(recorded) - present)
    report.unexpected = sorted(present - set(recorded))
    report.mismatched = [f for f in sorted(set(recorded) & present) if _sha256(rv.path / f) != recorded[f]]
    return report


# -- read-only: no writes into a registry except through register() -------------------------------
def registered_version_at(path: str | os.PathLike[str]) -> RegisteredVersion | None:
    """The registered version whose folder is ``path`` or holds it (its manifest's release record
    names the folder), else None."""
    p = Path(path).expanduser().resolve()
    for d in (p, *p.parents):
        if _SEMVER.match(d.name) and (d / MANIFEST).is_file():
            try:
                rel = json.loads((d / MANIFEST).read_text(encoding="utf-8")).get("release") or {}
            except (OSError, ValueError, AttributeError):
                continue
            if rel.get("version") == d.name and rel.get("name") == d.parent.name:
                return RegisteredVersion(d.parent.name, d.name, d)
    return None


def _is_dataset_folder(d: Path) -> bool:
    """``d`` holds at least one registered version (``<d>/<X.Y.Z>/`` with a release record)."""
    try:
        return any(
            _SEMVER.match(c.name) and c.is_dir() and registered_version_at(c) is not None for c in d.iterdir()
        )
    except OSError:
        return False


def check_writable(
    path: str | os.PathLike[str], registry: str | os.PathLike[str] | None = None, *, flag: str = "--output"
) -> None:
    """Refuse ``path`` as an output when it is (inside) a registered version, a registry's dataset
    folder, or the registry root: :class:`ReadOnlyError` naming the path and the way forward."""
    try:
        p = Path(path).expanduser().resolve()
    except (OSError, ValueError) as e:
        raise DatasetRegistryError(f"{flag} {str(path)[:200]!r} is not a usable path: {e}") from None
    rv = registered_version_at(p)
    root = DatasetRegistry(registry).root.expanduser().resolve()
    if rv is not None:
        where = f"is the folder of the registered version {rv.ref}" if rv.path == p else f"is inside {rv.ref}"
        raise ReadOnlyError(
            f"{flag} {path} {where} ({rv.path}); registered versions are read-only. Register a new version "
            f"instead (harness datasets build ... --name {rv.name} --version X.Y.Z or --bump patch|minor|major) "
            f"or choose another {flag}"
        )
    folder = next((d for d in (p, *p.parents) if d == root or _is_dataset_folder(d)), None)
    if folder is not None:
        what = "the dataset registry" if folder == root else "a dataset folder of a registry"
        raise ReadOnlyError(
            f"{flag} {path} is inside {what} ({folder}), which only `harness datasets build` writes (a new "
            f"version: --version X.Y.Z or --bump patch|minor|major); choose another {flag}"
        )


def verify_if_registered(path: str | os.PathLike[str]) -> None:
    """A directory given by path that is a registered version's folder is checked like a
    ``NAME@X.Y.Z`` reference: :class:`IntegrityError` when its files changed since registration."""
    rv = registered_version_at(path)
    if rv is not None and rv.path == Path(path).expanduser().resolve():
        report = verify_version(rv)
        if not report.ok:
            raise IntegrityError(report.message())
