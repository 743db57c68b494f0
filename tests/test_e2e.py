"""End to end on the real embedded llama.cpp server: baseline and ngram-mod runs, comparison, lossless check."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from bench.analysis import lossless_check
from bench.cli import main
from bench.pipeline import PipelineConfig, run_pipeline, write_comparison
from bench.prompts import PromptSet, Sample
from bench.records import Run, load_run
from bench.runner import RunConfig, SilentProgress, run_benchmark
from bench.server import EmbeddedServer, ServerConfig

pytestmark = pytest.mark.e2e

REPETITIVE = PromptSet(
    samples=(
        Sample(id="rep-1", category="coding", turns=(  # the default model repeats it: ngram-mod drafts
            "Repeat exactly: red green blue red green blue red green blue red green blue red green blue",)),
        Sample(id="rep-2", category="qa", turns=("Say hello.", "Now say: one two three four five six seven eight")),
    ),
    source="test", bench="qualitative", categories=("coding", "qa"),
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def _run(mode: str, output: Path, stream: bool = False) -> tuple:
    server = EmbeddedServer(ServerConfig(mode=mode))
    server.start()
    pid = server.pid
    try:
        run, _ = run_benchmark(REPETITIVE, RunConfig(url=server.url, osl=64, stream=stream), output=output,
                               install_signal_handlers=False)
    finally:
        server.stop()
    assert pid is not None and not _alive(pid)
    return run


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run, Run]:
    """A baseline and a streamed ngram-mod run of the same prompts on fresh embedded servers."""
    folder = tmp_path_factory.mktemp("real")
    return folder, _run("baseline", folder / "baseline.json"), _run("ngram-mod", folder / "spec.json", stream=True)


def test_the_reference_compare_reads_our_real_run_files(real_runs: tuple[Path, Run, Run], reference_compare,
                                                         capsys, monkeypatch) -> None:
    folder, _, _ = real_runs
    args = ["--baseline", "baseline.json", "--speculative", "spec.json"]
    theirs = reference_compare(args, folder)
    assert theirs.returncode == 0, theirs.stderr
    monkeypatch.chdir(folder)
    assert main(["compare", *args]) == 0
    assert capsys.readouterr().out == theirs.stdout


def test_baseline_and_ngram_mod_runs_compare(real_runs: tuple[Path, Run, Run], tmp_path: Path, capsys) -> None:
    folder, baseline, speculative = real_runs
    for name in ("baseline.json", "spec.json"):
        shutil.copy(folder / name, tmp_path / name)
    assert baseline.failed_samples == 0 and speculative.failed_samples == 0
    assert baseline.meta["engine"] == "llamacpp"
    assert all(row["accept_rate"] is None for row in baseline.summary)
    assert speculative.summary[-1]["accept_rate"] is not None
    assert speculative.meta["acceptance"]["drafts"] > 0
    # streaming on the real server: client-side decode rate agrees with the server's
    for result in speculative.results:
        assert result.ttft_s is not None and result.client_decode_t_s is not None
        if result.turns == 1:  # multi-turn server rates use the reference's token totals
            assert result.client_decode_t_s == pytest.approx(result.predicted_per_second, rel=0.02)
    code = main(["compare", "--baseline", str(tmp_path / "baseline.json"),
                 "--speculative", str(tmp_path / "spec.json"), "--stats", "--min-pairs", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith(f"Comparison: baseline={tmp_path / 'baseline.json'} speculative={tmp_path / 'spec.json'}\n")
    assert "Lossless check" in out and "Paired statistics" in out
    checked = lossless_check(load_run(tmp_path / "baseline.json"), load_run(tmp_path / "spec.json"))
    rows = [row.as_cells() for row in checked]
    assert rows[-1]["compared"] == 2
    comparison, files = write_comparison(load_run(tmp_path / "baseline.json"), load_run(tmp_path / "spec.json"),
                                         tmp_path)
    assert (tmp_path / "plots" / "speedup.png").stat().st_size > 10_000
    assert files[0].read_text().startswith("Comparison:")
    assert comparison.stats[-1].category == "overall"


def test_pipeline_writes_results_folder(tmp_path: Path) -> None:
    lines: list[str] = []
    code = run_pipeline(
        PipelineConfig.build(limit=1, osl=16, category="coding,qa", results_dir=str(tmp_path)),
        out=lines.append, progress=SilentProgress(),
    )
    assert code == 0, "".join(lines)
    (folder,) = tmp_path.iterdir()
    names = {path.name for path in folder.iterdir()}
    assert {"baseline.json", "speculative.json", "comparison.txt", "comparison.md", "plots"} <= names
    assert folder.name.endswith("-ngram-mod")
    assert "Comparison: baseline=" in "".join(lines)


def test_missing_model_is_a_clear_error_before_anything_runs(tmp_path: Path, capsys) -> None:
    code = main(["bench", "--server-model", str(tmp_path / "nope.gguf"), "--results-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "model file not found" in err and len(err.strip().splitlines()) == 1
    assert sys.exc_info() == (None, None, None)


def test_a_server_that_dies_mid_run_keeps_results_and_shows_its_log(tmp_path: Path, monkeypatch) -> None:
    import signal
    import threading

    original_start = EmbeddedServer.start

    def start_then_die(self: EmbeddedServer, timeout: float = 120.0) -> None:
        original_start(self, timeout)
        threading.Timer(2.5, lambda: os.kill(self.pid, signal.SIGKILL)).start()

    monkeypatch.setattr(EmbeddedServer, "start", start_then_die)
    lines: list[str] = []
    code = run_pipeline(PipelineConfig.build(limit=4, osl=48, category="coding", results_dir=str(tmp_path)),
                        out=lines.append, progress=SilentProgress())
    text = "".join(lines)
    assert code == 1, text
    assert "the baseline server died during the run; its last log lines:" in text
    (folder,) = tmp_path.iterdir()
    run = load_run(folder / "baseline.json")
    assert run.failed_samples >= 1 and len(run.results) == 4
    # interleaved: both servers were up from the start, and the speculative arm's results are kept too
    assert len(load_run(folder / "speculative.json").results) == 4


def test_serve_command_runs_until_ctrl_c(tmp_path: Path) -> None:
    import re
    import signal
    import subprocess
    import urllib.request

    process = subprocess.Popen([sys.executable, "-m", "bench", "serve", "--mode", "ngram-mod"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        match = re.search(r"ngram-mod server at (http://127\.0\.0\.1:\d+) \(Ctrl-C to stop\)", line)
        assert match, line + process.stderr.read()
        with urllib.request.urlopen(match.group(1) + "/health", timeout=30) as response:
            assert response.status == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    with pytest.raises(OSError):
        urllib.request.urlopen(match.group(1) + "/health", timeout=5)
