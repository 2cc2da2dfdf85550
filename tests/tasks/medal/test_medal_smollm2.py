"""Real-model tier: MEDAL issue-detection JSON verdicts (Table 11) written by SmolLM2-135M-Instruct
through the hf backend (unguided): whatever the model writes is kept as raw text, and a verdict that
does not parse is None, counted per task and per label — never coerced."""

from __future__ import annotations

import math

import pytest

from harness.run.runner import RunConfig, run
from tests.fixtures.medal_source import write_medal_source

pytestmark = pytest.mark.real_model


def test_medal_json_verdicts_from_smollm2(tmp_path, smollm2):
    src = write_medal_source(tmp_path / "medal-src")
    out = run(
        RunConfig(
            judge="hf:smollm2-135m-instruct,max_tokens=160",
            tasks=["medal"],
            source=str(src),
            languages=["en"],
            limit=2,
            n_bootstrap=0,
            output_dir=tmp_path / "run",
            show_progress=False,
            use_cache=False,
        )
    )
    s = out.samples
    assert len(s) == 2
    assert all(isinstance(t, str) and t.strip() for t in s["raw_output"])  # the model's own text, kept
    # (whether it writes a JSON object at all is the model's chance: 10 of 10 unguided verdicts did not
    # parse in docs/smollm2.md, so that is measured there, not asserted here)
    failed = s["parse_status"] != "ok"
    assert out.results["parse_failures"]["medal"] == int(failed.sum())
    assert all(math.isnan(x) for x in s.loc[failed, "score"])  # a failure is None, never a 0
    assert all(1 <= x <= 5 for x in s.loc[~failed, "score"])
    per_label = out.results["label_parse_failures"]["medal"]
    assert set(per_label) >= {"incoherent", "repetitive"} and all(0 <= n <= 2 for n in per_label.values())
