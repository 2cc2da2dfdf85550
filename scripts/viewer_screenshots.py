"""The screenshots of docs/viewer.md and the README: `harness view` on real runs, in Debian's
chromium (Playwright, as the browser tests drive it).

    .venv/bin/python scripts/viewer_screenshots.py runs/xdial-default runs/xdial-minilm --out docs

Writes ``viewer-samples.png`` (the samples browser: Arabic items sorted by disagreement) and
``viewer-sample.png`` (the first of them), 1280 × 800 each.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

READY = "document.body.dataset.ready === location.hash"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run directories; the first is shown")
    ap.add_argument("--out", type=Path, default=ROOT / "docs")
    ap.add_argument("--language", default="ar")
    ap.add_argument("--task", default=None, help="task of the samples page (default: the run's first)")
    ap.add_argument("--chromium", default=os.environ.get("DIALEVAL_CHROMIUM", "/usr/bin/chromium"))
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    from harness.view.data import read_runs
    from harness.view.server import Viewer, ViewerServer

    runs = read_runs(args.runs)
    viewer = Viewer(runs)
    key = runs[0].key
    task = args.task or runs[0].tasks[0]
    viewer.warm().join()
    with ViewerServer(viewer) as srv, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(srv.url + f"#/run/{key}/samples?task={task}&language={args.language}&sort=disagreement")
        page.wait_for_function(READY)
        args.out.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(args.out / "viewer-samples.png"))
        before = page.evaluate("location.hash")
        page.locator("a.sample-link").first.click()
        page.wait_for_function(f"location.hash !== {before!r} && {READY}")
        page.screenshot(path=str(args.out / "viewer-sample.png"))
        browser.close()
    for name in ("viewer-samples.png", "viewer-sample.png"):
        path = args.out / name
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
