"""In Chromium at 1280x720: presentation mode shows every call of a turn at once (each card's
box inside the viewport, the page not scrolled), the controls on one compact band."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


from .browser_support import SHOTS, checked_page, dashboard, launched
from .test_web_browser import DONE

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1280, 720


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with dashboard(tmp_path_factory.mktemp("present-data")) as url:
        yield url


@pytest.mark.parametrize("demo", ["openai-parallel", "anthropic-parallel"])
def test_every_call_of_a_turn_is_visible_in_presentation_mode(base_url: str, demo: str) -> None:
    with launched() as browser, checked_page(browser, f"present-{demo}") as page:
        page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
        page.goto(base_url + "/")
        page.keyboard.press("p")  # saved: the session page opens in presentation mode too
        page.click(f"button[name=name][value={demo}]")
        page.wait_for_url("**/sessions/*")
        page.wait_for_function("document.documentElement.classList.contains('present')")
        page.select_option("select[name=speed]", "max")
        page.wait_for_selector(DONE)
        page.wait_for_function("document.querySelectorAll('.card.state-committed').length === 2")
        assert page.evaluate("window.scrollY") == 0
        boxes = [card.bounding_box() for card in page.locator(".card").all()]
        assert len(boxes) == 2
        for box in boxes:
            assert box is not None
            assert box["x"] >= 0 and box["y"] >= 0, box
            assert box["x"] + box["width"] <= WIDTH and box["y"] + box["height"] <= HEIGHT, box
        # the controls stay on the page, the keys hint gives its room to the cards
        assert page.locator("#controls button[value=restart]").is_visible()
        assert not page.locator("#keys").is_visible()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"present-{demo}-1280x720.png"))
