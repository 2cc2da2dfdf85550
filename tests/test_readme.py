"""The README's two fresh-machine commands and CI must not drift apart."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setup_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", section, flags=re.S)


def test_exactly_two_setup_commands():
    cmds = _setup_commands()
    assert len(cmds) == 2, cmds
    install_and_run, test = cmds
    assert "\n" not in install_and_run and "\n" not in test
    assert "-c constraints.txt" in install_and_run and install_and_run.endswith("harness run")
    assert "pytest" in test


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    m = re.search(r"^TEST_COMMAND='(.*)'$", ci, flags=re.M)
    assert m, "TEST_COMMAND not found in .ci/run"
    assert m.group(1) == _setup_commands()[1]
    assert "-eq 5" in ci  # pytest's "no tests collected" is handled


def test_constraints_pin_cpu_torch():
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text().split()
