"""Escaping per sink: every name (category, label, model, warning) that reaches Markdown, Mermaid or a terminal.

A name comes from a dataset, a run file or a server, and is shown where users paste and read:

- Markdown (`markdown_escape`): markup, links and HTML are escaped; what GitHub would turn into a link
  or a notification on its own (bare URLs, `www.` hosts, e-mail addresses, @-mentions, #123 issue
  references) is shown as inline code, which GitHub never autolinks;
- Mermaid (`mermaid_text`): inside a quoted Mermaid text, no quote, backtick, `;`, `%%`, line break or bidi
  override; `short_labels` keeps axis labels short enough that the renderer draws them;
- a terminal (`terminal_text`, `terminal_lines` for whole outputs): control characters (ESC and OSC sequences
  included), C1 controls and bidirectional overrides are shown escaped (`\\x1b`, `\\u202e`), never sent to the
  terminal raw.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_MARKDOWN_SPECIAL = re.compile(r"[\\`*<>\[\]|~&!#]")
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_AUTOLINKED = re.compile(
    r"(?:(?<![A-Za-z0-9+.-])(?:https?|ftp|mailto|xmpp|file|data|javascript|vbscript|irc|ssh|git|wss?)"
    r":[^\s`|<>]+"  # a scheme's URL
    r"|www\.[^\s`|<>]*"  # www.host
    r"|[A-Za-z0-9._%+-]+@[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+"  # e-mail addresses
    r"|(?<![A-Za-z0-9_`])@(?![0-9.]+%)[A-Za-z0-9][A-Za-z0-9_/-]*"  # @-mentions (@user, @org/team), not @99.5%
    r"|(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#[0-9]+)",  # issue references (#12, org/repo#12)
    re.IGNORECASE,
)


def _plain_markdown(text: str) -> str:
    text = _MARKDOWN_SPECIAL.sub(lambda match: "\\" + match.group(0), text)
    return _UNDERSCORE.sub(r"\\_", text)


def markdown_escape(text: str) -> str:
    """Text made inert in Markdown: no markup, link, HTML, autolink, mention or issue reference; one line.

    Control characters and bidirectional overrides are shown escaped, as on a terminal (`terminal_text`).
    """
    text = terminal_text(str(text).replace("\r", " ").replace("\n", " "))
    pieces: list[str] = []
    last = 0
    for match in _AUTOLINKED.finditer(text):
        pieces.append(_plain_markdown(text[last:match.start()]))
        pieces.append(f"`{match.group(0)}`")  # GitHub never autolinks or mentions inside code
        last = match.end()
    pieces.append(_plain_markdown(text[last:]))
    return "".join(pieces)


def mermaid_text(value: object) -> str:
    """A string made safe inside a quoted Mermaid text: no quote, backtick, `;` (so no `#60;` entity), `%%`,
    control character, and no `<` or `>` (shown as the look-alikes U+2039 and U+203A: no markup in a label)."""
    text = str(value).replace('"', "'").replace("`", "'").replace(";", ",").replace("<", "\u2039").replace(
        ">", "\u203a")
    text = re.sub(r"%+", "%", text)
    text = re.sub("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+", " ", text)
    text = " ".join(text.split())
    return text or "(unnamed)"


def short_labels(names: Sequence[object], limit: int) -> list[str]:
    """Names as Mermaid texts (`mermaid_text`) of at most `limit` characters: a longer one is cut and ends in an
    ellipsis, and names that cutting made equal are told apart by a number (`...2`)."""
    shown: list[str] = []
    seen: set[str] = set()
    for name in names:
        text = mermaid_text(name)
        if len(text) > limit:
            text = text[:limit - 1].rstrip() + "\u2026"
        candidate, number = text, 2
        while candidate in seen:
            tail = f"\u2026{number}"
            candidate = text[:limit - len(tail)].rstrip("\u2026").rstrip() + tail
            number += 1
        seen.add(candidate)
        shown.append(candidate)
    return shown


_TERMINAL_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_TERMINAL_UNSAFE_KEEP_LINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_lines(lines: Iterable[object]) -> str:
    """Lines safe to write to a terminal, each ending in a line break: every line passes through `terminal_text`
    whole, so a line break inside a name from data is shown escaped (`\\x0a`) and can never start a line of its own.
    A rendered table is given as its lines (`table.splitlines()`), its cells already escaped."""
    return "".join(terminal_text(line) + "\n" for line in lines)


def terminal_text(text: object, *, keep_lines: bool = False) -> str:
    """Text safe to write to a terminal: control characters (ESC, OSC, C1), and bidirectional overrides shown
    escaped (`\\x1b`); with `keep_lines`, line breaks are kept (for a whole rendered output)."""
    pattern = _TERMINAL_UNSAFE_KEEP_LINES if keep_lines else _TERMINAL_UNSAFE
    return pattern.sub(_shown, str(text))
