"""Secret redaction: the one place that decides what of a URL, header or server-echoed text may be shown.

Every text speedbench writes to a file or a terminal passes through here: `redact` for text a server
sent back (error bodies, warnings), `redact_tree` for records written to disk, `RedactingStream` for
stdout and stderr. What is masked:

- every secret registered with `register_secret` (the API key, the URL password, the values of
  sensitive headers), in its raw, JSON-escaped (`\\/`, `\\uXXXX`), URL-encoded (`%XX`) and base64
  forms: no run of `SECRET_RUN` or more of its characters survives, so a secret cut by a truncation
  elsewhere leaks no prefix either;
- URL userinfo (`user:password@`);
- in the JSON options (`--extra-inputs`, `--chat-template-kwargs`), the value of every secret-named key at any
  depth (`masked_by_key`; its values are also registered, `key_secrets`);
- the value of any `name: value` / `name=value` / `"name": "value"` whose name says it is a secret
  (it ends in key, token, secret, password, cookie, signature or credential, or starts with auth),
  and bearer/basic credentials.
"""

from __future__ import annotations

import base64
import contextlib
import io
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import TextIO, overload
from urllib.parse import quote, unquote, urlsplit

from bench._types import JsonMapping, JsonObject, JsonValue

MASK = "***"
SECRET_RUN = 8
"""No run of this many characters of a registered secret (in any of its forms) survives redaction."""
_MIN_SECRET_LENGTH = 4  # shorter values would mask ordinary words; such "secrets" protect nothing anyway
_WINDOW_MARGIN = 4096
"""`one_line` redacts this much beyond its limit before cutting, so no secret straddles the cut unredacted."""

_SECRET_NAME = (
    r"(?:[A-Za-z0-9]+[-_.])*"
    r"(?:[A-Za-z0-9]*(?:key|token|secret|password|passwd|pwd|cookie|signature|credentials?)|auth[A-Za-z0-9]*)"
)
SENSITIVE_HEADER = re.compile(rf"^{_SECRET_NAME}(?:[-_.][A-Za-z0-9]+)*$", re.IGNORECASE)
"""Header names whose values are secrets: any with a part that ends in key, token, secret, password, cookie,
signature or credential, or starts with auth (`X-Api-Key`, `Ocp-Apim-Subscription-Key`, `Authorization`)."""

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#@\s]+)@")
_HEADER_VALUE = re.compile(
    rf"(?<![A-Za-z0-9_.-])(?P<name>{_SECRET_NAME}(?:\\?[\"'])?\s*[:=]\s*(?:\\?[\"'])?)"
    r"(?P<value>(?:(?:bearer|basic|token)\s+)?[^\s\"'\\,;}&]+)",
    re.IGNORECASE,
)
_FLAG_VALUE = re.compile(rf"(?P<name>(?<!\S)--?{_SECRET_NAME}(?:=|\s+)[\"']?)(?P<value>[^\s\"']+)", re.IGNORECASE)
"""A secret-named command-line option and its value (`--api-key X`, `--hf-token=X`), as a server command holds it."""
_SECRET_OPTION = re.compile(rf"--?{_SECRET_NAME}(?:=(?P<value>.+))?", re.IGNORECASE)
"""One argv word that is a secret-named option, with its value when written `--name=value`."""
_BEARER = re.compile(r"(?P<name>\b(?:bearer|basic)\s+)(?P<value>[A-Za-z0-9._~+/=-]{4,})", re.IGNORECASE)
_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}|\\[/\\\"']|%[0-9a-fA-F]{2}")

_lock = threading.Lock()
_secrets: set[str] = set()
_grams: dict[int, frozenset[str]] = {}
"""Runs of the registered secrets by length; replaced whole under `_lock`, never changed in place, so a reader
takes the current dict without the lock."""


def _base64_forms(secret: str) -> list[str]:
    """The base64 text a secret becomes at each of the three byte alignments (inside `user:secret`, say).

    Only the characters that depend on the secret's bytes alone are kept, in standard and URL-safe alphabets.
    """
    raw = secret.encode("utf-8")
    forms = []
    for offset, skip in ((0, 0), (1, 2), (2, 3)):
        data = b"\0" * offset + raw
        whole = len(data) // 3 * 3
        encoded = base64.b64encode(data[:whole]).decode("ascii")[skip:]
        if encoded:
            forms += [encoded, encoded.replace("+", "-").replace("/", "_")]
    return forms


