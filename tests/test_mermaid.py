"""The Mermaid speedup chart against the rules of Mermaid's xychart grammar that it relies on.

Rules (from mermaid-js `packages/mermaid/src/diagrams/xychart/parser/xychart.jison`, the lexer and
grammar GitHub's renderer uses for `xychart-beta`):

R1. The block is fenced as ```mermaid ... ``` and its first line is the keyword `xychart-beta`.
R2. Each further line is one statement: `title <text>`, `x-axis <text> [<text>, ...]`,
    `y-axis <text> <number> --> <number>`, `bar [<number>, ...]` or `line [<number>, ...]`.
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

from bench.render import mermaid_text, speedup_chart

STRING = r'"(?!`)[^"\n;]*"'
NUMBER = r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)"
STATEMENTS = {
    "title": re.compile(rf"title {STRING}"),
    "x-axis": re.compile(rf"x-axis {STRING} \[(?P<items>{STRING}(?:, {STRING})*)\]"),
    "y-axis": re.compile(rf"y-axis {STRING} {NUMBER} --> {NUMBER}"),
    "bar": re.compile(rf"bar \[(?P<items>{NUMBER}(?:, {NUMBER})*)\]"),
    "line": re.compile(rf"line \[(?P<items>{NUMBER}(?:, {NUMBER})*)\]"),
}


def _blocks(markdown: str) -> list[list[str]]:
    return [block.split("\n") for block in re.findall(r"```mermaid\n(.*?)\n```", markdown, flags=re.S)]


def check_xychart(markdown: str) -> dict[str, list[str]]:
    """Validate the one xychart block in `markdown` against R1-R7; return its statements' item lists."""
    blocks = _blocks(markdown)
    assert len(blocks) == 1, "exactly one fenced mermaid block"  # R1
    lines = blocks[0]
    assert lines[0] == "xychart-beta"  # R1
    found: dict[str, list[str]] = {}
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
        found[keyword] = re.findall(STRING if keyword == "x-axis" else NUMBER, items) if items else []
    labels = found.get("x-axis", [])
    assert labels, "the x-axis needs at least one label"  # R7
    for keyword in ("bar", "line"):
        if keyword in found:
            assert len(found[keyword]) == len(labels)  # R6
    return found


def test_chart_follows_the_grammar_and_carries_the_values() -> None:
    chart = speedup_chart("Speedup per category", ["coding", "math", "overall"], [1.26, 1.3, 1.27], [1.13, 0.98, 1.14])
    found = check_xychart(chart)
    assert found["x-axis"] == ['"coding"', '"math"', '"overall"']
    assert found["bar"] == ["1.26", "1.30", "1.27"] and found["line"] == ["1.13", "0.98", "1.14"]
    assert 'y-axis "speedup (x), 1.00 = no change" 0 --> 1.50' in chart
    assert "_Bars: decode speedup; line: latency speedup, speculative vs baseline (1.00 = no change)._" in chart


@pytest.mark.parametrize(
    "name",
    ['say "hi"', "semi;colon", "100%% done", "`tick", "new\nline", "tab\there", "a, b [c]", "#35;", ""],
)
def test_awkward_labels_and_titles_stay_inside_the_grammar(name: str) -> None:
    chart = speedup_chart(name, [name, "plain"], [1.5, 2.0], [1.1, 1.2])
    found = check_xychart(chart)
    assert len(found["x-axis"]) == 2
    assert mermaid_text(name) == (mermaid_text(name).strip() or "(unnamed)")


def test_missing_values_are_left_out_and_named() -> None:
    chart = speedup_chart("t", ["coding", "math", "qa"], [1.2, None, 1.4], [1.1, 1.0, math.nan])
    found = check_xychart(chart)
    assert found["x-axis"] == ['"coding"']
    assert "_Not charted: math (decode speedup n/a), qa (latency speedup n/a)._" in chart


def test_a_series_missing_everywhere_is_dropped_and_named() -> None:
    chart = speedup_chart("t", ["coding", "math"], [1.2, 1.3], [None, None])
    found = check_xychart(chart)
    assert "line" not in found and found["bar"] == ["1.20", "1.30"]
    assert "_Latency speedup n/a for every category._" in chart
    assert "Bars: decode speedup, speculative" in chart


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


def test_the_real_mermaid_parser_accepts_the_chart(tmp_path: Path) -> None:
    """Opt-in: SPEEDBENCH_MERMAID_DIR names a folder with `npm install mermaid jsdom` done (no network here)."""
    folder = os.environ.get("SPEEDBENCH_MERMAID_DIR")
    node = shutil.which("node")
    if not folder or not node or not (Path(folder) / "node_modules" / "mermaid").exists():
        pytest.skip("set SPEEDBENCH_MERMAID_DIR to a folder where `npm install mermaid jsdom` was run")
    charts = [speedup_chart(name, [name, "b"], [1.5, 2.0], [1.1, None]) for name in ('say "hi"', "a;b", "x%%y")]
    charts.append(speedup_chart("t", ["coding", "math"], [1.2, 1.3], [1.1, 0.9]))
    script = (
        "import {JSDOM} from 'jsdom'; const dom = new JSDOM('<!doctype html><body></body>');"
        "globalThis.window = dom.window; globalThis.document = dom.window.document;"
        "const mermaid = (await import('mermaid')).default; mermaid.initialize({startOnLoad: false});"
        "const out = []; for (const text of JSON.parse(process.argv[1])) {"
        "  try { out.push((await mermaid.parse(text)).diagramType); } catch (e) { out.push(String(e.message)); } }"
        "console.log(JSON.stringify(out));"
    )
    bodies = [block for chart in charts for block in re.findall(r"```mermaid\n(.*?)```", chart, flags=re.S)]
    done = subprocess.run([node, "--input-type=module", "-e", script, json.dumps(bodies)], cwd=folder,
                          capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["xychart"] * len(bodies)


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
