"""`--help`: every option of every command has help and shows its default; means are named where printed."""

from __future__ import annotations

import argparse

import pytest

from bench.analysis import DECODE_SPEEDUP, GateRow
from bench.cli import build_parser, main
from bench.render import gate_markdown, gate_text, stats_text


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(command: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in command._actions if action.option_strings and action.dest != "help"]


def test_every_option_has_help() -> None:
    missing = [f"{name} {action.option_strings[0]}" for name, command in _commands().items()
               for action in _options(command) if not (action.help or "").strip()]
    assert missing == []


def test_every_option_shows_its_default() -> None:
    unexplained = []
    for name, command in _commands().items():
        formatter = command._get_formatter()
        for action in _options(command):
            text = formatter._get_help_string(action) % {"default": action.default}
            flag = isinstance(action, argparse._StoreTrueAction)
            if not (flag or action.required or "default" in text.lower()):
                unexplained.append(f"{name} {action.option_strings[0]}: {text}")
    assert unexplained == []


def test_help_prints_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "output sequence length, sent as max_tokens (default: 4096)" in out
    assert 'extra request fields (JSON object) (default: {"temperature": 0})' in out
    assert "--limit LIMIT at most this many samples per category (default: every sample)" in out
    assert main(["regress", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--threshold-decode THRESHOLD_DECODE threshold of the decode metric (default: --threshold)" in out
    assert "--resamples" not in out and "--seed" not in out  # the gate draws nothing: no option pretends it does


def test_stats_and_regress_name_their_means() -> None:
    legend = "geometric mean of per-sample speedups (the SpeedBench table: ratio of arithmetic means)"
    assert legend in stats_text([], 0.02)
    rows = [GateRow("overall", DECODE_SPEEDUP, 5, 1.2, 1.1, 0.917, 0.9, 0.95, "REGRESSED")]
    text = gate_text(rows)
    assert text.startswith("speedbench regress: 1 regression(s): overall decode speedup\n")
    assert text.split("\n")[1].startswith("reference, candidate: geometric means over the samples both share")
    assert "geometric mean of per-sample candidate/reference ratios" in gate_markdown(rows)
