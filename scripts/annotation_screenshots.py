"""Screenshots of the annotator page for docs/annotation.md, taken from a real server in Debian's chromium.

    .venv/bin/python scripts/annotation_screenshots.py            # writes docs/img/annotation/*.png

Builds two small projects in a temporary folder (the synthetic MEDAL benchmark of the tests, the
packaged demo benchmark's turn items), serves each with the annotator app, labels a little with the
keyboard and the mouse, and saves what the annotator sees: a MEDAL dialogue in Chinese with two
issues toggled, an Arabic turn item (right to left) and a Hindi one (Devanagari), and a refused
submission (the server's error above the form, the labels kept).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "docs" / "img" / "annotation"
CHROMIUM = Path(os.environ.get("DIALEVAL_CHROMIUM", "/usr/bin/chromium"))


def main() -> int:
    from playwright.sync_api import sync_playwright

    from harness.annotate.server import AnnotationServer
    from tests.fixtures.annotate_projects import medal_project, xdial_project

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT, help=f"folder of the PNG files (default {OUT})")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        root = Path(tmp)
        medal = medal_project(root, "medal-style", annotators=("ann-zh",))
        arabic = xdial_project(root, "xdial-ar", annotators=("ann-ar",), languages=("ar",))
        hindi = xdial_project(root, "xdial-hi", annotators=("ann-hi",), languages=("hi",))
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 860})

        def open_page(srv: AnnotationServer, token: str) -> None:
            page.goto(srv.page_url(token))
            page.locator("body[data-ready='1']").wait_for(state="attached")

        def save(name: str) -> None:
            page.screenshot(path=str(args.out / name))
            print(
                f"wrote {(args.out / name).relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out / name}"
            )

        with AnnotationServer(medal) as srv:
            open_page(srv, medal.tokens()["ann-zh"])
            while page.get_attribute(".card.item", "lang") != "zh":  # a Chinese dialogue
                page.keyboard.press("s")
                page.locator("body[data-busy='']").wait_for(state="attached")
            for dim in ("repetitive", "irrelevant"):
                page.click(f".field[data-dimension='{dim}'] button.toggle")
            page.keyboard.press("2")
            save("medal-dialogue.png")
        with AnnotationServer(arabic) as srv:
            open_page(srv, arabic.tokens()["ann-ar"])
            page.click("button.point[data-value='4']")
            save("xdial-arabic.png")
            arabic.revoke("ann-ar")  # the next request is refused: the page shows why, keeps the form
            page.click("#submit")
            page.locator("#error:not([hidden])").wait_for()
            save("refused.png")
        with AnnotationServer(hindi) as srv:
            open_page(srv, hindi.tokens()["ann-hi"])
            save("xdial-hindi.png")
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
