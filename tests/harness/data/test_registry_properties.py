"""Property-based tests (hypothesis) of the registry's names, versions and paths: any
name, version or reference is valid or a :class:`DatasetRegistryError`; a registration writes only under
``<root>/<name>/<version>``; ``check_writable`` refuses every path inside a registered version."""

from __future__ import annotations

import json
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.data.registry import (
    MAX_NAME_LENGTH,
    DatasetRegistry,
    DatasetRegistryError,
    ReadOnlyError,
    check_name,
    check_writable,
    parse_semver,
    split_ref,
    verify_version,
)

SETTINGS = settings(max_examples=400, deadline=None, derandomize=True, database=None)
FEW = settings(max_examples=60, deadline=None, derandomize=True, database=None)
NAME_CHARS = string.ascii_letters + string.digits + "_.-/\\@ :*?\x00é中~$"
NAMES = st.one_of(
    st.text(NAME_CHARS, max_size=20),
    st.sampled_from(
        ["..", ".", "../evil", "a/../../b", "/abs", "~root", "a" * 96, "a" * 97, "a" * 300, "CON", "-x"]
    ),
)
VERSIONS = st.one_of(
    st.text("0123456789.v-+ a", max_size=12),
    st.sampled_from(["1.0.0", "v2.3.4", "01.0.0", "1.0", "1.0.0.0", "99999999999999999999.0.0", " 1.2.3 "]),
)


@SETTINGS
@given(NAMES)
def test_names_are_valid_or_refused_with_the_rule(name):
    try:
        assert check_name(name) == name
    except DatasetRegistryError as e:
        assert "a dataset name is 1 to 96 characters" in str(e) and "\n" not in str(e)
        return
    assert 1 <= len(name) <= MAX_NAME_LENGTH and Path(name).name == name and name not in (".", "..")
    assert "/" not in name and "\\" not in name and "\x00" not in name


@SETTINGS
@given(name=NAMES, version=VERSIONS, sep=st.sampled_from(["@", "", "@latest", "@@"]))
def test_references_split_or_are_refused(name, version, sep):
    ref = f"{name}{sep}{version}" if sep == "@" else f"{name}{sep}"
    try:
        n, v = split_ref(ref)
    except DatasetRegistryError:
        return
    assert check_name(n) == n
    assert v is None or ".".join(map(str, parse_semver(v))) == v


@FEW
@given(name=NAMES, version=VERSIONS)
def test_a_registration_writes_only_its_own_folder(name, version):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = base / "reg"

        def write(staging: Path, release: dict) -> None:
            staging.mkdir(parents=True)
            (staging / "build_manifest.json").write_text(json.dumps({"release": release}))

        try:
            rv = DatasetRegistry(root).register(name, version, write)
        except DatasetRegistryError:
            assert sorted(p.relative_to(base).as_posix() for p in base.rglob("*")) in ([], ["reg"])
            return
        files = sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
        assert files == [
            f"reg/{name}/{rv.version}/SHA256SUMS",
            f"reg/{name}/{rv.version}/build_manifest.json",
        ]
        assert rv.path.resolve().is_relative_to(root.resolve()) and verify_version(rv).ok
        with pytest.raises(ReadOnlyError):
            check_writable(rv.path / "sub" / "x")


@FEW
@given(st.lists(st.sampled_from(["..", ".", "demo", "1.0.0", "2.0.0", "sub", "x"]), min_size=1, max_size=5))
def test_no_output_path_reaches_into_a_registered_version(parts):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "R"
        rv = DatasetRegistry(root).register(
            "demo",
            "1.0.0",
            lambda s, r: (
                s.mkdir(parents=True),
                (s / "build_manifest.json").write_text(json.dumps({"release": r})),
            ),
        )
        target = (root / "demo" / "1.0.0").joinpath(*parts)
        inside = target.resolve().is_relative_to(rv.path.resolve())
        try:
            check_writable(target)
        except ReadOnlyError:
            return
        assert not inside  # only paths outside the version (and its dataset folder) pass
        assert not target.resolve().is_relative_to((root / "demo").resolve())
