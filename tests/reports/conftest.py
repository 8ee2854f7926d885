"""A real headless browser for the report tests: Debian's Chromium driven by Playwright.

CI installs Chromium (the README's test command); a missing browser fails the browser tests
with the reason, never skips them. Playwright's own browser download is not used: Chromium
comes from the system's packages.
"""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = (
    os.environ.get("OPENIPU_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
)
#: No sandbox (CI runs as root), no GPU, and nothing that reaches the network by itself.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory):
    """One Chromium per test process, with a fresh profile directory."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is missing: pip install -e '.[test]' installs it")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"Chromium is missing ({CHROMIUM}): the README's test command installs it "
            "(apt-get install -y chromium)"
        )
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 900},
        )
        yield context
        context.close()


@pytest.fixture
def open_page(browser_context):
    """`open_page(path)`: a tab showing the file, with what it requested and reported.

    The tab records every request (`page.requests`) and every script error or console error
    (`page.problems`): a self-contained report makes only the one request for itself.
    """
    pages = []

    def open_file(path):
        page = browser_context.new_page()
        page.requests, page.problems = [], []
        page.on("request", lambda request: page.requests.append(request.url))
        page.on("pageerror", lambda error: page.problems.append(str(error)))
        page.on(
            "console",
            lambda message: message.type == "error" and page.problems.append(message.text),
        )
        page.goto(path.resolve().as_uri())
        page.wait_for_load_state("load")
        pages.append(page)
        return page

    yield open_file
    for page in pages:
        page.close()
