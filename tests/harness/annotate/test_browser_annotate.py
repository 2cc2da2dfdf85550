"""`harness annotate` in a real browser: Debian's chromium driven by Playwright (no browser download).

Two annotators work at the same time in two browser contexts: one labels a MEDAL-style project
(dialogue level, binary issues as toggles, overall 1–5) with the keyboard, the other an xDial-style
project (turn level, a 1–5 scale) on Arabic items with the mouse. Both servers are killed with
SIGKILL between submissions and restarted; the pages keep what was typed, send it again and the
queues resume. The project files must then hold exactly what was clicked. Screenshots go to
``tests/.artifacts/annotate/`` (or ``$DIALEVAL_TEST_ARTIFACTS/annotate``). Without the browser the
tests fail and say how to install it; they are never skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from harness.annotate.store import Project
from tests.fixtures.annotate_projects import medal_project, xdial_project
from tests.fixtures.browser import artifacts, launch_chromium

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = artifacts("annotate")


@pytest.fixture(scope="module")
def browser():
    yield from launch_chromium(ARTIFACTS)


class ServerProcess:
    """``python -m harness.annotate.server PROJECT`` in a subprocess, killable with SIGKILL and
    restartable on the same port."""

    def __init__(self, project_file: Path) -> None:
        self.project_file = project_file
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> str:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.annotate.server",
                str(self.project_file),
                "--port",
                str(self.port),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://"), self.proc.stderr.read() if self.proc.stderr else ""
        self.port = urlsplit(self.url).port or 0
        return self.url

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> Iterator[dict[str, object]]:
    root = tmp_path_factory.mktemp("annotate-browser")
    medal = medal_project(root, "medal-style", annotators=("ann-en",))
    xdial = xdial_project(root, "xdial-style", annotators=("ann-ar",), languages=("ar",))
    tokens = {"medal": medal.tokens()["ann-en"], "xdial": xdial.tokens()["ann-ar"]}
    medal.close()
    xdial.close()
    servers = {
        "medal": ServerProcess(root / "medal-style.sqlite"),
        "xdial": ServerProcess(root / "xdial-style.sqlite"),
    }
    for s in servers.values():
        s.start()
    yield {"root": root, "tokens": tokens, "servers": servers}
    for s in servers.values():
        s.stop()


def open_page(browser, url: str, errors: list[str]):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "console",
        lambda m: (
            errors.append(m.text)
            if m.type == "error" and "net::ERR_CONNECTION_REFUSED" not in m.text
            else None
        ),
    )
    page.goto(url)
    page.locator("body[data-ready='1']").wait_for(state="attached")
    return context, page


def current(page) -> str:
    return page.evaluate("document.body.dataset.item")


def wait_moved_on(page, item: str) -> None:
    page.locator(f"body[data-busy='']:not([data-item='{item}'])").wait_for(state="attached")


def toggle_letter(page, dimension: str) -> str:
    return page.inner_text(f".field[data-dimension='{dimension}'] button.toggle kbd").strip().lower()


def medal_by_keyboard(page, issues: set[str], overall: int) -> dict[str, float]:
    """Label the open MEDAL item with keys only; returns the labels the page must send."""
    fields = page.eval_on_selector_all(".field", "els => els.map(e => [e.dataset.dimension, e.dataset.kind])")
    for dim in sorted(issues):
        page.keyboard.press(toggle_letter(page, dim))
    page.keyboard.press(str(overall))
    labels = {d: (1.0 if d in issues else 0.0) for d, kind in fields if kind == "binary"}
    labels["overall"] = float(overall)
    for dim in issues:
        assert page.get_attribute(f".field[data-dimension='{dim}'] button.toggle", "aria-pressed") == "true"
    return labels


def stored(project_file: Path, annotator: str) -> dict[str, dict[str, float]]:
    with Project.open(project_file) as project:
        rows = project.labels()
    rows = rows[(rows["annotator"] == annotator) & (~rows["skipped"].astype(bool))]
    out: dict[str, dict[str, float]] = {}
    for r in rows.itertuples():
        out.setdefault(str(r.item_id), {})[str(r.dimension)] = float(r.value)
    return out


def exported(registry: Path, ref: str, cache: Path) -> dict[str, dict[str, float]]:
    """{record id: {dimension: value}} of a registered version, read back with ``load_dataset``."""
    from datasets import load_dataset

    from harness.data.registry import DatasetRegistry

    rv = DatasetRegistry(registry).resolve(ref)
    out: dict[str, dict[str, float]] = {}
    for config in sorted(p.name for p in rv.path.iterdir() if p.is_dir()):
        for row in load_dataset(str(rv.path), config, split="test", cache_dir=str(cache)):
            for lab in row["labels"]:
                out.setdefault(row["id"], {})[lab["dimension"]] = float(lab["value"])
    return out


def by_record(project_file: Path, labels: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    with Project.open(project_file) as project:
        rows = project.labels()
    record_of = dict(zip(rows["item_id"], rows["record_id"], strict=True))
    return {record_of[item]: values for item, values in labels.items()}


def test_two_annotators_at_once_keyboard_and_mouse_through_a_kill_9(browser, projects, monkeypatch):
    tokens, servers = projects["tokens"], projects["servers"]
    errors: list[str] = []
    ctx_m, medal = open_page(browser, f"{servers['medal'].url}a/{tokens['medal']}", errors)
    ctx_x, xdial = open_page(browser, f"{servers['xdial'].url}a/{tokens['xdial']}", errors)
    expected_m: dict[str, dict[str, float]] = {}
    expected_x: dict[str, dict[str, float]] = {}
    try:
        # the pages: the guideline and the definitions beside the item, the shortcuts shown
        assert "Guideline" in medal.inner_text(".guideline") and medal.locator("#definitions dt").count() == 9
        assert medal.locator("button.toggle").count() == 8 and medal.locator("button.point").count() == 5
        assert "Enter" in medal.inner_text("#shortcuts") and "undo" in medal.inner_text("#shortcuts")
        letters = [
            toggle_letter(medal, d)
            for d in medal.eval_on_selector_all("button.toggle", "b => b.map(x => x.dataset.dimension)")
        ]
        assert len(set(letters)) == 8 and not set(letters) & {"s", "u", "f"}
        assert medal.locator(".msg").count() >= 4 and medal.locator(".persona").count() >= 1
        assert (
            xdial.get_attribute(".card.item", "dir") == "rtl"
            and xdial.get_attribute(".card.item", "lang") == "ar"
        )
        assert xdial.locator(".msg.rated").count() == 1
        medal.screenshot(path=str(ARTIFACTS / "medal.png"), full_page=True)
        xdial.screenshot(path=str(ARTIFACTS / "xdial-ar.png"), full_page=True)

        # one item each, interleaved: keyboard on MEDAL, mouse on the Arabic xDial items
        m1 = current(medal)
        expected_m[m1] = medal_by_keyboard(medal, {"repetitive", "nonfactual"}, 2)
        medal.keyboard.press("Enter")
        x1 = current(xdial)
        xdial.click(".field[data-dimension='relevance'] button.point[data-value='5']")
        xdial.click("#submit")
        expected_x[x1] = {"relevance": 5.0}
        wait_moved_on(medal, m1)
        wait_moved_on(xdial, x1)
        assert medal.inner_text("#progress-text").startswith("1/")

        # a refused submission keeps the form: Enter without the overall scale
        m2 = current(medal)
        medal.keyboard.press(toggle_letter(medal, "irrelevant"))
        medal.keyboard.press("Enter")
        medal.locator("#error:not([hidden])").wait_for()
        assert "overall" in medal.inner_text("#error") and current(medal) == m2

        # both servers die (SIGKILL) between submissions
        for s in servers.values():
            s.kill9()
        medal.keyboard.press("4")
        labels_m2 = {d: (1.0 if d == "irrelevant" else 0.0) for d in expected_m[m1] if d != "overall"}
        labels_m2["overall"] = 4.0
        medal.keyboard.press("Enter")
        # the refused submission's message may still show: wait for the new one
        medal.locator("#error:not([hidden])", has_text="does not answer").wait_for()
        assert current(medal) == m2
        assert (
            medal.get_attribute(".field[data-dimension='irrelevant'] button.toggle", "aria-pressed") == "true"
        )
        x2 = current(xdial)
        xdial.click(".field[data-dimension='relevance'] button.point[data-value='2']")
        xdial.click("#submit")
        xdial.locator("#error:not([hidden])").wait_for()
        assert current(xdial) == x2

        # restarted on the same ports: the kept forms are sent again and counted once
        for s in servers.values():
            s.start()
        medal.keyboard.press("Enter")
        wait_moved_on(medal, m2)
        expected_m[m2] = labels_m2
        assert medal.locator("#error").is_hidden()
        xdial.reload()  # a reload resumes the queue where the server says it stands
        xdial.locator("body[data-ready='1']").wait_for(state="attached")
        assert current(xdial) == x2
        xdial.click(".field[data-dimension='relevance'] button.point[data-value='3']")
        xdial.click("#submit")
        wait_moved_on(xdial, x2)
        expected_x[x2] = {"relevance": 3.0}

        # undo (U) reopens the last item with its labels; a new answer replaces the old
        xdial.keyboard.press("u")
        xdial.locator(f"body[data-item='{x2}'][data-busy='']").wait_for(state="attached")
        assert xdial.get_attribute("button.point[data-value='3']", "aria-pressed") == "true"
        xdial.keyboard.press("1")
        xdial.keyboard.press("Enter")
        wait_moved_on(xdial, x2)
        expected_x[x2] = {"relevance": 1.0}

        # skip (S) and flag with a comment (F, type, Esc, Enter) on MEDAL
        m3 = current(medal)
        medal.keyboard.press("s")
        wait_moved_on(medal, m3)
        m4 = current(medal)
        medal.keyboard.press("f")
        medal.keyboard.type("the assistant turns are cut off")
        medal.keyboard.press("Escape")
        expected_m[m4] = medal_by_keyboard(medal, set(), 5)
        medal.keyboard.press("Enter")
        wait_moved_on(medal, m4)
        assert "1 skipped" in medal.inner_text("#progress-text") and "1 flagged" in medal.inner_text(
            "#progress-text"
        )
        medal.screenshot(path=str(ARTIFACTS / "medal-after.png"), full_page=True)
    finally:
        ctx_m.close()
        ctx_x.close()
    assert not errors, f"errors in the pages: {errors}"

    root = projects["root"]
    assert stored(root / "medal-style.sqlite", "ann-en") == expected_m
    assert stored(root / "xdial-style.sqlite", "ann-ar") == expected_x
    with Project.open(root / "medal-style.sqlite") as project:
        assert project.progress("ann-en").skipped == 1 and project.progress("ann-en").flagged == 1
        rows = project.labels()
        assert set(rows[rows["flag"].notna()]["flag"]) == {"the assistant turns are cut off"}

    # export: registered versions whose labels are what was clicked; `harness run` evaluates a judge on one
    from typer.testing import CliRunner

    from harness.cli.app import app

    registry = root / "registry"
    monkeypatch.setenv("DIALEVAL_REGISTRY", str(registry))
    cli = CliRunner()
    for name, ref in (("medal-style", "medal-humans@1.0.0"), ("xdial-style", "xdial-humans@1.0.0")):
        r = cli.invoke(app, ["annotate", "export", name, "--dir", str(root), "--as", ref])
        assert r.exit_code == 0, r.output
    assert exported(registry, "medal-humans@1.0.0", root / "hf") == by_record(
        root / "medal-style.sqlite", expected_m
    )
    assert exported(registry, "xdial-humans@1.0.0", root / "hf") == by_record(
        root / "xdial-style.sqlite", expected_x
    )
    replay = root / "replay.jsonl"
    replay.write_text('{"default": {"hashed_p_yes": true}}\n')
    out = root / "run-on-export"
    argv = ["run", "--judge", f"replay:{replay}", "--task", "demo-turn", "--dataset", "xdial-humans@1.0.0"]
    r = cli.invoke(app, [*argv, "-o", str(out), "-q", "--bootstrap", "20", "--no-cache"])
    assert r.exit_code == 0, r.output
    assert (out / "results.json").is_file() and (out / "samples.parquet").is_file()
