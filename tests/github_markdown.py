"""Markdown rendered the GitHub way, for the browser checks: CommonMark with tables and raw HTML, GitHub's styles.

The styles are the ones of github.com's `.markdown-body` that decide a report's width: 16px system font, tables
as blocks of `max-content` width that scroll inside themselves when wider than the column (so a table that is
too wide hides its right-hand columns), code blocks that scroll inside themselves, images no wider than the
column. `WIDE_ELEMENTS` is the expression that names every table, code block or other element scrolling sideways.
"""

from __future__ import annotations

import html
from pathlib import Path

from markdown_it import MarkdownIt

GITHUB_CSS = """
body { margin: 0; }
.markdown-body { box-sizing: border-box; width: 100%; font-family: -apple-system, BlinkMacSystemFont, "Segoe UI",
  "Noto Sans", Helvetica, Arial, sans-serif; font-size: 16px; line-height: 1.5; word-wrap: break-word; }
.markdown-body table { display: block; width: max-content; max-width: 100%; overflow: auto;
  border-spacing: 0; border-collapse: collapse; margin: 0 0 16px; }
.markdown-body th, .markdown-body td { padding: 6px 13px; border: 1px solid #d1d9e0; }
.markdown-body th { font-weight: 600; }
.markdown-body pre { overflow: auto; padding: 16px; font-size: 85%; line-height: 1.45; background: #f6f8fa;
  font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace; }
.markdown-body code { font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono",
  monospace; }
.markdown-body img { max-width: 100%; box-sizing: content-box; }
.markdown-body details summary { cursor: pointer; }
"""

WIDE_ELEMENTS = """
Array.from(document.querySelectorAll(
    '.markdown-body table, .markdown-body pre, .markdown-body p, .markdown-body li, .markdown-body details'))
  .filter(node => !node.querySelector('code.language-mermaid'))
  .filter(node => node.scrollWidth > node.clientWidth + 1)
  .map(node => ({tag: node.tagName.toLowerCase(), scroll: node.scrollWidth, width: node.clientWidth,
                 start: node.textContent.trim().slice(0, 80)}))
"""
"""A JavaScript expression: every element of the rendered Markdown that is wider than its box (it scrolls); Mermaid
blocks aside (GitHub draws them as charts, sized by their own configuration)."""


def github_html(markdown: str, *, title: str = "report") -> str:
    """A standalone HTML page of `markdown` as GitHub renders a PR description or job summary (details blocks open,
    so their content's width counts too)."""
    parser = MarkdownIt("commonmark", {"html": True}).enable("table")
    body = parser.render(markdown).replace("<details>", "<details open>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{GITHUB_CSS}</style></head><body><article class='markdown-body'>{body}</article></body></html>")


def write_github_page(markdown: str, path: Path) -> Path:
    """Write `markdown` rendered the GitHub way to `path`; return the path."""
    path.write_text(github_html(markdown, title=path.stem), encoding="utf-8")
    return path
