"""The Mermaid speedup chart against the rules of Mermaid's xychart grammar that it relies on.

Rules (from mermaid-js `packages/mermaid/src/diagrams/xychart/parser/xychart.jison`, the lexer and
grammar GitHub's renderer uses for `xychart-beta`):

R1. The block is fenced as ```mermaid ... ```; after optional YAML front matter between `---` lines,
    its first line is the keyword `xychart-beta`, optionally followed by `horizontal`.
R2. Each further line is one statement: `title <text>`, `x-axis <text> [<text>, ...]`,
    `y-axis <text> <number> --> <number>`, `bar <text>? [<number>, ...]` or `line <text>? [<number>, ...]`.
R3. A quoted text is `"` then `[^"]*` then `"` (the lexer's `string` state): it cannot hold a
    double quote, and there is no escape. A `"` directly followed by a backtick opens a markdown
    string instead, so a text never starts with a backtick.
R4. A number is `[+-]?(?:\\d+(?:\\.\\d+)?|\\.\\d+)`: no exponent, no NaN, no infinity, no empty slot.
R5. `%%` starts a comment anywhere outside a string (even right after a character), and `;` ends a
    statement, so neither may appear outside quotes; inside quotes we avoid them too (older lexers
    had a `title` state ending at `;`), and a line break ends every statement.
R6. Every `bar`/`line` list has one number per x-axis label (Mermaid pairs them by position).
R7. The x-axis list holds at least one label (`commaSeparatedTexts` has no empty form).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.render import mermaid_text, speedup_chart, sweep_chart

STRING = r'"(?!`)[^"\n;]*"'
NUMBER = r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)"
STATEMENTS = {
    "title": re.compile(rf"title {STRING}"),
    "x-axis": re.compile(rf"x-axis {STRING} \[(?P<items>{STRING}(?:, {STRING})*)\]"),
    "y-axis": re.compile(rf"y-axis {STRING} {NUMBER} --> {NUMBER}"),
    "bar": re.compile(rf"bar (?:(?P<name>{STRING}) )?\[(?P<items>{NUMBER}(?:, {NUMBER})*)\]"),
    "line": re.compile(rf"line (?:(?P<name>{STRING}) )?\[(?P<items>{NUMBER}(?:, {NUMBER})*)\]"),
}
FRONT_MATTER = re.compile(r"---\n(?:[ A-Za-z]+:(?: [^\n]*)?\n)+---\n")
"""Front matter as the charts write it: `key:` or `key: value` lines between `---` lines."""


def _blocks(markdown: str) -> list[list[str]]:
    return [FRONT_MATTER.sub("", block, count=1).split("\n")
            for block in re.findall(r"```mermaid\n(.*?)\n```", markdown, flags=re.S)]


def check_xychart(markdown: str) -> dict[str, list[str]]:
    """Validate the one xychart block in `markdown` against R1-R7; return its statements' item lists.

    Named series are returned under `bar` / `line` (the first of each) and every series under `series`."""
    blocks = _blocks(markdown)
    assert len(blocks) == 1, "exactly one fenced mermaid block"  # R1
    lines = blocks[0]
    assert lines[0] in ("xychart-beta", "xychart-beta horizontal")  # R1
    found: dict[str, list[str]] = {}
    series: list[tuple[str, str | None, list[str]]] = []
    for line in lines[1:]:
        statement = line.strip()
        outside = re.sub(r'"[^"]*"', '""', statement)
        assert "%%" not in statement and ";" not in outside  # R5
        keyword = statement.split(" ", 1)[0]
        pattern = STATEMENTS.get(keyword)
        assert pattern is not None, f"unknown statement {statement!r}"  # R2
        match = pattern.fullmatch(statement)
        assert match, f"{statement!r} breaks the {keyword} rule"  # R2-R4
        items = match.groupdict().get("items")
        values = re.findall(STRING if keyword == "x-axis" else NUMBER, items) if items else []
        if keyword in ("bar", "line"):
            series.append((keyword, match.group("name"), values))
        found.setdefault(keyword, values)
    labels = found.get("x-axis", [])
    assert labels, "the x-axis needs at least one label"  # R7
    for _, _, values in series:
        assert len(values) == len(labels)  # R6
    found["series"] = [f"{kind} {name}" for kind, name, _ in series]
    return found


def test_chart_follows_the_grammar_and_carries_the_values() -> None:
    chart = speedup_chart("Speedup per category", ["coding", "math", "overall"], [1.26, 1.3, 1.27], [1.13, 0.98, 1.14])
    found = check_xychart(chart)
    assert found["x-axis"] == ['"coding: decode"', '"coding: latency"', '"math: decode"', '"math: latency"',
                               '"overall: decode"', '"overall: latency"']
    assert found["bar"] == ["1.26", "0.00", "1.30", "0.00", "1.27", "0.00"]
    assert 'bar "latency speedup" [0.00, 1.13, 0.00, 0.98, 0.00, 1.14]' in chart  # bars: no line joins categories
    assert 'y-axis "speedup (x)" 0 --> 1.50' in chart
    assert found["series"] == ['bar "decode speedup"', 'bar "latency speedup"', 'line "1.00x = no change"']
    assert 'line "1.00x = no change" [1.00, 1.00, 1.00, 1.00, 1.00, 1.00]' in chart  # the reference, one per row
    assert "_Blue bars: decode speedup; orange bars: latency speedup; grey line: 1.00x = no change; " in chart


def test_eleven_categories_are_horizontal_bars_with_a_legend_and_room_for_them() -> None:
    names = ["coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay", "stem",
             "summarization", "writing"]
    chart = speedup_chart("t", names, [1.1] * 11, [1.0] * 11)
    found = check_xychart(chart)
    assert _blocks(chart)[0][0] == "xychart-beta horizontal"  # one row per category: labels never collide
    assert len(found["x-axis"]) == 22  # a decode and a latency row per category
    assert "    showLegend: true" in chart
    height = int(re.search(r"height: (\d+)", chart).group(1))
    assert height >= 22 * 25  # at least 25 px a row
    palette = re.search(r'plotColorPalette: "([^"]+)"', chart).group(1).split(", ")
    assert len(palette) == len(found["series"])  # one colour per series, in the legend sentence's order


@pytest.mark.parametrize(
    "name",
    ['say "hi"', "semi;colon", "100%% done", "`tick", "new\nline", "tab\there", "a, b [c]", "#35;", ""],
)
def test_awkward_labels_and_titles_stay_inside_the_grammar(name: str) -> None:
    chart = speedup_chart(name, [name, "plain"], [1.5, 2.0], [1.1, 1.2])
    found = check_xychart(chart)
    assert len(found["x-axis"]) == 4
    assert mermaid_text(name) == (mermaid_text(name).strip() or "(unnamed)")


def test_missing_values_are_left_out_and_named() -> None:
    chart = speedup_chart("t", ["coding", "math", "qa"], [1.2, None, 1.4], [1.1, 1.0, math.nan])
    found = check_xychart(chart)
    assert found["x-axis"] == ['"coding: decode"', '"coding: latency"']
    assert "_Not charted: math (decode speedup n/a), qa (latency speedup n/a)._" in chart


def test_a_series_missing_everywhere_is_dropped_and_named() -> None:
    chart = speedup_chart("t", ["coding", "math"], [1.2, 1.3], [None, None])
    found = check_xychart(chart)
    assert found["series"] == ['bar "decode speedup"', 'line "1.00x = no change"'] and found["bar"] == ["1.20", "1.30"]
    assert "_Latency speedup n/a for every category._" in chart
    assert "Blue bars: decode speedup; grey line" in chart


def test_nothing_to_chart_is_a_sentence_not_a_broken_block() -> None:
    for categories, values in (([], []), (["qa"], [None])):
        chart = speedup_chart("t", categories, values, values)
        assert _blocks(chart) == [] and chart.startswith("_No speedup to chart")
    only_gaps = speedup_chart("t", ["a", "b"], [None, 1.0], [1.1, None])
    assert _blocks(only_gaps) == [] and "a (decode speedup n/a), b (latency speedup n/a)" in only_gaps


def test_the_axis_starts_at_zero_and_covers_every_value() -> None:
    chart = speedup_chart("t", ["a", "b"], [3.37, 0.4], [0.2, 2.9])
    top = float(re.search(r"0 --> ([\d.]+)", chart).group(1))
    assert top >= 3.37 and top == pytest.approx(math.ceil(3.37 * 1.1 * 4) / 4)


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(ValueError):
        speedup_chart("t", ["a"], [1.0, 2.0], [1.0])


MERMAID_DIR = Path(__file__).parent / "mermaid"


def real_parse(bodies: list[str]) -> list[str]:
    """Each block's diagram type (or `error: ...`) from the real Mermaid parser that `make mermaid` installs."""
    node = shutil.which("node")
    if node is None or not (MERMAID_DIR / "node_modules" / "mermaid").exists():
        reason = "the Mermaid parser is not installed: `make mermaid` installs it (needs node and npm)"
        if os.environ.get("CI") == "true" and shutil.which("npm"):
            pytest.fail(reason)  # in CI with npm the check must run: a skip would hide a failed install
        pytest.skip(reason)
    done = subprocess.run([node, str(MERMAID_DIR / "parse.mjs")], input=json.dumps(bodies), cwd=MERMAID_DIR,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _bodies(markdown: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)```", markdown, flags=re.S)


def test_the_real_mermaid_parser_accepts_every_chart() -> None:
    names = ["coding", "humanities (no drafts)", "math", "multilingual", "qa", "rag", "reasoning", "roleplay",
             "stem", "summarization", "writing"]
    charts = [speedup_chart(name, [name, "b"], [1.5, 2.0], [1.1, None]) for name in ('say "hi"', "a;b", "x%%y")]
    charts.append(speedup_chart("t", names, [1.2] * 11, [0.9] * 11))
    charts.append(speedup_chart("t", ["a", "b"], [1.2, 1.3], [None, None]))
    charts.append(sweep_chart("Throughput", [1, 2, 4], {"ngram-mod:draft_max=8": [1.1, 1.0, 0.9], "b;%%": [1, 2, 3]}))
    bodies = [body for chart in charts for body in _bodies(chart)]
    assert len(bodies) == len(charts)
    assert real_parse(bodies) == ["xychart"] * len(bodies)


def test_the_real_mermaid_parser_rejects_a_broken_chart() -> None:
    """The parser check can fail: a data list cut short is an error, not a chart."""
    (result,) = real_parse(['xychart-beta\n    x-axis "c" ["a", "b"]\n    bar [1.0, 2.0\n'])
    assert result.startswith("error:")


@pytest.mark.parametrize(
    "body",
    [
        'xychart-beta\n    x-axis "c" ["a "b"", "c"]\n    bar [1.0, 2.0]',  # R3: a quote inside a text
        'xychart-beta\n    x-axis "c" ["a", "b"]\n    bar [1.0, NaN]',  # R4
        'xychart-beta\n    x-axis "c" ["a", "b"]\n    bar [1.0, 1e3]',  # R4
        'xychart-beta\n    x-axis "c" ["a", "b"]\n    bar [1.0]',  # R6
        'xychart-beta\n    title "a";b\n    x-axis "c" ["a"]',  # R5
        'xychart-beta\n    title "a %% b"\n    x-axis "c" ["a"]',  # R5
        'xychart\n    x-axis "c" ["a"]',  # R1
        'xychart-beta\n    x-axis "c" []',  # R7
        'xychart-beta\n    x-axis "c" ["`a`"]',  # R3: a markdown string
    ],
)
def test_the_rule_check_rejects_what_the_grammar_rejects(body: str) -> None:
    with pytest.raises(AssertionError):
        check_xychart(f"```mermaid\n{body}\n```\n")
