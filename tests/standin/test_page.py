"""The no-rate-limit page in headless Chromium: Proceed on its own and inside a frame.

Debian's ``chromium`` (installed by ``scripts/test.sh``), driven by Playwright's bundled driver; nothing is
downloaded and nothing leaves loopback.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from gitops.core.endpoints import UNLIMITED_PERIOD
from gitops.standin.testing import FULL_TOKEN, RESTRICTED_TOKEN, StandIn

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def _link(standin: StandIn, token: str) -> str:
    return f"{standin.url}/a/#!/account/auth-tokens/noratelimit?token={token}"


def _unlimited_seconds(standin: StandIn, token: str) -> int:
    answer = httpx.get(standin.url + "/api/auth/query-token", params={"token": token}).json()
    seconds: int = answer["unlimitedSeconds"]
    return seconds


def test_proceed_on_its_own_lifts_the_limits(standin: StandIn, page: Page) -> None:
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        for _ in range(60):
            http.get("/api/user/code")
        assert http.get("/api/user/code").status_code == 429
        page.goto(_link(standin, FULL_TOKEN))
        page.wait_for_selector("body[data-state=limited]")
        assert "is rate limited" in page.inner_text("#state")
        assert FULL_TOKEN not in page.content()  # only the first characters are shown
        page.evaluate("window.received = []; window.addEventListener('message', e => window.received.push(e.data))")
        page.get_by_role("button", name="Proceed").click()
        page.wait_for_selector("body[data-state=done]")
        assert "Rate limiting is off until" in page.inner_text("#result")
        assert _unlimited_seconds(standin, FULL_TOKEN) == UNLIMITED_PERIOD
        assert http.get("/api/user/code").status_code == 200
        # Not in a frame: no message to a parent.
        assert page.evaluate("window.received") == []
        page.reload()
        page.wait_for_selector("body[data-state=unlimited]")
        assert "for another 120 minutes" in page.inner_text("#state")


def test_proceed_inside_a_frame_posts_service_token_success(standin: StandIn, page: Page) -> None:
    page.set_content(
        "<script>window.received = [];"
        " window.addEventListener('message', e => window.received.push(e.data));</script>"
        f'<iframe id="unlock" src="{_link(standin, RESTRICTED_TOKEN)}" width="600" height="400"></iframe>'
    )
    frame = page.frame_locator("#unlock")
    frame.locator("body[data-state=limited]").wait_for()
    frame.get_by_role("button", name="Proceed").click()
    page.wait_for_function("window.received.includes('serviceTokenSuccess')")
    assert page.evaluate("window.received") == ["serviceTokenSuccess"]
    assert _unlimited_seconds(standin, RESTRICTED_TOKEN) == UNLIMITED_PERIOD
    assert _unlimited_seconds(standin, FULL_TOKEN) == 0


def test_unknown_token_and_missing_token(standin: StandIn, page: Page) -> None:
    page.goto(_link(standin, "f" * 32))
    page.wait_for_selector("body[data-state=error]")
    assert "is not known to this server" in page.inner_text("#state")
    assert not page.is_visible("#proceed")
    page.goto(standin.url + "/a/")
    page.wait_for_selector("body[data-state=error]")
    assert "no token in the address" in page.inner_text("#state")
