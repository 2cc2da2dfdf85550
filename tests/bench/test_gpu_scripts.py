"""The GPU bench scripts take the data folder and the output folder on the command line and refuse a
bad invocation with one clear error before they run anything; the SmolLM2 report reads what a run
wrote under its --out folder."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ("bench/e5/gpu_full.sh", "bench/smollm2/gpu.sh")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", script, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bad_invocation_is_one_error_and_the_usage(script, tmp_path):
    out = tmp_path / "out"
    usage = f"bash {script} --source DIR --out DIR"  # from the script's header
    cases = [
        ((), ["--source DIR and --out DIR are required", usage]),
        (("--out", str(out)), ["--source DIR and --out DIR are required", usage]),
        (("--source", str(tmp_path), "--out", str(out), "--bogus"), ["unknown argument '--bogus'", usage]),
        (
            ("--source", str(tmp_path / "missing"), "--out", str(out)),
            [f"--source {tmp_path / 'missing'}: no such folder"],
        ),
        (("--source", str(tmp_path), "--out", str(out)), [f"--source {tmp_path} has no xdial-eval"]),
    ]
    for args, messages in cases:
        res = _run(script, *args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        for message in messages:
            assert message in res.stderr, (args, res.stderr)
    assert not out.exists(), "nothing is written before the arguments are checked"


def test_the_e5_script_checks_its_turn_configuration(tmp_path):
    for sub in ("xdial-eval", "topical-chat"):
        (tmp_path / sub).mkdir()
    res = _run(
        "bench/e5/gpu_full.sh", "--source", str(tmp_path), "--out", str(tmp_path / "o"), "--turn-config", "x"
    )
    assert res.returncode == 2 and "no finetune/configs/x.yaml" in res.stderr
    res = _run(
        "bench/e5/gpu_full.sh", "--source", str(tmp_path), "--out", str(tmp_path / "o"), "--only", "dialogue"
    )
    assert res.returncode == 2 and "--only takes 'turn'" in res.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_header_documents_the_generic_interface(script):
    head = (ROOT / script).read_text(encoding="utf-8").split("set -uo pipefail", 1)[0]
    assert "--source DIR --out DIR" in head and "SMOKE=1" in head and "CUDA" in head


def test_the_smollm2_report_reads_an_out_folder(tmp_path):
    from bench.smollm2.gpu_report import Collected

    out, extra = tmp_path / "out", tmp_path / "extra"
    (out / "xdial-dialogue").mkdir(parents=True)
    (out / "xdial-dialogue" / "results.json").write_text(json.dumps({"a": 1}), "utf-8")
    (out / "parts.txt").write_text("xdial rc=0 12s\n", "utf-8")
    (extra / "ft-dial").mkdir(parents=True)
    (extra / "ft-dial" / "results.json").write_text(json.dumps({"b": 2}), "utf-8")
    files = Collected(out, extra)
    assert files.json("llm/xdial-dialogue/results.json") == {"a": 1}
    assert files.json("extra/ft-dial/results.json") == {"b": 2}
    assert files.text("llm/parts.txt") == "xdial rc=0 12s\n"
    assert files.json("llm/missing.json") is None and files.text("extra/missing.txt") == ""
    assert Collected(out).json("extra/ft-dial/results.json") is None  # no --extra folder given
    with pytest.raises(FileNotFoundError):
        files.parquet("llm/xdial-limit20/samples.parquet")
