"""The grounded set's reuse measure and the file order it writes (benchmarks/grounded_reuse.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module():
    path = ROOT / "benchmarks" / "grounded_reuse.py"
    spec = importlib.util.spec_from_file_location("grounded_reuse_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PASSAGE = ("The ferry leaves the north pier at seven each morning and returns from the island at six in the "
           "evening, except on public holidays, when the last boat leaves an hour earlier.")


def test_a_copied_passage_counts_and_a_paraphrase_does_not() -> None:
    reuse = _module().reuse
    prompt = "Copy the notice below exactly.\n\n" + PASSAGE
    assert reuse(prompt, PASSAGE) == 1.0
    half = PASSAGE + " " + "x" * len(PASSAGE)
    assert 0.45 < reuse(prompt, half) < 0.55
    paraphrase = "A boat goes to the island every morning at seven and comes back at six, earlier on holidays."
    assert reuse(prompt, paraphrase) == 0.0
    assert reuse(prompt, "") == 0.0


def test_write_order_numbers_ids_by_position(tmp_path: Path) -> None:
    rows = [{"question_id": f"grounded-qa-00{n}", "category": "qa", "turns": [str(n)]} for n in (1, 2, 3)]
    path = tmp_path / "qa.jsonl"
    _module().write_order(path, [json.dumps(rows[2]), json.dumps(rows[0]), json.dumps(rows[1])])
    written = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [row["turns"] for row in written] == [["3"], ["1"], ["2"]]
    assert [row["question_id"] for row in written] == ["grounded-qa-001", "grounded-qa-002", "grounded-qa-003"]


@pytest.mark.parametrize("flag", ["--osl", "--threads"])
def test_a_count_below_one_is_refused_before_any_server_starts(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _module().main([flag, "0"])
    assert exited.value.code == 2 and f"{flag} must be >= 1 (got 0)" in capsys.readouterr().err
