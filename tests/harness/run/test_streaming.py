"""Streaming runs: items are read a record batch at a time, samples appended to
samples.parquet in row groups, statistics computed from the file one task at a time — and none of the
chunk sizes changes a number. (Peak memory and time per item at 10k–1M items: bench/scaling/scale.py.)"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from datasets import load_dataset

import harness.data.resolve as resolve
import harness.meta.correlation as correlation
import harness.run.runner as runner
import harness.run.samples as samples_mod
from harness.data.resolve import iter_items, prepare_dataset
from harness.run.runner import RunConfig, run
from harness.run.samples import HEAVY_COLUMNS, task_frame
from tests.fixtures.tolerances import FLOAT64_PATHS, float_diffs


@pytest.fixture
def judge(tmp_path):
    f = tmp_path / "judge.jsonl"
    rules = [
        {"match": "lemon|limón|Zitrone|citron", "response": {"text": "Maybe"}},
        {"default": {"hashed_p_yes": True}},
    ]
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rules), encoding="utf-8")
    return f"replay:{f}"


def _run(judge, out, tasks=("demo",), **kw):
    return run(
        RunConfig(
            judge=judge,
            tasks=list(tasks),
            n_bootstrap=40,
            output_dir=out,
            show_progress=False,
            use_cache=False,
            **kw,
        )
    )


def test_chunk_sizes_do_not_change_a_number(judge, tmp_path, monkeypatch):
    ref = _run(judge, tmp_path / "ref")
    monkeypatch.setattr(samples_mod, "ROW_GROUP", 7)  # samples flushed every 7 rows
    monkeypatch.setattr(resolve, "READ_BATCH", 5)  # items read 5 rows at a time
    monkeypatch.setattr(correlation, "BOOTSTRAP_CHUNK", 200)  # ~13 resamples at a time
    small = _run(judge, tmp_path / "small", batch_size=3)
    diffs: list[str] = []
    for key in ("results", "parse_failures", "datasets"):
        a, b = ref.results[key], small.results[key]
        if key == "datasets":
            a, b = ({t: d["used_configs"] for t, d in x.items()} for x in (a, b))
        diffs += float_diffs(a, b, tol=FLOAT64_PATHS, where=key)
    assert not diffs, diffs[:10]
    # a row group is flushed once 7 rows are buffered (batches of 3: every 9 rows)
    assert pq.ParquetFile(small.output_dir / "samples.parquet").num_row_groups == -(-240 // 9)
    cols = ["task", "dataset", "language", "id", "score", "parse_status", "human_rating", "raw_output"]
    pd.testing.assert_frame_equal(ref.samples[cols], small.samples[cols])
    assert small.results["samples"]["rows"] == 240 and small.results["timings"]["samples_io_s"] >= 0


def test_a_run_that_raises_leaves_no_samples_file_and_no_folder(judge, tmp_path, monkeypatch):
    real = runner.sample_row
    calls = []

    def failing(*a, **kw):
        calls.append(1)
        if len(calls) > 20:
            raise RuntimeError("disk on fire")
        return real(*a, **kw)

    monkeypatch.setattr(runner, "sample_row", failing)
    with pytest.raises(RuntimeError, match="disk on fire"):
        _run(judge, tmp_path / "new", ["demo-turn"], limit=4)
    assert not (tmp_path / "new").exists()
    # into a folder holding an earlier run: that run's files stay as they were, no temporary file is left
    monkeypatch.setattr(runner, "sample_row", real)
    _run(judge, tmp_path / "old", ["demo-turn"], limit=4)
    before = {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()}
    calls.clear()
    monkeypatch.setattr(runner, "sample_row", failing)
    with pytest.raises(RuntimeError):
        _run(judge, tmp_path / "old", ["demo-turn"], limit=4)
    assert {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()} == before


def test_items_stream_in_the_order_and_selection_of_load_dataset():
    handle = prepare_dataset("demo", show_progress=False)
    config = handle.configs[0]
    every = load_dataset(handle.location, config, split="test").to_list()
    for languages, limit in ((None, None), (["de", "ja"], None), (None, 3), (["zh", "en"], 2)):
        want = [r for r in every if languages is None or r["language"] in languages]
        if limit is not None:
            seen: dict[str, int] = {}
            want = [
                r
                for r in want
                if (seen.__setitem__(r["language"], seen.get(r["language"], 0) + 1) or seen[r["language"]])
                <= limit
            ]
        batches = list(iter_items(handle, config, languages=languages, limit=limit, batch_size=4))
        assert [r for b in batches for r in b] == want
        assert all(len(b) <= 4 for b in batches)


def test_task_frame_reads_one_task_without_the_heavy_columns(judge, tmp_path):
    out = _run(judge, tmp_path / "r")
    path = out.output_dir / "samples.parquet"
    whole = pd.read_parquet(path)
    frame = task_frame(path, "demo-dialogue")
    assert list(frame.index) == list(whole.index[whole["task"] == "demo-dialogue"])  # positions in the file
    assert not set(HEAVY_COLUMNS) & set(frame.columns) and {"score", "human_rating", "item_id"} <= set(
        frame.columns
    )
    pd.testing.assert_series_equal(frame["score"], whole.loc[frame.index, "score"])
    assert task_frame(path, "no-such-task").empty
