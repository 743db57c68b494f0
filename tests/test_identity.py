"""A run's identity, defined once: resume refuses another experiment; compare and the gate share its settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from bench.records import COMPARED_AS_ERROR, COMPARED_AS_WARNING, SELECTION_KEYS, RunIdentity, journal_path
from bench.runner import RunConfig, run_benchmark
from tests.conftest import make_prompts
from tests.fakeserver import FakeServer


def test_every_setting_that_changes_what_is_measured_is_in_the_identity() -> None:
    identity = RunIdentity.of(RunConfig(url="h:1", api_key="secret").recorded())
    keys = {key for key, _ in identity.values}
    assert keys >= {"api", "warmup", "revision", "chat_template_kwargs", "concurrency", "logprobs", "retries",
                    "timeout", "max_response_bytes", "osl", "stream", "extra_inputs", "model", "engine", "url"}
    assert "secret" not in repr(identity)
    assert set(COMPARED_AS_ERROR) >= {"osl", "concurrency", "api", "bench", "dataset"}
    assert set(COMPARED_AS_WARNING) >= {"logprobs", "retries", "timeout", "max_response_bytes", "warmup"}
    assert set(SELECTION_KEYS) <= set(COMPARED_AS_ERROR) | set(COMPARED_AS_WARNING)


@pytest.mark.parametrize(
    ("change", "named"),
    [({"concurrency": 8}, "concurrency was 1, now 8"), ({"logprobs": True}, "logprobs was False, now True"),
     ({"retries": 2}, "retries was 0, now 2"), ({"timeout": 5.0}, "timeout was 600.0, now 5.0"),
     ({"max_response_bytes": 2048}, "max_response_bytes"), ({"warmup": 1}, "warmup was 0, now 1"),
     ({"api": "completions"}, "api was 'chat', now 'completions'")],
)
def test_resume_mismatches_name_each_changed_setting(change: dict, named: str) -> None:
    old = RunIdentity.of(RunConfig(url="h:1").recorded())
    new = RunIdentity.of(RunConfig(url="h:1", **change).recorded())
    assert named in "; ".join(mismatch.message() for mismatch in old.resume_mismatches(new))
    assert old.resume_mismatches(old) == []


def test_an_embedded_server_is_identified_by_its_tags_not_its_port() -> None:
    tags = {"server": "embedded llama.cpp (xllamacpp 1)", "model": "m.gguf"}
    old = RunIdentity.of(RunConfig(url="h:1", tags=tags).recorded())
    assert old.resume_mismatches(RunIdentity.of(RunConfig(url="h:2", tags=tags).recorded())) == []
    other = RunIdentity.of(RunConfig(url="h:2", tags={**tags, "model": "n.gguf"}).recorded())
    assert [mismatch.key for mismatch in old.resume_mismatches(other)] == ["tags"]


def test_a_concurrency_1_journal_resumed_at_8_with_logprobs_is_refused(fake_server: FakeServer, tmp_path: Path,
                                                                       capsys) -> None:
    output = tmp_path / "r.json"
    run_benchmark(make_prompts(), RunConfig(url=fake_server.url, osl=8), output=output, install_signal_handlers=False)
    journal = journal_path(output)
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:2]))  # the header and one finished sample: an interrupted run
    before = journal.read_text()
    code = main(["run", "--url", fake_server.url, "--osl", "8", "--category", "coding,math", "--dataset",
                 str(_dataset(tmp_path)), "--output", str(output), "--resume", "--concurrency", "8", "--logprobs",
                 "--quiet"])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(error) == 1
    assert "cannot resume" in error[0] and "concurrency was 1, now 8" in error[0] and "logprobs" in error[0]
    assert journal.read_text() == before  # nothing was added to the other experiment's journal


def _dataset(tmp_path: Path) -> Path:
    """The test prompts as a local dataset file, so the CLI selects the very same samples."""
    import json

    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"question_id": sample.id, "category": sample.category,
                                        "turns": list(sample.turns)}) + "\n" for sample in make_prompts().samples))
    return path
