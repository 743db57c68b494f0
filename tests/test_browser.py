"""The headless-Chromium page check finds what a reader would meet: errors, requests out, sideways scroll."""

from __future__ import annotations

from pathlib import Path

from tests.browser import GITHUB_CONTENT_WIDTH, load_page

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_a_quiet_page_shows_no_error_no_request_and_fits(tmp_path: Path) -> None:
    page = tmp_path / "quiet.html"
    page.write_text("<!doctype html><html><body><p id=p>hello</p>"
                    "<script>document.getElementById('p').dataset.seen = 'yes';</script></body></html>")
    view = load_page(page, expressions={"seen": "document.getElementById('p').dataset.seen"})
    assert view.console_errors == []
    assert view.external_requests == []
    assert view.values == {"seen": "yes"}
    assert view.viewport_width == GITHUB_CONTENT_WIDTH
    assert not view.scrolls_sideways
    assert view.screenshot.startswith(PNG_SIGNATURE)


def test_errors_requests_out_and_a_wide_table_are_each_found(tmp_path: Path) -> None:
    page = tmp_path / "noisy.html"
    page.write_text("<!doctype html><html><body>"
                    "<table><tr><td style='min-width:1500px'>wide</td></tr></table>"
                    "<img src='http://192.0.2.1/pixel.png'>"
                    "<script>console.error('drawn badly'); undefinedFunction();</script></body></html>")
    view = load_page(page)
    assert any("drawn badly" in error for error in view.console_errors)
    assert any("undefinedFunction" in error for error in view.console_errors)
    assert view.external_requests == ["http://192.0.2.1/pixel.png"]
    assert view.scrolls_sideways
    assert view.scroll_width >= 1500
