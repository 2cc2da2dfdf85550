"""harness.data.hub.publish_dataset against the local stand-in Hub (tests/fixtures/servers/hub.py).

The real push to huggingface.co cannot run offline; these tests pin the exact client calls, the
single commit, the tag, the refusal to move a tag, and that the token never leaks.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from pathlib import Path

import huggingface_hub.constants
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.data.hub import PublishError, PublishResult, publish_dataset
from tests.fixtures.servers.hub import HubStandIn

TOKEN = "hf_StandInSecretToken0123456789abcdef"
REPO = "dialeval/demo-eval"

CARD = """---
configs:
{entries}
---
# demo-eval

A tiny dataset version built for the publishing tests.
"""


def make_version(root: Path, version: str = "1.0.0", configs: dict[str, list[str]] | None = None) -> Path:
    """A built version directory: README.md card, build_manifest.json, <config>/test-*.parquet."""
    configs = configs or {"main": ["hello", "world"]}
    out = root / version
    entries = []
    for name, texts in configs.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        table = pa.table({"id": [f"{name}-{i}" for i in range(len(texts))], "text": texts})
        pq.write_table(table, out / name / "test-00000-of-00001.parquet")
        entries.append(
            f"- config_name: {name}\n  data_files:\n  - split: test\n    path: {name}/test-00000-of-00001.parquet"
        )
    (out / "README.md").write_text(CARD.format(entries="\n".join(entries)), "utf-8")
    manifest = {
        "builder": {"name": "demo", "version": "1.0.0"},  # the build code's version, not the dataset's
        "fingerprint": "f" * 64,
        "configs": configs,
        "release": {"name": "demo", "version": version, "registered_at": "2026-01-01T00:00:00Z"},
    }
    (out / "build_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
    return out


def local_files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


@pytest.fixture
def hub():
    with HubStandIn(token=TOKEN) as srv:
        yield srv


@pytest.fixture(autouse=True)
def hub_env(monkeypatch):
    """Token in the environment, network allowed (tests/conftest.py sets HF_HUB_OFFLINE=1 before
    huggingface_hub is imported, so the import-time constant is patched too)."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    # No telemetry lookup on huggingface.co from the tests (see test_only_tokenless_telemetry_...).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)


@pytest.fixture
def version_dir(tmp_path) -> Path:
    return make_version(tmp_path / "demo")


# -- (a) one commit with every file, and the tag ----------------------------------------------------
def test_publish_creates_repo_one_commit_and_tag(hub, version_dir):
    result = publish_dataset(version_dir, REPO, "1.0.0", endpoint=hub.endpoint)

    repo = hub.repo("dataset", REPO)
    (commit,) = repo.user_commits()  # exactly one commit besides the repo's initial commit
    expected = local_files(version_dir)
    assert set(expected) == {"README.md", "build_manifest.json", "main/test-00000-of-00001.parquet"}
    assert commit.added == expected  # every file, byte for byte
    assert commit.deleted == []
    assert commit.summary == "Publish dataset v1.0.0"
    assert "f" * 64 in commit.description  # build fingerprint recorded in the commit
    assert repo.tags == {"v1.0.0": commit.oid}
    assert repo.tag_messages["v1.0.0"] == "Dataset version 1.0.0"
    assert repo.branches["main"] == commit.oid
    assert not repo.private
    tagged = hub.files_at(REPO, "v1.0.0")
    assert tagged.pop(".gitattributes")  # created with the repo, kept
    assert tagged == expected

    assert isinstance(result, PublishResult)
    assert (result.repo_id, result.version, result.tag) == (REPO, "1.0.0", "v1.0.0")
    assert result.commit_sha == commit.oid
    assert result.commit_url == f"{hub.endpoint}/datasets/{REPO}/commit/{commit.oid}"
    assert result.files == sorted(expected)
    assert result.endpoint == hub.endpoint
    assert result.repo_url == f"{hub.endpoint}/datasets/{REPO}"
    assert result.deleted == [] and result.pr_url is None

    initial = next(c.oid for c in repo.commits.values() if c.parent is None)
    assert hub.calls() == [
        "POST /api/repos/create",
        f"GET /api/datasets/{REPO}/refs",
        f"GET /api/datasets/{REPO}/tree/{initial}",
        "POST /api/validate-yaml",
        f"POST /api/datasets/{REPO}/preupload/main",
        f"POST /api/datasets/{REPO}/commit/main",
        f"POST /api/datasets/{REPO}/tag/{commit.oid}",
    ]
    create, _, _, _, preupload, commit_req, tag_req = hub.requests
    assert all(r.authorized and r.status == 200 for r in hub.requests)
    assert create.json == {
        "name": "demo-eval",
        "organization": "dialeval",
        "visibility": "public",
        "type": "dataset",
    }
    assert sorted(f["path"] for f in preupload.json["files"]) == sorted(expected)
    header, *ops = commit_req.ndjson
    assert header["value"]["parentCommit"] == initial  # a concurrent push fails instead of interleaving
    assert sorted((op["key"], op["value"]["path"]) for op in ops) == [("file", p) for p in sorted(expected)]
    assert tag_req.json == {"tag": "v1.0.0", "message": "Dataset version 1.0.0"}


