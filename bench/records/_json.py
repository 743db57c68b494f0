"""Run files' bytes at C speed: msgspec's encoder, mended to the bytes `json.dumps(indent=2, sort_keys=True)` writes.

The reference layout is Python's: keys sorted, two-space indent, every non-ASCII character and DEL escaped as
`\\uXXXX`, floats as `repr` writes them (`1e-05`, `1e+16`). msgspec writes the same structure but leaves text as
UTF-8 and spells some floats otherwise (`0.00001`, `1e16`), so those two are mended on its bytes, each found by
C-speed searches: a float is mended only where a value ends its line (every scalar of an indented document
does), so text that looks like a number is left alone. NaN and infinities are written as null (as `finite`
makes them); what msgspec cannot encode (a lone surrogate, an integer past 64 bits, an unknown type) takes
Python's encoder, which gives the reference bytes or its error.
"""

from __future__ import annotations

import codecs
import json
from json.encoder import encode_basestring_ascii

import msgspec

from bench.records._schema import finite

_ENCODER = msgspec.json.Encoder(order="sorted")
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NUMBER = frozenset(b"0.-+e")
"""Bytes of a float once every digit reads 0."""
_ESCAPES = "speedbench-json-escape"


def _escape(error: UnicodeError) -> tuple[str, int]:
    """Python's `\\uXXXX` escapes of the characters that are not ASCII."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return encode_basestring_ascii(error.object[error.start:error.end])[1:-1], error.end


codecs.register_error(_ESCAPES, _escape)


def _python(payload: object) -> bytes:
    try:
        text = json.dumps(payload, indent=2, sort_keys=True, allow_nan=False)
    except ValueError:
        text = json.dumps(finite(payload), indent=2, sort_keys=True, allow_nan=False)
    return text.encode("ascii")


def _value_at(shape: bytes, index: int) -> tuple[int, int] | None:
    """(start, end) of the float around `index` when it is a whole value ending its line, else None."""
    start, end = index, index
    while start > 0 and shape[start - 1] in _NUMBER:
        start -= 1
    while end < len(shape) and shape[end] in _NUMBER:
        end += 1
    before_ok = start == 0 or shape[start - 1] == ord(" ")
    after = shape[end:end + 2]
    after_ok = after[:1] in (b"", b"\n") or after in (b",\n", b",")
    return (start, end) if before_ok and after_ok else None


def _candidates(document: bytes, shape: bytes) -> set[int]:
    """Where a float may be spelled otherwise than `repr` spells it: an exponent, or four zeros after the point."""
    found: set[int] = set()
    for text, needle in ((shape, b"0e"), (document, b"0.0000")):
        index = text.find(needle)
        while index != -1:
            found.add(index)
            index = text.find(needle, index + 1)
    return found


def _mend_floats(document: bytes) -> bytes:
    """Every float that ends its line, spelled as `repr` spells it."""
    shape = document.translate(_DIGITS_AS_ZERO)
    spans = {span for index in _candidates(document, shape) if (span := _value_at(shape, index)) is not None}
    if not spans:
        return document
    pieces, done = [], 0
    for start, end in sorted(spans):
        token = document[start:end]
        if b"." not in token and b"e" not in token:
            continue
        pieces += [document[done:start], repr(float(token)).encode("ascii")]
        done = end
    return b"".join([*pieces, document[done:]])


def reference_json(payload: object) -> bytes:
    """`payload` as `json.dumps(payload, indent=2, sort_keys=True, allow_nan=False)` writes it, NaN as null."""
    try:
        compact = _ENCODER.encode(payload)
    except (TypeError, OverflowError, UnicodeEncodeError, msgspec.EncodeError):
        return _python(payload)
    document = _mend_floats(msgspec.json.format(compact, indent=2))
    if not document.isascii():
        document = document.decode("utf-8").encode("ascii", _ESCAPES)
    return document.replace(b"\x7f", b"\\u007f")  # DEL is ASCII, but Python escapes it too (it is only in text)


def python_reference_json(payload: object) -> bytes:
    """The same bytes from Python's own encoder: what `reference_json` is checked against."""
    return _python(payload)