def secret_forms(secret: str) -> list[str]:
    """The forms of a secret that `redact` matches in a text (escaped forms are matched by decoding the text)."""
    return [secret, quote(secret, safe=""), *_base64_forms(secret)]


def register_secret(value: str | None) -> None:
    """Remember a secret (an API key, a URL password, a header value): `redact` masks it anywhere."""
    if not value or len(value.strip()) < _MIN_SECRET_LENGTH:
        return
    with _lock:
        _secrets.add(value.strip())
        grams: dict[int, set[str]] = {}
        for secret in _secrets:
            for form in secret_forms(secret):
                size = min(SECRET_RUN, len(form))
                if size >= _MIN_SECRET_LENGTH:
                    grams.setdefault(size, set()).update(form[i:i + size] for i in range(len(form) - size + 1))
        _set_grams({size: frozenset(found) for size, found in grams.items()})


def _set_grams(grams: dict[int, frozenset[str]]) -> None:
    """Publish a new gram table (the caller holds `_lock`)."""
    global _grams
    _grams = grams


def forget_secrets() -> None:
    """Forget every registered secret (a process that runs several benchmarks, such as a test session)."""
    with _lock:
        _secrets.clear()
        _set_grams({})


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


def _decoded(text: str, spans: list[tuple[int, int]] | None) -> tuple[str, list[tuple[int, int]]]:
    """The text with one level of JSON (`\\/`, `\\uXXXX`) and URL (`%XX`) escapes decoded, and for each
    decoded character the span of the original text it came from (through `spans`, an earlier decoding)."""
    out: list[str] = []
    where: list[tuple[int, int]] = []
    last = 0
    for match in _ESCAPE.finditer(text):
        for index in range(last, match.start()):
            out.append(text[index])
            where.append((index, index + 1))
        token = match.group()
        if token.startswith("\\u"):
            out.append(chr(int(token[2:], 16)))
        elif token.startswith("%"):
            out.append(chr(int(token[1:], 16)))
        else:
            out.append(token[1])
        where.append((match.start(), match.end()))
        last = match.end()
    for index in range(last, len(text)):
        out.append(text[index])
        where.append((index, index + 1))
    if spans is not None:
        where = [(spans[start][0], spans[end - 1][1]) for start, end in where]
    return "".join(out), where


def _secret_spans(text: str) -> list[tuple[int, int]]:
    """Spans of the text that hold a run of a registered secret, raw or under up to two levels of escaping."""
    grams = _grams
    if not grams:
        return []
    found: list[tuple[int, int]] = []
    views: list[tuple[str, list[tuple[int, int]] | None]] = [(text, None)]
    if _ESCAPE.search(text):
        once = _decoded(text, None)
        views.append(once)
        if _ESCAPE.search(once[0]):
            views.append(_decoded(*once))
    for view, spans in views:
        for size, known in grams.items():
            for start in range(len(view) - size + 1):
                if view[start:start + size] in known:
                    found.append((start, start + size) if spans is None else
                                 (spans[start][0], spans[start + size - 1][1]))
    return found


