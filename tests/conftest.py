"""Shared fixtures: the loopback fake server and small prompt sets."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.prompts import PromptSet, Sample
from tests.fakeserver import FakeServer, FakeState

DATA = Path(__file__).parent / "data"
SPEC_BENCH = Path(os.environ.get("SPEEDBENCH_SPEC_BENCH")
                  or Path(__file__).resolve().parents[2] / "shared" / "datasets" / "spec-bench" / "question.jsonl")
"""Spec-Bench's public question.jsonl: `$SPEEDBENCH_SPEC_BENCH`, else where this workspace keeps it."""
SPEC_BENCH_MISSING = "Spec-Bench's question.jsonl is not on this machine (set SPEEDBENCH_SPEC_BENCH to its path)"


ROOT = Path(__file__).resolve().parents[1]
REFERENCE_DIR = ROOT / ".cache" / "reference" / "speed-bench"
REFERENCE_PYTHON = ROOT / ".cache" / "reference" / "venv" / "bin" / "python"
_STUB_AND_RUN = (
    "import runpy, sys, types\n"
    "if 'datasets' not in sys.modules:\n"
    "    stub = types.ModuleType('datasets')\n"
    "    stub.load_dataset = stub.get_dataset_config_names = None\n"
    "    sys.modules['datasets'] = stub\n"
    "folder = sys.argv[1]\n"
    "sys.path.insert(0, folder)\n"
    "sys.argv = [folder + '/speed_bench_compare.py', *sys.argv[2:]]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


@pytest.fixture
def reference_compare() -> Callable[[list[str], Path], subprocess.CompletedProcess[str]]:
    """Run llama.cpp's own speed_bench_compare.py (fetched by `make test` into .cache/reference/), or skip."""
    folder = Path(os.environ.get("SPEEDBENCH_REFERENCE_DIR", REFERENCE_DIR))
    python = os.environ.get("SPEEDBENCH_REFERENCE_PYTHON", str(REFERENCE_PYTHON))
    if not (folder / "speed_bench_compare.py").exists() or not Path(python).exists():
        if os.environ.get("CI") == "true":  # in CI the parity tests must run: a skip would hide a broken fetch
            pytest.fail("the reference client is not fetched (make test fetches it into .cache/reference/)")
        pytest.skip("the reference client is not fetched (make test fetches it into .cache/reference/)")

    def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([python, "-c", _STUB_AND_RUN, str(folder), *args], cwd=cwd, capture_output=True,
                              text=True, timeout=60)

    return run


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


@pytest.fixture(scope="session")
def bench_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh `make bench`-shaped folder: two workloads (qualitative, 5 prompts a category, and throughput_1k),
    each a comparison folder, a report over both, run against two loopback fake servers (one drafting)."""
    from bench.pipeline import PipelineConfig, run_pipeline
    from bench.runner import SilentProgress

    results = tmp_path_factory.mktemp("results")
    base, spec = FakeServer(FakeState()), FakeServer(FakeState(drafting=True))
    base.start()
    spec.start()
    try:
        code = run_pipeline(PipelineConfig.build(limit=5, osl=4, base_url=base.url, spec_url=spec.url,
                                           results_dir=str(results), bench="qualitative,throughput_1k"),
                            out=lambda _: None, progress=SilentProgress())
    finally:
        base.stop()
        spec.stop()
    assert code == 0
    (folder,) = results.iterdir()
    return folder
