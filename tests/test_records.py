"""Run files: reference compatibility, versioning, atomic writes, journals and bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import BenchError
from bench.records import (
    SCHEMA_VERSION,
    Journal,
    Look,
    Run,
    RunMeta,
    SampleResult,
    SequentialStop,
    SummaryRow,
    dumps_run,
    journal_path,
    load_run,
    read_journal,
    save_run,
    summarize,
)
from tests.conftest import DATA


def test_reference_file_loads_as_version_0() -> None:
    run = load_run(DATA / "reference_speculative.json")
    assert run.schema_version == 0
    assert run.completed_samples == 29 and run.failed_samples == 1
    assert run.summary[-1]["category"] == "overall"


def test_summary_recomputed_from_reference_results_matches_reference_summary() -> None:
    for name in ("reference_baseline.json", "reference_speculative.json"):
        run = load_run(DATA / name)
        assert summarize(run.results) == [dict(row) for row in run.summary]


def test_roundtrip_keeps_reference_keys(tmp_path: Path) -> None:
    run = load_run(DATA / "reference_baseline.json")
    target = tmp_path / "copy.json"
    save_run(run, target)
    data = json.loads(target.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    original = json.loads((DATA / "reference_baseline.json").read_text())
    for key in ("config", "selected_samples", "completed_samples", "failed_samples", "summary"):
        assert data[key] == original[key]
    for ours, theirs in zip(data["results"], original["results"], strict=True):
        assert {k: ours[k] for k in theirs} == theirs
    assert load_run(target).results == run.results


def test_written_json_is_sorted_and_indented() -> None:
    run = Run(config={"url": "x"}, selected_samples=0, results=(), summary=())
    text = dumps_run(run)
    assert text.startswith('{\n  "completed_samples": 0,')
    assert list(json.loads(text)) == sorted(json.loads(text))


def test_nan_is_written_as_null(tmp_path: Path) -> None:
    result = SampleResult(id="a", category="c", ok=True, turns=1, latency_s=1.0, predicted_per_second=float("nan"))
    run = Run(config={}, selected_samples=1, results=(result,), summary=tuple(summarize([result])))
    save_run(run, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["predicted_per_second"] is None


def test_save_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("keep me")
    run = Run(config={}, selected_samples=0, results=(), summary=())
    with pytest.raises(BenchError, match="exists"):
        save_run(run, target, force=False)
    assert target.read_text() == "keep me"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "not valid JSON"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a run file"),
        ('{"results": []}', "does not contain a summary list"),
        ('{"summary": {}}', "does not contain a summary list"),
        ('{"summary": [], "results": [{"id": 1}]}', "lacks 'category'"),
        ('{"summary": [], "schema_version": 99}', "newer speedbench"),
        ('{"summary": [], "results": [{"id": "a", "category": "c", "ok": true, "latency_s": "x"}]}', "not a number"),
        ('{"summary": [], "results": [{"id": "a", "category": "c", "ok": true, "latency_s": true}]}', "not a number"),
        ('{"summary": [], "results": [{"id": "a", "category": "c", "ok": true, "draft_n": 1.5}]}', "not an integer"),
        ('{"summary": [], "results": [{"id": "a", "category": "c", "ok": true, "itl_s": [0.1, "x"]}]}',
         "holds an item that is not a number"),
        ('{"summary": [], "results": [{"id": "a", "category": "c", "ok": true, "chunk_tokens": [1, true]}]}',
         "holds an item that is not an integer"),
        ('{"summary": [], "results": [{"id": "a", "category": "c", "ok": true, "outputs": "text"}]}', "not a list"),
    ],
)
def test_bad_files_give_one_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BenchError, match=message) as info:
        load_run(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="no such file"):
        load_run(tmp_path / "nope.json")


def test_journal_survives_a_torn_last_line(tmp_path: Path) -> None:
    path = journal_path(tmp_path / "run.json")
    journal = Journal(path, {"config": {"osl": 8}, "selected_samples": 3})
    for index in range(2):
        journal.append(SampleResult(id=f"s{index}", category="c", ok=True, turns=1, latency_s=0.5))
    journal.close()
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"type": "result", "id": "s2", "cat')
    header, results = read_journal(path)
    assert header["config"] == {"osl": 8}
    assert [r.id for r in results] == ["s0", "s1"]
    run = load_run(path)
    assert run.completed_samples == 2 and run.summary[-1]["requests"] == 2


def test_journal_with_damage_in_the_middle_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.json.jsonl"
    path.write_text('{"type": "header"}\nnot json\n{"type": "result", "id": "a", "category": "c", "ok": true}\n')
    with pytest.raises(BenchError, match="line 2"):
        read_journal(path)


def test_journal_keeps_the_last_attempt_of_a_retried_sample(tmp_path: Path) -> None:
    path = journal_path(tmp_path / "run.json")
    journal = Journal(path, {"config": {}, "selected_samples": 1})
    journal.append(SampleResult(id="s0", category="c", ok=False, turns=1, latency_s=0.1, error_kind="http_5xx"))
    journal.append(SampleResult(id="s0", category="c", ok=True, turns=1, latency_s=0.5))
    journal.close()
    run = load_run(path)
    assert run.completed_samples == 1 and run.failed_samples == 0 and run.summary[-1]["failed"] == 0


def test_a_failed_save_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    def broken_replace(source: str, target: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        save_run(Run(config={}, selected_samples=0, results=(), summary=()), tmp_path / "r.json")
    assert list(tmp_path.iterdir()) == []


def test_a_version_1_file_loads_with_typed_metadata(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[1] / "results" / "sample" / "speculative.json"
    data = json.loads(sample.read_text())
    data["schema_version"] = 1
    data.pop("server_description", None)
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(data))
    run = load_run(path)
    assert run.schema_version == 1
    assert run.info.engine == "llamacpp" and run.info.harness.startswith("speedbench")
    assert run.info.server.build is None  # 1 files carry no adapter description; nothing is guessed
    assert run.info.acceptance is not None and run.info.acceptance.acceptance_length > 1.0
    assert run.settings.osl == run.config["osl"] and run.settings.tags.get("mode")
    saved = tmp_path / "saved.json"
    save_run(run, saved)
    assert json.loads(saved.read_text())["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize("name", ["results/sample/baseline.json", "results/sample/speculative.json",
                                  "tests/data/reference_speculative.json"])
def test_a_loaded_run_writes_back_what_it_read(name: str) -> None:
    """Metadata and summary are read once into RunMeta and SummaryRows, which write the same keys and values."""
    path = Path(__file__).resolve().parents[1] / name
    original = json.loads(path.read_text())
    original.setdefault("harness", {"name": "speed_bench.py", "version": None})  # the upgrade names a 0 file's writer
    if original.get("schema_version", 0) < 5:  # the upgrade names the seeds for what they seed
        for section, old, new in (("config", "seed", "arrival_seed"), ("interleaved", "seed", "order_seed")):
            if isinstance(original.get(section), dict) and old in original[section]:
                original[section][new] = original[section].pop(old)
    if 1 <= original.get("schema_version", 0) < 7:  # speedbench files before 7 sent no thinking switch
        original["config"].setdefault("reasoning", "auto")
    run = load_run(path)
    assert isinstance(run.meta, RunMeta) and run.info is run.meta
    assert all(isinstance(row, SummaryRow) for row in run.summary)
    assert run.summary[-1].category == "overall" and run.summary[-1].requests == original["summary"][-1]["requests"]
    again = json.loads(dumps_run(run))
    assert again["load"] == run.load.to_dict()  # derived from the results, written with every file
    assert {key: value for key, value in again.items() if key not in ("schema_version", "results", "load")} \
        == {key: value for key, value in original.items() if key not in ("schema_version", "results", "load")}


def test_results_load_with_defaults_nulls_and_number_subclasses() -> None:
    import numpy as np

    from bench.records import result_from_dict

    loaded = result_from_dict({"id": 7, "category": "qa", "ok": 1, "draft_n": None, "itl_s": None, "unknown": 3,
                               "spec": {"drafts": 2}, "ttft_s": np.float64(0.5), "chunk_tokens": [1, 2]})
    assert loaded == SampleResult(id="7", category="qa", ok=True, turns=1, latency_s=0.0, draft_n=0,
                                  spec={"drafts": 2}, ttft_s=0.5, chunk_tokens=(1, 2))
    assert loaded.spec is not SampleResult(id="x", category="c", ok=True, turns=1, latency_s=0.0).spec
    fresh = result_from_dict({"id": "a", "category": "c", "ok": True})
    assert fresh.spec == {} and fresh.outputs == () and fresh.cache_n is None


def test_collector_is_paused_while_loading_and_restored_after(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import json

    from bench.records import collector_paused

    seen: list[bool] = []
    original = json.loads
    monkeypatch.setattr(json, "loads", lambda text, **kwargs: seen.append(gc.isenabled()) or original(text, **kwargs))
    path = tmp_path / "r.json"
    save_run(Run(config={}, selected_samples=0, results=(), summary=()), path)
    assert gc.isenabled()
    load_run(path)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a collector the caller had off stays off
    finally:
        gc.enable()
    with pytest.raises(BenchError):
        load_run(tmp_path / "missing.json")
    assert gc.isenabled()


def test_latest_is_the_last_attempt_per_sample_in_first_seen_order() -> None:
    def result(sample: str, ok: bool, repeat: int = 0) -> SampleResult:
        return SampleResult(id=sample, category="c", ok=ok, turns=1, latency_s=1.0, repeat=repeat)

    run = Run(config={}, selected_samples=2, summary=(),
              results=(result("a", False), result("b", True), result("a", True), result("a", False, repeat=1)))
    assert run.latest == (result("a", True), result("b", True), result("a", False, repeat=1))
    assert run.latest is run.latest


def test_a_sequential_record_survives_the_run_file_and_a_version_2_file_has_none(tmp_path: Path) -> None:
    looks = (Look(11, 0.0, 1.2, 0.9, 1.6, "continue"), Look(22, 0.004, 1.3, 1.1, 1.5, "faster"),
             Look(5, 0.0, 1.0, 0.0, float("inf"), "continue"))
    stop = SequentialStop(method="group-sequential", metric="decode_speedup", alpha=0.05, threshold=0.02,
                          max_samples=110, rounds=10, per_round=11, looks=looks)
    run = Run(config={}, selected_samples=0, results=(), summary=(), meta=RunMeta(sequential=stop))
    save_run(run, tmp_path / "run.json")
    assert load_run(tmp_path / "run.json").info.sequential == stop  # an unbounded interval comes back unbounded
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION >= 3 and data["sequential"]["looks"][1]["decision"] == "faster"
    del data["sequential"]
    data["schema_version"] = 2
    (tmp_path / "v2.json").write_text(json.dumps(data))
    old = load_run(tmp_path / "v2.json")
    assert old.schema_version == 2 and old.info.sequential is None  # sampled at a fixed size
    data["sequential"] = {"looks": [{"n": "x"}, {"n": 3, "level": 0.01, "point": 1, "low": 0.9, "high": 1.1,
                                    "decision": "faster"}, "junk"], "alpha": 7}
    (tmp_path / "bad.json").write_text(json.dumps(data))
    read = load_run(tmp_path / "bad.json").info.sequential
    assert read is not None and len(read.looks) == 1 and read.alpha == 0.05 and read.finished


def test_a_file_before_version_5_names_its_seeds_for_what_they_seed(tmp_path: Path) -> None:
    from bench.records import RunIdentity, journal_path, read_journal

    data = json.loads((Path(__file__).resolve().parents[1] / "results/sample/baseline.json").read_text())
    data["schema_version"] = 3
    data["config"]["seed"] = 5
    data["interleaved"] = {"seed": 2, "partner": "speculative", "batch": 1}
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    run = load_run(old)
    assert "seed" not in run.config and run.config["arrival_seed"] == 5
    assert run.meta["interleaved"] == {"order_seed": 2, "partner": "speculative", "batch": 1}
    assert RunIdentity.of(run.config).get("arrival_seed") == 5
    saved = json.loads(dumps_run(run))
    assert saved["schema_version"] == SCHEMA_VERSION >= 5 and saved["config"]["arrival_seed"] == 5
    header = {"type": "header", "schema_version": 3, "config": {"seed": 7}, "interleaved": {"seed": 1}}
    journal_path(old).write_text(json.dumps(header) + "\n")
    upgraded, _ = read_journal(journal_path(old))
    assert upgraded["config"] == {"arrival_seed": 7, "reasoning": "auto"}
    assert upgraded["interleaved"] == {"order_seed": 1}


def test_comparison_inputs_reads_every_results_folder_a_user_has(tmp_path: Path) -> None:
    import pytest

    from bench import BenchError
    from bench.records import comparison_inputs

    def runs(folder: Path, *names: str) -> Path:
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_text("{}")
        return folder

    one = runs(tmp_path / "one", "baseline.json", "speculative.json")
    assert comparison_inputs(one) == [("one", one / "baseline.json", one / "speculative.json")]
    readme = runs(tmp_path / "readme", "baseline.json", "spec.json", "comparison.json")
    assert comparison_inputs(readme) == [("readme", readme / "baseline.json", readme / "spec.json")]
    bench = tmp_path / "bench"
    runs(bench / "20260101T000000Z-grounded", "baseline.json", "speculative.json")
    runs(bench / "20260101T000100Z-qualitative", "baseline.json", "speculative.json")
    assert [name for name, _, _ in comparison_inputs(bench)] == ["grounded", "qualitative"]
    sweep = tmp_path / "sweep"
    runs(sweep / "c1", "baseline.json", "k8.json")
    runs(sweep / "c2", "baseline.json", "k8.json")
    assert [name for name, _, _ in comparison_inputs(sweep)] == ["k8 at c1", "k8 at c2"]
    ambiguous = runs(tmp_path / "ambiguous", "baseline.json", "a.json", "b.json")
    for folder, message in ((ambiguous, "not a comparison (a.json, b.json, baseline.json)"),
                            (tmp_path / "nope", "no such folder"), (runs(tmp_path / "empty"), "(no run files)")):
        with pytest.raises(BenchError) as raised:
            comparison_inputs(folder)
        assert message in str(raised.value) and "\n" not in str(raised.value)
        assert raised.value._render_traceback_() == [f"speedbench: error: {raised.value}"]


def test_a_resumed_folder_must_exist_and_otherwise_a_new_one_is_made(tmp_path: Path) -> None:
    from bench.records import resumed_or_new_folder

    with pytest.raises(BenchError, match=r"gone: no sweep folder to resume$"):
        resumed_or_new_folder(str(tmp_path / "gone"), tmp_path, "sweep", "sweep")
    assert not (tmp_path / "gone").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    assert resumed_or_new_folder(str(kept), tmp_path / "results", "tune-x", "tune") == kept
    made = resumed_or_new_folder(None, tmp_path / "results", "tune-x", "tune")
    assert made.is_dir() and made.parent == tmp_path / "results" and made.name.endswith("-tune-x")
