"""Shared fixtures: the loopback fake server and small prompt sets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench._prompts import PromptSet, Sample
from tests.fakeserver import FakeServer, FakeState

DATA = Path(__file__).parent / "data"
SPEC_BENCH = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "spec-bench" / "question.jsonl"


@pytest.fixture
def fake_state() -> FakeState:
    return FakeState()


@pytest.fixture
def fake_server(fake_state: FakeState) -> Iterator[FakeServer]:
    server = FakeServer(fake_state)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def make_prompts(per_category: int = 2, categories: tuple[str, ...] = ("coding", "math")) -> PromptSet:
    """A tiny prompt set; the second sample of each category has two turns."""
    samples = []
    for category in categories:
        for index in range(per_category):
            turns = (f"{category} question {index}",) if index % 2 == 0 else (f"{category} q{index}", "and then?")
            samples.append(Sample(id=f"{category}-{index:03d}", category=category, turns=turns))
    return PromptSet(samples=tuple(samples), source="test", bench="qualitative", categories=categories)


@pytest.fixture
def prompts() -> PromptSet:
    return make_prompts()
