"""Real-model tier: ``harness run --judge hf:smollm2-135m-instruct --task xdial-eval-turn`` on the shared
xDial-Eval data (2 items in 2 languages): real chat-template prompts, P(Yes) from the model's label
log-probs, the packaged model's weights fingerprint in the recorded judge identity, and a rerun
served from the request cache (no backend call)."""

from __future__ import annotations

import pytest

from harness.modelstore import weights_fingerprint
from harness.run.runner import RunConfig, run

pytestmark = [pytest.mark.real_model, pytest.mark.shared_data]


def test_xdial_p_yes_with_smollm2(tmp_path, smollm2, xdial_source):
    def go(name: str):
        return run(
            RunConfig(
                judge="hf:smollm2-135m-instruct,batch_size=4",
                tasks=["xdial-eval-turn"],
                source=str(xdial_source),
                languages=["en", "zh"],
                limit=1,
                n_bootstrap=0,
                output_dir=tmp_path / name,
                show_progress=False,
                cache_path=tmp_path / "cache.sqlite",
            )
        )

    out = go("first")
    s = out.samples
    assert len(s) == 12 and set(s["language"]) == {"en", "zh"}  # 6 shared turn sets x 2 languages x 1
    assert (s["parse_status"] == "ok").all() and s["score"].between(0, 1).all()
    assert s["score"].nunique() > 1  # real log-probs, not a constant
    r = out.results
    assert r["parse_failures"]["xdial-eval-turn"] == 0
    ident = r["judge"]["identity"]
    assert ident["model"] == "smollm2-135m-instruct"
    assert ident["model_fingerprint"] == weights_fingerprint(smollm2)
    assert r["usage"]["backend"]["requests"] == 12

    again = go("again")
    assert again.results["usage"]["backend"]["requests"] == 0  # every call from the cache
    assert list(again.samples["score"]) == pytest.approx(list(s["score"]), rel=1e-12, abs=1e-12, nan_ok=True)
