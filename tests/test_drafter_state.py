"""The signature of a drafter that remembers earlier requests, on synthetic runs with known behaviour."""

from __future__ import annotations

import numpy as np
import pytest

from bench.analysis import drafter_state, first_repeat, recorded_states, state_warnings
from bench.records import Run, SampleResult, summarize
from bench.runner import RunConfig, run_benchmark
from tests.conftest import make_prompts


def _run(counts):
    """counts: {(sample, repeat): (drafted, accepted)}."""
    results = tuple(
        SampleResult(id=f"s{sample}", category="qa", ok=True, turns=1, latency_s=1.0, repeat=repeat,
                     draft_n=drafted, draft_n_accepted=accepted)
        for (sample, repeat), (drafted, accepted) in counts.items())
    return Run(config={}, selected_samples=len({key[0] for key in counts}), results=results,
               summary=tuple(summarize(list(results))))


def test_memorising_drafter_is_flagged():
    # ngram-mod as measured: repeat 0 drafts 0-16 per sample, repeats 1-2 draft 48-59, all accepted
    rng = np.random.default_rng(1)
    counts = {}
    for sample in range(11):
        first = int(rng.integers(0, 17))
        counts[(sample, 0)] = (first, first // 2)
        for repeat in (1, 2):
            later = int(rng.integers(48, 60))
            counts[(sample, repeat)] = (later, later)
    state = drafter_state(_run(counts), "ngram-mod")
    assert state.remembers and state.checked
    assert state.rose == 11 and state.fell == 0 and state.repeats == 3
    assert state.accepted_later > 5 * state.accepted_first
    assert "remembers" in state.message() and "ngram-mod" in state.message()


def test_stateless_drafter_at_temperature_zero_is_not_flagged():
    counts = {(sample, repeat): (32, 20 + sample) for sample in range(11) for repeat in range(3)}
    state = drafter_state(_run(counts))
    assert state.checked and not state.remembers and state.rose == state.fell == 0
    assert state.message() is None


def test_noisy_stateless_drafter_rarely_flagged():
    rng = np.random.default_rng(2)
    alarms = 0
    for _ in range(200):
        counts = {}
        for sample in range(20):
            base = int(rng.integers(5, 40))
            for repeat in range(3):
                accepted = max(0, base + int(rng.integers(-4, 5)))
                counts[(sample, repeat)] = (accepted + 10, accepted)
        alarms += drafter_state(_run(counts)).remembers
    assert alarms / 200 <= 0.02


def test_small_rise_is_not_called_memory():
    # every sample accepts one token more after repeat 0: consistent, but 2.5%, under the floor
    counts = {(s, r): (60, 40 + (r > 0)) for s in range(12) for r in range(2)}
    assert not drafter_state(_run(counts)).remembers


def test_single_repeat_cannot_be_checked():
    state = drafter_state(_run({(s, 0): (10, 5) for s in range(10)}))
    assert not state.checked and not state.remembers and state.samples == 0


def test_first_repeat_keeps_repeat_zero():
    run = _run({(s, r): (10, 5) for s in range(3) for r in range(3)})
    assert {r.repeat for r in first_repeat(run).results} == {0}
    assert len(first_repeat(run).results) == 3


@pytest.mark.parametrize("remembers", [True, False])
def test_repeats_on_a_fake_drafter_that_memorises_are_flagged(fake_state, fake_server, tmp_path, remembers):
    fake_state.drafting = True
    fake_state.remembers = remembers
    run, _ = run_benchmark(make_prompts(4, ("coding", "math")), RunConfig(url=fake_server.url, osl=16, repeat=3),
                           output=tmp_path / "r.json", install_signal_handlers=False)
    state = drafter_state(run, "fake")
    assert state.checked and state.samples == 8
    assert state.remembers is remembers


def _stated(states):
    results = tuple(SampleResult(id=f"s{i}", category="qa", ok=True, turns=1, latency_s=1.0, repeat=repeat,
                                 server_state=state) for repeat, state in enumerate(states) for i in range(3))
    return Run(config={}, selected_samples=3, results=results, summary=tuple(summarize(list(results))))


def test_arms_from_different_server_states_are_flagged():
    assert recorded_states(_stated(["restart", "restart"])) == {0: frozenset({"restart"}), 1: frozenset({"restart"})}
    assert state_warnings({"baseline": _stated(["restart"] * 2), "spec": _stated(["restart"] * 2)}) == []
    lines = state_warnings({"baseline": _stated(["restart", "restart"]), "spec": _stated(["restart", "kept"])})
    assert len(lines) == 1 and "different server states" in lines[0]
    assert "baseline: restart before every repeat" in lines[0] and "repeat 1: kept" in lines[0]
    assert "unknown" in state_warnings({"a": _stated([None]), "b": _stated(["restart"])})[0]


def _timed_run(counts, *, speed):
    """A run with decode timings (so paired statistics compute), drafting as in `counts`."""
    results = tuple(
        SampleResult(id=f"s{sample}", category="qa", ok=True, turns=1, latency_s=2.0 / speed + 0.01 * sample,
                     repeat=repeat, completion_tokens=64, predicted_per_second=32.0 * speed + sample,
                     draft_n=drafted, draft_n_accepted=accepted)
        for (sample, repeat), (drafted, accepted) in counts.items())
    return Run(config={}, selected_samples=len({key[0] for key in counts}), results=results,
               summary=tuple(summarize(list(results))))


def test_every_comparison_output_carries_the_drafter_flag(tmp_path):
    import json

    from bench.analysis import compare
    from bench.render import render_json, render_markdown, render_report, render_text

    plain = {(sample, repeat): (0, 0) for sample in range(11) for repeat in range(3)}
    memorising = {(sample, repeat): (4, 2) if repeat == 0 else (50, 50) for sample in range(11) for repeat in range(3)}
    comparison = compare(_timed_run(plain, speed=1.0), _timed_run(memorising, speed=1.5),
                         baseline_label="base", speculative_label="ngram-mod")
    assert comparison.has_stats
    assert [state.remembers for state in comparison.drafter] == [False, True]
    assert len(comparison.drafter_warnings) == 1
    flag = "speculative: the drafter remembers earlier requests"
    assert flag in render_text(comparison)
    assert flag in render_markdown(comparison)
    assert flag in render_report([comparison])
    payload = json.loads(render_json(comparison))
    assert payload["drafter_state"]["warnings"] == list(comparison.drafter_warnings)
    assert [arm["remembers"] for arm in payload["drafter_state"]["arms"]] == [False, True]

    quiet = compare(_timed_run(plain, speed=1.0), _timed_run(plain, speed=1.5))
    assert quiet.drafter_warnings == () and "drafter_state" not in json.loads(render_json(quiet))
    assert "remembers" not in render_text(quiet) and "remembers" not in render_markdown(quiet)


def test_compare_says_the_drafter_flag_once(tmp_path, capsys):
    from bench.cli import main
    from bench.records import save_run

    plain = {(sample, repeat): (0, 0) for sample in range(11) for repeat in range(3)}
    memorising = {(sample, repeat): (4, 2) if repeat == 0 else (50, 50) for sample in range(11) for repeat in range(3)}
    save_run(_timed_run(plain, speed=1.0), tmp_path / "b.json")
    save_run(_timed_run(memorising, speed=1.5), tmp_path / "s.json")
    main(["compare", "--baseline", str(tmp_path / "b.json"), "--speculative", str(tmp_path / "s.json"), "--stats"])
    captured = capsys.readouterr()
    assert (captured.out + captured.err).count("the drafter remembers earlier requests") == 1
