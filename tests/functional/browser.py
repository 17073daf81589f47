"""A headless Chromium for the status page's tests, driven by Playwright.

Debian's ``chromium`` (``BERTH_TEST_CHROMIUM`` names another binary). Without it the tests
are skipped, unless ``BERTH_TEST_REQUIRE_BROWSER`` is set (as .ci/run sets it): then they fail.
"""

import contextlib
import os
import shutil
import time

import pytest


@contextlib.contextmanager
def chromium():
    """(browser, console messages and page errors seen) for the block."""
    binary = os.environ.get("BERTH_TEST_CHROMIUM") or shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = "playwright is not installed" if sync_playwright is None else (
        None if binary else "no chromium binary (apt-get install chromium)")
    if missing:
        if os.environ.get("BERTH_TEST_REQUIRE_BROWSER"):
            pytest.fail(f"the browser tests cannot run: {missing}")
        pytest.skip(missing)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def wait_until(page, expression, timeout=15.0, what=None):
    """Poll ``expression`` (JavaScript, evaluated as the debugger does: the page's policy
    forbids eval, which Playwright's own wait_for_function needs) until it is true."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or expression} within {timeout:g} s")
        time.sleep(0.1)


def watched_page(browser, width=1280, height=1000):
    """A new page and the list its console errors, warnings and uncaught exceptions go to."""
    page = browser.new_page(viewport={"width": width, "height": height})
    problems = []
    page.on("console",
            lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    return page, problems
