"""A model a spec names is located before anything loads: an ``hf:`` / ``embed:`` model that is not
local, not cached and cannot be downloaded now is one clear error within seconds — not a minute of
download retries ending in a transformers traceback."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import evaluate
import huggingface_hub
import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.judges.loader import load_judge
from harness.models import ModelUnavailableError, locate_model

MODULE = str(Path(__file__).resolve().parents[2] / "tasks" / "xdial_eval")
NOT_CACHED = "dialeval-test/no-such-model-0.5b"  # never in any Hugging Face cache


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache of this test's own."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture
def unreachable_hub(monkeypatch, hub_cache):
    """Network allowed (HF_HUB_OFFLINE unset), but the Hub endpoint is a closed local port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: connections are refused
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    return hub_cache


def _cache_model(cache: Path, repo: str) -> None:
    """The layout huggingface_hub writes: models--org--name/{refs/main, snapshots/<sha>/config.json}."""
    d = cache / f"models--{repo.replace('/', '--')}"
    sha = "0" * 40
    (d / "refs").mkdir(parents=True)
    (d / "refs" / "main").write_text(sha)
    (d / "snapshots" / sha).mkdir(parents=True)
    (d / "snapshots" / sha / "config.json").write_text("{}")


def test_offline_and_not_cached_is_one_clear_error_at_once(hub_cache):
    t = time.perf_counter()
    with pytest.raises(ModelUnavailableError) as ei:
        load_judge(f"hf:{NOT_CACHED}")
    msg = str(ei.value)
    assert time.perf_counter() - t < 10
    assert f"hf backend: model {NOT_CACHED} is not available offline" in msg and "HF_HUB_OFFLINE" in msg
    assert "hf:/path/to/model" in msg and f"hf download {NOT_CACHED}" in msg and "\n" not in msg


def test_an_unreachable_hub_is_found_with_one_quick_request(unreachable_hub):
    t = time.perf_counter()
    with pytest.raises(ModelUnavailableError, match="cannot be reached") as ei:
        locate_model(NOT_CACHED, owner="hf backend: model")
    assert time.perf_counter() - t < 10 and "not available offline" in str(ei.value)
    # cached files are used without asking the Hub again (transformers then loads local files only)
    _cache_model(unreachable_hub, NOT_CACHED)
    assert locate_model(NOT_CACHED) == locate_model(NOT_CACHED).__class__(NOT_CACHED, "cached", True)


def test_cached_and_local_models(hub_cache, tmp_path):
    _cache_model(hub_cache, NOT_CACHED)
    assert locate_model(NOT_CACHED).local_files_only is True  # offline (tests), cached
    assert locate_model(str(tmp_path)).kind == "local"
    for bad, fragment in [
        ("./no/such/dir", "no such directory"),
        ("a" * 300, "neither a local directory nor"),
        ("bad id!", "neither a local directory nor"),
    ]:
        with pytest.raises(ModelUnavailableError, match=fragment):
            locate_model(bad, owner="embed encoder")


def test_cli_and_readme_evaluate_example_fail_fast(hub_cache, tmp_path):
    t = time.perf_counter()
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--task",
            "demo-turn",
            "--judge",
            f"hf:{NOT_CACHED}",
            "--limit",
            "1",
            "-q",
            "--no-cache",
            "--output",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert (
        r.output.strip()
        .splitlines()[-1]
        .startswith(f"error: hf backend: model {NOT_CACHED} is not available")
    )
    # the README's evaluate example with an LLM judge that is not on this machine
    m = evaluate.load(MODULE, "turn")
    with pytest.raises(ModelUnavailableError, match="not available offline"):
        m.compute(
            contexts=[["hi", "any plans?"]],
            responses=["a hike tomorrow"],
            references=[4.5],
            languages=["en"],
            datasets=["mine"],
            judge=f"hf:{NOT_CACHED}",
        )
    assert time.perf_counter() - t < 30
    with pytest.raises(ModelUnavailableError, match="embed encoder"):
        load_judge(f"embed:{NOT_CACHED}")


def test_a_reference_metric_model_that_is_not_here(hub_cache):
    from harness.tasks import get_task
    from harness.types import BackendConfigError

    item = {
        "id": "x",
        "language": "en",
        "context": [{"role": "user", "text": "hi"}],
        "response": "a",
        "reference": "b",
    }
    with pytest.raises(ModelUnavailableError, match=r"not available offline.*\(model=/path/to/model\)") as ei:
        load_judge(f"metric:bert_score_F1,model={NOT_CACHED},num_layers=6").score(
            get_task("upheld-content"), [item]
        )
    assert isinstance(ei.value, BackendConfigError)  # a run stops with it, it is not a resume
