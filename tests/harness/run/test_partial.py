"""A backend that keeps failing on the local executor: partial results marked incomplete, a non-zero
exit, and a rerun that completes."""

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.run.partial import EXIT_INCOMPLETE, RunIncomplete
from harness.run.results import load_results
from harness.run.runner import RunConfig, run


def _rules(path, failing: bool):
    rules = [{"match": "Zitrone", "response": {"error": "server keeps refusing"}}] if failing else []
    rules.append({"default": {"hashed_p_yes": True}})
    path.write_text("\n".join(json.dumps(r) for r in rules) + "\n", encoding="utf-8")
    return path


def test_local_permanent_failure_writes_partial_results_marked_incomplete(tmp_path):
    bad = _rules(tmp_path / "bad.jsonl", failing=True)
    cfg = dict(
        tasks=["demo-turn"],
        languages=["en", "de"],
        limit=8,
        batch_size=4,
        n_bootstrap=20,
        show_progress=False,
        cache_path=tmp_path / "c.sqlite",
    )
    with pytest.raises(RunIncomplete) as ei:
        run(RunConfig(judge=f"replay:{bad}", output_dir=tmp_path / "o", **cfg))
    # items 0-7 (two batches of 4) were scored; de t03 ("Zitrone", item 10) failed in batch 8-11
    out = ei.value.output
    inc = load_results(tmp_path / "o").incomplete
    assert inc == out.document.incomplete
    assert (inc.n_items_total, inc.n_items_scored, inc.n_items_unscored) == (16, 8, 8)
    assert inc.stopped_at == {"task": "demo-turn", "item": 8}
    assert inc.by_task == {"demo-turn": {"total": 16, "scored": 8}}
    assert "scripted failure: server keeps refusing" in inc.reason and "rerun" in inc.resume
    samples = pd.read_parquet(tmp_path / "o" / "samples.parquet")
    assert len(samples) == 8 and samples["score"].notna().all()
    assert load_results(tmp_path / "o").results["demo-turn"]["en"]["pearson"].n == 8

    # the CLI shows what there is and exits non-zero (3: incomplete; 2 stays "bad input")
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--judge",
            f"replay:{bad}",
            "-t",
            "demo-turn",
            "-l",
            "en,de",
            "--limit",
            "8",
            "-b",
            "4",
            "--bootstrap",
            "20",
            "-q",
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--output",
            str(tmp_path / "cli"),
        ],
    )
    assert r.exit_code == EXIT_INCOMPLETE == 3
    assert "run incomplete: 8 of 16 items scored" in " ".join(r.output.split())
    assert (tmp_path / "cli" / "results.json").exists()

    # once the backend answers, the same command completes the run (a replay file is part of the
    # judge's identity, so this rerun misses the cache; tests/harness/executors checks zero repeats)
    good = _rules(tmp_path / "bad.jsonl", failing=False)
    fixed = run(RunConfig(judge=f"replay:{good}", output_dir=tmp_path / "fixed", **cfg))
    assert "incomplete" not in fixed.results and len(fixed.samples) == 16
