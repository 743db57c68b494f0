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


def test_gating_a_baseline_run_against_a_speculative_one_is_named(tmp_path: Path, capsys) -> None:
    shutil.copy(SAMPLE / "baseline.json", tmp_path / "b.json")
    shutil.copy(SAMPLE / "speculative.json", tmp_path / "s.json")
    main(["regress", "--reference", str(tmp_path / "b.json"), "--candidate", str(tmp_path / "s.json")])
    err = capsys.readouterr().err
    assert ("warning: the candidate drafted 275 tokens and the reference none: this gates a baseline run against a "
            "speculative one") in err
    main(["regress", "--reference", str(tmp_path / "s.json"), "--candidate", str(tmp_path / "s.json"),
          "--allow-mismatch"])
    assert "gates a baseline run" not in capsys.readouterr().err  # two speculative runs: nothing to say


def test_the_gate_takes_no_resampling_options(capsys) -> None:
    assert main(["regress", "--reference", "a", "--candidate", "b", "--resamples", "2000"]) == 2
    assert "unrecognized arguments: --resamples 2000" in capsys.readouterr().err
