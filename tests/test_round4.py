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


def _usage_error(err: str, option: str, message: str) -> None:
    """One line: the usage error argparse reports, naming the option and why."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("speedbench") and f"argument {option}: {message}" in lines[0], err


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
    assert len(calls) >= 2  # the shared plot writer and the sweep's figure writer


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


# ---------------------------------------------------------------- 6. a lone surrogate from the server


def test_valid_text_joins_split_pairs_and_counts_lone_surrogates() -> None:
    from bench.records import valid_text

    assert valid_text("eta\ud800") == ("eta\ufffd", 1)
    assert valid_text("a\ud83d" + "\ude00b") == ("a\U0001f600b", 0)  # a pair split over two chunks
    assert valid_text("\udc80x\ud83d\ude00\ud800") == ("\ufffdx\U0001f600\ufffd", 2)
    assert valid_text("plain") == ("plain", 0)


@pytest.mark.parametrize("stream", [True, False])
def test_a_lone_surrogate_from_the_server_is_stored_valid_counted_and_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stream: bool
) -> None:
    from tests.fakeserver import FakeState

    dataset = str(_dataset(tmp_path, 4))
    for name, state in (("base", FakeState()), ("spec", FakeState(drafting=True, transform=lambda t: t + "\ud800"))):
        with _fake(state) as server:
            code, out, err = _main(capsys, "run", "--url", server.url, "--dataset", dataset, "--osl", "4",
                                   "--output", str(tmp_path / f"{name}.json"), "--quiet",
                                   *(["--stream"] if stream else []))
            assert code == 0, out + err
    spec = load_run(tmp_path / "spec.json")
    assert all(result.replaced_chars == 1 and result.outputs[0].endswith("\ufffd") for result in spec.results)
    (tmp_path / "spec.json").read_bytes().decode("utf-8")  # valid UTF-8 on disk
    code, out, err = _main(capsys, "compare", "--baseline", str(tmp_path / "base.json"), "--speculative",
                           str(tmp_path / "spec.json"), "--stats")
    assert "Traceback" not in err and code in (0, 1), out + err
    assert "4 sample(s) held invalid Unicode from the server" in out, out


def test_a_run_file_already_holding_a_lone_surrogate_loads_as_valid_text(tmp_path: Path) -> None:
    import json

    from bench.records import Run, SampleResult, save_run

    save_run(Run(config={"url": "x"}, selected_samples=1, summary=(),
                 results=(SampleResult(id="a", category="qa", ok=True, turns=1, latency_s=1.0, outputs=("x",)),)),
             tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    data["results"][0]["outputs"] = ["eta\ud800"]
    (tmp_path / "r.json").write_text(json.dumps(data))  # escaped as \\ud800, as a run file of before held it
    (result,) = load_run(tmp_path / "r.json").results
    assert result.outputs == ("eta\ufffd",) and result.replaced_chars == 1


# ---------------------------------------------------------------- 7 + 8. numeric edges, checked before anything runs


@pytest.mark.parametrize(("extra", "option", "message"), [
    (["--timeout", "inf"], "--timeout", "must be a finite number in (0, 1e+06] seconds"),
    (["--timeout", "nan"], "--timeout", "must be a finite number"),
    (["--timeout", "1e300"], "--timeout", "must be a finite number"),
    (["--start-at", "nan"], "--start-at", "must be a time within the next 30 days"),
    (["--start-at", "inf"], "--start-at", "must be a time within the next 30 days"),
    (["--start-at", "1e300"], "--start-at", "must be a time within the next 30 days"),
    (["--request-rate", "inf"], "--request-rate", "must be a finite number"),
    (["--request-rate", "nan"], "--request-rate", "must be a finite number"),
    (["--request-rate", "5e-324", "--arrival", "constant"], "--request-rate", "must be a finite number"),
    (["--request-rate", "1e308", "--arrival", "gamma", "--burstiness", "10"], "--request-rate", "must be a finite"),
    (["--request-rate", "5", "--arrival", "gamma", "--burstiness", "1e308"], "--burstiness", "must be a finite"),
    (["--request-rate", "inf", "--workers", "2", "--concurrency", "2"], "--request-rate", "must be a finite"),
    (["--shard", "0/" + "9" * 5000], None, "expected I/N"),
    (["--shard", "9" * 5000 + "/2"], None, "expected I/N"),
    (["--concurrency", "9" * 400], None, "--concurrency must be <= 65,536 (got an integer of 400 digits)"),
    (["--concurrency", "-" + "9" * 400], None, "--concurrency must be >= 1 (got an integer of 400 digits)"),
    (["--concurrency", "70000"], None, "--concurrency must be <= 65,536 (got 70000)"),
    (["--repeat", "9" * 400], None, "--repeat must be <= 1,000,000"),
    (["--osl", "9" * 30], None, "--osl must be <="),
    (["--request-rate", "2", "--max-concurrency", "9" * 400], None, "--max-concurrency must be <= 65,536"),
])
def test_a_numeric_edge_is_one_line_before_anything_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], option: str | None, message: str
) -> None:
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 4)), "--osl",
                             "4", "--output", str(tmp_path / "r.json"), "--quiet", *extra)
        assert not server.state.requests
    assert code == 2, err
    if option is None:
        assert message in err
        _one_line_error(err)
    else:
        _usage_error(err, option, message)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("command", [["bench", "--concurrency", "9" * 400],
                                     ["bench", "--request-rate", "2", "--max-concurrency", "9" * 400],
                                     ["sweep", "--concurrency", "1," + "9" * 400, "--base-url", "http://127.0.0.1:9",
                                      "--spec-url", "a=http://127.0.0.1:9"],
                                     ["tune", "--concurrency", "1," + "9" * 400, "--base-url", "http://127.0.0.1:9",
                                      "--spec-cmd", "x {port} {draft_max}"]])
def test_a_huge_concurrency_level_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                command: list[str]) -> None:
    code, _, err = _main(capsys, *command, "--results-dir", str(tmp_path / "results"))
    assert code == 2, err
    assert "must be <= 65,536 (got an integer of 400 digits)" in err
    _one_line_error(err)
    assert not (tmp_path / "results").exists()


def test_the_sweeps_rates_and_the_apis_schedules_have_the_same_bounds() -> None:
    from bench import BenchError
    from bench.pipeline import parse_rates
    from bench.runner import RunConfig, arrival_schedule

    for rate in (5e-324, 1e308):
        with pytest.raises(BenchError, match="--request-rate must be a finite number"):
            arrival_schedule(4, rate, process="constant")
        with pytest.raises(BenchError, match="--request-rate must be a finite number"):
            parse_rates(f"1,{rate!r}")
    with pytest.raises(BenchError, match="--timeout must be a finite number"):
        RunConfig(url="x", timeout=float("nan")).validate()
    assert arrival_schedule(3, 1e6, process="gamma", burstiness=1e3).offsets_s[-1] < 1e-3  # the bounds hold


@pytest.mark.parametrize("line", [
    '{"offset_s": ' + "9" * 5000 + "}",
    '{"offset_s": 0, "prompt_id": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "[" * 100_000,
])
def test_a_trace_line_too_long_or_too_deep_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       line: str) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"offset_s": 0}\n' + line + "\n")
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 4)), "--osl",
                             "4", "--trace", str(trace), "--output", str(tmp_path / "r.json"), "--quiet")
        assert not server.state.requests
    assert code == 2 and "trace.jsonl:2" in err, err
    _one_line_error(err)


def test_a_deep_trace_line_under_the_length_limit_is_one_line(tmp_path: Path) -> None:
    import sys as _sys

    from bench import BenchError
    from bench.runner import load_trace

    trace = tmp_path / "trace.jsonl"
    depth = 2000
    trace.write_text("[" * depth + "]" * depth + "\n")
    limit = _sys.getrecursionlimit()
    _sys.setrecursionlimit(200)  # nesting past the stack, as a deeper line would be on any stack
    try:
        with pytest.raises(BenchError, match=r"trace\.jsonl:1"):
            load_trace(trace)
    finally:
        _sys.setrecursionlimit(limit)


# ---------------------------------------------------------------- 10. a trace shorter than the selection


def test_a_short_trace_is_said_up_front_and_its_run_finishes(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"offset_s": 0}\n{"offset_s": 0.05, "prompt_id": "q7"}\n')
    with _fake() as server:
        code, out, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 12)),
                               "--osl", "4", "--trace", str(trace), "--output", str(tmp_path / "r.json"))
        assert len(server.state.requests) == 2
    assert code == 0, out + err
    assert "schedules 2 arrivals for 12 selected samples: running the 2 it schedules" in out + err
    assert "--resume" not in out + err
    run = load_run(tmp_path / "r.json")
    assert sorted(result.id for result in run.results) == ["q0", "q7"] and run.selected_samples == 2
    assert not run.info.interrupted


def test_a_short_trace_with_repeats_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"offset_s": 0}\n{"offset_s": 0.05}\n')
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 4)), "--osl",
                             "4", "--trace", str(trace), "--repeat", "2", "--output", str(tmp_path / "r.json"))
        assert not server.state.requests
    assert code == 2 and "2 arrivals for 8 requests" in err, err
    _one_line_error(err)


# ---------------------------------------------------------------- 9. merge trusts each shard's marker


def _emptied(run, ids=(), results=None):
    from dataclasses import replace as _replace

    marker = {**run.meta["shard"], "sample_ids": list(ids)}
    return _replace(run, meta={**run.meta, "shard": marker},
                    results=run.results if results is None else tuple(results))


def test_a_shard_whose_ids_were_emptied_is_not_its_slice() -> None:
    from bench import BenchError
    from bench.records import merge_shards
    from tests.test_merge import _shard_run

    shards = [_shard_run(index, 4) for index in range(4)]
    shards[1] = _emptied(shards[1], results=())
    with pytest.raises(BenchError, match=r"shard1\.json: its marker lists 0 sample ids, but slice 1/4 of the run.s 10"):
        merge_shards(shards)


def _recorded_with_ids(run, all_ids):
    from dataclasses import replace as _replace

    from bench.records import shard_marker

    marker = run.meta["shard"]
    return _replace(run, meta={**run.meta, "shard": shard_marker(
        marker["index"], marker["count"], marker["prompts_sha256"], marker["selected_samples"], marker["sample_ids"],
        all_ids)})


def test_a_foreign_id_swapped_into_one_shard_file_is_caught_without_the_prompt_set() -> None:
    from dataclasses import replace as _replace

    from bench import BenchError
    from bench.records import merge_shards
    from tests.test_merge import IDS, _shard_run

    shards = [_recorded_with_ids(_shard_run(index, 4), IDS) for index in range(4)]
    assert merge_shards(shards).completed_samples == 20  # the honest slices merge
    victim = shards[2]
    swapped = victim.meta["shard"]["sample_ids"][0]
    ids = ["foreign-1" if sample_id == swapped else sample_id for sample_id in victim.meta["shard"]["sample_ids"]]
    results = [_replace(result, id="foreign-1") if result.id == swapped else result for result in victim.results]
    shards[2] = _emptied(victim, ids=ids, results=results)  # count unchanged: every per-shard check passes
    with pytest.raises(BenchError, match="do not make up the run they were cut from"):
        merge_shards(shards)
    old = [_shard_run(index, 4) for index in range(4)]  # files written before the ids' digest was kept
    assert "ids_sha256" not in old[0].meta["shard"] and merge_shards(old).completed_samples == 20


def test_an_id_in_no_prompt_set_is_not_merged() -> None:
    from bench import BenchError
    from bench.records import merge_shards
    from tests.test_merge import _shard_run

    shards = [_shard_run(index, 4) for index in range(4)]
    shards[0] = _emptied(shards[0], ids=[*shards[0].meta["shard"]["sample_ids"], "forged"])
    with pytest.raises(BenchError, match="lists 4 sample ids, but slice 0/4 of the run's 10 samples holds 3"):
        merge_shards(shards)


def test_results_that_do_not_cover_the_slices_make_the_merge_interrupted_and_are_named() -> None:
    from bench.records import merge_shards
    from tests.test_merge import _shard_run

    shards = [_shard_run(index, 2) for index in range(2)]
    kept = [result for result in shards[1].results if (result.id, result.repeat) not in {("s3", 0), ("s5", 1)}]
    shards[1] = _emptied(shards[1], ids=shards[1].meta["shard"]["sample_ids"], results=kept)
    merged = merge_shards(shards)
    assert len(merged.results) == 18 and merged.selected_samples == 20
    assert merged.info.interrupted
    assert "2 of the shards' 20 selected samples have no result: s3, s5 (repeat 1)" in merged.info.warnings


def test_merge_of_a_shard_with_a_nan_latency_reads_it_as_unknown(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from bench.records import save_run
    from tests.test_merge import _shard_run

    paths = []
    for index in range(2):
        save_run(_shard_run(index, 2), tmp_path / f"s{index}.json")
        paths.append(tmp_path / f"s{index}.json")
    data = json.loads(paths[0].read_text())
    data["results"][0]["latency_s"] = float("nan")
    paths[0].write_text(json.dumps(data))  # NaN, as Python's json writes it
    code, out, err = _main(capsys, "merge", *map(str, paths), "--output", str(tmp_path / "m.json"))
    assert "Traceback" not in err and code == 0, out + err
    merged = load_run(tmp_path / "m.json")
    unknown = [result for result in merged.results if result.error_kind == "unknown_latency"]
    assert len(unknown) == 1 and not unknown[0].ok


# ---------------------------------------------------------------- 11. Mermaid labels in every chart

HOSTILE = '<img src=x onerror=alert(1)>"]\n    bar [9'
"""A category name that would be markup in a label, or close the label and the axis, if it reached a chart raw."""


def _mermaid_blocks(markdown: str) -> list[str]:
    import re

    return re.findall(r"```mermaid\n(.*?)```", markdown, flags=re.S)


def _assert_escaped(markdown: str, charts: int) -> list[str]:
    blocks = _mermaid_blocks(markdown)
    assert len(blocks) >= charts, markdown
    import re

    for block in blocks:
        labels = re.findall(r'"([^"]*)"', block)
        assert not [label for label in labels if "<" in label or ">" in label], block  # no markup in any label
        shown = "\u2039img src=x onerror=alert(1)\u203a'] bar [9"
        assert [label for label in labels  # the name is there (cut to the axis' label length), not obeyed
                if shown.startswith(label.split(": ")[0].removesuffix("\u2026")) and len(label) > 10], block
        for line in block.splitlines():
            assert line.count('"') % 2 == 0, line  # no label closed early
            assert not line.strip().startswith("bar [9"), block  # nothing the name held became a line
    return blocks


def test_every_mermaid_renderer_escapes_a_hostile_name(tmp_path: Path) -> None:
    import numpy as np

    from bench.analysis import compare
    from bench.render import render_report, speedup_chart, sweep_chart
    from tests.test_report_regress import _run

    categories = ["coding"] * 6 + [HOSTILE] * 6
    rates = 20 * np.exp(np.random.default_rng(0).normal(0, 0.3, 12))
    base = _run(rates, categories, accept=None, seed=1, path=tmp_path / "b.json")
    spec = _run(rates * 1.5, categories, accept=0.6, seed=2, path=tmp_path / "s.json")
    comparison = compare(base, spec)
    many = ["coding", "math", "qa", "rag", "stem", "roleplay", "writing", "reasoning", "summary", "humanities",
            HOSTILE]  # eleven rows: the horizontal chart
    bodies = []
    bodies += _assert_escaped(render_report(comparison), 1)
    bodies += _assert_escaped(render_report([comparison, comparison]), 2)
    bodies += _assert_escaped(speedup_chart(HOSTILE, ["coding", HOSTILE], [1.5, 2.0], [1.1, 1.2]), 1)
    bodies += _assert_escaped(speedup_chart("t", many, [1.2] * 11, [0.9] * 11), 1)
    bodies += _assert_escaped(sweep_chart(HOSTILE, [1, 2], {HOSTILE: [1.1, 1.0], "b": [1.0, 1.2]}), 1)
    from tests.test_mermaid import real_parse

    assert real_parse(bodies) == ["xychart"] * len(bodies)  # the real parser reads each as a chart
