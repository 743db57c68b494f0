"""The run file's single-writer lock: exclusive while held, and no empty lock file left once a run ends."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from bench import BenchError
from bench.records import lock_path, output_lock


def test_the_lock_file_is_removed_when_the_writer_finishes(tmp_path: Path) -> None:
    output = tmp_path / "baseline.json"
    with output_lock(output) as path:
        assert path.exists()
        with pytest.raises(BenchError, match="another speedbench run is writing it"), output_lock(output):
            pass
    assert not lock_path(output).exists()
    assert list(tmp_path.iterdir()) == []  # no empty *.json.lock left in the results folder


def test_a_writer_that_opened_a_removed_lock_file_takes_the_new_one(tmp_path: Path) -> None:
    """The race removal opens: B opens the file, A finishes and removes it, C creates a new one. B must not then
    hold a lock on the removed file while C holds the new one."""
    output = tmp_path / "run.json"
    path = lock_path(output)
    stale = open(path, "a+b")  # B's open before A removed the file
    try:
        path.unlink()  # A finished
        with output_lock(output):  # C: a fresh file and its lock
            fcntl.flock(stale.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # B locks the removed file ...
            assert not os.path.samestat(os.fstat(stale.fileno()), os.stat(path))  # ... which the path no longer names
            with pytest.raises(BenchError):  # and a writer going through the path is refused while C holds it
                with output_lock(output):
                    pass
    finally:
        stale.close()
    assert not path.exists()
