"""harness runs publish against the stand-in Hub (tests/fixtures/servers/hub.py, the one `datasets
publish` is tested with): one commit + tag, a card with the results table, samples that
`load_dataset` reads back, and `harness view hub:...` opening the published run."""

from __future__ import annotations

import huggingface_hub
import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.data.hub import PublishError
from harness.view.data import read_runs
from harness.view.publish import publish_run
from harness.view.store import Query, SampleStore
from tests.fixtures.servers.hub import HubStandIn

TOKEN = "hf_StandInSecretToken0123456789abcdef"
REPO = "dialeval/demo-run"


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """The stand-in Hub, with huggingface_hub and datasets pointed at it (both read their endpoint
    and offline flags at import time: the module constants are patched next to the environment)."""
    import datasets.config

    c = huggingface_hub.constants
    with HubStandIn(token=TOKEN) as srv:
        hf_home = tmp_path / "hf_home"
        monkeypatch.setattr(c, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(c, "HF_HUB_DISABLE_TELEMETRY", True)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", srv.endpoint)
        monkeypatch.setattr(c, "ENDPOINT", srv.endpoint)
        monkeypatch.setattr(
            c, "HUGGINGFACE_CO_URL_TEMPLATE", srv.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
        )
        monkeypatch.setattr(c, "HF_HUB_CACHE", str(hf_home / "hub"))
        monkeypatch.setattr(c, "HF_TOKEN_PATH", str(hf_home / "token"))
        monkeypatch.setattr(c, "HF_STORED_TOKENS_PATH", str(hf_home / "stored_tokens"))
        monkeypatch.setattr(datasets.config, "HF_ENDPOINT", srv.endpoint)
        monkeypatch.setattr(
            datasets.config,
            "HUB_DATASETS_URL",
            srv.endpoint + "/datasets/{repo_id}/resolve/{revision}/{path}",
        )
        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets_cache")
        yield srv
        huggingface_hub.HfFileSystem.clear_instance_cache()


def test_publish_a_run_and_read_it_back(hub, view_runs, tmp_path, monkeypatch):
    import datasets

    res, info = publish_run(view_runs["demo_a"], REPO, with_transcripts=True)
    assert (res.tag, info["items"]) == ("v1.0.0", 240)
    repo = hub.repo("dataset", REPO)
    (commit,) = repo.user_commits()
    assert set(commit.added) == {"README.md", "results.json", "samples.parquet", "items.parquet"}
    assert repo.tags == {"v1.0.0": commit.oid}
    card = commit.added["README.md"].decode()
    assert "config_name: samples" in card and "config_name: items" in card
    assert "| ar |" in card and "| **all** (mean) |" in card and "replay:" in card
    assert TOKEN not in card and all(TOKEN.encode() not in b for b in commit.added.values())

    monkeypatch.delenv("HF_TOKEN")  # a public dataset reads back anonymously
    ds = datasets.load_dataset(
        REPO, "samples", split="test", revision="v1.0.0", cache_dir=str(tmp_path / "c")
    )
    assert ds.num_rows == 240 and "human_rating" in ds.column_names

    (run,) = read_runs([f"hub:{REPO}@v1.0.0"])
    assert run.items is not None and run.judge.startswith("replay:")
    st = SampleStore(run, cache_dir=tmp_path / "idx")
    assert st.facets()["transcripts"]["available"]  # from items.parquet, not the publisher's disk
    s = st.sample("demo-turn", "demo-turn", "demo-turn-t01-ar")
    assert "قطة" in s["item"]["context"][0]["text"]
    assert st.query(Query.from_params({"q": "小猫"}))["total"] >= 1


def test_versions_are_immutable_and_errors_are_one_line(hub, view_runs, monkeypatch):
    publish_run(view_runs["upheld"], REPO)
    with pytest.raises(PublishError, match="already has tag v1.0.0"):
        publish_run(view_runs["upheld"], REPO)
    res, info = publish_run(view_runs["upheld"], REPO, "1.1.0")
    assert res.tag == "v1.1.0" and info["items"] is None
    monkeypatch.delenv("HF_TOKEN")
    r = CliRunner().invoke(
        app, ["runs", "publish", str(view_runs["demo_b"]), "--repo", REPO, "--version", "2.0.0"]
    )
    assert r.exit_code == 2 and "no Hugging Face token" in r.output
    r = CliRunner().invoke(app, ["runs", "publish", str(view_runs["demo_b"]), "--repo", "bad repo"])
    assert r.exit_code == 2 and "invalid repo id" in r.output
