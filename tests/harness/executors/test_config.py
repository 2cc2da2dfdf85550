"""The executor options without a cluster: validation, and a clear error when Ray is missing."""

import sys

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.executors import ExecutorConfig, RayNotInstalledError, executor_scope
from harness.spec import parse_spec


def test_options_are_validated_with_the_flag_named():
    with pytest.raises(ValueError, match="--executor must be one of local, ray"):
        ExecutorConfig("dask")
    with pytest.raises(ValueError, match="add --executor ray"):
        ExecutorConfig("local", workers=2)
    with pytest.raises(ValueError, match="--workers must be >= 1"):
        ExecutorConfig("ray", workers=0)
    ex = ExecutorConfig("ray", workers=4, gpus_per_worker=1)
    assert ex.items_per_call(8) == 32 and ExecutorConfig().items_per_call(8) == 8
    # the judge spec's num_gpus / num_cpus win over the flags
    assert ex.resources(parse_spec("hf:m,num_gpus=2,num_cpus=4")) == {"num_cpus": 4.0, "num_gpus": 2.0}
    assert ex.resources(parse_spec("hf:m")) == {"num_cpus": 1.0, "num_gpus": 1.0}
    with pytest.raises(
        ValueError, match="tensor_parallel_size=2 needs 2 GPUs per worker.*--gpus-per-worker 2"
    ):
        ex.resources(parse_spec("vllm:m,tensor_parallel_size=2"))


def test_executor_options_never_reach_a_local_backend(tmp_path):
    from harness.backends.base import create_backend

    f = tmp_path / "r.jsonl"
    f.write_text('{"default": {"text": "Yes"}}\n', encoding="utf-8")
    plain = create_backend(parse_spec(f"replay:{f}"))
    sized = create_backend(parse_spec(f"replay:{f},num_gpus=1,num_cpus=2"))
    assert sized.options == {} and sized.identity() == plain.identity()  # same cache keys


def test_without_ray_the_error_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(RayNotInstalledError, match=r"dialeval-harness\[ray\]"):
        with executor_scope(ExecutorConfig("ray", workers=2)):
            pass
    with executor_scope(ExecutorConfig()) as scope:  # local never imports ray
        assert scope.describe() == {"kind": "local"}
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--executor",
            "ray",
            "--workers",
            "2",
            "-q",
            "--no-cache",
            "--judge",
            "replay:nope.jsonl",
            "--output",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 2 and "pip install 'dialeval-harness[ray]'" in r.output
    r = CliRunner().invoke(app, ["run", "--workers", "2", "-q", "--output", str(tmp_path / "o")])
    assert r.exit_code == 2 and "--executor ray" in r.output
