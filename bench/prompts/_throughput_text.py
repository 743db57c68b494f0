"""Throughput prompt text: the offline token estimate, the shipped prompts cut into units, each tier's stream.

`_throughput` describes the tiers and fits the units to a target length.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._errors import BenchError
from bench.prompts._sets import Sample, read_rows, rows_to_samples

_BYTE_CLASS = bytes(
    ord("q") if byte < 0xCC else ord("o") if 0xE3 <= byte <= 0xED or byte >= 0xEF else ord("h") for byte in range(256)
)
"""UTF-8 lead byte -> q (U+0000-U+02FF), h (U+0300-U+2FFF, U+E000-U+EFFF) or o (CJK and the rest)."""
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))
_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+|(?<=[。！？；])|\n")
_CODE_BLOCK = re.compile(r"```([\w+-]*)\n(.*?)```", re.DOTALL)
_FUNCTION_NAME = re.compile(r"\b(?:def|function|fn|func)\s+([A-Za-z_]\w*)")
_SCRIPT_RANGES = (
    ("Greek", 0x0370, 0x03FF),
    ("Cyrillic", 0x0400, 0x04FF),
    ("Hebrew", 0x0590, 0x05FF),
    ("Arabic", 0x0600, 0x06FF),
    ("Devanagari", 0x0900, 0x097F),
    ("Thai", 0x0E00, 0x0E7F),
    ("Kana", 0x3040, 0x30FF),
    ("Han", 0x4E00, 0x9FFF),
    ("Hangul", 0xAC00, 0xD7AF),
)
_TABLE_HEADER = "| # | id | sub_category | difficulty | turns | words | opening |\n|---|---|---|---|---|---|---|\n"
_RECORD_WINDOW = 6
"""Table rows and records cycle through this many consecutive samples of one category."""
_OTHER_CAP = 150
_MULTILINGUAL_CAP = 100


def estimate_tokens(texts: Sequence[str]) -> list[int]:
    """Offline token estimate per text: 4 Latin chars, 2 other-script chars or 1 CJK char a token.

    The rule, with no tokenizer: characters up to U+02FF (ASCII, accented Latin letters, digits,
    punctuation, whitespace) count a quarter of a token; characters from U+3000 to U+DFFF (CJK
    symbols, kana, ideographs, Hangul syllables), from U+F000 to U+FFFF (compatibility
    ideographs, full-width forms) and above U+FFFF (ideograph extensions, emoji) count one token
    each; every other character (Greek, Cyrillic, Hebrew, Arabic, Devanagari, Thai, typographic
    punctuation...) counts half a token. The sum is rounded up, so an empty text is 0 tokens. The
    ranges follow UTF-8 lead bytes, so the count is a few C-level byte operations per text.
    """
    counts = []
    for text in texts:
        if text.isascii():
            counts.append((len(text) + 3) // 4)
            continue
        classes = text.encode("utf-8", "surrogatepass").translate(_BYTE_CLASS, _CONTINUATION_BYTES)
        quarter = classes.count(b"q")
        half = classes.count(b"h")
        one = len(classes) - quarter - half
        counts.append((quarter + 2 * half + 4 * one + 3) // 4)
    return counts


@dataclass(frozen=True, slots=True)
class Unit:
    """A piece of prompt text (with its trailing separator) and, for prose, where it came from."""

    text: str
    category: str | None = None
    script: str | None = None


@dataclass(frozen=True, slots=True)
class Source:
    """The shipped samples, and their prose split into paragraph-sized units."""

    samples: tuple[Sample, ...]
    prose: dict[str, list[Unit]]
    multilingual: dict[str, list[Unit]]
    code: tuple[tuple[str, str, str], ...]


def _script(text: str) -> str:
    """The script with the most letters in a text (`Kana` for Japanese, whose kanji are Han), else `Latin`."""
    counts: dict[str, int] = {}
    for char in text:
        point = ord(char)
        if point < 0x0370:
            if char.isalpha():
                counts["Latin"] = counts.get("Latin", 0) + 1
            continue
        for name, low, high in _SCRIPT_RANGES:
            if low <= point <= high:
                counts[name] = counts.get(name, 0) + 1
                break
    if not counts:
        return "Latin"
    top = max(sorted(counts), key=lambda name: counts[name])
    if top == "Han" and counts.get("Kana", 0) * 10 > counts["Han"]:
        return "Kana"
    return top


def _pieces(paragraph: str, cap: int) -> list[str]:
    """A paragraph as-is, or split at sentence ends (or line breaks) into pieces of about `cap` tokens."""
    if estimate_tokens([paragraph])[0] <= cap:
        return [paragraph]
    pieces: list[str] = []
    start = 0
    last = 0
    for match in _SENTENCE_END.finditer(paragraph):
        end = match.start()
        if end > last and estimate_tokens([paragraph[start:end]])[0] > cap and last > start:
            pieces.append(paragraph[start:last].strip())
            start = last
        last = match.end()
    pieces.append(paragraph[start:].strip())
    return [piece for piece in pieces if piece]


def load_source(folder: Path) -> Source:
    """Read every `*.jsonl` in `folder` and cut its prose into units."""
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise BenchError(f"{folder}: no category files (*.jsonl) found")
    samples: list[Sample] = []
    for path in files:
        samples.extend(rows_to_samples(read_rows(path))[0])
    if not samples:
        raise BenchError(f"{folder}: no usable samples in the category files")
    prose: dict[str, list[Unit]] = {}
    multilingual: dict[str, list[Unit]] = {}
    code: list[tuple[str, str, str]] = []
    for sample in samples:
        name = sample.category
        is_multilingual = name == "multilingual"
        script = _script("".join(sample.turns)) if is_multilingual else "Latin"
        cap = _MULTILINGUAL_CAP if is_multilingual else _OTHER_CAP
        for turn in sample.turns:
            for paragraph in _PARAGRAPH_SPLIT.split(turn):
                if not paragraph.strip():
                    continue
                for piece in _pieces(paragraph.strip(), cap):
                    group = multilingual.setdefault(script, []) if is_multilingual else prose.setdefault(name, [])
                    group.append(Unit(piece + "\n\n", sample.category, script))
            if sample.category == "coding":
                for match in _CODE_BLOCK.finditer(turn):
                    body = match.group(2).strip("\n")
                    if len(body) >= 150:
                        code.append((sample.id, match.group(1) or "text", body))
    if not prose and not multilingual:
        raise BenchError(f"{folder}: the category files hold no text")
    return Source(tuple(samples), prose, multilingual, tuple(code))


def _cycle(units: Sequence[Unit], rng: random.Random) -> Iterator[Unit]:
    """Units in a shuffled order, reshuffled each time they run out."""
    order = list(units)
    while True:
        rng.shuffle(order)
        yield from order


def _round_robin(groups: dict[str, list[Unit]], rng: random.Random) -> Iterator[Unit]:
    """One unit from each group per round, the groups in a new shuffled order every round."""
    streams = {name: _cycle(units, rng) for name, units in sorted(groups.items()) if units}
    names = list(streams)
    while names:
        rng.shuffle(names)
        for name in names:
            yield next(streams[name])


def high_units(source: Source, rng: random.Random) -> Iterator[Unit]:
    """Interleaved prose: two units from the other categories, then one multilingual unit, and so on."""
    others = _round_robin(source.prose, rng)
    languages = _round_robin(source.multilingual, rng)
    if not source.prose:
        yield from languages
    if not source.multilingual:
        yield from others
    while True:
        yield next(others)
        yield next(languages)
        yield next(others)


def _opening(text: str) -> str:
    """The first six words of a text, at most 48 characters."""
    return " ".join(text.split()[:6])[:48].replace("|", "/")


def low_units(source: Source, kind: str, rng: random.Random) -> tuple[str, Iterator[Unit]]:
    """A description and an endless stream of repetitive units of one kind."""
    if kind == "code" and source.code:
        sample_id, language, code = rng.choice(source.code)
        match = _FUNCTION_NAME.search(code)
        pattern = re.compile(rf"\b{re.escape(match.group(1))}\b") if match else None

        def variants() -> Iterator[Unit]:
            number = 1
            while True:
                text = pattern.sub(f"{match.group(1)}_{number}", code) if pattern and match else code
                yield Unit(f"Variant {number} ({sample_id}):\n```{language}\n{text}\n```\n\n")
                number += 1

        return f"code variants of {sample_id} ({language})", variants()
    groups: dict[str, list[Sample]] = {}
    for sample in source.samples:
        groups.setdefault(sample.category, []).append(sample)
    category = rng.choice(sorted(groups))
    start = rng.randrange(len(groups[category]))
    members = (groups[category] * 2)[start : start + _RECORD_WINDOW]
    if kind == "code":
        kind = "table"

    rows = [
        (
            sample.id,
            sample.sub_category or "-",
            sample.difficulty or "-",
            str(len(sample.turns)),
            str(len(sample.turns[0].split())),
            _opening(sample.turns[0]),
        )
        for sample in members
    ]

    def entries() -> Iterator[Unit]:
        number = 1
        while True:
            fields = rows[(number - 1) % len(rows)]
            if kind == "table":
                header = _TABLE_HEADER if number % 32 == 1 else ""
                yield Unit(header + f"| {number} | " + " | ".join(fields) + " |\n")
            else:
                yield Unit(
                    f"Record {number}\n  id: {fields[0]}\n  category: {category}\n  sub_category: {fields[1]}\n"
                    f"  difficulty: {fields[2]}\n  turns: {fields[3]}\n  words: {fields[4]}\n  opening: {fields[5]}\n\n"
                )
            number += 1

    return f"{kind} of {category} prompts", entries()


def mixed_units(low: Iterator[Unit], high: Iterator[Unit], chunk: int) -> Iterator[Unit]:
    """Alternating chunks of about `chunk` estimated tokens, low entropy first, keeping the two totals level."""
    totals = [0, 0]
    goal = 0
    while True:
        goal += chunk
        for side, stream in enumerate((low, high)):
            unit = None
            while totals[side] < goal:
                unit = next(stream)
                totals[side] += estimate_tokens([unit.text])[0]
                yield unit
            if unit is not None and not unit.text.endswith("\n\n"):
                yield Unit("\n")


def prose_summary(units: Sequence[Unit]) -> str:
    """How many categories and scripts the prose units come from."""
    categories = {unit.category for unit in units if unit.category}
    scripts = {unit.script for unit in units if unit.script}
    return f"paragraphs from {len(categories)} categories in {len(scripts)} scripts"
