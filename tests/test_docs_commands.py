"""Every `harness …` command that README.md and docs/*.md show, read from the Markdown when the test
runs: each parses through the CLI (an unknown command or option fails), the tasks, judges,
mappings and registered datasets it names resolve, a task named with a dataset built by a known
builder or mapping can read one of its configs, and the cheap offline ones (demo data, packaged
encoders, ``--limit``) run in a temporary ``DIALEVAL_HOME``. The others are listed by the rule
that keeps them from running here (models, servers, benchmark files, training) with the reason."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

try:  # typer >= 0.20 parses with its own copy of click
    from typer._click import ClickException
except ImportError:  # pragma: no cover - older typer on click itself
    from click import ClickException

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Why a shown command is not executed here: the first rule whose pattern matches the command.
NOT_EXECUTED: list[tuple[str, str]] = [
    (
        r"(^|[\s:+\[=\"])(hf|vllm|openai):",
        "an LLM judge: hf loads model weights (a GPU for the 7B+ models), vllm/openai need a server or an API key",
    ),
    (r"--executor ray", "starts a Ray cluster of workers"),
    (r"\bfinetune\b", "trains a model (minutes on CPU to hours on a GPU)"),
    (r"models materialize", "writes hundreds of MB of packaged model weights (~1 min)"),
    (r"datasets build medal", "runs the MEDAL generation pipeline (LLM calls) or needs its config"),
    (
        r"--source\s+(\.\./shared|~|DIR|hub:|ratings|\S*/data)",
        "reads benchmark files users bring (not in the repository)",
    ),
    (r"evaluator:", "loads a fine-tuned evaluator (covered by tests/finetune)"),
    (
        r"<|\bpath/to\b|\bDIR\b|judge\.jsonl|pairs\.jsonl|held_out\.jsonl|medal\.yaml|paper\.yaml|\.\.\.|…",
        "a placeholder for the user's own files, runs or models",
    ),
    (r"\bruns/(a|b|x)\b|runs/<|\bruns/\s|\bruns/$|reports/", "reads runs the user made before"),
    (
        r"@1\.1\.0|upheld@|xdial-eval@|medal@|selfsup-en@|comperdial@|dstc11-track4@",
        "a dataset version built from benchmark files users bring",
    ),
    (r"^harness view\b(?!.*--bundle)", "starts a web server"),
    (
        r"^harness annotate serve\b|^harness annotate start\b(?!.*--no-serve)",
        "starts the annotators' web server (runs until Ctrl-C)",
    ),
    (r"^harness annotate (status|export)\b|demo-relevance@", "needs the labels annotators give"),
    (
        r"datasets/xdial-eval|--dataset dstc11-common",
        "a dataset directory built from benchmark files users bring",
    ),
]
#: Commands executed here get these options appended to bound their runtime.
BOUNDED = {"run": ["--limit", "3"]}


@dataclass
class Shown:
    file: str
    line: int
    text: str

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text, comments=True)[1:]

    @property
    def code(self) -> str:
        """The command without its trailing comment."""
        return " ".join(["harness", *self.argv])

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


def shown_commands() -> list[Shown]:
    """`harness …` lines of the bash/sh/console blocks of README.md and docs/*.md (continuation
    backslashes joined, ``$`` prompts dropped)."""
    out: list[Shown] = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for block in re.finditer(r"^```(?:bash|sh|shell|console)\n(.*?)^```", text, re.S | re.M):
            start = text[: block.start(1)].count("\n") + 1
            lines = block.group(1).split("\n")
            k = 0
            while k < len(lines):
                first, line = k, lines[k]
                while line.rstrip().endswith("\\") and k + 1 < len(lines):
                    k += 1
                    line = line.rstrip()[:-1] + " " + lines[k].strip()
                k += 1
                cmd = line.strip().removeprefix("$ ")
                if cmd.startswith("harness ") or cmd == "harness":
                    out.append(Shown(path.relative_to(ROOT).as_posix(), start + first, cmd))
    return out


COMMANDS = shown_commands()


def reason_not_executed(cmd: Shown) -> str | None:
    for pattern, why in NOT_EXECUTED:
        if re.search(pattern, cmd.code):
            return why
    return None


def _cli() -> typer.core.TyperCommand | TyperGroup:
    from harness.cli.app import app

    return typer.main.get_command(app)


def parse(argv: list[str]) -> tuple[list[str], dict[str, object]]:
    """Parse ``argv`` through the click tree without running it: (command path, parameters)."""
    cmd, names = _cli(), []
    ctx = cmd.make_context("harness", list(argv))
    while isinstance(cmd, TyperGroup):
        rest = [*ctx._protected_args, *ctx.args]
        name, sub, rest = cmd.resolve_command(ctx, rest)
        assert sub is not None, f"unknown command {name!r}"
        names.append(str(name))
        cmd = sub
        ctx = sub.make_context(str(name), list(rest), parent=ctx)
    return names, dict(ctx.params)


def test_the_docs_show_commands():
    assert len(COMMANDS) > 20 and any(c.file == "README.md" for c in COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: f"{c.file}:{c.line}")
def test_command_parses_and_its_names_resolve(cmd: Shown):
    try:
        names, params = parse(cmd.argv)
    except ClickException as e:
        pytest.fail(f"{cmd}\n  does not parse: {e.format_message()}")
    check_names(cmd, names, params)


def check_names(cmd: Shown, names: list[str], params: dict) -> None:
    from dataset_builders.importer.mapping import MappingSpec
    from harness.spec import parse_spec
    from harness.tasks import resolve_tasks

    tasks = params.get("task") or params.get("tasks")
    specs = resolve_tasks(tasks if isinstance(tasks, list | tuple) else [tasks]) if tasks else []
    judges = params.get("judge")
    for judge in judges if isinstance(judges, list | tuple) else [judges] if judges else []:
        if not str(judge).startswith("@"):
            parse_spec(str(judge))  # raises on an unknown kind or a malformed spec
    mapping = params.get("mapping")
    if mapping and not str(mapping).endswith((".yaml", ".yml")):
        MappingSpec.load(str(mapping))
    dataset = params.get("dataset")
    if specs and dataset:
        check_pairing(cmd, specs, str(dataset))


def _mapping_configs(name: str) -> dict[str, str] | None:
    from dataset_builders.importer.mapping import MAPPINGS_DIR, MappingSpec

    if not (MAPPINGS_DIR / f"{name}.yaml").is_file():
        return None
    spec, _ = MappingSpec.load(name)
    return {c.name: c.level for c in spec.configs}


def check_pairing(cmd: Shown, specs: list, dataset: str) -> None:
    """A registered version of a dataset imported with a shipped mapping must hold a config of the
    task at the task's level (the check `harness run` makes before it starts)."""
    name = dataset.split("@")[0] if re.match(r"^[\w.-]+@\d+\.\d+\.\d+$", dataset) else None
    configs = _mapping_configs(name) if name else None
    if configs is None:
        return  # a directory / builder version: the task's own builder decides (run-time check)
    for spec in specs:
        level = spec.row_level
        ok = [c for c, lv in configs.items() if lv == level and (spec.any_config or c in spec.configs)]
        assert ok, (
            f"{cmd}\n  task {spec.name!r} reads {list(spec.configs)} at {level} level; "
            f"{dataset} (mapping {name!r}) has {configs}"
        )


EXECUTED = [c for c in COMMANDS if reason_not_executed(c) is None]


def test_every_command_is_executed_or_has_a_reason():
    for cmd in COMMANDS:
        assert cmd in EXECUTED or reason_not_executed(cmd), cmd
    assert EXECUTED, "no shown command runs offline; the rules above are too broad"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("docs-home")


@pytest.mark.parametrize("cmd", EXECUTED, ids=lambda c: f"{c.file}:{c.line}")
def test_offline_command_runs(cmd: Shown, home: Path, monkeypatch):
    from harness.cli.app import app

    monkeypatch.setenv("DIALEVAL_HOME", str(home))
    monkeypatch.setenv("DIALEVAL_REGISTRY", str(home / "registry"))
    monkeypatch.chdir(home)
    argv = cmd.argv
    names, _ = parse(argv)
    if re.search(r"demo@", cmd.code) and not (home / "registry" / "demo").exists():
        r = CliRunner().invoke(app, ["datasets", "build", "demo"])
        assert r.exit_code == 0, r.output
    argv = [*argv, *BOUNDED.get(names[0], [])]
    if names == ["datasets", "build"] and (home / "registry" / argv[2]).exists():
        argv = [*argv, "--bump", "patch"]  # shown twice: the second build is the next version
    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 0, (
        f"{cmd}\n  ran as harness {shlex.join(argv)}: exit {r.exit_code}\n{r.output[-3000:]}"
    )
