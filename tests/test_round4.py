"""Adversarial round 4: each case a fault found by trying a feature as an adversary would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli
from bench.records import load_run
from tests.test_adversarial import _dataset, _fake, _main, _one_line_error
from tests.test_report_regress import comparison_pair  # noqa: F401  (a fixture)

# ---------------------------------------------------------------- 4. plots written through planted links


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    return victim


@pytest.mark.parametrize("name", ["plots/speedup.png", "plots/speedup.svg", "plots/latency.png"])
def test_a_link_planted_among_a_reports_plots_is_refused_in_one_line(
    comparison_pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str  # noqa: F811
) -> None:
    ref, _ = comparison_pair
    victim = _victim(tmp_path)
    planted = tmp_path / "r" / name
    planted.parent.mkdir(parents=True)
    planted.symlink_to(victim)
    code, _, err = _main(capsys, "report", "--baseline", str(ref / "baseline.json"), "--speculative",
                         str(ref / "speculative.json"), "--out", str(tmp_path / "r"))
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert code == 2 and "symbolic link" in err, err
    _one_line_error(err)


@pytest.mark.parametrize("plant", ["link", "fifo"])
def test_a_runs_timeline_plot_is_never_written_through_a_link_or_into_a_fifo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plant: str
) -> None:
    victim = _victim(tmp_path)
    timeline = tmp_path / "r.timeline.png"
    if plant == "link":
        timeline.symlink_to(victim)
    else:
        os.mkfifo(timeline)
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 4)), "--osl",
                             "4", "--request-rate", "50", "--output", str(tmp_path / "r.json"), "--quiet")
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert code == 2 and ("symbolic link" if plant == "link" else "not a regular file") in err, err
    _one_line_error(err)
    assert len(load_run(tmp_path / "r.json").results) == 4  # the run itself is kept


def test_every_plot_writer_refuses_a_planted_link(tmp_path: Path) -> None:
    from bench import BenchError
    from bench.render import plot_timeline

    victim = _victim(tmp_path)
    (tmp_path / "timeline.svg").symlink_to(victim)
    with pytest.raises(BenchError, match="symbolic link"):
        plot_timeline({"run": []}, tmp_path, formats=("svg",))
    assert victim.read_text(encoding="utf-8") == "precious\n"


def test_every_savefig_in_the_package_writes_to_a_handle_opened_without_following_links() -> None:
    import re

    calls = []
    for path in Path(__file__).parent.parent.joinpath("bench").rglob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if ".savefig(" in line:
                calls.append(path.name)
                assert re.search(r"\.savefig\(handle,", line), f"{path}:{number + 1}: {line.strip()}"
                assert "open_no_follow(" in lines[number - 1], f"{path}:{number + 1}: the handle's open"
    assert len(calls) >= 3  # the shared plot writer and the sweep's two figures


# ---------------------------------------------------------------- 5. a FIFO as the step summary


def test_a_fifo_as_the_step_summary_does_not_hang_regress(comparison_pair: tuple[Path, Path],  # noqa: F811
                                                           tmp_path: Path) -> None:
    ref, cand = comparison_pair
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "bench", "regress", "--reference", str(ref), "--candidate",
                           str(cand)], env={**os.environ, "GITHUB_STEP_SUMMARY": str(fifo)}, capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).parent.parent)
    assert done.stdout.startswith("speedbench regress: 0 regression(s)\n"), done.stdout + done.stderr
    assert done.returncode == 2 and "not a regular file" in done.stderr, done.stderr
    _one_line_error(done.stderr)


def test_the_plain_files_a_step_summary_is_still_appended_to(comparison_pair: tuple[Path, Path],  # noqa: F811
                                                              tmp_path: Path, monkeypatch) -> None:
    ref, cand = comparison_pair
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert cli.main(["regress", "--reference", str(ref), "--candidate", str(cand)]) == 0
    assert summary.read_text().startswith("earlier step\n### speedbench regress: ")
