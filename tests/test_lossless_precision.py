"""Near-ties at the engine's precision: a grid of log-probabilities estimated from recorded margins."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.analysis import NEAR_TIE_MARGIN, compare, estimate_resolution, lossless_check, run_margins
from bench.records import Run, SampleResult, decode_margins, encode_margins, load_run, summarize
from bench.render import render_markdown, render_text

# top-2 margins a real vLLM (bf16) run recorded on this CPU, as quoted in the issue, and more of the same grid
VLLM_BF16 = (0.125, 0.625, 0.75, 2.875, 0.125, 1.5, 0.25, 3.0, 0.375, 0.875, 4.125, 0.5, 6.25, 1.125, 0.125, 2.0,
             0.625, 5.375, 0.75, 1.875, 0.25, 9.5)


def _recorded(margins) -> list[float | None]:
    """Margins as a run file keeps them (three significant digits)."""
    return [margin for _, margin in decode_margins(encode_margins((1, m) for m in margins))]


def test_bf16_grid_is_found_through_the_run_file_rounding() -> None:
    resolution = estimate_resolution(_recorded(VLLM_BF16))
    assert resolution.step == 0.125
    assert resolution.threshold() > 0.125 > NEAR_TIE_MARGIN  # one step is a tie; two steps (0.25) are not
    assert resolution.threshold() < 0.25


def test_continuous_fp32_margins_have_no_grid() -> None:
    rng = np.random.default_rng(3)
    resolution = estimate_resolution(_recorded(rng.exponential(1.5, 200)))
    assert resolution.step is None and resolution.threshold() == NEAR_TIE_MARGIN
    assert estimate_resolution(_recorded(VLLM_BF16[:5])).step is None  # too few margins to claim a grid


def _result(sample: str, output: str, margins: str) -> SampleResult:
    return SampleResult(id=sample, category="qa", ok=True, turns=1, latency_s=1.0, predicted_per_second=20.0,
                        prompt_per_second=100.0, outputs=(output,), token_margins=(margins,))


def test_a_one_step_bf16_margin_is_a_near_tie_and_the_output_names_the_rule() -> None:
    grid = " ".join(f"1:{m:.3g}" for m in VLLM_BF16)
    tail = "1:" + " 1:".join(f"{m:.3g}" for m in VLLM_BF16)
    # "The cat sat" / "The dog sat": tokens "The", " cat", " sat"; the margin at " cat" is one or two grid steps
    one_step = _result("a", "The cat sat", f"3:1.5 4:0.125 4:2 {grid}")
    two_steps = _result("b", "The cat sat", f"3:1.5 4:0.25 4:2 {tail}")
    base = Run(config={}, selected_samples=2, results=(one_step, two_steps), summary=tuple(summarize([one_step])))
    spec_a = _result("a", "The dog sat", "3:1.5 4:0.5 4:2")
    spec_b = _result("b", "The dog sat", "3:1.5 4:0.5 4:2")
    spec = Run(config={}, selected_samples=2, results=(spec_a, spec_b), summary=tuple(summarize([spec_a])))
    row = lossless_check(base, spec)[-1].as_cells()
    assert (row["near_tie"], row["real"]) == (1, 1)
    assert row["resolution"] == 0.125
    comparison = compare(base, spec)
    for text in (render_text(comparison), render_markdown(comparison)):
        assert "at most 1 step(s) of 0.125 nats apart" in text
    # the fixed 0.1-nat rule, given explicitly, calls the one-step margin real
    assert lossless_check(base, spec, threshold=NEAR_TIE_MARGIN)[-1].as_cells()["real"] == 2


def test_real_llamacpp_fp32_margins_have_no_grid() -> None:
    fixture = Path(__file__).parent / "data" / "llamacpp_fp32_margins.txt"
    margins = [float(line) for line in fixture.read_text().splitlines() if line and not line.startswith("#")]
    assert len(margins) > 500
    resolution = estimate_resolution(margins)
    assert resolution.step is None and resolution.threshold() == NEAR_TIE_MARGIN


def _bf16(values: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (round to nearest even), as an engine holding bf16 logits keeps them."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def _bf16_margins(count: int, seed: int = 0) -> list[float]:
    """Top-2 margins of bf16 logits: 60% of top logits near 2-4 (steps of 2^-6), 40% near 16-32 (steps of 0.125)."""
    rng = np.random.default_rng(seed)
    top = np.where(rng.random(count) < 0.6, rng.uniform(2.0, 4.0, count), rng.uniform(16.0, 32.0, count))
    gap = rng.exponential(1.0, count)
    first, second = _bf16(top), _bf16(top - gap)
    return [float(m) for m in first - second if m > 0]


def test_a_one_step_margin_of_bf16_logits_near_16_to_32_is_a_tie_though_smaller_logits_set_a_finer_grid() -> None:
    margins = _bf16_margins(204)
    resolution = estimate_resolution(_recorded(margins))
    assert resolution.step <= 2.0 ** -6 and resolution.coarsest == 0.125  # a fine global grid, and the 0.125 one
    grid = " ".join(f"1:{m:.3g}" for m in margins)
    base, spec = [], []
    for sample, margin in (("one-step", 0.125), ("two-steps", 0.25), ("three-steps", 0.375)):
        base.append(_result(sample, "The cat sat", f"3:1.5 4:{margin} 4:2 {grid}"))
        spec.append(_result(sample, "The dog sat", "3:1.5 4:0.5 4:2"))
    runs = [Run(config={}, selected_samples=3, results=tuple(results), summary=tuple(summarize(results)))
            for results in (base, spec)]
    row = lossless_check(*runs)[-1].as_cells()
    kinds = {item["id"]: item["kind"] for item in row["divergences"]}
    assert kinds == {"one-step": "near_tie", "two-steps": "real", "three-steps": "real"}
    assert "read at the step of their own binary form" in row["resolution_note"]


def test_a_single_bf16_grid_keeps_two_steps_real_and_fp32_gets_no_coarser_grid() -> None:
    assert estimate_resolution(_recorded(VLLM_BF16)).coarsest == 0.125  # the one grid: nothing coarser in use
    rng = np.random.default_rng(5)
    assert estimate_resolution(_recorded(rng.exponential(1.5, 300))).coarsest is None


VLLM_BF16_PAIR = Path(__file__).parent / "data" / "vllm_bf16"


def _vllm_bf16_pair() -> tuple[Run, Run]:
    """The baseline and ngram run files of a real vLLM bf16 pair (see tests/data/README.md)."""
    return load_run(VLLM_BF16_PAIR / "baseline.json"), load_run(VLLM_BF16_PAIR / "speculative.json")


def test_the_captured_pair_is_a_real_vllm_bf16_pair_with_divergences() -> None:
    baseline, speculative = _vllm_bf16_pair()
    for run, mode in ((baseline, "baseline"), (speculative, "ngram")):
        assert run.meta["engine"] == "vllm" and run.config["tags"]["mode"] == mode
        assert run.config["logprobs"] and run.completed_samples == run.selected_samples == 22
    row = lossless_check(baseline, speculative)[-1].as_cells()
    assert row["compared"] == 22 and row["identical"] < row["compared"] and row["unclassified"] == 0


def test_one_step_divergences_of_the_real_vllm_bf16_pair_read_at_their_magnitude_are_ties() -> None:
    baseline, speculative = _vllm_bf16_pair()
    resolution = estimate_resolution(run_margins(baseline))
    # logits of small magnitude set a fine global grid; those near 16-32 move in steps of 0.125 beside it
    assert resolution.step is not None and resolution.step < 0.125 and resolution.coarsest == 0.125
    assert resolution.margins > 500
    row = lossless_check(baseline, speculative)[-1].as_cells()
    at_one_coarse_step = [item for item in row["divergences"] if item["margin"] == 0.125]
    assert len(at_one_coarse_step) >= 3
    assert row["real"] == 0 and row["near_tie"] == len(row["divergences"])
    # one global grid reads those one-step margins as real: the fault the rule at each margin's own step fixes
    global_grid = lossless_check(baseline, speculative, threshold=resolution.threshold())[-1].as_cells()
    assert resolution.threshold() < 0.125
    assert global_grid["real"] == len(at_one_coarse_step)


def _diverge_at(baseline: SampleResult, result: SampleResult, margin: float) -> tuple[SampleResult, int]:
    """`result` with its first turn changed from the first token whose baseline margin is `margin`, and that token."""
    entries = decode_margins(baseline.token_margins[0])
    token = next(index for index, (_, value) in enumerate(entries) if value == margin)
    start = sum(size for size, _ in entries[:token])
    prefix = result.outputs[0].encode("utf-8")[:start].decode("utf-8")
    return replace(result, outputs=(prefix + "\u2603 not what the baseline said", *result.outputs[1:])), token


def test_a_real_difference_in_the_real_vllm_bf16_pair_stays_real() -> None:
    baseline, speculative = _vllm_bf16_pair()
    spec_by_key = {result.key: result for result in speculative.latest}
    identical = [(base, spec_by_key[base.key]) for base in baseline.latest
                 if base.outputs == spec_by_key[base.key].outputs]
    assert len(identical) >= 5
    # two steps of the coarsest grid (0.25) and a clear gap (over 2 nats): both real, whatever grid they are on
    for margin in (0.25, 2.0):
        base, spec = next((b, s) for b, s in identical if margin in [m for _, m in decode_margins(b.token_margins[0])])
        changed, token = _diverge_at(base, spec, margin)
        results = tuple(changed if result.key == spec.key else result for result in speculative.results)
        row = lossless_check(baseline, replace(speculative, results=results))[-1].as_cells()
        found = next(item for item in row["divergences"] if item["id"] == base.id)
        assert (found["token"], found["margin"], found["kind"]) == (token, margin, "real")
        assert row["real"] == 1
