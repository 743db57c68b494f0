"""The comparability vet of two runs before they are compared, reported or gated: refuse, or say what differs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from bench._errors import BenchError

if TYPE_CHECKING:
    from bench.analysis import Comparability
    from bench.records import Run


def vet(
    first: Run, second: Run, *, allow_mismatch: bool, allow_partial: bool = True, gate: bool = False,
    said: set[str] | None = None, collect: list[str] | None = None, arm: str = "",
) -> Comparability:
    """Check two runs are comparable: refuse meaning-changing differences (and partial runs where asked), exit 2;
    print every other difference, partial or failing arm and note to stderr, one line each (a line already in
    `said`, from another pair of the same command, is not printed again); every warning and note printed is also
    appended to `collect` (the job summary's). `arm` names which arm of two gated comparisons the runs are."""
    from bench.analysis import check_comparable, check_regress_comparable

    checked = check_regress_comparable(first, second, arm) if gate else check_comparable(first, second)
    if checked.errors and not allow_mismatch:
        raise BenchError(
            "the runs are not comparable: " + "; ".join(d.message for d in checked.errors)
            + " (pass --allow-mismatch to compare them anyway)"
        )
    if checked.partial and not allow_partial:
        raise BenchError(
            "partial run: " + "; ".join(arm.message for arm in checked.partial)
            + " (finish it with --resume, or pass --allow-partial)"
        )
    from bench.analysis import state_warnings
    from bench.render import terminal_text

    for line in checked.lines(allowed=allow_mismatch):
        if said is not None:
            if line in said:
                continue
            said.add(line)
        sys.stderr.write(f"speedbench: {terminal_text(line)}\n")
        if collect is not None and line.startswith(("warning: ", "note: ")):
            collect.append(line.removeprefix("warning: "))
    # compare and report draw these with the comparison; the gate's table has no place for them
    for line in state_warnings({"baseline": first, "speculative": second}) if gate else ():
        sys.stderr.write(f"speedbench: warning: {terminal_text(line)}\n")
        if collect is not None:
            collect.append(line)
    return checked
