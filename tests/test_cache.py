"""Prompt-cache hygiene: first turns served from the cache per arm, and arms whose cache use differs."""

from __future__ import annotations

from pathlib import Path

from bench.analysis import CACHED_SHARE, cache_use, served_from_cache
from bench.records import Run, SampleResult, load_run

SAMPLE = Path(__file__).resolve().parents[1] / "results" / "sample"


def _result(sample: str, cache_n: int | None, prompt_tokens: int = 1440, turns: int = 1, ok: bool = True):
    return SampleResult(id=sample, category=sample.split("-")[0], ok=ok, turns=turns, latency_s=1.0,
                        prompt_tokens=prompt_tokens, cache_n=cache_n)


def _run(*results: SampleResult) -> Run:
    return Run(config={}, selected_samples=len(results), results=results, summary=())


def test_served_from_cache_ignores_the_bos_token_and_multi_turn_sums() -> None:
    assert served_from_cache(_result("rag-001", 1435)) is True
    assert served_from_cache(_result("rag-001", 1)) is False  # a cold llama.cpp reports the BOS token
    assert served_from_cache(_result("rag-001", int(CACHED_SHARE * 1440) - 1)) is False
    assert served_from_cache(_result("rag-001", 0)) is False
    assert served_from_cache(_result("rag-001", None)) is None
    assert served_from_cache(_result("coding-001", 628, turns=3)) is None  # later turns reuse history by design
    assert served_from_cache(_result("rag-001", 1435, ok=False)) is None


def test_warm_arm_is_flagged_with_its_samples_and_categories() -> None:
    # against an external server rag-001 had cache_n 1435 in one arm and 1 in the other
    baseline = _run(_result("rag-001", 1), _result("rag-002", 1, 529), _result("qa-001", 1, 51))
    speculative = _run(_result("rag-001", 1435), _result("rag-002", 1, 529), _result("qa-001", 1, 51))
    use = cache_use(baseline, speculative)
    assert use.known and use.differs
    rows = {row.category: row for row in use.categories}
    assert list(rows) == ["rag", "qa", "overall"]
    assert rows["rag"].differing == ("rag-001",) and rows["rag"].differs
    assert not rows["qa"].differs
    assert (rows["rag"].baseline.cell, rows["rag"].speculative.cell) == ("0/2", "1/2")
    assert rows["overall"].speculative.cached_ids == ("rag-001",)
    assert use.message == (
        "prompt cache use differs between the arms (samples rag-001): first turns served from the cache: "
        "baseline 0/3, speculative 1/3; latency speedups in rag reflect the cache, not only speculative decoding"
    )


def test_multi_turn_samples_differing_in_cache_are_flagged() -> None:
    baseline = _run(_result("coding-001", 628, 1114, turns=3))
    speculative = _run(_result("coding-001", 1100, 1114, turns=3))
    use = cache_use(baseline, speculative)
    assert use.differs and use.overall.differing == ("coding-001",)
    assert use.overall.baseline.cell == "n/a"


def test_both_arms_warm_alike_do_not_differ() -> None:
    use = cache_use(_run(_result("rag-001", 1435)), _run(_result("rag-001", 1430)))
    assert not use.differs and use.overall.baseline.cached == use.overall.speculative.cached == 1
    assert use.message.endswith("baseline 1/1, speculative 1/1; the arms match")


def test_unknown_cache_use_is_said() -> None:
    use = cache_use(_run(_result("rag-001", None)), _run(_result("rag-001", None)))
    assert not use.known and not use.differs and "unknown" in use.message


def test_the_shipped_cold_embedded_comparison_is_not_flagged() -> None:
    use = cache_use(load_run(SAMPLE / "baseline.json"), load_run(SAMPLE / "speculative.json"))
    assert use.known and not use.differs
    assert use.overall.baseline.cached == 0 and use.overall.baseline.known == 16
