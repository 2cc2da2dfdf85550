"""`harness view` in a real browser: Debian's chromium driven by Playwright (no browser download).

Opens the overview (scatter plots, a click on a point), filters and sorts the samples browser, opens
samples in Arabic (right to left), Chinese and Hindi, compares two runs, and loads the static bundle
from file:// (its filtered, sorted list must be the server's). Screenshots go to
``tests/.artifacts/viewer/`` (or ``$DIALEVAL_TEST_ARTIFACTS/viewer``). Without the browser the tests
fail and say how to install it; they are never skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.view.bundle import write_bundle
from harness.view.data import read_runs
from harness.view.server import Viewer, ViewerServer
from tests.fixtures.browser import artifacts, launch_chromium

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = artifacts("viewer")
READY = "document.body.dataset.ready === location.hash"


@pytest.fixture(scope="module")
def browser():
    yield from launch_chromium(ARTIFACTS)


@pytest.fixture(scope="module")
def site(view_runs, tmp_path_factory):
    runs = read_runs([view_runs["demo_a"].parent])
    keys = {r.path.name: r.key for r in runs}
    with ViewerServer(Viewer(runs, cache_dir=tmp_path_factory.mktemp("idx"))) as srv:
        yield srv.url, keys


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    pg.set_default_timeout(90_000)  # a busy 2-core machine: the compare page bootstraps on the server
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield pg
    pg.close()
    assert not errors, f"errors in the page: {errors}"


def goto(pg, url: str) -> None:
    pg.goto(url)
    pg.wait_for_function(READY)


def after(pg, action) -> None:
    """Run a UI action that changes the URL and wait until the new page has rendered."""
    before = pg.evaluate("location.hash")
    action()
    pg.wait_for_function(f"location.hash !== {before!r} && {READY}")


def shot(pg, name: str) -> None:
    pg.screenshot(path=str(ARTIFACTS / name), full_page=True)


def column(pg, table: str, n: int) -> list[str]:
    return pg.eval_on_selector_all(
        f"table.{table} tbody tr", f"rows => rows.map(r => r.cells[{n}].innerText.trim())"
    )


def test_overview_plots_and_a_click_on_a_point(page, site):
    url, keys = site
    goto(page, url + f"#/run/{keys['demo-a']}")
    assert keys["demo-a"] in page.inner_text("h1")
    assert page.locator("table.metrics").count() == 2
    assert column(page, "metrics", 0)[-1] == "all (mean)"
    assert page.locator(".plot").count() == 10
    assert page.locator('.plot[data-lang="de"] circle.pt').count() == 16
    assert page.locator('.plot[data-lang="ar"] circle.pt').count() == 15  # its parse failure has no point
    shot(page, "overview.png")
    after(page, lambda: page.locator('.plot[data-lang="hi"] circle.pt').first.click())
    assert "/sample?" in page.evaluate("location.hash") and "-hi" in page.inner_text("h1")
    goto(page, url + f"#/run/{keys['upheld-rouge']}")
    assert page.locator("table.section.alt_test tbody tr").count() >= 1
    assert page.locator("table.section.ceilings tbody tr").count() >= 1
    assert page.locator(".plots svg rect").count() >= 5  # ρ_j per annotator
    shot(page, "overview-upheld.png")


def test_filter_sort_search_and_open_a_sample(page, site, browser):
    url, keys = site
    goto(page, url + f"#/run/{keys['demo-a']}/samples")
    assert "240 samples" in page.inner_text(".pager")
    after(page, lambda: page.select_option("select[name=language]", "ar"))
    assert set(column(page, "samples", 1)) == {"ar"} and "24 samples" in page.inner_text(".pager")
    after(page, lambda: page.select_option("select[name=sort]", "disagreement"))
    assert "sort=disagreement" in page.evaluate("location.hash")
    gaps = [float(x) for x in column(page, "samples", 8) if x != "—"]
    assert gaps == sorted(gaps, reverse=True) and gaps[0] > 0
    # Arabic text is laid out right to left
    assert page.eval_on_selector("table.samples .snippet", "e => getComputedStyle(e).direction") == "rtl"
    shot(page, "samples-ar-disagreement.png")
    shared = page.evaluate("location.href")
    after(page, lambda: (page.fill("input[name=q]", "قطة"), page.press("input[name=q]", "Enter")))
    assert column(page, "samples", 0) == ["demo-turn-t01-ar"]
    after(page, lambda: page.click("a.sample-link"))
    assert page.locator(".msg.rated").count() == 1 and page.locator(".msg").count() == 4
    assert page.eval_on_selector(".msg.rated", "e => getComputedStyle(e).direction") == "rtl"
    assert "Maybe" in page.inner_text("pre.raw") and "missing_logprobs" in page.inner_text("main")
    assert "neither 'Yes' nor 'No' has a log-prob" in page.inner_text("main")
    shot(page, "sample-ar.png")
    # a filtered view is a shareable URL: a fresh page shows the same list
    fresh = browser.new_page(viewport={"width": 1280, "height": 900})
    fresh.set_default_timeout(90_000)
    fresh.goto(shared)
    fresh.wait_for_function(READY)
    assert set(column(fresh, "samples", 1)) == {"ar"}
    fresh.close()


def test_cjk_and_devanagari_samples(page, site):
    url, keys = site
    for lang, word in (("zh", "小猫"), ("hi", "बिल्ली"), ("ja", "")):
        goto(
            page,
            url + f"#/run/{keys['demo-a']}/sample?task=demo-turn&dataset=demo-turn&id=demo-turn-t01-{lang}",
        )
        first = page.locator(".msg").first
        assert first.get_attribute("lang") == lang
        assert page.eval_on_selector(".msg", "e => getComputedStyle(e).direction") == "ltr"
        assert word in first.inner_text()
        assert first.bounding_box()["width"] > 50
        shot(page, f"sample-{lang}.png")


def test_compare_two_runs(page, site):
    url, keys = site
    goto(page, url + "#/?list=1")
    page.check(f"input[data-key='{keys['demo-a']}']")
    page.check(f"input[data-key='{keys['demo-b']}']")
    after(page, lambda: page.click("text=Compare selected runs"))
    page.wait_for_selector("table.deltas")
    assert column(page, "deltas", 0)[-1] == "all (mean)" and len(column(page, "deltas", 0)) == 11
    assert page.locator("table.disagreements tbody tr").count() == 50
    shot(page, "compare.png")
    after(page, lambda: page.select_option("select[name=task]", "demo-dialogue"))
    assert "task=demo-dialogue" in page.evaluate("location.hash")
    assert len(column(page, "deltas", 0)) == 11


def test_static_bundle_from_file_url(page, site, view_runs, tmp_path):
    url, keys = site
    runs = read_runs([view_runs["demo_a"], view_runs["demo_b"]])
    out = tmp_path / "site"
    write_bundle(runs, out)
    view = f"#/run/{keys['demo-a']}/samples?language=zh&sort=disagreement&parse=ok"
    goto(page, url + view)
    from_server = column(page, "samples", 0)
    goto(page, (out / "index.html").as_uri() + view)
    assert column(page, "samples", 0) == from_server and len(from_server) == 23
    shot(page, "bundle-samples.png")
    after(page, lambda: page.locator("a.sample-link").first.click())
    assert page.locator(".msg.rated").count() == 1
    goto(page, (out / "index.html").as_uri() + f"#/compare?runs={keys['demo-a']},{keys['demo-b']}")
    page.wait_for_selector("table.deltas")
    assert len(column(page, "deltas", 0)) == 11
    goto(page, (out / "index.html").as_uri() + f"#/run/{keys['demo-b']}")
    assert page.locator(".plot").count() == 10
