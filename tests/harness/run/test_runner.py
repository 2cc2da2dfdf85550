"""End-to-end runs through `harness.run.runner.run` on the embedded demo benchmark."""

import json
import os
import subprocess
import sys

import pytest
from datasets import load_dataset
from scipy import stats

from harness.run.results import SCHEMA_VERSION, load_results
from harness.run.runner import RunConfig, run
from tests.fixtures.kill_resume import kill_after_rows
from tests.fixtures.tolerances import assert_close_tree

REPLAY_RULES = [
    # one scripted parse failure: a response without label log-probs
    {
        "match": "Dialogue Response:\\n[^\\n]*(lemon|limón|Zitrone|citron|レモン|柠檬|레몬|नींबू|ليمون|лимон)",
        "response": {"text": "Maybe"},
    },
    {"default": {"hashed_p_yes": True}},
]


@pytest.fixture
def replay_file(tmp_path):
    f = tmp_path / "judge.jsonl"
    f.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in REPLAY_RULES) + "\n", encoding="utf-8")
    return f


def test_replay_run_writes_versioned_results_and_samples(tmp_path, replay_file):
    out = run(
        RunConfig(
            judge=f"replay:{replay_file}",
            tasks=["demo"],
            output_dir=tmp_path / "run",
            n_bootstrap=200,
            show_progress=False,
        )
    )
    res = load_results(tmp_path / "run")
    assert res.schema_version == SCHEMA_VERSION == "3.0" and res.migrated_from is None
    for key in (
        "harness",
        "run",
        "judge",
        "datasets",
        "tasks",
        "results",
        "usage",
        "cache",
        "timings",
        "environment",
        "samples",
    ):
        assert getattr(res, key), key
    assert res.harness.git_sha and res.harness.version
    assert res.judge.role == "judge" and res.judge.identity["backend"] == "replay"
    assert res.judge.decoding["demo-turn"]["temperature"] == 0.0
    assert res.datasets["demo-turn"].fingerprint
    assert res.tasks["demo-turn"].templates["en"]["hash"]  # a field TaskInfo keeps as is
    assert res.environment["libraries"]["torch"]
    assert set(res.results) == {"demo-turn", "demo-dialogue"}
    langs = [k for k in res.results["demo-turn"] if k != "all"]
    assert langs == ["en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru"]

    # the scripted parse failure (item t03 mentions lemon in every language) is counted, not scored 0
    turn = res.results["demo-turn"]
    assert turn["en"]["pearson"].parse_failures == 1 and turn["all"]["pearson"].parse_failures == 10
    assert turn["en"]["pearson"].n == 15
    assert res.samples.rows == 240 and res.samples.file == "samples.parquet"
    samples = load_dataset("parquet", data_files=str(tmp_path / "run" / "samples.parquet"), split="train")
    assert len(samples) == 160 + 80
    bad = samples.filter(lambda r: r["parse_status"] != "ok")
    assert len(bad) == 10 and all(s is None for s in bad["score"]) and set(bad["raw_output"]) == {"Maybe"}
    assert set(bad["parse_status"]) == {"missing_logprobs"}

    # per-dataset correlations are scipy's over the saved samples
    df = out.samples
    en = df[(df.task == "demo-turn") & (df.language == "en") & df.score.notna()]
    ref = stats.pearsonr(en.score, en.human_rating)
    entry = turn["en"]["pearson"].per_dataset["demo-turn"]
    assert entry.value == pytest.approx(ref.statistic) and entry.p_value == pytest.approx(ref.pvalue)
    assert res.cache.misses == 240 and res.usage["backend"]["requests"] == 240


def test_warm_rerun_makes_no_backend_calls_and_no_cache_option(tmp_path, replay_file):
    cfg = dict(judge=f"replay:{replay_file}", tasks=["demo-turn"], n_bootstrap=100, show_progress=False)
    a = run(RunConfig(**cfg, output_dir=tmp_path / "a"))
    b = run(RunConfig(**cfg, output_dir=tmp_path / "b"))
    assert a.results["usage"]["backend"]["requests"] == 160
    assert b.results["usage"]["backend"]["requests"] == 0
    assert b.results["cache"]["hits"] == 160 and b.results["cache"]["misses"] == 0
    assert_close_tree(b.results["results"], a.results["results"])
    assert b.samples["cached"].all()
    c = run(RunConfig(**cfg, output_dir=tmp_path / "c", use_cache=False))
    assert c.results["usage"]["backend"]["requests"] == 160 and c.results["cache"]["hits"] == 0
    assert c.results["cache"]["enabled"] is False


def test_language_and_limit_filters(tmp_path, replay_file):
    out = run(
        RunConfig(
            judge=f"replay:{replay_file}",
            tasks=["demo-turn"],
            languages=["de", "japanese"],
            limit=5,
            n_bootstrap=0,
            output_dir=tmp_path / "r",
            show_progress=False,
        )
    )
    assert sorted(out.samples.language.unique()) == ["de", "ja"]
    assert len(out.samples) == 10
    assert out.results["results"]["demo-turn"]["de"]["pearson"]["ci"] is None  # no bootstrap requested


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(tasks=["no-such-task"]), "unknown task"),
        (dict(languages=["xx"]), "unknown language"),
        (dict(judge="gguf:x"), "unknown judge kind"),
        (dict(batch_size=0), "batch-size"),
        (dict(tasks=["demo", "xdial-eval"], source="/tmp"), "apply to one dataset"),
    ],
)
def test_bad_configuration_is_a_clear_error(tmp_path, kwargs, match):
    with pytest.raises((ValueError, KeyError), match=match):
        run(RunConfig(**{"output_dir": tmp_path / "x", "show_progress": False, **kwargs}))


