"""File names made from user-given text: a label becomes one path component of safe characters."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_LABEL_LENGTH = 64
"""Labels are cut to this many characters in file and folder names."""


def file_label(label: str | None, default: str) -> str:
    """A label as a file-name part: letters, digits, `.`, `_`, `-` only (anything else becomes `-`), no leading
    dot or dash, at most MAX_LABEL_LENGTH characters; `default` when nothing is left (`../..` names nothing)."""
    cleaned = _UNSAFE.sub("-", label or "")
    cleaned = re.sub(r"\.{2,}", ".", cleaned).strip(".-")[:MAX_LABEL_LENGTH].rstrip(".-")
    return cleaned or default
