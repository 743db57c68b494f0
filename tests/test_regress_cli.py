"""`speedbench regress` on the command line: each warning once, a baseline gated against a speculative run named,
and help that says what its options do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "results" / "sample"


def _folder(path: Path, *, swap: bool = False, osl: int | None = None) -> Path:
    path.mkdir(parents=True)
    for name, source in (("baseline.json", "speculative.json" if swap else "baseline.json"),
                         ("speculative.json", "baseline.json" if swap else "speculative.json")):
        data = json.loads((SAMPLE / source).read_text())
        if osl is not None:
            data["config"]["osl"] = osl
        (path / name).write_text(json.dumps(data))
    return path


def test_a_difference_both_arms_share_is_said_once(tmp_path: Path, capsys) -> None:
    reference = _folder(tmp_path / "ref")
    candidate = _folder(tmp_path / "cand", osl=128)  # both arms differ in osl from the reference's
    main(["regress", "--reference", str(reference), "--candidate", str(candidate), "--allow-mismatch"])
    err = capsys.readouterr().err.splitlines()
    osl = [line for line in err if "osl differs" in line]
    assert len(osl) == 1 and "osl differs: reference=64 candidate=128" in osl[0]  # not once per arm


def test_gating_a_baseline_run_against_a_speculative_one_is_named(tmp_path: Path, capsys, monkeypatch) -> None:
    shutil.copy(SAMPLE / "baseline.json", tmp_path / "b.json")
    shutil.copy(SAMPLE / "speculative.json", tmp_path / "s.json")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    main(["regress", "--reference", str(tmp_path / "b.json"), "--candidate", str(tmp_path / "s.json")])
    err = capsys.readouterr().err
    hint = ("the candidate drafted 275 tokens and the reference none: this gates a speculative run against a "
            "baseline one")
    assert f"warning: {hint}" in err and "are --reference and --candidate swapped" in err
    assert hint in summary.read_text()  # the warning that explains the outcome reaches the job summary
    main(["regress", "--reference", str(tmp_path / "s.json"), "--candidate", str(tmp_path / "s.json"),
          "--allow-mismatch"])
    assert "against a baseline one" not in capsys.readouterr().err  # two speculative runs: nothing to say


def test_speculation_switched_off_is_a_regression_and_says_so(tmp_path: Path, capsys, monkeypatch) -> None:
    reference = _folder(tmp_path / "ref")
    candidate = tmp_path / "cand"
    candidate.mkdir()
    plain = json.loads((SAMPLE / "baseline.json").read_text())  # the candidate's speculative server drafts nothing
    (candidate / "baseline.json").write_text(json.dumps(plain))
    plain["config"].setdefault("tags", {})["mode"] = "ngram-mod"
    (candidate / "speculative.json").write_text(json.dumps(plain))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code = main(["regress", "--reference", str(reference), "--candidate", str(candidate), "--allow-mismatch"])
    captured = capsys.readouterr()
    assert code == 1
    assert "not a regression" not in captured.out + captured.err
    first = captured.out.splitlines()[0]
    assert first.startswith("speedbench regress: 1 failure(s) besides the rows (speculation lost)")
    assert "FAILED: speculation lost: the reference drafted 275 tokens and the candidate none" in captured.out
    markdown = summary.read_text()
    assert markdown.startswith("### speedbench regress: failed: 1 failure(s) besides the rows (speculation lost)")
    assert "> **FAILED**: speculation lost: the reference drafted 275 tokens" in markdown


def test_the_gate_takes_no_resampling_options(capsys) -> None:
    assert main(["regress", "--reference", "a", "--candidate", "b", "--resamples", "2000"]) == 2
    assert "unrecognized arguments: --resamples 2000" in capsys.readouterr().err
