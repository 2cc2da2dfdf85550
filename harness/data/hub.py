"""Publish a built dataset *version directory* to the Hugging Face Hub as a dataset repo.

A version directory (``README.md`` card with ``configs:`` front matter, ``build_manifest.json`` and
``<config>/test-00000-of-00001.parquet`` files) becomes one commit on the repo's ``main`` branch,
tagged ``v{version}``, so users can ``load_dataset("org/name", config, revision="v1.0.0")``.

Steps, all through ``huggingface_hub.HfApi(endpoint=..., token=...)``:

1. ``create_repo(repo_type="dataset", exist_ok=True)``;
2. ``list_repo_refs``: refuse when the tag ``v{version}`` already exists (versions are immutable);
3. ``list_repo_files`` at the current head: files no longer in the directory are deleted in the
   same commit, so the tagged tree is exactly the version directory (plus ``.gitattributes``);
4. ``create_commit``: ONE commit with every file of the directory (``parent_commit`` = the head
   seen in step 2, so a concurrent push makes the commit fail instead of interleaving);
5. ``create_tag(tag=f"v{version}", revision=<commit oid>)``.

``create_commit`` is used rather than ``upload_folder`` on purpose: with ``hf_xet`` installed,
``upload_folder`` runs a streamed pipeline that may split a folder into several commits (and
splits a batch further when a commit fails), which would break "one version = one commit".

Every request goes to the resolved endpoint, passed explicitly to ``HfApi`` (``huggingface_hub``
reads ``HF_ENDPOINT`` only at import), except ``huggingface_hub``'s own tokenless user-agent lookup
``GET {constants.ENDPOINT}/api/agent-harnesses`` (off with ``HF_HUB_DISABLE_TELEMETRY=1``).

The token comes from the environment only (``HF_TOKEN``, then ``HUGGING_FACE_HUB_TOKEN``) and is
redacted from every error message; errors from the client are re-raised as :class:`PublishError`
without chaining, so the original exception (whose HTTP response carries the request headers) is
not reachable from the raised error.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from harness.jsontypes import JSONObject

if TYPE_CHECKING:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

__all__ = ["PublishError", "PublishResult", "publish_dataset", "resolve_endpoint", "TOKEN_ENV_VARS"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Environment variables read for the write token, in order.
TOKEN_ENV_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
DEFAULT_ENDPOINT = "https://huggingface.co"
_SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
_REPO_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_KEEP_REMOTE = frozenset({".gitattributes"})  # managed by the Hub, never deleted


class PublishError(RuntimeError):
    """Publishing failed or was refused. The message never contains the token."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True)
class PublishResult:
    """What was published. Holds no credential."""

    repo_id: str
    version: str
    tag: str
    commit_sha: str
    commit_url: str
    files: list[str]
    endpoint: str
    deleted: list[str] = field(default_factory=list)
    pr_url: str | None = None

    @property
    def repo_url(self) -> str:
        return f"{self.endpoint}/datasets/{self.repo_id}"

    def to_dict(self) -> JSONObject:
        return asdict(self)


def resolve_endpoint(endpoint: str | None = None) -> str:
    """The Hub to talk to: ``endpoint``, else ``$HF_ENDPOINT`` (read now), else huggingface.co.

    ``huggingface_hub`` reads ``HF_ENDPOINT`` once, at import time; the resolved value is always
    passed explicitly to ``HfApi`` so every request of the publish goes to the same place.
    """
    value = endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    return value.rstrip("/")


def _token_from_env() -> str:
    for name in TOKEN_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    raise PublishError(
        "no Hugging Face token: set HF_TOKEN (or HUGGING_FACE_HUB_TOKEN) to a token with write access "
        "to the target namespace, e.g. `HF_TOKEN=hf_... harness datasets publish ...`"
    )


