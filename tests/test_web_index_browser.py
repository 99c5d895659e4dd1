"""In Chromium at 1280x720: the index has a primary action above the fold, a section nav
that jumps to each section, demos beside the session list (which shows verdict chips), and
an upload that takes a dropped file."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from toollatch.demo.demos import DEMOS

from .browser_support import SHOTS, checked_page, dashboard, launched
from .test_web_browser import DONE

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1280, 720


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with dashboard(tmp_path_factory.mktemp("index-data")) as url:
        yield url


def in_view(page, selector: str) -> bool:  # type: ignore[no-untyped-def]
    box = page.locator(selector).bounding_box()
    return box is not None and 0 <= box["y"] and box["y"] + 10 <= HEIGHT and box["x"] + box["width"] <= WIDTH


def test_the_index_has_a_primary_action_and_a_section_nav(base_url: str) -> None:
    with launched() as browser, checked_page(browser, "index-structure") as page:
        page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
        page.goto(base_url + "/")
        assert in_view(page, "#primary-action")
        nav = page.get_by_role("navigation", name="Sections of this page")
        targets = [link.get_attribute("href") for link in nav.get_by_role("link").all()]
        assert targets == ["#demos", "#sessions", "#upload", "#live-streams", "#stored", "#captures"]
        for target in targets:
            assert page.locator(str(target)).count() == 1
        # demos and the session list side by side: both start on the first screen
        assert in_view(page, "#demos-h") and in_view(page, "#sessions-h")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "index-1280x720.png"))
        assert not in_view(page, "#stored-h")
        nav.get_by_role("link", name="Stored").click()
        page.wait_for_function("(() => { const r = document.getElementById('stored-h').getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })()")
        assert page.locator(".section-nav").is_visible()  # it stays at the top
        page.goto(base_url + "/")
        page.click("#primary-action")
        page.wait_for_url("**/sessions/*")
        assert page.locator("h1").inner_text() == DEMOS["openai-parallel"].title


def test_a_dropped_capture_is_uploaded_and_the_session_list_shows_its_verdict(base_url: str) -> None:
    with launched() as browser, checked_page(browser, "index-drop-upload") as page:
        page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
        page.goto(base_url + "/#upload")
        zone = page.locator("form.upload [data-dropzone]").first
        wire = DEMOS["openai-invalid"].wire.decode()
        transfer = page.evaluate_handle(
            f"(() => {{ const t = new DataTransfer(); t.items.add(new File([{json.dumps(wire)}], 'dropped.sse', {{type: 'text/event-stream'}})); return t; }})()"
        )
        zone.dispatch_event("dragenter", {"dataTransfer": transfer})
        assert "dragging" in str(zone.get_attribute("class"))
        zone.dispatch_event("drop", {"dataTransfer": transfer})
        assert page.eval_on_selector("form.upload input[name=file]", "input => input.files.length && input.files[0].name") == "dropped.sse"
        assert "has-file" in str(zone.get_attribute("class"))
        page.select_option("form.upload select[name=rate]", "max")
        page.click("form.upload button[type=submit]")
        page.wait_for_url("**/sessions/*")
        page.wait_for_selector(DONE)
        assert page.locator(".card.state-failed").count() == 1
        page.goto(base_url + "/")
        chip = page.locator("#sessions .chip-failed").first
        chip.wait_for(state="visible")
        assert chip.inner_text() == "1 FAILED"


def test_a_failed_upload_shows_its_error_at_the_index_address(base_url: str) -> None:
    """The answer to an upload that fails is the index with the error and the pasted text; the
    address bar shows the index's address, so a reload does not post the form again."""
    with launched() as browser, checked_page(browser, "index-upload-error") as page:
        page.goto(base_url + "/#upload")
        page.fill("form.upload textarea[name=paste]", "not a capture at all")
        page.click("form.upload button[type=submit]")
        page.wait_for_selector("#error")
        assert page.url == base_url + "/"
        assert page.input_value("form.upload textarea[name=paste]").strip() == "not a capture at all"
        page.reload()  # a GET of the index: no form posted again, no error left
        page.wait_for_selector("#upload")
        assert page.url == base_url + "/" and page.locator("#error").count() == 0
