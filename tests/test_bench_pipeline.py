"""`bench` fails fast on bad options and unreachable servers, runs several workloads, and ends with the decision."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.cli import main
from bench.pipeline import PipelineConfig, run_pipeline
from bench.runner import SilentProgress
from tests.fakeserver import FakeServer, FakeState


@contextlib.contextmanager
def _serving(state: FakeState) -> Iterator[FakeServer]:
    server = FakeServer(state)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once the socket is closed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--limit", "0"], "--limit must be >= 1 (got 0)"),
        (["--osl", "0"], "--osl must be >= 1"),
        (["--threads", "0"], "--threads must be >= 1"),
        (["--concurrency", "0"], "--concurrency must be >= 1"),
        (["--bench", ","], "--bench needs one or more different prompt sets"),
        (["--category", "nope"], "nope"),
    ],
)
def test_bad_options_are_refused_before_any_server_starts(tmp_path: Path, capsys, args: list[str],
                                                           message: str) -> None:
    assert main(["bench", "--results-dir", str(tmp_path / "results"), "--quiet", *args]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and len(captured.err.strip().splitlines()) == 1
    assert "starting embedded" not in captured.out + captured.err
    assert not (tmp_path / "results").exists()  # nothing written


def test_an_unreachable_server_is_one_line_naming_its_url_and_the_cause(tmp_path: Path, capsys) -> None:
    port = _closed_port()
    with _serving(FakeState()) as good:
        code = main(["bench", "--base-url", good.url, "--spec-url", f"http://127.0.0.1:{port}", "--quiet",
                     "--results-dir", str(tmp_path / "results")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip() == (
        f"speedbench: error: cannot reach the speculative server at http://127.0.0.1:{port}: connection refused"
    )
    assert not (tmp_path / "results").exists()


def test_two_workloads_run_in_turn_and_end_with_one_decision_over_both(tmp_path: Path) -> None:
    lines: list[str] = []
    with _serving(FakeState()) as base, _serving(FakeState(drafting=True)) as spec:
        code = run_pipeline(PipelineConfig.build(limit=1, osl=4, base_url=base.url, spec_url=spec.url,
                                           results_dir=str(tmp_path), bench="qualitative,throughput_1k"),
                            out=lines.append, progress=SilentProgress())
    printed = "".join(lines)
    assert code == 0, printed
    (top,) = tmp_path.iterdir()
    workloads = sorted(path.name.split("-", 1)[1] for path in top.iterdir() if (path / "baseline.json").exists())
    assert workloads == ["qualitative", "throughput_1k"]
    last = printed.strip().splitlines()[-1]
    assert last.startswith("speedbench: decision: ") and "qualitative: decode" in last and "throughput_1k:" in last
    report = (top / "report.md").read_text()
    assert report.splitlines()[2] == f"**{last.removeprefix('speedbench: decision: ')}.**".replace("[", "\\[").replace(
        "]", "\\]")
    (top / "report.md").unlink()
    assert main(["report", "--latest", str(tmp_path)]) == 0  # make report: the newest folder, every workload
    again = (top / "report.md").read_text()
    assert "## Workload: qualitative" in again and "## Workload: throughput_1k" in again
    assert again.splitlines()[2] == report.splitlines()[2]


def test_an_external_server_that_was_not_fresh_is_named_with_how_to_start_a_fresh_one(tmp_path: Path) -> None:
    lines: list[str] = []
    warm = FakeState(drafting=True, drafts=40, draft_tokens=160, accepted=90)  # a drafter that served before
    with _serving(FakeState()) as base, _serving(warm) as spec:
        code = run_pipeline(PipelineConfig.build(limit=1, osl=4, base_url=base.url, spec_url=spec.url, category="qa",
                                           results_dir=str(tmp_path)), out=lines.append, progress=SilentProgress())
    printed = "".join(lines)
    assert code == 0, printed
    hints = [line for line in printed.splitlines() if "was not fresh when its run began" in line]
    assert len(hints) == 1 and hints[0].startswith(f"speedbench: warning: the speculative server at {spec.url}")
    assert "drafter warm: 160 tokens drafted" in hints[0]
    assert "`speedbench serve --mode ngram-mod`" in hints[0] and "leave out --spec-url" in hints[0]