def _redact(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def _check_version(version: str) -> str:
    if not isinstance(version, str) or not _SEMVER.fullmatch(version):
        raise PublishError(
            f"invalid version {version!r}: expected semantic version X.Y.Z (e.g. 1.0.0, without a leading 'v')"
        )
    return version


def _check_repo_id(repo_id: str) -> str:
    parts = repo_id.split("/") if isinstance(repo_id, str) else []
    ok = len(parts) == 2 and all(
        _REPO_PART.fullmatch(p) and len(p) <= 96 and "--" not in p and ".." not in p for p in parts
    )
    if not ok:
        raise PublishError(
            f"invalid repo id {repo_id!r}: expected 'namespace/name' (letters, digits, '-', '_', '.')"
        )
    return repo_id


def _collect_files(directory: Path) -> dict[str, Path]:
    """Relative POSIX path -> file, for every file of the directory (hidden entries skipped)."""
    if not directory.is_dir():
        raise PublishError(f"not a directory: {directory}")
    if not (directory / "README.md").is_file():
        raise PublishError(f"{directory} has no README.md dataset card: is it a built dataset version?")
    files: dict[str, Path] = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        files[rel.as_posix()] = path
    return files


def _check_manifest(directory: Path, version: str) -> dict[str, object]:
    """The build manifest (if any); refuse when the registry release it records (``release.version``,
    written by :mod:`harness.data.registry`) is another version. The builder's own version is not checked:
    it versions the build code, not the dataset."""
    path = directory / "build_manifest.json"
    if not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise PublishError(f"unreadable build manifest {path}: {exc}") from None
    if not isinstance(manifest, dict):
        return {}
    release = manifest.get("release")
    released = release.get("version") if isinstance(release, dict) else None
    if released is not None and str(released) != version:
        raise PublishError(f"{path} records release {released}, refusing to publish it as v{version}")
    return manifest


def _hub_call(step: str, token: str, fn: Callable[[], T]) -> T:
    """Run one client call; turn any failure into a redacted, unchained :class:`PublishError`."""
    try:
        return fn()
    except Exception as exc:  # every client failure becomes a PublishError
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        message = _redact(f"{step} failed: {type(exc).__name__}: {exc}", token)
    # Raised outside the `except` block: no __context__, so the client exception (and the request
    # headers its response holds) does not travel with the error.
    raise PublishError(message, status_code=status if isinstance(status, int) else None)


def _refs(api: HfApi, repo_id: str) -> tuple[dict[str, str], str | None]:
    """(tag name -> commit, head of ``main``); a repository that does not exist has neither."""
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        refs = api.list_repo_refs(repo_id, repo_type="dataset")
    except RepositoryNotFoundError:
        return {}, None
    head = next((b.target_commit for b in refs.branches if b.name == "main"), None)
    return {t.name: t.target_commit for t in refs.tags}, head


def publish_dataset(
    directory: str | os.PathLike[str],
    repo_id: str,
    version: str,
    *,
    private: bool = False,
    endpoint: str | None = None,
    commit_message: str | None = None,
    create_pr: bool = False,
) -> PublishResult:
    """Publish the dataset version in ``directory`` to the Hub dataset repo ``repo_id`` as ``v{version}``.

    Args:
        directory: a built version directory (``README.md`` card, manifest, Parquet files).
        repo_id: ``namespace/name``; the dataset repo is created when missing.
        version: ``X.Y.Z``; the commit is tagged ``v{version}``. An existing tag is never moved.
        private: visibility of a repo created by this call (an existing repo is left as is).
        endpoint: Hub URL; defaults to ``$HF_ENDPOINT``, then https://huggingface.co.
        commit_message: summary of the commit (default ``"Publish dataset v{version}"``).
        create_pr: open the commit as a pull request instead of pushing to ``main``; the tag
            then points at the pull request's commit.

    Returns:
        A :class:`PublishResult` (no credential in it).

    Raises:
        PublishError: invalid arguments, no token in the environment, offline mode, the tag
            already exists, or a Hub call failed (message redacted of the token).
    """
    _check_repo_id(repo_id)
    _check_version(version)
    folder = Path(directory).expanduser().resolve()
    files = _collect_files(folder)
    manifest = _check_manifest(folder, version)
    token = _token_from_env()
    hub = resolve_endpoint(endpoint)
    tag = f"v{version}"

    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, constants

    if constants.is_offline_mode():
        raise PublishError("HF_HUB_OFFLINE is set: publishing needs network access to the Hub (unset it)")
    api = HfApi(endpoint=hub, token=token)

    log.info("hub: create_repo %s (dataset, private=%s, exist_ok) at %s", repo_id, private, hub)
    _hub_call(
        "create_repo",
        token,
        lambda: api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True),
    )

    log.info("hub: list_repo_refs %s: checking that tag %s is free", repo_id, tag)
    tags, head = _hub_call("list_repo_refs", token, lambda: _refs(api, repo_id))
    if tag in tags:
        raise PublishError(
            f"{repo_id} already has tag {tag} (commit {tags[tag][:12]}): published versions are immutable, "
            "bump the version to publish new content"
        )

    stale: list[str] = []
    if head is not None:
        log.info(
            "hub: list_repo_files %s@%s: finding files removed since the last version", repo_id, head[:12]
        )
        remote = _hub_call(
            "list_repo_files",
            token,
            lambda: api.list_repo_files(repo_id, repo_type="dataset", revision=head),
        )
        stale = sorted(p for p in remote if p not in files and p not in _KEEP_REMOTE)

    operations: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(f)) for p, f in files.items()
    ]
    operations += [CommitOperationDelete(path_in_repo=p) for p in stale]
    message = commit_message or f"Publish dataset {tag}"
    description = f"Dataset version {version}: {len(files)} file(s)"
    if manifest.get("fingerprint"):
        description += f"\n\nBuild fingerprint: {manifest['fingerprint']}"
    pr_note = " (pull request)" if create_pr else ""
    log.info(
        "hub: create_commit %s: %d file(s), %d deleted, one commit%s",
        repo_id,
        len(files),
        len(stale),
        pr_note,
    )
    info = _hub_call(
        "create_commit",
        token,
        lambda: api.create_commit(
            repo_id,
            operations,
            commit_message=message,
            commit_description=description,
            repo_type="dataset",
            create_pr=create_pr,
            parent_commit=head,
        ),
    )

    if info.oid == head:
        log.info("hub: no file differs from %s@%s: the tag goes on that commit", repo_id, head[:12])
    log.info("hub: create_tag %s %s -> %s", repo_id, tag, info.oid[:12])
    _hub_call(
        "create_tag",
        token,
        lambda: api.create_tag(
            repo_id, tag=tag, revision=info.oid, repo_type="dataset", tag_message=f"Dataset version {version}"
        ),
    )
    result = PublishResult(
        repo_id=repo_id,
        version=version,
        tag=tag,
        commit_sha=info.oid,
        commit_url=info.commit_url,
        files=list(files),
        endpoint=hub,
        deleted=stale,
        pr_url=info.pr_url,
    )
    log.info("hub: published %s@%s (%s)", repo_id, tag, result.commit_sha[:12])
    return result