def _mask_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """The text with each span (overlapping or touching ones merged) replaced by the mask."""
    if not spans:
        return text
    merged: list[list[int]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    pieces: list[str] = []
    last = 0
    for start, stop in merged:
        pieces += [text[last:start], MASK]
        last = stop
    pieces.append(text[last:])
    return "".join(pieces)


def redact_known(text: str) -> str:
    """Text with every registered secret (in any form, any run of `SECRET_RUN` of it) and URL userinfo masked."""
    if not text:
        return text
    text = _mask_spans(text, _secret_spans(text))
    return _USERINFO.sub(lambda match: f"{match.group('scheme')}{MASK}@", text) if "@" in text else text


def redact(text: str) -> str:
    """Server-echoed text with registered secrets, URL userinfo, secret-named values and bearer tokens masked."""
    if not text:
        return text
    if ":" in text or "=" in text:  # a secret-named value needs one of them; plain names and ids skip the search
        text = _HEADER_VALUE.sub(lambda match: f"{match.group('name')}{MASK}", text)
    if "-" in text:  # a secret-named option starts with a dash
        text = _FLAG_VALUE.sub(lambda match: f"{match.group('name')}{MASK}", text)
    if " " in text or not text.isprintable():  # a bearer token follows whitespace (isprintable is False for any other)
        text = _BEARER.sub(lambda match: f"{match.group('name')}{MASK}", text)
    return redact_known(text)


def command_secrets(argv: Iterable[str]) -> list[str]:
    """The values of a command's secret-named options (`--api-key X`, `--hf-token=X`), to register as secrets."""
    found: list[str] = []
    words = list(argv)
    for index, word in enumerate(words):
        match = _SECRET_OPTION.fullmatch(word)
        if match is None:
            continue
        value = match.group("value") if match.group("value") is not None else (
            words[index + 1] if index + 1 < len(words) else None)
        if value and not value.startswith("-"):
            found.append(value)
    return found


def _secret_key(key: object) -> bool:
    """Whether a JSON key names a secret (`api_key`, `Password`, `auth`, `x_token`: the header rule)."""
    return isinstance(key, str) and SENSITIVE_HEADER.match(key.strip()) is not None


def key_secrets(value: JsonValue | JsonMapping, *, under_secret: bool = False) -> list[str]:
    """Every scalar under a secret-named key of a JSON value, at any depth, as text: to register as secrets."""
    if isinstance(value, Mapping):
        return [found for key, item in value.items()
                for found in key_secrets(item, under_secret=under_secret or _secret_key(key))]
    if isinstance(value, list | tuple):
        return [found for item in value for found in key_secrets(item, under_secret=under_secret)]
    if under_secret and value is not None and not isinstance(value, bool):
        return [str(value)]
    return []


def masked_by_key(value: JsonValue) -> JsonValue:
    """A JSON value with the value of every secret-named key, at any depth, replaced by the mask (whatever its
    type or length: a secret too short to register is masked here too)."""
    if isinstance(value, dict):
        return {key: MASK if _secret_key(key) else masked_by_key(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [masked_by_key(item) for item in value]
    return value


@overload
def redact_tree(value: JsonObject) -> JsonObject: ...
@overload
def redact_tree(value: JsonValue) -> JsonValue: ...
def redact_tree(value: JsonValue) -> JsonValue:
    """A JSON-ready value with `redact` applied to every string in it (keys included), at any depth."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(key) if isinstance(key, str) else key: redact_tree(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(item) for item in value]
    return value


def one_line(text: str, limit: int = 500) -> str:
    """Redacted text on one line (line breaks and control characters become spaces), at most `limit` chars.

    Redaction comes first, over more than is kept, so a secret cut by the limit is masked whole.
    """
    flat = " ".join(redact(text[: limit + _WINDOW_MARGIN]).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class RedactingStream(io.TextIOBase):
    """A text stream that masks registered secrets (`redact_known`) in everything written through it."""

    def __init__(self, stream: TextIO) -> None:
        """Wrap `stream` (e.g. sys.stderr); everything else is delegated to it."""
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        """Write the text with secrets masked; return the length of the text given."""
        self._stream.write(redact_known(text))
        return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream."""
        self._stream.flush()

    def isatty(self) -> bool:
        """Whether the wrapped stream is a terminal."""
        return bool(self._stream.isatty())

    def fileno(self) -> int:
        """The wrapped stream's file descriptor."""
        return int(self._stream.fileno())

    # typeshed declares TextIOBase's `encoding` and `errors` writeable attributes; at run time they are read-only
    # descriptors, so read-only properties override them as the runtime allows
    @property
    def encoding(self) -> str | None:  # type: ignore[override]
        """The wrapped stream's encoding."""
        return getattr(self._stream, "encoding", None)

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        """The wrapped stream's error handler."""
        return getattr(self._stream, "errors", None)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacting_std_streams() -> Iterator[None]:
    """Within the block, everything written to stdout and stderr passes through `RedactingStream`."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
