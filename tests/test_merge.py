"""Merging shard run files: the N slices of one experiment join into its run; anything else is refused."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench._errors import BenchError
from bench.prompts import Shard
from bench.records import Run, SampleResult, load_run, merge_shards, save_run, shard_marker, summarize

CONFIG = {"url": "http://127.0.0.1:8080/v1", "osl": 64, "concurrency": 2, "bench": "qualitative", "repeat": 2,
          "label": "x", "extra_inputs": {"temperature": 0}}
IDS = [f"s{index}" for index in range(10)]


def _shard_run(index: int, count: int, *, config: dict | None = None, ids: list[str] | None = None,
               digest: str = "full-digest", seed: int = 0) -> Run:
    own = Shard(index, count).select(ids or IDS)
    rng = random.Random(seed + index)
    results = [SampleResult(id=sample_id, category="qa" if int(sample_id[1:]) % 2 else "math", ok=True, turns=1,
                            repeat=repeat, latency_s=rng.uniform(0.1, 0.2), completion_tokens=64)
               for repeat in range(2) for sample_id in own]
    rng.shuffle(results)  # finished out of order, as at concurrency > 1
    meta = {"engine": "llamacpp", "harness": {"name": "speedbench", "version": "0.3"},
            "started_at": f"2026-12-02T14:0{index}:00+00:00", "finished_at": f"2026-12-02T14:0{index}:30+00:00",
            "elapsed_s": 30.0, "warnings": [f"note {index}"], "machine": {"host": f"node{index}"},
            "client_lag": {"p99_ms": float(index)},
            "shard": shard_marker(index, count, digest, len(ids or IDS) * 2, own)}
    return Run(config={**CONFIG, **(config or {}), "label": f"shard{index}"}, selected_samples=len(own) * 2,
               results=tuple(results), summary=tuple(summarize(results, ["qa", "math"])), meta=meta,
               path=f"shard{index}.json")


def test_the_shards_merge_into_every_sample_in_schedule_order() -> None:
    shards = [_shard_run(index, 4) for index in (2, 0, 3, 1)]  # any order on the command line
    merged = merge_shards(shards)
    assert [(r.id, r.repeat) for r in merged.results] == [(i, repeat) for repeat in range(2) for i in IDS]
    assert merged.selected_samples == 20 and merged.completed_samples == 20
    assert merged.config["concurrency"] == 8 and "label" not in merged.config
    assert merged.meta["prompts_sha256"] == "full-digest" and "shard" not in merged.meta
    assert [item["index"] for item in merged.meta["shards"]] == [0, 1, 2, 3]
    assert merged.meta["shards"][2]["machine"] == {"host": "node2"}
    assert merged.meta["started_at"] == "2026-12-02T14:00:00+00:00"
    assert merged.meta["finished_at"] == "2026-12-02T14:03:30+00:00" and merged.meta["elapsed_s"] == 30.0
    assert "shard 1/4: note 1" in merged.meta["warnings"]
    assert merged.meta["client_lag"] == {"p99_ms": 3.0}
    overall = {row["category"]: row["requests"] for row in merged.summary}
    assert overall == {"qa": 10, "math": 10, "overall": 20}


def test_a_merged_run_saves_and_loads_like_any_run(tmp_path: Path) -> None:
    merged = merge_shards([_shard_run(index, 2) for index in range(2)])
    save_run(merged, tmp_path / "merged.json")
    loaded = load_run(tmp_path / "merged.json")
    assert [result.key for result in loaded.results] == [result.key for result in merged.results]
    assert loaded.meta["shards"][1]["samples"] == 5


@pytest.mark.parametrize(
    ("shards", "message"),
    [
        ([0, 1, 3], "missing shard(s) 2/4 of 4"),
        ([0, 1, 1, 2, 3], "shard 1/4 given twice: shard1.json and shard1.json"),
        ([], "merge needs the shard run files"),
    ],
)
def test_missing_or_duplicate_slices_are_refused_in_one_line(shards: list[int], message: str) -> None:
    with pytest.raises(BenchError) as info:
        merge_shards([_shard_run(index, 4) for index in shards])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_shards_of_different_experiments_are_refused_naming_the_difference() -> None:
    with pytest.raises(BenchError, match=r"differ in config 'osl' \(64 vs 128\)"):
        merge_shards([_shard_run(0, 2), _shard_run(1, 2, config={"osl": 128})])
    with pytest.raises(BenchError, match="split into 2 and 3"):
        merge_shards([_shard_run(0, 2), _shard_run(1, 3)])
    with pytest.raises(BenchError, match="cut from different prompt sets"):
        merge_shards([_shard_run(0, 2), _shard_run(1, 2, digest="other")])
    other = _shard_run(1, 2)
    other = Run(config=other.config, selected_samples=other.selected_samples, results=other.results,
                summary=other.summary, meta={**other.meta, "engine": "vllm"}, path=other.path)
    with pytest.raises(BenchError, match="differ in engine"):
        merge_shards([_shard_run(0, 2), other])


def test_a_run_without_a_marker_or_with_a_stray_sample_is_refused() -> None:
    plain = _shard_run(0, 2)
    plain = Run(config=plain.config, selected_samples=1, results=plain.results, summary=plain.summary,
                meta={key: value for key, value in plain.meta.items() if key != "shard"}, path="plain.json")
    with pytest.raises(BenchError, match=r"plain.json: not a shard's run file"):
        merge_shards([plain, _shard_run(1, 2)])
    broken = _shard_run(1, 2)
    broken = Run(config=broken.config, selected_samples=1, results=broken.results, summary=broken.summary,
                 meta={**broken.meta, "shard": {**broken.meta["shard"], "index": 5}}, path="broken.json")
    with pytest.raises(BenchError, match=r"broken.json: its shard marker is malformed"):
        merge_shards([_shard_run(0, 2), broken])
    stray = _shard_run(1, 2)
    stray = Run(config=stray.config, selected_samples=1, results=(*stray.results, _shard_run(0, 2).results[0]),
                summary=stray.summary, meta=stray.meta, path="stray.json")
    with pytest.raises(BenchError, match=r"stray.json: holds sample 's[02468]', which is not in its slice"):
        merge_shards([_shard_run(0, 2), stray])