def test_endpoint_from_env_reaches_every_call(hub, version_dir, monkeypatch):
    # huggingface_hub read HF_ENDPOINT at import time (default hub); the env is honoured at call time.
    assert huggingface_hub.constants.ENDPOINT != hub.endpoint
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint + "/")
    result = publish_dataset(version_dir, REPO, "1.0.0")
    assert result.endpoint == hub.endpoint
    assert len(hub.requests) == 7 and hub.repo("dataset", REPO).tags == {"v1.0.0": result.commit_sha}


@pytest.mark.parametrize("telemetry", [True, False])
def test_only_tokenless_telemetry_escapes_the_explicit_endpoint(
    hub, version_dir, tmp_path, monkeypatch, telemetry
):
    """Every publish request goes to the given endpoint. The one exception is huggingface_hub's own
    user-agent "agent harness" lookup (``GET {constants.ENDPOINT}/api/agent-harnesses``, no token,
    once per process / 24 h), which HF_HUB_DISABLE_TELEMETRY=1 turns off."""
    import huggingface_hub.utils._detect_agent as detect_agent

    with HubStandIn(token="unused") as default_hub:  # stands for huggingface_hub.constants.ENDPOINT
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", default_hub.endpoint)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", not telemetry)
        monkeypatch.setattr(huggingface_hub.constants, "AGENT_HARNESSES_PATH", str(tmp_path / "agents.json"))
        monkeypatch.setattr(detect_agent, "_registry", None)
        publish_dataset(version_dir, REPO, "1.0.0", endpoint=hub.endpoint)
        assert len(hub.requests) == 7 and all(r.authorized for r in hub.requests)
        escaped = [(r.method, r.path, r.auth) for r in default_hub.requests]
        assert escaped == ([("GET", "/api/agent-harnesses", "absent")] if telemetry else [])


