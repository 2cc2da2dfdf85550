"""The README's two fresh-machine commands and CI must not drift apart, and CI must hold the numeric
libraries to their AVX2 kernels."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _setup_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", section, flags=re.S)


def _ci() -> str:
    return (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_exactly_two_setup_commands():
    cmds = _setup_commands()
    assert len(cmds) == 2, cmds
    install_and_run, test = cmds
    assert "\n" not in install_and_run and "\n" not in test
    assert "-c constraints.txt" in install_and_run and install_and_run.endswith("harness run")
    # the system packages first: python3-venv may be what is missing
    assert test.startswith("bash scripts/provision_tests.sh && python3 -m venv .venv && ")
    assert "-c constraints.txt" in test and test.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command():
    m = re.search(r"^TEST_COMMAND='(.*)'$", _ci(), flags=re.M)
    assert m, "TEST_COMMAND not found in .ci/run"
    assert m.group(1) == _setup_commands()[1]
    assert "-eq 5" in _ci()  # pytest's "no tests collected" is handled


def test_ci_provisions_the_vllm_tier_before_the_tests():
    ci = _ci()
    assert ci.index("bash scripts/provision_vllm_cpu.sh || exit 1") < ci.index('bash -c "$TEST_COMMAND"')


def _exports() -> dict[str, str]:
    return dict(re.findall(r'^export (\w+)="?([^"\n#]*?)"?\s*(?:#.*)?$', _ci(), flags=re.M))


def test_ci_runs_the_avx2_kernels_and_leaves_openblas_alone():
    env = _exports()
    assert env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert not [k for k in env if k.startswith("OPENBLAS")]


def test_ci_disables_every_avx512_target_of_the_installed_numpy():
    """NumPy renames its dispatch targets between releases (AVX512F/AVX512_SKX became X86_V4); a
    name it does not know is ignored with a warning, and the AVX-512 kernels would stay on."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    disabled = set(_exports()["NPY_DISABLE_CPU_FEATURES"].split())
    avx512 = {f for f in __cpu_dispatch__ if f == "X86_V4" or f.startswith("AVX512")}
    assert avx512 and disabled == avx512, (disabled, avx512, np.__version__)
    probe = (
        "from numpy._core._multiarray_umath import __cpu_features__ as f, __cpu_dispatch__ as d; "
        "print(sorted(k for k in d if f[k]))"
    )
    env = {"NPY_DISABLE_CPU_FEATURES": " ".join(sorted(disabled)), "PATH": ""}
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert r.stderr == "" and not avx512 & set(ast.literal_eval(r.stdout)), (r.stdout, r.stderr)


def test_pytorch_takes_its_avx2_kernels_under_ci():
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    env = {"ATEN_CPU_CAPABILITY": _exports()["ATEN_CPU_CAPABILITY"], "PATH": ""}
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert r.stdout.strip() in ("AVX2", "DEFAULT"), r.stdout  # DEFAULT: a CPU without AVX2 at all


def test_constraints_pin_cpu_torch():
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text().split()
