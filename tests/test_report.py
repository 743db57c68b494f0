"""The report opens with its title, then the decision; several workloads share it; external servers show how they
drafted."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from bench.analysis import compare
from bench.records import Run, SampleResult, summarize
from bench.render import decision_line, render_report, write_report


def _run(bench: str, speedup: float, *, drafted: int, mode: str | None, seed: int) -> Run:
    rng = np.random.default_rng(seed)
    results = []
    for index in range(12):
        rate = 20.0 * float(np.exp(rng.normal(0.0, 0.2))) * speedup
        results.append(SampleResult(id=f"{bench}-{index}", category=("coding", "qa")[index % 2], ok=True, turns=1,
                                    latency_s=64.0 / rate, predicted_per_second=rate, completion_tokens=64,
                                    outputs=("x",), draft_n=drafted, draft_n_accepted=drafted // 2))
    config = {"bench": bench, "osl": 64, "tags": {"mode": mode} if mode else {}}
    return Run(config=config, selected_samples=12, results=tuple(results), summary=tuple(summarize(results)))


def _comparison(bench: str, speedup: float, *, spec_mode: str | None = "ngram-mod", drafted: int = 32):
    return compare(_run(bench, 1.0, drafted=0, mode="baseline", seed=1),
                   _run(bench, speedup, drafted=drafted, mode=spec_mode, seed=1))


def test_the_title_then_the_overall_decision_with_intervals_open_the_report() -> None:
    report = render_report(_comparison("grounded", 1.5), title="T")
    assert report.splitlines()[:2] == ["# T", ""]
    first = report.splitlines()[2]
    assert re.fullmatch(r"\*\*ngram-mod vs baseline: decode 1\.50x \\\[1\.\d\d, 1\.\d\d\\\] faster, latency 1\.50x "
                        r"\\\[1\.\d\d, 1\.\d\d\\\] faster \(12 prompts, 25\.0% of the output drafted\)\.\*\*", first)
    assert report.index("# T\n") < report.index("```mermaid")
    legend = report.splitlines()[4]  # one short line; the long legend waits in a details block
    assert legend.startswith("_") and len(legend.split()) <= 15
    assert report.splitlines()[6].startswith("<details><summary>How the decision is drawn</summary>")


def test_two_workloads_share_the_decision_line_and_get_a_section_each(tmp_path: Path) -> None:
    grounded, qualitative = _comparison("grounded", 1.5), _comparison("qualitative", 1.0)
    line = decision_line([grounded, qualitative])
    assert "grounded: decode 1.50x" in line and "qualitative: decode 1.00x" in line
    assert line.index("grounded") < line.index("qualitative") and "no significant change" in line
    report = write_report([grounded, qualitative], tmp_path, title="both").read_text()
    assert report.splitlines()[2] == line
    assert "## Workload: grounded" in report and "## Workload: qualitative" in report
    assert report.count("```mermaid") == 2 and "### Paired statistics" in report
    assert "- `plots/grounded/speedup.png`" in report and (tmp_path / "plots" / "qualitative" / "latency.png").exists()


def test_an_external_server_that_drafted_shows_it_instead_of_na() -> None:
    report = render_report(_comparison("qualitative", 1.2, spec_mode=None))
    row = next(line for line in report.splitlines() if line.startswith("| speculative mode |"))
    assert row == ("| speculative mode | baseline | speculative (drafted 384 tokens; the server does not report its "
                   "mode) |")
    silent = render_report(_comparison("qualitative", 1.2, spec_mode=None, drafted=0))
    assert "| speculative mode | baseline | n/a |" in silent


def _as_reported(run: Run, speculative: str | None, **settings: object) -> Run:
    from dataclasses import replace

    from bench.records import ServerDescription

    described = ServerDescription(engine="llamacpp", speculative=speculative, draft_settings=settings)
    return replace(run, meta=replace(run.info, server=described))


def test_labels_and_draft_settings_come_from_what_the_servers_report() -> None:
    base = _as_reported(_run("grounded", 1.0, drafted=0, mode="baseline", seed=1), "none")
    # `bench --spec-url` tags the run with --spec's default; the server says what it runs
    spec = _as_reported(_run("grounded", 1.4, drafted=32, mode="ngram-mod", seed=1), "draft",
                        **{"speculative.n_max": 16, "speculative.p_min": 0.75})
    line = decision_line([compare(base, spec)])
    assert line.startswith("**draft vs baseline: decode 1.40x")
    report = render_report(compare(base, spec))
    assert "| speculative mode | baseline | draft |" in report
    assert "| draft settings (server) | n/a | n_max 16, p_min 0.75 |" in report
    off = _as_reported(_run("grounded", 1.0, drafted=0, mode="ngram-mod", seed=1), "none")
    assert decision_line([compare(base, off)]).startswith("**baseline vs baseline:")  # speculation off, said so


def test_without_paired_statistics_the_decision_says_why() -> None:
    base = _run("qualitative", 1.0, drafted=0, mode="baseline", seed=1)
    spec = _run("other", 1.2, drafted=8, mode="ngram-mod", seed=2)  # different ids: nothing pairs
    first = render_report(compare(base, spec)).splitlines()[2]
    assert first.startswith("**ngram-mod vs baseline: no paired statistics (only 0 successful samples match")


def test_a_warning_both_interleaved_runs_recorded_is_said_once() -> None:
    note = "the client's event loop stalled 3 times over 10 ms during the run"
    base = _run("qualitative", 1.0, drafted=0, mode="baseline", seed=1)
    spec = _run("qualitative", 1.2, drafted=8, mode="ngram-mod", seed=1)
    base, spec = (Run(config=run.config, selected_samples=run.selected_samples, results=run.results,
                      summary=run.summary, meta={"warnings": [note]}) for run in (base, spec))
    report = render_report(compare(base, spec))
    assert report.count(note) == 1 and f"both runs warned: {note}" in report
