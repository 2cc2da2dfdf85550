"""The repository is the product: its README, docs, code, comments, bench output and tests speak of
the software and its users, never of how it was developed. No tracked file names the machines or
tooling the project was built with, refers to its development work items by number, or tells of a
development session; a GPU result says which GPU, precision, date and command instead. Exempt:
CHANGELOG.md (history by design) and this file (the phrase list and the sentences it must catch).

Each phrase is a regular expression matched line by line; :data:`ALLOWED` lists, with the reason, the
few lines where such words mean something else. To allow a new line, add it there with its reason.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: CHANGELOG.md: history by design; this file: the phrase list itself and the sentences it must catch
EXEMPT_FILES = {"CHANGELOG.md", "tests/test_product_language.py"}


class Phrase(NamedTuple):
    pattern: re.Pattern[str]
    why: str


def _p(regex: str, why: str, flags: int = re.IGNORECASE) -> Phrase:
    return Phrase(re.compile(regex, flags), why)


PHRASES: dict[str, Phrase] = {
    "lent": _p(
        r"\blent\b|\blends? (?:a |an |the )?(?:GPU|H200|machine|device)", "a machine lent for development"
    ),
    "lease": _p(r"\blease\b", "a machine lease"),
    "this task": _p(r"\bthis task\b", "the development work item (a harness task is 'the task')"),
    "session": _p(
        r"\b(?:this|that|first|second|third|earlier|later|previous|next|whole|development) session\b"
        r"|\bin the session\b",
        "a development session",
    ),
    "issue number": _p(r"\bissues? #?\d+", "a development work item by number"),
    "the issue's": _p(
        r"\bthe issue's (?:size|goals?|last step)|\bstep \d+[a-z]? of the issue\b", "a work item"
    ),
    "device tool": _p(
        r"\bdevice tool\b|`device` tool|\bcan_start_another\b|\bbudget_left", "the device tool"
    ),
    "staging": _p(
        r"\bdevice_stage\b|\bstage_remote\b|\bgpu_runs\.txt\b|(?<![\w.])\.gpu/|/tmp/site\b|\bSTAGED\b|shared/tools/",
        "staging files for a remote machine",
    ),
    "workplace": _p(
        r"\bworkplace\b|\bcoordinator\b|\bHELPER-RULES\b|\bother engineers\b", "the development setting"
    ),
    "scratch runs": _p(r"\bscratch (?:runs?|experiments?)\b", "unkept development experiments"),
    "this branch": _p(r"\bthis branch\b", "a development branch"),
}


class Allowed(NamedTuple):
    path: str
    phrase: str
    line_contains: str
    why: str


#: Lines where a phrase's words mean something else.
ALLOWED: list[Allowed] = [
    Allowed(
        "harness/meta/panel.py",
        "issue number",
        "inspect_ai issue #4955",
        "cites a third-party repository's issue tracker",
    ),
    *(
        Allowed(
            path,
            "this task",
            "In this task, you will be shown",
            "the MEEP paper's prompt text, quoted verbatim",
        )
        for path in (
            "tasks/meep/templates.py",
            "tests/fixtures/meep_replay.py",
            "tests/tasks/meep/test_meep_tasks.py",
        )
    ),
]


def tracked_files() -> list[Path]:
    """``git ls-files``; outside a git checkout (an unpacked source tree), every file but the usual
    build, cache and environment folders."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout
        return [ROOT / p for p in out.decode("utf-8").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "__pycache__", "node_modules", "build", "dist", "runs", ".mypy_cache"}
        return [
            p
            for p in ROOT.rglob("*")
            if p.is_file() and not any(part in skip or part.startswith(".venv") for part in p.parts)
        ]


def _text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:  # a tracked file deleted in the working tree
        return None
    if b"\0" in data[:8192]:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def texts(files: list[Path]) -> Iterator[tuple[str, str]]:
    """``(path relative to the repository, text)`` of every text file but the exempt ones."""
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        text = None if rel in EXEMPT_FILES else _text(path)
        if text is not None:
            yield rel, text


def findings(docs: Iterable[tuple[str, str]]) -> list[str]:
    """``path:line: [phrase] text`` of every line that uses a phrase and is not allowed."""
    allowed = {(a.path, a.phrase): a.line_contains for a in ALLOWED}
    hits = []
    for rel, text in docs:
        for n, line in enumerate(text.splitlines(), 1):
            for name, phrase in PHRASES.items():
                if not phrase.pattern.search(line):
                    continue
                ok = allowed.get((rel, name))
                if ok is not None and ok in line and not phrase.pattern.search(line.replace(ok, "")):
                    continue
                hits.append(f"{rel}:{n}: [{name}: {phrase.why}] {line.strip()[:160]}")
    return hits


def test_no_tracked_file_speaks_of_how_the_software_was_developed():
    files = tracked_files()
    assert any(p.name == "README.md" for p in files) and len(files) > 100, (
        "the file list is not the repository"
    )
    hits = findings(texts(files))
    assert not hits, (
        "development talk in the product (rephrase, or add an ALLOWED entry with its reason):\n"
        + "\n".join(hits)
    )


@pytest.mark.parametrize(
    "line",
    [
        "Trained on a lent NVIDIA H200 on 3.3x the pairs",
        "No GPU was lent to this task (the `device` tool's status reported",
        "when the device tool lends a GPU, also train it",
        "did not finish inside the lease's window",
        "the sessions that ran them; in the second session two jobs held the cores",
        "Streaming runs (issue 24, item 9): items are read",
        "Issue 26's GPU run",
        "## SmolLM2 as a judge (step 3 of the issue)",
        "it runs the issue's size, 3 languages",
        "python scripts/device_stage.py pack --out .gpu --chunk-mib 33.7",
        "export PYTHONPATH=/tmp/site:$PWD",
        "A copy of the staging script is at ../shared/tools/stage_remote.py",
        "scratch experiments, leave-one-set-out",
        "(float rounding, not a change of this branch)",
    ],
)
def test_each_kind_of_development_talk_is_caught(line):
    """The phrase list catches the sentences it exists for, in any tracked file."""
    assert findings([("docs/probe.md", line)]), line


@pytest.mark.parametrize(
    "line",
    [
        "MEDAL's 8 issues + overall, JSON verdicts",
        "the issue-detection metrics of each language",
        "a Ray session that finds Ray already initialised reuses it",
        "at the end of the session every results.json is validated",
        "the judge of this dialogue; an excellent reply",
        "see https://github.com/org/repo/issues for bugs",
        "PersonX lends PersonY some money",
    ],
)
def test_product_language_with_the_same_words_passes(line):
    """Words that only look like development talk (MEDAL issues, Ray and pytest sessions) pass."""
    assert not findings([("docs/probe.md", line)]), line


def test_an_allowed_line_passes_only_in_its_file():
    """An exception covers its own line in its own file, not the same words elsewhere."""
    a = ALLOWED[0]
    assert not findings([(a.path, f"... {a.line_contains} ...")])
    assert findings([("docs/probe.md", f"... {a.line_contains} ...")])
    assert findings([(a.path, f"... {a.line_contains} ... see issue 12")])


def test_every_allowed_line_exists():
    """An exception whose line is gone is removed from ALLOWED, so the list stays short and true."""
    for a in ALLOWED:
        assert a.phrase in PHRASES, a
        text = (ROOT / a.path).read_text(encoding="utf-8")
        assert a.line_contains in text, f"{a.path} no longer has {a.line_contains!r}: drop its ALLOWED entry"
