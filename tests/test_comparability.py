"""The comparability check: each mismatch is named and graded; summary-only files are not checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.analysis import (
    ERROR,
    NOTHING_CHECKED,
    WARNING,
    Comparability,
    Difference,
    check_comparable,
    check_regress_comparable,
)
from bench.records import Run, SampleResult, load_run, save_run, summarize
from bench.runner import RunConfig, prompts_digest, run_benchmark
from tests.conftest import DATA, make_prompts
from tests.fakeserver import FakeServer

CONFIG = {
    "bench": "qualitative", "dataset": "categories", "osl": 32, "concurrency": 1, "api": "chat",
    "extra_inputs": {"temperature": 0}, "category": "all", "limit": 2, "repeat": 1, "revision": None,
    "stream": False, "warmup": 0, "tags": {}, "model": None,
}


def _results(ids: list[str], *, ok: bool = True, drafted: int = 0) -> tuple[SampleResult, ...]:
    return tuple(
        SampleResult(id=sample, category=sample.split("-")[0], ok=ok, turns=1, latency_s=1.0 + index,
                     predicted_per_second=20.0 + index, draft_n=drafted, draft_n_accepted=drafted // 2)
        for index, sample in enumerate(ids)
    )


def _run(ids: list[str] | None = None, *, path: str | None = None, meta: dict | None = None,
         selected: int | None = None, ok: bool = True, drafted: int = 0, **config) -> Run:
    ids = ids if ids is not None else ["qa-001", "qa-002", "math-001", "math-002"]
    results = _results(ids, ok=ok, drafted=drafted)
    base_meta = {"prompts_sha256": "a" * 64, "engine": "llamacpp", "interrupted": False,
                 "harness": {"name": "speedbench", "version": "0.1.0"}, "elapsed_s": len(ids)}
    return Run(
        config={**CONFIG, **config}, selected_samples=selected if selected is not None else len(ids), results=results,
        summary=tuple(summarize(list(results))), meta={**base_meta, **(meta or {})}, path=path,
    )


def _fields(check: Comparability, severity: str) -> set[str]:
    return {d.field for d in check.differences if d.severity == severity}


def test_matching_runs_have_no_difference_and_no_flag() -> None:
    check = check_comparable(_run(meta={"elapsed_s": 1}), _run(meta={"elapsed_s": 2}, drafted=4))
    assert check.checked and check.differences == () and check.flags == ()
    assert check.errors == () and check.warnings == () and check.partial == () and check.failed == ()


def test_unrelated_runs_name_every_meaning_changing_difference() -> None:
    # shipped qa,math prompts at osl 32 against Spec-Bench prompts at osl 16 (a mismatch of prompts and osl)
    shipped = _run(["qa-001", "math-001"])
    spec_bench = _run(["81", "82"], dataset="spec-bench.jsonl", osl=16, meta={"prompts_sha256": "b" * 64})
    check = check_comparable(shipped, spec_bench)
    assert {"dataset", "osl", "sample ids"} <= _fields(check, ERROR)
    osl = next(d for d in check.errors if d.field == "osl")
    assert osl == Difference("osl", "32", "16", ERROR)
    assert osl.message == "osl differs: baseline=32 speculative=16"
    assert all(line.startswith(("error: ", "warning: ", "note: ")) for line in check.lines())


@pytest.mark.parametrize(
    ("key", "first", "second"),
    [("bench", "qualitative", "throughput_2k"), ("concurrency", 1, 2), ("osl", 64, 16), ("api", "chat", "completions")],
)
def test_settings_that_change_the_meaning_are_errors(key: str, first, second) -> None:
    check = check_comparable(_run(**{key: first}), _run(**{key: second}, meta={"elapsed_s": 9}))
    assert [d.field for d in check.errors] == [key]


@pytest.mark.parametrize(
    ("key", "first", "second"),
    [("extra_inputs", {"temperature": 0}, {"temperature": 0.7}), ("category", "all", "math"),
     ("stream", False, True), ("revision", None, "abc")],
)
def test_lesser_settings_are_warnings(key: str, first, second) -> None:
    check = check_comparable(_run(**{key: first}), _run(**{key: second}, meta={"elapsed_s": 9}))
    assert check.errors == () and [d.field for d in check.warnings] == [key]


def test_engine_model_and_harness_version_are_warnings() -> None:
    base = _run(meta={"engine": "llamacpp", "server": {"models": {"data": [{"id": "/home/u/a.gguf"}]}}})
    spec = _run(meta={"engine": "vllm", "harness": {"name": "speedbench", "version": "0.2.0"},
                      "server": {"models": {"data": [{"id": "/home/u/b.gguf"}]}}})
    check = check_comparable(base, spec)
    assert check.errors == ()
    assert _fields(check, WARNING) == {"engine", "model", "harness version"}
    model = next(d for d in check.warnings if d.field == "model")
    assert (model.baseline, model.speculative) == ("a.gguf", "b.gguf")  # file names, never local paths


def test_same_selection_with_another_prompt_digest_is_an_error() -> None:
    check = check_comparable(_run(), _run(meta={"prompts_sha256": "b" * 64}))
    assert [d.field for d in check.errors] == ["prompts (sha256)"]


def test_another_selection_explains_the_digest_and_compares_shared_samples() -> None:
    # LIMIT=2 against LIMIT=1: the digests differ because the selection does; the shared sample ids are compared
    check = check_comparable(_run(), _run(["qa-001", "math-001"], limit=1, meta={"prompts_sha256": "c" * 64}))
    assert check.errors == ()
    assert _fields(check, WARNING) == {"limit", "sample ids"}
    assert any("selections differ" in note for note in check.notes)


def test_regress_pairs_name_the_configuration_differences() -> None:
    # a LIMIT=2/OSL=64 reference against a LIMIT=1/OSL=16 candidate called two regressions silently
    reference = _run(osl=64, tags={"mode": "ngram-mod"})
    candidate = _run(["qa-001", "math-001"], osl=16, limit=1, tags={"mode": "draft"}, meta={"prompts_sha256": "d" * 64})
    check = check_regress_comparable(reference, candidate)
    assert _fields(check, ERROR) == {"osl"}
    assert {"limit", "sample ids", "speculative mode"} <= _fields(check, WARNING)
    assert check.errors[0].message == "osl differs: reference=64 candidate=16"


def test_a_baseline_that_drafted_is_flagged() -> None:
    check = check_comparable(_run(drafted=8), _run(drafted=8, meta={"elapsed_s": 3}))
    assert [d.field for d in check.warnings] == ["speculative mode"]


def test_every_sample_failed_is_an_error_and_a_flag() -> None:
    # server down, every sample failed, compare printed a table of n/a and exit 0
    check = check_comparable(_run(), _run(ok=False))
    assert [d.field for d in check.errors] == ["successful samples"]
    assert [arm.arm for arm in check.failed] == ["speculative"]
    assert check.flags == ("speculative ((in memory)): 4 of 4 samples failed",)


def test_some_failed_samples_are_flagged_not_refused() -> None:
    spec = _run()
    spec = Run(config=spec.config, selected_samples=4, summary=spec.summary, meta=spec.meta,
               results=(*spec.results[:3], *_results(["math-002"], ok=False)))
    check = check_comparable(_run(), spec)
    assert check.errors == () and len(check.failed) == 1 and "1 of 4 samples failed" in check.flags[0]


def test_interrupted_and_partial_runs_are_flagged() -> None:
    # Ctrl-C in the speculative phase: 7 of 11 categories recorded, "interrupted": true
    interrupted = _run(["qa-001", "math-001"], selected=4, meta={"interrupted": True})
    check = check_comparable(_run(), interrupted)
    assert [arm.arm for arm in check.partial] == ["speculative"]
    assert check.partial[0].interrupted and "interrupted, 2 of 4 samples recorded" in check.flags[0]
    # fewer results than selected counts as partial even without the flag (a journal read back)
    short = check_comparable(_run(selected=9), _run())
    assert [arm.arm for arm in short.partial] == ["baseline"]


def test_same_path_twice_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    save_run(_run(), path)
    run = load_run(path)
    check = check_comparable(run, load_run(path))
    assert "file" in _fields(check, ERROR)
    assert any("same file" in note for note in check.notes)


def test_identical_copies_are_an_error_and_distinct_runs_are_not(tmp_path: Path) -> None:
    save_run(_run(), tmp_path / "a.json")
    shutil.copy(tmp_path / "a.json", tmp_path / "b.json")
    save_run(_run(meta={"elapsed_s": 77}), tmp_path / "c.json")
    copy = check_comparable(load_run(tmp_path / "a.json"), load_run(tmp_path / "b.json"))
    assert [d.field for d in copy.errors] == ["file"]
    distinct = check_comparable(load_run(tmp_path / "a.json"), load_run(tmp_path / "c.json"))
    assert distinct.errors == ()


def test_summary_only_files_are_not_checked_and_say_so_once(tmp_path: Path) -> None:
    for name, source in (("base.json", "reference_baseline.json"), ("spec.json", "reference_speculative.json")):
        data = json.loads((DATA / source).read_text())
        (tmp_path / name).write_text(json.dumps({"summary": data["summary"]}))
    check = check_comparable(load_run(tmp_path / "base.json"), load_run(tmp_path / "spec.json"))
    assert not check.checked and check.differences == () and check.arms == ()
    assert len(check.notes) == 1 and check.notes[0].startswith(NOTHING_CHECKED)


def test_reference_files_are_checked_by_sample_id() -> None:
    check = check_comparable(load_run(DATA / "reference_baseline.json"), load_run(DATA / "reference_speculative.json"))
    assert check.checked and check.errors == ()
    assert any("no prompt digest" in note for note in check.notes)


def test_runner_records_the_prompt_digest_in_the_run_file(fake_server: FakeServer, tmp_path: Path) -> None:
    prompts = make_prompts()
    output = tmp_path / "run.json"
    run_benchmark(prompts, RunConfig(url=fake_server.url, osl=8), output=output, install_signal_handlers=False)
    saved = json.loads(output.read_text())
    assert saved["prompts_sha256"] == prompts_digest(prompts)
    assert load_run(output).meta["prompts_sha256"] == prompts_digest(prompts)


def test_warnings_a_run_recorded_are_shown_to_the_reader() -> None:
    from bench.analysis import compare
    from bench.render import render_report

    lagged = "the client's event loop was later than the median gap between streamed chunks (5.0 ms) in 9 of 90"
    base, spec = _run(meta={"warnings": []}), _run(meta={"warnings": [lagged]}, drafted=4)
    check = check_comparable(base, spec)
    assert check.notes == (f"the speculative run warned: {lagged}",) and check.differences == ()
    assert f"note: the speculative run warned: {lagged}" in check.lines()
    assert lagged in render_report(compare(base, spec))


def test_swapped_baseline_and_speculative_get_a_hint() -> None:
    from pathlib import Path

    from bench.analysis import check_comparable
    from bench.records import load_run

    sample = Path(__file__).resolve().parents[1] / "results" / "sample"
    checked = check_comparable(load_run(sample / "speculative.json"), load_run(sample / "baseline.json"))
    assert any("are --baseline and --speculative swapped?" in note for note in checked.notes)
    straight = check_comparable(load_run(sample / "baseline.json"), load_run(sample / "speculative.json"))
    assert not any("swapped" in note for note in straight.notes)


def test_two_runs_own_loop_stall_notes_are_one_note() -> None:
    from dataclasses import replace
    from pathlib import Path

    from bench.analysis import check_comparable
    from bench.records import load_run

    sample = Path(__file__).resolve().parents[1] / "results" / "sample"
    stall = ("the client's event loop stalled {} times over 10 ms during the run (max 15.0 ms, p99 9.0 ms, 2.0% of "
             "the run's time): each request's latency can include that much; run the client on a less busy machine")
    base, spec = (load_run(sample / f"{name}.json") for name in ("baseline", "speculative"))
    base = replace(base, meta=replace(base.info, warnings=(stall.format(3),)))
    spec = replace(spec, meta=replace(spec.info, warnings=(stall.format(7),)))
    lines = check_comparable(base, spec).lines()
    stalls = [line for line in lines if "event loop" in line]
    assert stalls == [f"note: both runs warned: {stall.format(3)} (the baseline run; the speculative run stalled 7 "
                      "times over 10 ms during the run (max 15.0 ms, p99 9.0 ms, 2.0% of the run's time))"]
