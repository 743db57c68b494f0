"""Merging shard run files: the N slices of one experiment join into its run; anything else is refused."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from bench import BenchError
from bench.prompts import Shard
from bench.records import Run, SampleResult, load_run, merge_shards, save_run, shard_marker, summarize
from tests.fakeserver import FakeServer

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
    with pytest.raises(BenchError, match=r"shard0\.json and shard1\.json differ: osl was 64, now 128"):
        merge_shards([_shard_run(0, 2), _shard_run(1, 2, config={"osl": 128})])
    with pytest.raises(BenchError, match=r"differ in config 'headers' \(\[\] vs \['X-A'\]\)"):
        merge_shards([_shard_run(0, 2, config={"headers": []}), _shard_run(1, 2, config={"headers": ["X-A"]})])
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


def _cli(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "bench", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_four_shards_on_loopback_merge_into_the_unsharded_runs_samples_and_compare_with_it(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"question_id": f"q{index}", "category": ("qa", "math", "coding")[index % 3],
                                           "turns": [f"question {index}"]}) + "\n" for index in range(14)))
    common = ["run", "--url", fake_server.url, "--dataset", str(dataset), "--osl", "8", "--repeat", "2", "--quiet",
              "--force"]
    shards = [_cli(*common, "--shard", f"{index}/4", "--output", f"shard{index}.json", cwd=tmp_path)
              for index in range(4)]  # four client processes at once, as four machines would run them
    for process in shards:
        assert process.wait(timeout=120) == 0, process.stderr.read() if process.stderr else ""
    whole = _cli(*common, "--concurrency", "4", "--output", "whole.json", cwd=tmp_path)
    assert whole.wait(timeout=120) == 0
    merge = _cli("merge", *(f"shard{index}.json" for index in (3, 1, 0, 2)), "--output", "merged.json", cwd=tmp_path)
    out, err = merge.communicate(timeout=60)
    assert merge.returncode == 0, err
    assert "merged 4 shards (28 results of 28 selected)" in out

    merged, unsharded = load_run(tmp_path / "merged.json"), load_run(tmp_path / "whole.json")
    assert sorted(result.key for result in merged.results) == sorted(result.key for result in unsharded.results)
    assert len(merged.results) == 28 and merged.meta["prompts_sha256"] == unsharded.meta["prompts_sha256"]
    assert merged.config["concurrency"] == 4
    compare = _cli("compare", "--baseline", "whole.json", "--speculative", "merged.json", "--stats", cwd=tmp_path)
    out, err = compare.communicate(timeout=120)
    assert compare.returncode == 0, err
    assert "overall" in out

    again = _cli("merge", "shard0.json", "shard1.json", "shard2.json", "--output", "bad.json", cwd=tmp_path)
    _, err = again.communicate(timeout=60)
    assert again.returncode == 2 and err.strip() == "speedbench: error: missing shard(s) 3/4 of 4: a merged run must " \
        "hold every slice"
    assert not (tmp_path / "bad.json").exists()


def test_a_shard_that_starts_after_the_shared_start_says_so_in_its_run_file(fake_server: FakeServer,
                                                                            tmp_path: Path, capsys) -> None:
    import time

    from bench.cli import main

    common = ["run", "--url", fake_server.url, "--category", "qa", "--limit", "2", "--osl", "4", "--quiet",
              "--shard", "0/2"]
    assert main([*common, "--start-at", f"{time.time() - 5:.3f}", "--output", str(tmp_path / "late.json")]) == 0
    (late,) = [note for note in load_run(tmp_path / "late.json").meta["warnings"] if "after --start-at" in note]
    assert late.startswith("started ") and float(late.split()[1]) >= 5.0
    assert main([*common, "--start-at", f"{time.time() + 0.5:.3f}", "--output", str(tmp_path / "on_time.json")]) == 0
    assert not [note for note in load_run(tmp_path / "on_time.json").meta["warnings"] if "--start-at" in note]
    capsys.readouterr()
