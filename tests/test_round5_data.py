"""Adversarial round 5 (data): each case a fault found by feeding speedbench hostile files, names and options."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from tests.test_history import SAMPLE, _history, synthetic_points


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _exit_code(args: list[str]) -> int:
    """main's exit code, whether it returns it or argparse exits with it."""
    try:
        return main(args)
    except SystemExit as exited:
        return int(exited.code or 0)


# ---------------------------------------------------------------- 6. gate thresholds


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-0.1", "0", "1", "5", "1e300"])
def test_a_gate_threshold_outside_0_1_is_one_usage_line(tmp_path: Path, capsys, value: str) -> None:
    history = _history(tmp_path, synthetic_points(30, step_at=15, seed=5))
    for args in (["history", "check", "--history", str(history), f"--threshold={value}"],
                 ["regress", "--reference", str(SAMPLE), "--candidate", str(SAMPLE), f"--threshold={value}"],
                 ["regress", "--reference", str(SAMPLE), "--candidate", str(SAMPLE), f"--threshold-decode={value}"]):
        assert _exit_code(args) == 2
        line = _one_line(capsys.readouterr().err)
        assert "threshold" in line and "between 0 and 1" in line, line


def test_a_threshold_inside_0_1_still_gates(tmp_path: Path, capsys) -> None:
    history = _history(tmp_path, synthetic_points(30, step_at=15, seed=5))
    assert main(["history", "check", "--history", str(history), "--threshold", "0.05"]) == 1
    assert main(["history", "check", "--history", str(history), "--threshold", "0.5"]) == 0
