"""The reasoning analysis on hand-made samples: what counts as an exhausted budget, an edited file's counts, the
osl that fits, bursts, and runs without thinking left as they were."""

from __future__ import annotations

from bench.analysis import (
    Budget,
    budget_exhausted,
    compare,
    fitting_osl,
    segment_steps,
    step_starts,
    thinking_rows,
    thinking_tokens,
)
from bench.records import Run, SampleResult, summarize


def _sample(key: str, *, thinking: str = "hmm", answer: str = "", finish: str = "length", tokens: int = 10,
            thought: int | None = 10, category: str = "qa", **extra: object) -> SampleResult:
    return SampleResult(id=key, category=category, ok=True, turns=1, latency_s=1.0, completion_tokens=tokens,
                        outputs=(answer,), reasoning=(thinking,) if thinking else (), finish_reason=finish,
                        thinking_tokens=thought, predicted_per_second=10.0, **extra)


def _run(*results: SampleResult, osl: int = 10) -> Run:
    return Run(config={"osl": osl}, selected_samples=len(results), results=results,
               summary=tuple(summarize(list(results))))


def test_an_empty_answer_is_an_exhausted_budget_only_when_thinking_ran_to_the_limit() -> None:
    assert budget_exhausted(_sample("a"), 10)
    assert not budget_exhausted(_sample("a", answer="4"), 10)
    assert not budget_exhausted(_sample("a", thinking=""), 10)  # no thinking: an empty answer of another kind
    assert not budget_exhausted(_sample("a", finish="stop", thought=5), 10)
    assert budget_exhausted(_sample("a", finish="stop", thought=10), 10)  # no length finish, but thought it all


def test_an_edited_files_impossible_thinking_count_is_unknown() -> None:
    assert thinking_tokens(_sample("a", thought=11, tokens=10)) is None
    assert thinking_tokens(_sample("a", thought=-1)) is None
    assert thinking_tokens(_sample("a", thinking="", thought=None)) == 0
    assert thinking_tokens(_sample("a", thought=None)) is None


def test_the_osl_that_fits_is_a_power_of_two_over_the_longest_finished_output() -> None:
    assert fitting_osl([Budget(3, 10, 300, 256), Budget(0, 10, 150, 512)]) == (
        "samples that finished used up to 300 tokens: --osl 512 fits them")
    assert "no sample finished thinking within osl 256" in fitting_osl([Budget(10, 10, None, 256)])


def test_a_row_is_flagged_above_five_percent_and_not_at_it() -> None:
    finished = [_sample(f"s{index}", answer="ok", finish="stop", thought=4) for index in range(19)]
    base = _run(*finished, _sample("e"))
    row = thinking_rows(base, base)[-1]
    assert [arm.empty for arm in row.budget] == [1, 1] and not row.flagged  # 1 of 20 is 5%: not above
    base = _run(*finished[:18], _sample("e"), _sample("f"))
    assert thinking_rows(base, base)[-1].flagged


def test_runs_without_thinking_have_no_thinking_rows_and_their_json_is_unchanged() -> None:
    plain = _run(*[_sample(f"s{index}", thinking="", answer="ok", finish="stop", thought=None) for index in range(3)])
    comparison = compare(plain, plain)
    assert comparison.thinking == ()
    assert all("segment" not in item.as_cells() for row in comparison.lossless for item in row.divergences)


def test_tokens_per_step_read_from_bursts_in_each_segment() -> None:
    # thinking: 6 tokens in 2 steps of 3; answer: 2 tokens in 2 steps
    result = _sample("a", chunk_segments="ttttttaa", itl_s=(0.0, 0.0, 0.01, 0.0, 0.0, 0.01, 0.01),
                     chunk_tokens=(1,) * 8)
    assert segment_steps(result) == {"t": (6, 2), "a": (2, 2)}
    assert segment_steps(_sample("b", chunk_segments="ta", itl_s=())) is None  # gaps and chunks do not line up
    assert step_starts([0.005, 0.00001, 0.005]) == [True, False, True]


def test_a_thinking_divergence_is_classified_when_the_margins_cover_thinking_and_answer() -> None:
    from bench.analysis import lossless_check

    # thinking "ab" + answer "c": three one-byte tokens; the baseline's margin at the second token is a near-tie
    base = _sample("a", thinking="ab", answer="c", finish="stop", thought=2, tokens=3,
                   token_margins=("1:2 1:0.01 1:3",))
    spec = _sample("a", thinking="ax", answer="c", finish="stop", thought=2, tokens=3,
                   token_margins=("1:2 1:0.5 1:3",))
    row = lossless_check(_run(base), _run(spec), threshold=0.1)[-1]
    assert [(item.segment, item.char, item.kind) for item in row.divergences] == [("thinking", 1, "near_tie")]
    assert row.first_diff == "a thinking@char 1"
    # margins of the answer alone (tags between, or thinking not covered): a thinking divergence is unclassified
    base = _sample("a", thinking="ab", answer="c", finish="stop", thought=2, tokens=3, token_margins=("1:0.01",))
    row = lossless_check(_run(base), _run(spec), threshold=0.1)[-1]
    assert [item.kind for item in row.divergences] == ["unclassified"]
    # an answer divergence after identical thinking is placed after the thinking's bytes
    base = _sample("a", thinking="ab", answer="c", finish="stop", thought=2, tokens=3,
                   token_margins=("1:2 1:3 1:0.02",))
    spec = _sample("a", thinking="ab", answer="d", finish="stop", thought=2, tokens=3,
                   token_margins=("1:2 1:3 1:0.02",))
    row = lossless_check(_run(base), _run(spec), threshold=0.1)[-1]
    assert [(item.segment, item.char, item.kind) for item in row.divergences] == [("answer", 0, "near_tie")]
