"""What `bench` prints: a screen's worth a workload (decision, SpeedBench table, narrow paired table, one line a
note kind, files), every table with `--verbose`."""

from __future__ import annotations

from pathlib import Path

from bench.analysis import compare
from bench.pipeline import PipelineConfig, run_pipeline
from bench.render import CONSOLE_LINES, console_text, note_lines, render_text
from bench.runner import SilentProgress
from tests.fakeserver import FakeServer, FakeState
from tests.test_explain import _result, _run


def _bench(tmp_path: Path, *, verbose: bool) -> str:
    lines: list[str] = []
    base, spec = FakeServer(FakeState()), FakeServer(FakeState(drafting=True))
    base.start()
    spec.start()
    try:
        code = run_pipeline(PipelineConfig.build(limit=2, osl=4, base_url=base.url, spec_url=spec.url,
                                                 results_dir=str(tmp_path), bench="grounded,qualitative"),
                            out=lines.append, progress=SilentProgress(), verbose=verbose)
    finally:
        base.stop()
        spec.stop()
    printed = "".join(lines)
    assert code == 0, printed
    return printed


def test_each_workload_fits_a_screen_and_verbose_prints_every_table(tmp_path: Path) -> None:
    printed = _bench(tmp_path / "short", verbose=False)
    workloads = printed.split("speedbench: wrote in ")
    assert len(workloads) == 3  # two workloads, then the report and the decision
    for index, chunk in enumerate(workloads[:2]):
        lines = (chunk if index == 0 else chunk.split("\n", 1)[1]).rstrip("\n").splitlines()
        assert len(lines) + 1 <= CONSOLE_LINES, "\n".join(lines)  # + its `wrote` line
    assert printed.count("\ndecision: ngram-mod vs baseline: decode ") == 2
    assert printed.strip().splitlines()[-1].startswith("speedbench: decision: ")
    assert "Speedup explained" not in printed and "Lossless check" not in printed and "decode_mde" not in printed
    folder = next(path for path in (tmp_path / "short").glob("*/*-grounded"))
    reference = (folder / "comparison.txt").read_text().split("\n\n", 1)[0]
    assert reference.startswith("Comparison: ") and reference + "\n" in printed  # the SpeedBench table unchanged
    assert "comparison.txt, comparison.md, comparison.json, plots/speedup.png" in printed
    verbose = _bench(tmp_path / "long", verbose=True)
    assert "Lossless check" in verbose and "decode_mde" in verbose and len(verbose.splitlines()) > len(
        printed.splitlines())


def test_note_kinds_are_one_line_each_naming_their_rows() -> None:
    base = _run([_result(f"{cat}{i}", cat, tokens=100, ms=1000.0 * (1 + 0.01 * i)) for cat in ("code", "chat", "qa")
                 for i in range(4)])
    spec = _run([_result(f"{cat}{i}", cat, tokens=100, ms=800.0 * (1 + 0.01 * i),
                         spec={"drafts": 80 if cat != "qa" else 20, "accepted": 40}) for cat in ("code", "chat", "qa")
                 for i in range(4)])
    comparison = compare(base, spec)
    notes = [line for line in note_lines(comparison) if "not reconciled" in line]
    assert len(notes) == 1
    assert notes[0].endswith("(code, chat)") and "more drafts than decode steps" in notes[0]
    text = console_text(comparison)
    assert text.count("not reconciled") == 1 and "reconciles on 2 of 4 rows" in text
    assert console_text(comparison, verbose=True) == render_text(comparison)

