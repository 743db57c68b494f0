"""The server's state when a run begins: recorded from /metrics, upgraded from older files, and comparisons of
servers that started in different states refused (a warm drafter cannot fool the gate), on real servers too."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench.analysis import check_comparable, check_regress_comparable
from bench.cli import main
from bench.engines import engine_by_name
from bench.records import DRAFTED, FRESH, SERVED, UNKNOWN, Run, ServerStart, load_run, save_run

SAMPLE = Path(__file__).resolve().parents[1] / "results" / "sample"

LLAMACPP_WARM = """\
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 85
llamacpp:prompt_tokens_cached_total 24
llamacpp:tokens_predicted_total 290
llamacpp:spec_decode_num_draft_tokens_total 477
llamacpp:spec_decode_num_accepted_tokens_total 301
llamacpp:spec_decode_num_drafts_total 120
"""


def test_llamacpp_metrics_give_the_state_a_run_starts_from() -> None:
    engine = engine_by_name("llamacpp")
    warm = engine.start_state(LLAMACPP_WARM, now_s=0.0)
    assert warm is not None and warm.state == DRAFTED
    assert warm.draft_tokens == 477 and warm.generated_tokens == 290 and warm.cached_prompt_tokens == 24
    assert warm.describe() == ("drafter warm: 477 tokens drafted, 290 generated, 24 prompt tokens reused from its "
                               "cache before the run")
    fresh = engine.start_state(LLAMACPP_WARM.replace(" 85", " 0").replace(" 24", " 0").replace(" 290", " 0")
                               .replace(" 477", " 0").replace(" 301", " 0").replace(" 120", " 0"), now_s=0.0)
    assert fresh is not None and fresh.state == FRESH
    served = engine.start_state("llamacpp:tokens_predicted_total 12\nllamacpp:prompt_tokens_total 40\n", now_s=0.0)
    assert served is not None and served.state == SERVED
    assert engine.start_state("", now_s=0.0) is None


def test_vllm_metrics_give_uptime_and_drafter_state() -> None:
    metrics = (Path(__file__).parent / "data" / "vllm" / "metrics_ngram.txt").read_text()  # a real vLLM's
    start = engine_by_name("vllm").start_state(metrics, now_s=1796106680.36 + 60)
    assert start is not None and start.state == DRAFTED and start.generated_tokens and start.draft_tokens
    assert start.process_started == pytest.approx(1796106680.36) and start.uptime_s == pytest.approx(60.0)


def _sample(name: str) -> Run:
    return load_run(SAMPLE / name)


def test_a_file_without_the_record_upgrades_to_unknown(tmp_path: Path) -> None:
    data = json.loads((SAMPLE / "speculative.json").read_text())
    data["schema_version"] = 3
    data.pop("server_start", None)
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = load_run(tmp_path / "old.json")
    assert old.info.server_start is None
    start = ServerStart(generated_tokens=5.0, draft_tokens=9.0)
    warm = replace(old, path=None, meta=replace(old.info, server_start=start))
    checked = check_regress_comparable(old, warm)
    assert not checked.errors  # unknown against known: named, not refused
    assert any("records no server state at its start" in note for note in checked.notes)
    save_run(warm, tmp_path / "new.json")
    again = load_run(tmp_path / "new.json")
    assert again.info.server_start == warm.info.server_start
    assert json.loads((tmp_path / "new.json").read_text())["server_start"]["state"] == DRAFTED


def _with_start(run: Run, **counters: float) -> Run:
    return replace(run, path=None, meta=replace(run.info, server_start=ServerStart(**counters)))


def test_servers_that_started_in_different_states_are_refused() -> None:
    spec = _sample("speculative.json")
    fresh = _with_start(spec, generated_tokens=0.0, prompt_tokens=0.0, drafts=0.0, draft_tokens=0.0)
    warm = _with_start(spec, generated_tokens=300.0, prompt_tokens=80.0, drafts=120.0, draft_tokens=477.0)
    checked = check_regress_comparable(fresh, warm)
    assert [d.field for d in checked.errors] == ["server state at start"]
    message = checked.errors[0].message
    assert "reference fresh; candidate drafter warm: 477 tokens drafted" in message and "restart the servers" in message
    both_warm = check_regress_comparable(warm, warm)
    assert not [d for d in both_warm.errors if d.field == "server state at start"]
    assert any("drafter was warm when its run began" in note for note in both_warm.notes)
    base = _with_start(_sample("baseline.json"), generated_tokens=0.0, prompt_tokens=0.0)
    assert not check_comparable(base, fresh).errors  # both fresh: a fair comparison
    against_baseline = check_comparable(base, warm)  # one speculative server: named, not refused
    assert not against_baseline.errors and [d.field for d in against_baseline.warnings] == ["server state at start"]
    assert [d.field for d in check_comparable(fresh, warm).errors] == ["server state at start"]  # two drafting
    assert ServerStart().state == UNKNOWN


@pytest.mark.e2e
def test_a_warm_ngram_drafter_on_a_long_lived_server_cannot_fool_the_gate(tmp_path: Path, capsys,
                                                                           monkeypatch) -> None:
    """Two comparisons on the same two long-lived real servers: the second's ngram-mod drafter remembers the first."""
    from bench.server import EmbeddedServer, ServerConfig

    servers = {mode: EmbeddedServer(ServerConfig(mode=mode)) for mode in ("baseline", "ngram-mod")}
    for server in servers.values():
        server.start()
    try:
        for folder in ("reference", "candidate"):
            (tmp_path / folder).mkdir()
            for side, mode in (("baseline", "baseline"), ("speculative", "ngram-mod")):
                code = main(["run", "--url", servers[mode].url, "--bench", "grounded", "--category", "qa",
                             "--limit", "2", "--osl", "32", "--output", str(tmp_path / folder / f"{side}.json"),
                             "--quiet"])
                assert code == 0
    finally:
        for server in servers.values():
            server.stop()
    capsys.readouterr()
    reference, candidate = (load_run(tmp_path / folder / "speculative.json") for folder in ("reference", "candidate"))
    assert reference.info.server_start is not None and reference.info.server_start.state == FRESH
    assert candidate.info.server_start is not None and candidate.info.server_start.state == DRAFTED
    assert candidate.info.server_start.draft_tokens == sum(result.draft_n for result in reference.results)
    gate = ["regress", "--reference", str(tmp_path / "reference"), "--candidate", str(tmp_path / "candidate")]
    assert main(gate) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "the speculative servers started in different states: reference fresh; candidate drafter warm" in err
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    main([*gate, "--allow-mismatch"])  # compared anyway: flagged above the table and in the job summary
    captured = capsys.readouterr()
    top = captured.out.split("reference, candidate:")[0]
    assert "warning: the baseline servers started in different states: reference fresh; candidate served" in top
    assert "warning: the speculative servers started in different states" in top and "candidate drafter warm" in top
    assert "candidate drafter warm" in summary.read_text().split("Reference, candidate:")[0]