def test_private_repo_and_legacy_token_variable(hub, version_dir, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", TOKEN)
    publish_dataset(version_dir, REPO, "1.0.0", endpoint=hub.endpoint, private=True)
    assert hub.repo("dataset", REPO).private
    assert hub.requests[0].json["visibility"] == "private"
    assert all(r.authorized for r in hub.requests)


def test_create_pr_tags_the_pull_request_commit(hub, version_dir):
    result = publish_dataset(version_dir, REPO, "1.0.0", endpoint=hub.endpoint, create_pr=True)
    repo = hub.repo("dataset", REPO)
    (commit,) = repo.user_commits()
    assert result.pr_url == f"{hub.endpoint}/datasets/{REPO}/discussions/1"
    assert repo.pull_requests == {1: commit.oid}
    assert repo.branches["main"] == commit.parent  # main untouched until the PR is merged
    assert repo.tags == {"v1.0.0": commit.oid}
    assert hub.requests[5].query == {"create_pr": ["1"]}


# -- (b) versions are immutable ----------------------------------------------------------------------
def test_republishing_a_version_is_refused_without_a_new_commit(hub, tmp_path):
    first = publish_dataset(make_version(tmp_path / "a"), REPO, "1.0.0", endpoint=hub.endpoint)
    repo = hub.repo("dataset", REPO)
    n_commits, n_requests = len(repo.commits), len(hub.requests)

    changed = make_version(tmp_path / "b", configs={"main": ["other", "content"]})
    with pytest.raises(PublishError, match=r"already has tag v1\.0\.0.*immutable"):
        publish_dataset(changed, REPO, "1.0.0", endpoint=hub.endpoint)

    assert len(repo.commits) == n_commits
    assert repo.tags == {"v1.0.0": first.commit_sha} and repo.branches["main"] == first.commit_sha
    later = [r.path for r in hub.requests[n_requests:]]
    assert later == ["/api/repos/create", f"/api/datasets/{REPO}/refs"]  # refused before any upload


def test_next_version_replaces_the_tree_and_keeps_the_old_tag(hub, tmp_path):
    v1 = make_version(tmp_path / "v1", "1.0.0", {"main": ["a", "b"], "extra": ["c"]})
    v2 = make_version(tmp_path / "v2", "1.1.0", {"main": ["a", "b", "new"]})
    r1 = publish_dataset(v1, REPO, "1.0.0", endpoint=hub.endpoint)
    r2 = publish_dataset(v2, REPO, "1.1.0", endpoint=hub.endpoint)

    repo = hub.repo("dataset", REPO)
    c1, c2 = repo.user_commits()
    assert (c1.oid, c2.oid) == (r1.commit_sha, r2.commit_sha) and c2.parent == c1.oid
    assert r2.deleted == ["extra/test-00000-of-00001.parquet"] == c2.deleted
    assert set(c2.added) == set(local_files(v2))
    assert repo.tags == {"v1.0.0": c1.oid, "v1.1.0": c2.oid}
    for version, directory in (("v1.0.0", v1), ("v1.1.0", v2)):
        tree = hub.files_at(REPO, version)
        tree.pop(".gitattributes")
        assert tree == local_files(directory)


def test_a_failed_commit_creates_no_tag(hub, version_dir):
    hub.create_repo("dataset", REPO)
    hub.fail(f"/api/datasets/{REPO}/commit/", 412, "parentCommit is not the head of main")
    with pytest.raises(PublishError, match="create_commit failed") as info:
        publish_dataset(version_dir, REPO, "1.0.0", endpoint=hub.endpoint)
    assert info.value.status_code == 412
    assert hub.repo("dataset", REPO).tags == {}
    assert not any("/tag/" in r.path for r in hub.requests)


# -- (c) no token --------------------------------------------------------------------------------
def test_no_token_in_environment_is_an_error_before_any_request(hub, version_dir, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "  ")
    with pytest.raises(PublishError, match="set HF_TOKEN"):
        publish_dataset(version_dir, REPO, "1.0.0", endpoint=hub.endpoint)
    assert hub.requests == []


def test_offline_mode_is_an_error_before_any_request(hub, version_dir, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PublishError, match="HF_HUB_OFFLINE"):
        publish_dataset(version_dir, REPO, "1.0.0", endpoint=hub.endpoint)
    assert hub.requests == []


def test_stand_in_answers_401_without_a_bearer_token(hub):
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        req = urllib.request.Request(
            f"{hub.endpoint}/api/repos/create",
            data=json.dumps({"name": "x", "organization": "o", "type": "dataset"}).encode(),
            headers={"Content-Type": "application/json", **headers},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=10)
        assert info.value.code == 401
    assert [r.auth for r in hub.requests] == ["absent", "invalid"] and hub.repos == {}


# -- (d) the token never leaks ---------------------------------------------------------------------
def _assert_no_token(err: BaseException) -> None:
    assert TOKEN not in str(err) and TOKEN not in repr(err)
    assert err.__cause__ is None and err.__context__ is None  # client exception not reachable
    assert TOKEN not in repr(vars(err))


def test_token_never_in_result_errors_or_logs(hub, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    result = publish_dataset(make_version(tmp_path / "a"), REPO, "1.0.0", endpoint=hub.endpoint)
    for text in (repr(result), str(result), json.dumps(result.to_dict()), repr(vars(result))):
        assert TOKEN not in text

    with pytest.raises(PublishError) as refused:  # refusal
        publish_dataset(make_version(tmp_path / "b"), REPO, "1.0.0", endpoint=hub.endpoint)
    _assert_no_token(refused.value)
    # Nothing logged so far, by any library at DEBUG level, carries the token.
    assert caplog.records and all(TOKEN not in r.getMessage() for r in caplog.records)
    assert any(r.name == "harness.data.hub" and "create_tag" in r.getMessage() for r in caplog.records)
    caplog.clear()

    # A Hub error whose message echoes the token is redacted.
    hub.fail(f"/api/datasets/{REPO}/commit/", 500, f"internal error for Bearer {TOKEN}")
    with pytest.raises(PublishError, match=r"(?s)create_commit failed.*Bearer \*\*\*") as echoed:
        publish_dataset(make_version(tmp_path / "c", "1.1.0"), REPO, "1.1.0", endpoint=hub.endpoint)
    assert echoed.value.status_code == 500
    _assert_no_token(echoed.value)
    # (httpcore's own DEBUG trace prints the response headers the server sent, echo included.)
    ours = [r for r in caplog.records if r.name.startswith(("harness", "huggingface_hub"))]
    assert ours and all(TOKEN not in r.getMessage() for r in ours)


def test_rejected_token_is_a_redacted_error(hub, version_dir, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_wrong_token_abcdef")
    with pytest.raises(PublishError, match="create_repo failed") as info:
        publish_dataset(version_dir, REPO, "1.0.0", endpoint=hub.endpoint)
    assert info.value.status_code == 401
    assert "hf_wrong_token_abcdef" not in str(info.value)
    # create_repo(exist_ok=True) checks with repo_info whether the repo exists after a 401
    assert hub.calls() == ["POST /api/repos/create", f"GET /api/datasets/{REPO}"]
    assert {r.auth for r in hub.requests} == {"invalid"} and hub.repos == {}


# -- (e) invalid arguments -------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "1.0.0-rc1", "01.0.0", "1.0.0.0", "", "latest"])
def test_invalid_version_is_refused(hub, version_dir, version):
    with pytest.raises(PublishError, match="invalid version"):
        publish_dataset(version_dir, REPO, version, endpoint=hub.endpoint)
    assert hub.requests == []


@pytest.mark.parametrize(
    "repo_id", ["demo", "org/", "/demo", "a/b/c", "org/de mo", "org/-demo", "org/de--mo", ""]
)
def test_invalid_repo_id_is_refused(hub, version_dir, repo_id):
    with pytest.raises(PublishError, match="invalid repo id"):
        publish_dataset(version_dir, repo_id, "1.0.0", endpoint=hub.endpoint)
    assert hub.requests == []


def test_directory_must_be_a_built_version_matching_the_version(hub, tmp_path):
    with pytest.raises(PublishError, match="not a directory"):
        publish_dataset(tmp_path / "missing", REPO, "1.0.0", endpoint=hub.endpoint)
    (tmp_path / "empty").mkdir()
    with pytest.raises(PublishError, match="no README.md"):
        publish_dataset(tmp_path / "empty", REPO, "1.0.0", endpoint=hub.endpoint)
    with pytest.raises(PublishError, match="records release 1.0.0, refusing to publish it as v2.0.0"):
        publish_dataset(make_version(tmp_path / "v"), REPO, "2.0.0", endpoint=hub.endpoint)
    assert hub.requests == []


# -- (f) read-back with datasets.load_dataset --------------------------------------------------------
@pytest.fixture
def hub_reader(hub, tmp_path, monkeypatch):
    """Point huggingface_hub and datasets at the stand-in. Both read HF_ENDPOINT / offline flags /
    cache paths at import time, so their module constants are patched next to the environment."""
    import datasets.config

    hf_home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets_cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    c = huggingface_hub.constants
    monkeypatch.setattr(c, "ENDPOINT", hub.endpoint)
    monkeypatch.setattr(
        c, "HUGGINGFACE_CO_URL_TEMPLATE", hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr(c, "HF_TOKEN_PATH", str(hf_home / "token"))  # no stored token: anonymous reads
    monkeypatch.setattr(c, "HF_STORED_TOKENS_PATH", str(hf_home / "stored_tokens"))
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", hub.endpoint)
    monkeypatch.setattr(
        datasets.config, "HUB_DATASETS_URL", hub.endpoint + "/datasets/{repo_id}/resolve/{revision}/{path}"
    )
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets_cache")
    yield tmp_path / "datasets_cache"
    huggingface_hub.HfFileSystem.clear_instance_cache()  # its cached instances know the stand-in's URL


def test_published_versions_load_back_with_load_dataset(hub, hub_reader, tmp_path, monkeypatch):
    import datasets

    v1 = make_version(tmp_path / "v1", "1.0.0", {"main": ["hello", "world"]})
    v2 = make_version(tmp_path / "v2", "1.1.0", {"main": ["hello", "world", "again"], "extra": ["x"]})
    publish_dataset(v1, REPO, "1.0.0")
    publish_dataset(v2, REPO, "1.1.0")
    monkeypatch.delenv("HF_TOKEN")  # users read a public dataset anonymously
    n_writes = len(hub.requests)

    old = datasets.load_dataset(REPO, "main", revision="v1.0.0", cache_dir=str(hub_reader))
    assert list(old) == ["test"]
    assert old["test"].to_list() == [{"id": "main-0", "text": "hello"}, {"id": "main-1", "text": "world"}]
    new = datasets.load_dataset(REPO, "main", revision="v1.1.0", cache_dir=str(hub_reader))
    assert new["test"]["text"] == ["hello", "world", "again"]
    extra = datasets.load_dataset(REPO, "extra", revision="v1.1.0", cache_dir=str(hub_reader))
    assert extra["test"]["text"] == ["x"]

    reads = hub.requests[n_writes:]
    assert reads and {r.auth for r in reads} == {"absent"}
    assert f"HEAD /datasets/{REPO}/resolve/v1.0.0/README.md" in hub.calls()
    v1_sha = hub.repo("dataset", REPO).tags["v1.0.0"]
    assert f"GET /datasets/{REPO}/resolve/{v1_sha}/main/test-00000-of-00001.parquet" in hub.calls()


def test_unchanged_files_are_not_sent_again(hub, tmp_path):
    publish_dataset(make_version(tmp_path / "a", "1.0.0"), REPO, "1.0.0", endpoint=hub.endpoint)
    again = make_version(tmp_path / "b", "1.0.1")  # same data; only the manifest's release differs
    publish_dataset(again, REPO, "1.0.1", endpoint=hub.endpoint)
    _, c2 = hub.repo("dataset", REPO).user_commits()
    assert set(c2.added) == {"build_manifest.json"}
    tree = hub.files_at(REPO, "v1.0.1")
    tree.pop(".gitattributes")
    assert tree == local_files(again)


def test_identical_tree_under_a_new_version_tags_the_existing_commit(hub, tmp_path):
    directory = make_version(tmp_path / "a", "1.0.0")
    (directory / "build_manifest.json").write_text('{"fingerprint": "abc"}\n')  # no release recorded
    first = publish_dataset(directory, REPO, "1.0.0", endpoint=hub.endpoint)
    second = publish_dataset(directory, REPO, "1.0.1", endpoint=hub.endpoint)
    repo = hub.repo("dataset", REPO)
    assert len(repo.user_commits()) == 1  # nothing to commit: no empty commit either
    assert second.commit_sha == first.commit_sha
    assert repo.tags == {"v1.0.0": first.commit_sha, "v1.0.1": first.commit_sha}
    assert f"GET /api/datasets/{REPO}/revision/main" in hub.calls()  # the client's head lookup
