"""Every command CONTRIBUTING.md (and the README's tour) shows exists: a ``harness …`` line names
subcommands and options the CLI has, a script or test path names a file or folder of the repository,
a pytest marker is declared, and every relative link points at a file."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperGroup

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("CONTRIBUTING.md", "README.md")
#: words that stand for a value the reader chooses (not a path of the repository)
PLACEHOLDER = re.compile(r"[<>…]|\b(?:DIR|OUT|RUN|FILE|NAME|SPEC)\b|\.\.\.")
REPO_TOPS = (
    "harness",
    "dataset_builders",
    "tasks",
    "finetune",
    "tests",
    "bench",
    "scripts",
    "docs",
    "model_cards",
    ".ci",
)


def _command() -> TyperGroup:
    from harness.cli.app import app

    cmd = typer.main.get_command(app)
    assert isinstance(cmd, TyperGroup)
    return cmd


def shell_lines(doc: str) -> list[str]:
    """The command lines of the document's ``bash`` blocks (continuations joined, comments dropped)
    and its inline code spans that start with ``harness``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```bash\n(.*?)\n```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if line:
                lines.append(line)
    lines += [m for m in re.findall(r"`([^`\n]+)`", text) if m.startswith("harness ")]
    return lines


def commands(line: str) -> list[list[str]]:
    """The simple commands of a line (split on ``&&``, ``||``, ``;``, ``|``), as words, without
    leading ``VAR=value`` assignments."""
    out = []
    for part in re.split(r"&&|\|\||;|\|", line):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words.pop(0)
        if words:
            out.append(words)
    return out


def check_harness(words: list[str], root: TyperGroup) -> list[str]:
    """Problems of one ``harness …`` command: unknown subcommands or options."""
    problems: list[str] = []
    cmd: Any = root  # a typer (vendored click) command or group
    path = ["harness"]
    for w in words[1:]:
        if w.startswith("-"):
            name = w.split("=", 1)[0]
            known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
            if name not in known and not PLACEHOLDER.search(name):
                problems.append(f"{' '.join(path)}: no option {name}")
            continue
        if isinstance(cmd, TyperGroup):
            if PLACEHOLDER.search(w) or "|" in w:
                choices = [c for c in w.split("|") if not PLACEHOLDER.search(c)]
                problems += [f"{' '.join(path)}: no subcommand {c}" for c in choices if c not in cmd.commands]
                break
            sub = cmd.commands.get(w)
            if sub is None:
                problems.append(f"{' '.join(path)}: no subcommand {w}")
                break
            cmd, path = sub, [*path, w]
    return problems


def _markers() -> set[str]:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {m.split(":", 1)[0].strip() for m in conf["tool"]["pytest"]["ini_options"]["markers"]}


def check_paths(words: list[str]) -> list[str]:
    """Problems of one command's repository paths (scripts, tests, configs) and pytest markers."""
    problems = []
    after_pytest = words.index("pytest") + 1 if "pytest" in words else len(words)
    for i, w in enumerate(words):
        if i > after_pytest and words[i - 1] == "-m":  # pytest's -m: a marker expression
            for marker in re.findall(r"[a-z_]+", w):
                if marker not in {"not", "and", "or"} and marker not in _markers():
                    problems.append(f"pytest marker {marker!r} is not declared in pyproject.toml")
            continue
        path = w.split("::", 1)[0].split("=", 1)[-1]
        if PLACEHOLDER.search(path) or path.startswith(("/", "~", "$", "http", "../")):
            continue
        if (
            path.split("/", 1)[0] in REPO_TOPS
            and "/" in path
            or path in ("constraints.txt", "pyproject.toml")
        ):
            if not (ROOT / path).exists():
                problems.append(f"{path}: no such file or folder in the repository")
    return problems


def test_the_command_parser_reads_commands_options_and_paths():
    """The checker itself: it finds a subcommand, an option and a path that do not exist."""
    root = _command()
    assert check_harness(["harness", "datasets", "build", "demo", "--bump", "minor"], root) == []
    assert check_harness(["harness", "models", "materialize|ls"], root) == []
    assert check_harness(["harness", "datasets", "frobnicate"], root) == [
        "harness datasets: no subcommand frobnicate"
    ]
    assert check_harness(["harness", "run", "--no-such-option"], root) == [
        "harness run: no option --no-such-option"
    ]
    assert check_paths(["python", "bench/no_such_bench.py"]) == [
        "bench/no_such_bench.py: no such file or folder in the repository"
    ]
    assert check_paths(["bash", "bench/e5/gpu_full.sh", "--source", "DIR"]) == []
    assert check_paths([".venv/bin/python", "-m", "pytest", "-m", "not slow"]) == []
    assert check_paths([".venv/bin/python", "-m", "pytest", "-m", "gpu_only"]) != []
    assert commands("A=1 bash x.sh --out OUT && python y.py") == [
        ["bash", "x.sh", "--out", "OUT"],
        ["python", "y.py"],
    ]


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_the_document_shows_exists(doc):
    root = _command()
    lines = shell_lines(doc)
    assert lines, f"{doc} shows no command"
    problems = []
    for line in lines:
        for words in commands(line):
            if words[0] == "harness" or words[0].endswith("/harness"):
                problems += [f"{line}: {p}" for p in check_harness(words, root)]
            problems += [f"{line}: {p}" for p in check_paths(words)]
    assert not problems, f"{doc}:\n" + "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS)
def test_every_relative_link_of_the_document_exists(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://", "#", "mailto:")):
            continue
        if not (ROOT / target.split("#", 1)[0]).exists():
            missing.append(target)
    assert not missing, f"{doc}: links to missing files: {missing}"


def test_contributing_documents_every_plug_in_kind_and_the_version_policy():
    """The five extension points (docs/architecture.md) each have a row, and the version policy and
    changelog are described."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for group in ("builders", "tasks", "judges", "backends", "scorers"):
        assert f"`dialeval_harness.{group}`" in text, group
    for word in ("Patch", "Minor", "Major", "CHANGELOG.md", "docs/architecture.md"):
        assert word in text, word
    assert (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").startswith("# Changelog")
