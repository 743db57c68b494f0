"""Run files of reasoning runs: the thinking/answer split survives a save, older files upgrade on load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import BenchError
from bench.records import SCHEMA_VERSION, SampleResult, dumps_run, load_run, recorded_reasoning, result_from_dict

ROOT = Path(__file__).resolve().parents[1]


def test_a_schema_5_file_loads_with_its_split_unknown_and_no_thinking_switch(tmp_path: Path) -> None:
    data = json.loads((ROOT / "results/sample/baseline.json").read_text())
    data["schema_version"] = 5
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    run = load_run(old)
    assert all(result.thinking_tokens is None and result.chunk_segments is None for result in run.results)
    assert recorded_reasoning(run.config) == "auto" and run.config["reasoning"] == "auto"
    assert json.loads(dumps_run(run))["schema_version"] == SCHEMA_VERSION == 7


def test_the_split_survives_a_save_and_a_load() -> None:
    result = SampleResult(id="a", category="qa", ok=True, turns=1, latency_s=1.0, completion_tokens=9,
                          thinking_tokens=6, answer_tokens=3, thinking_source="stream", answer_ttft_s=0.5,
                          thinking_decode_t_s=40.0, answer_decode_t_s=30.0, chunk_segments="tttttta")
    assert result_from_dict(json.loads(json.dumps(result.to_dict()))) == result


@pytest.mark.parametrize(("field", "value"), [("thinking_tokens", "6"), ("chunk_segments", 3),
                                              ("answer_ttft_s", [1.0])])
def test_a_split_of_the_wrong_type_is_refused(field: str, value: object) -> None:
    data = {"id": "a", "category": "qa", "ok": True, "latency_s": 1.0, field: value}
    with pytest.raises(BenchError, match=field):
        result_from_dict(data)


def test_a_recorded_reasoning_setting_outside_on_off_auto_reads_as_auto() -> None:
    assert recorded_reasoning({"reasoning": "on"}) == "on"
    assert recorded_reasoning({"reasoning": "sideways"}) == "auto" and recorded_reasoning({}) == "auto"


def test_a_journal_before_schema_6_resumes_as_a_run_that_sent_no_thinking_switch(tmp_path: Path) -> None:
    from bench.records import RunIdentity, read_journal

    journal = tmp_path / "r.json.jsonl"
    journal.write_text(json.dumps({"type": "header", "schema_version": 5, "config": {"osl": 8}}) + "\n")
    header, _ = read_journal(journal)
    old = RunIdentity.of(header["config"])
    assert not [item for item in old.resume_mismatches(RunIdentity.of({"osl": 8, "reasoning": "auto"}))
                if item.key == "reasoning"]
    assert [item.key for item in old.resume_mismatches(RunIdentity.of({"osl": 8, "reasoning": "on"}))
            if item.key == "reasoning"] == ["reasoning"]