def test_tiny_hf_judge_end_to_end(tmp_path, tiny_qwen2):
    out = run(
        RunConfig(
            judge=f"hf:{tiny_qwen2},batch_size=8",
            tasks=["demo"],
            limit=3,
            n_bootstrap=50,
            output_dir=tmp_path / "hf",
            show_progress=False,
        )
    )
    df = out.samples
    assert len(df) == 2 * 10 * 3
    assert (df.parse_status == "ok").all()
    assert df.score.between(0, 1).all() and df.score.nunique() > 10
    assert all(json.loads(e)["choice_logprobs"].keys() == {"Yes", "No"} for e in df.extra)
    assert out.results["judge"]["identity"]["backend"] == "hf"
    assert out.results["judge"]["decoding"]["demo-turn"]["max_tokens"] == 1
    assert out.results["usage"]["prompt_tokens"] > 0
    for task in ("demo-turn", "demo-dialogue"):
        assert len([k for k in out.results["results"][task] if k != "all"]) == 10


def test_embedded_default_judge_on_demo(tmp_path):
    out = run(
        RunConfig(tasks=["demo"], limit=4, n_bootstrap=50, output_dir=tmp_path / "e", show_progress=False)
    )
    from harness.judges import DEFAULT_JUDGE

    # the multilingual default: packaged E5 for every language, the English MiniLM for en
    assert out.results["judge"]["spec"] == DEFAULT_JUDGE
    routes = out.results["judge"]["identity"]["routes"]
    assert routes["en"]["fingerprint"] and routes["*"]["weights_sha256"]
    assert (out.samples.parse_status == "ok").all()
    assert out.samples.score.between(-1, 1).all()


def test_killed_run_resumes_without_repeating_calls(tmp_path, replay_file):
    env = {**os.environ, "DIALEVAL_HOME": str(tmp_path / "home")}
    cache = tmp_path / "cache.sqlite"
    args = [
        sys.executable,
        "-m",
        "harness.cli",
        "run",
        "--judge",
        f"replay:{replay_file},delay=0.04",
        "--task",
        "demo-turn",
        "--limit",
        "8",
        "--batch-size",
        "4",
        "--bootstrap",
        "100",
        "--quiet",
        "--cache",
        str(cache),
    ]
    done_before = kill_after_rows([*args, "--output", str(tmp_path / "killed")], env, cache, 20, 120)
    assert 20 <= done_before < 80, done_before
    assert not (tmp_path / "killed" / "results.json").exists()

    subprocess.run(
        [*args, "--output", str(tmp_path / "resumed")],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    resumed = load_results(tmp_path / "resumed")
    assert resumed.usage["backend"]["requests"] == 80 - done_before  # zero repeated calls
    assert resumed.cache.hits == done_before

    # identical results to an uninterrupted run with a fresh cache
    subprocess.run(
        [*args[:-1], str(tmp_path / "fresh.sqlite"), "--output", str(tmp_path / "fresh")],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    fresh = load_results(tmp_path / "fresh")
    assert fresh.usage["backend"]["requests"] == 80
    assert_close_tree(resumed.results, fresh.results)
    a = load_dataset("parquet", data_files=str(tmp_path / "resumed" / "samples.parquet"), split="train")
    b = load_dataset("parquet", data_files=str(tmp_path / "fresh" / "samples.parquet"), split="train")
    assert a["id"] == b["id"]
    assert_close_tree(a["score"], b["score"])  # None (parse failure) compares equal too


def test_url_credentials_never_reach_results(tmp_path, replay_file):
    from harness.provenance import redact

    assert (
        redact("openai:m,base_url=https://bob:s3cret@host:8000/v1")
        == "openai:m,base_url=https://***@host:8000/v1"
    )
    out = run(
        RunConfig(
            judge=f"replay:{replay_file},note=http://u:s3cret@x",
            tasks=["demo-turn"],
            limit=1,
            n_bootstrap=0,
            output_dir=tmp_path / "r",
            show_progress=False,
        )
    )
    text = (tmp_path / "r" / "results.json").read_text() + "".join(out.samples.judge)
    assert "s3cret" not in text and "***@x" in text


def test_run_on_a_prebuilt_dataset_directory(tmp_path, replay_file):
    from harness.data.builders import build_dataset

    built = build_dataset("demo", None, tmp_path / "demo-ds", show_progress=False)
    out = run(
        RunConfig(
            judge=f"replay:{replay_file}",
            tasks=["demo-dialogue"],
            dataset=str(tmp_path / "demo-ds"),
            n_bootstrap=0,
            output_dir=tmp_path / "r",
            show_progress=False,
        )
    )
    ds = out.results["datasets"]["demo-dialogue"]
    assert ds["location"] == str((tmp_path / "demo-ds").resolve())
    assert ds["fingerprint"] == built.fingerprint and ds["used_configs"] == ["demo-dial"]
    assert len(out.samples) == 80
