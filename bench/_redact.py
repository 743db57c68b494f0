"""Secret redaction: the one place that decides what of a URL, header or server-echoed text may be shown.

Every text speedbench writes to a file or a terminal that may hold a URL, a header or something a
server sent back passes through `redact` (or `redact_url` for a URL alone): URL userinfo
(`user:password@`), the values of `Authorization`/`api-key`-like headers written as `name: value` or
`"name": "value"`, bearer tokens, and every secret registered with `register_secret` (the API key,
the URL password, sensitive header values) wherever it appears.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

MASK = "***"
_MIN_SECRET_LENGTH = 4  # shorter values would mask ordinary words; such "secrets" protect nothing anyway

SENSITIVE_HEADER = re.compile(
    r"^(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key|apikey|x-auth-token|"
    r".*(api[-_]?key|token|secret|password).*)$",
    re.IGNORECASE,
)
"""Header names whose values are secrets."""

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#@\s]+)@")
_HEADER_VALUE = re.compile(
    r"(?P<name>[\"']?(?:proxy-)?(?:authorization|x-api-key|api[-_]?key|apikey|x-auth-token|access[-_]?token)"
    r"[\"']?\s*[:=]\s*[\"']?)(?P<value>(?:bearer\s+|basic\s+)?[^\s\"',;}]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<name>\b(?:bearer|basic)\s+)(?P<value>[A-Za-z0-9._~+/=-]{4,})", re.IGNORECASE)

_lock = threading.Lock()
_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret (an API key, a URL password, a header value): `redact` masks it anywhere."""
    if value and len(value.strip()) >= _MIN_SECRET_LENGTH:
        with _lock:
            _secrets.add(value.strip())


def register_secrets(values: Iterable[str | None]) -> None:
    """Remember several secrets."""
    for value in values:
        register_secret(value)


def url_secrets(url: str) -> list[str]:
    """The password (and the whole userinfo) of a URL, raw and percent-decoded, for `register_secrets`."""
    try:
        parts = urlsplit(url if "://" in url else "http://" + url)
        password = parts.password
    except ValueError:
        return []
    found = [match.group("userinfo") for match in _USERINFO.finditer(url)]
    if password:
        found += [password, unquote(password)]
    return found


def redact_url(url: str) -> str:
    """A URL with its userinfo (`user:password@`) replaced by `***@`."""
    return _USERINFO.sub(lambda match: f"{match.group('scheme')}{MASK}@", url)


def redact(text: str) -> str:
    """Text with URL userinfo, Authorization/api-key header values, bearer tokens and registered secrets masked."""
    if not text:
        return text
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _USERINFO.sub(lambda match: f"{match.group('scheme')}{MASK}@", text)
    text = _HEADER_VALUE.sub(lambda match: f"{match.group('name')}{MASK}", text)
    return _BEARER.sub(lambda match: f"{match.group('name')}{MASK}", text)


def one_line(text: str, limit: int = 500) -> str:
    """Redacted text on one line (line breaks and control characters become spaces), at most `limit` chars."""
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
