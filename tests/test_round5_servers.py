"""Adversarial round 5, the servers' side: tune's servers and resume, its templates, URLs, workers and the probe."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.test_adversarial import _dataset, _main, _one_line_error

# ---------------------------------------------------------------- 12. a malformed URL


@pytest.mark.parametrize("args", [
    ["run", "--url", "http://[::1:8080", "--osl", "4", "--output", "{tmp}/r.json", "--dataset", "{data}"],
    ["run", "--url", "http://127.0.0.1:1,http://[::1", "--output", "{tmp}/r.json", "--dataset", "{data}"],
    ["bench", "--base-url", "http://[::1:8080", "--spec-url", "http://127.0.0.1:1", "--results-dir", "{tmp}/r"],
    ["tune", "--base-url", "http://[::1:8080", "--spec-cmd", f"{sys.executable} {{port}} {{draft_max}}",
     "--dataset", "{data}", "--results-dir", "{tmp}/r"],
])
def test_an_ipv6_bracket_left_open_is_one_line(args: list[str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data = _dataset(tmp_path, 2)
    code, _, err = _main(capsys, *(arg.replace("{tmp}", str(tmp_path)).replace("{data}", str(data))
                                   for arg in args))
    assert code == 2 and "Invalid IPv6 URL" in err, err
    _one_line_error(err)
    assert not (tmp_path / "r").exists() and not (tmp_path / "r.json").exists()
