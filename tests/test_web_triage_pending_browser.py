"""In Chromium: once a max-speed replay is over, the triage panel never claims it waits for
the end ("Shown when the replay is over"); it says it is working, then shows the diagnoses.
The card timeline labels its clock virtual."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


from .browser_support import checked_page, dashboard, launched
from .test_web_browser import DONE

pytestmark = pytest.mark.browser

#: Records, at every DOM change, whether the page says the replay is over while the triage
#: panel still says it waits for that.
WATCH = """
window.__stale = [];
new MutationObserver(() => {
  const st = document.getElementById('status');
  const panel = document.getElementById('triage');
  if (!st || !panel || !['finished', 'cancelled', 'error'].includes(st.dataset.status)) return;
  if (panel.innerText.includes('Shown when the replay is over')) window.__stale.push(panel.dataset.state);
}).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
"""


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with dashboard(tmp_path_factory.mktemp("pending-data")) as url:
        yield url


def test_the_triage_panel_follows_the_end_of_a_max_speed_replay(base_url: str) -> None:
    with launched() as browser, checked_page(browser, "triage-after-max-speed") as page:
        page.goto(base_url + "/")
        page.click("button[name=name][value=openai-invalid]")
        page.wait_for_url("**/sessions/*")
        page.evaluate(WATCH)
        page.select_option("select[name=speed]", "max")
        page.wait_for_selector(DONE)
        page.wait_for_selector("#triage[data-state$=done] .diagnoses")
        assert page.evaluate("window.__stale") == []
        assert page.locator(".card .timeline time.virtual").first.inner_text().startswith("virtual +")
