"""`harness view` from the command line: a real server process (URL printed, API answering, Ctrl+C
stops it), --bundle, and bad arguments."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request

from typer.testing import CliRunner

from harness.cli.app import app


def test_serves_until_interrupted(view_runs, tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "view", str(view_runs["demo_a"].parent), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url, lines, deadline = None, [], time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            url = m.group(1) if m else None
        assert url, "".join(lines)
        assert "3 run(s)" in "".join(lines)
        with urllib.request.urlopen(url + "api/runs", timeout=30) as r:
            assert len(json.loads(r.read())) == 3
        with urllib.request.urlopen(url, timeout=30) as r:
            assert b'DIALEVAL_MODE = "server"' in r.read()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 0


def test_bundle_and_bad_arguments(view_runs, tmp_path):
    r = CliRunner().invoke(app, ["view", str(view_runs["demo_a"]), "--bundle", str(tmp_path / "site")])
    assert r.exit_code == 0, r.output
    assert "wrote the viewer of 1 run(s)" in r.output and (tmp_path / "site" / "index.html").is_file()
    r = CliRunner().invoke(app, ["view", str(tmp_path / "nothing-here")])
    assert r.exit_code == 2 and "no such run directory" in r.output
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x.txt").write_text("x")
    r = CliRunner().invoke(app, ["view", str(view_runs["demo_a"]), "--bundle", str(tmp_path / "taken")])
    assert r.exit_code == 2 and "refusing to overwrite" in r.output
