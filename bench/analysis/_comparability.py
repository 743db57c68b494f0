"""Can two runs be compared? Differences in what was measured, named and graded, before any table is drawn.

A difference that changes what a speedup means (no samples in common, other prompts, another
output length, concurrency, bench or dataset, the same file twice) is an error; a lesser one
(engine, model, harness version, extra inputs, which categories were selected...) is a warning.
Failed samples and interrupted or partial runs are recorded per arm so every output can flag them
and `report` can refuse a partial run. Files that carry only a `summary` (pasted tables rebuilt)
cannot be checked at all: that is said once, and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.analysis._thinking import longer_thinking, reasoning_mismatch
from bench.records import (
    COMPARED_AS_ERROR,
    COMPARED_AS_WARNING,
    DRAFTED,
    SELECTION_KEYS,
    UNKNOWN,
    Run,
    start_state,
)

ERROR = "error"
"""The severity of a difference that makes two runs incomparable (refused unless --allow-mismatch)."""
WARNING = "warning"
"""The severity of a difference that is shown beside the comparison but does not stop it."""
NOTHING_CHECKED = "nothing could be checked"
LOOP_NOTE = "the client's event loop"
"""How the runner's notes about its own event loop begin (stalls, merged chunks)."""
SERVER_STATE = "server state at start"
"""The difference of two runs whose servers started in different states (fresh, served before, drafter warm)."""
"""What the check says when neither run records anything it could compare."""

# config keys compared between two runs, and how much a difference matters: the run identity's (bench.records)
_ERROR_CONFIG_KEYS = COMPARED_AS_ERROR
_WARNING_CONFIG_KEYS = COMPARED_AS_WARNING
_SELECTION_KEYS = SELECTION_KEYS


@dataclass(frozen=True)
class Difference:
    """One setting that differs between two runs, and whether it changes what the comparison means."""

    field: str
    baseline: str
    speculative: str
    severity: str
    labels: tuple[str, str] = ("baseline", "speculative")
    arm: str = ""
    """Which arm of two comparisons the runs are (the gate's `baseline` and `speculative`), when that is not plain."""

    @property
    def message(self) -> str:
        """One line naming the difference: `osl differs: baseline=32 speculative=16`."""
        if self.field == SERVER_STATE:
            which = f"{self.arm} " if self.arm else ""
            return (f"the {which}servers started in different states: {self.labels[0]} {self.baseline}; "
                    f"{self.labels[1]} {self.speculative} (a drafter's memory or a warm prompt cache of earlier "
                    "requests favours the warmer server: restart the servers before each run, or run `speedbench "
                    "bench`, which starts fresh ones)")
        if self.field == "file":
            return f"the same file (or identical copies) on both sides: {self.labels[0]}={self.baseline} " \
                   f"{self.labels[1]}={self.speculative}"
        return f"{self.field} differs: {self.labels[0]}={self.baseline} {self.labels[1]}={self.speculative}"


@dataclass(frozen=True)
class ArmState:
    """What one run finished: selected, recorded and failed samples, and whether it was interrupted."""

    arm: str
    path: str | None
    selected: int
    recorded: int
    failed: int
    interrupted: bool

    @property
    def partial(self) -> bool:
        """Interrupted, or fewer samples recorded than were selected."""
        return self.interrupted or self.recorded < self.selected

    @property
    def message(self) -> str:
        """One line: `speculative: interrupted, 14 of 22 samples recorded, 2 failed`."""
        parts = []
        if self.interrupted:
            parts.append("interrupted")
        if self.partial:
            parts.append(f"{self.recorded} of {self.selected} samples recorded")
        if self.failed:
            parts.append(f"{self.failed} of {self.recorded} samples failed")
        return f"{self.arm} ({_file_name(self.path)}): " + (", ".join(parts) if parts else "complete")


@dataclass(frozen=True)
class Comparability:
    """The outcome of the check: graded differences, notes for the reader, and whether anything was checked."""

    differences: tuple[Difference, ...]
    notes: tuple[str, ...]
    checked: bool
    arms: tuple[ArmState, ...] = ()

    @property
    def errors(self) -> tuple[Difference, ...]:
        """Differences that change what the comparison means (refused unless --allow-mismatch)."""
        return tuple(d for d in self.differences if d.severity == ERROR)

    @property
    def warnings(self) -> tuple[Difference, ...]:
        """Lesser differences, printed above the table."""
        return tuple(d for d in self.differences if d.severity == WARNING)

    @property
    def partial(self) -> tuple[ArmState, ...]:
        """Arms that were interrupted or recorded fewer samples than selected (report refuses these)."""
        return tuple(arm for arm in self.arms if arm.partial)

    @property
    def failed(self) -> tuple[ArmState, ...]:
        """Arms with failed samples."""
        return tuple(arm for arm in self.arms if arm.failed)

    @property
    def flags(self) -> tuple[str, ...]:
        """One line per partial or failing arm, for every output to show."""
        return tuple(arm.message for arm in self.arms if arm.partial or arm.failed)

    def lines(self, *, allowed: bool = False) -> list[str]:
        """Everything worth printing, one line each: errors, warnings, flags and notes.

        With `allowed` (the user passed --allow-mismatch and the runs are compared anyway) an error is no
        longer one: it is printed as a warning that says so.
        """
        return [
            *(f"warning: {d.message} (compared anyway: --allow-mismatch)" if allowed else f"error: {d.message}"
              for d in self.errors),
            *(f"warning: {d.message}" for d in self.warnings),
            *(f"warning: {flag}" for flag in self.flags),
            *(f"note: {note}" for note in self.notes),
        ]


def summary_only(run: Run) -> bool:
    """A file that carries only a `summary` (no config, no results): a pasted table rebuilt."""
    return not run.config and not run.results


def check_comparable(baseline: Run, speculative: Run) -> Comparability:
    """Compare what two runs measured: graded differences, per-arm state and notes; never raises."""
    return _check(baseline, speculative, ("baseline", "speculative"), same_mode_expected=False)


def check_regress_comparable(reference: Run, candidate: Run, arm: str = "") -> Comparability:
    """The same check for the gate's reference and candidate (runs of one arm, so the speculative mode must match);
    `arm` names which arm of two comparisons they are."""
    return _check(reference, candidate, ("reference", "candidate"), same_mode_expected=True, arm=arm)


def _check(
    first: Run, second: Run, labels: tuple[str, str], *, same_mode_expected: bool, arm: str = ""
) -> Comparability:
    if summary_only(first) or summary_only(second):
        which = [_file_name(run.path) for run in (first, second) if summary_only(run)]
        note = f"{NOTHING_CHECKED}: {' and '.join(which)} carry only a summary (no config, no per-sample results)"
        return Comparability(differences=(), notes=(note,), checked=False)
    differences: list[Difference] = []
    notes: list[str] = []

    def differ(name: str, a: object, b: object, severity: str) -> None:
        differences.append(Difference(name, _show(a), _show(b), severity, labels))

    if _same_file(first, second):
        where = _file_name(first.path)
        differences.append(Difference("file", where, _file_name(second.path), ERROR, labels))
        notes.append(f"the {labels[0]} and the {labels[1]} are the same file (or identical copies)")

    for key in _ERROR_CONFIG_KEYS + _WARNING_CONFIG_KEYS:
        severity = ERROR if key in _ERROR_CONFIG_KEYS else WARNING
        if key in first.config and key in second.config:
            if first.config[key] != second.config[key]:
                differ(key, first.config[key], second.config[key], severity)
        elif severity == ERROR and (key in first.config) != (key in second.config) and key != "api":
            missing = labels[0] if key not in first.config else labels[1]
            notes.append(f"{key} is not recorded in the {missing} run; it could not be checked")

    _check_prompts(first, second, labels, differences, notes)
    _check_samples(first, second, labels, differences)
    differences.extend(thinking_differences(first, second, labels))

    for name, getter in (("engine", _engine), ("model", _model), ("harness version", _harness)):
        a, b = getter(first), getter(second)
        if a is not None and b is not None and a != b:
            differ(name, a, b, WARNING)
    mode_a, mode_b = _mode(first), _mode(second)
    if same_mode_expected and mode_a is not None and mode_b is not None and mode_a != mode_b:
        differ("speculative mode", mode_a, mode_b, WARNING)
    if not same_mode_expected and _drafted(first):
        differences.append(
            Difference("speculative mode", "drafted tokens", mode_b or "speculative", WARNING, labels)
        )
        notes.append(f"the {labels[0]} run drafted tokens: it was not run without speculative decoding" + (
            f"; the {labels[1]} run drafted none: are --{labels[0]} and --{labels[1]} swapped?"
            if not _drafted(second) else ""))

    same_role = same_mode_expected or (_drafted(first) and _drafted(second))
    _check_server_start(first, second, labels, differences, notes, refuse=same_role, arm=arm)
    shared = [warning for warning in first.info.warnings if warning in second.info.warnings]
    notes.extend(f"both runs warned: {warning}" for warning in shared)  # interleaved arms share one client
    own = [[warning for warning in run.info.warnings if warning not in shared] for run in (first, second)]
    loops = [next((warning for warning in warnings if warning.startswith(LOOP_NOTE)), None) for warnings in own]
    if loops[0] is not None and loops[1] is not None:  # runs of their own clients: one note, both runs' figures
        figures = loops[1].split(":", 1)[0].removeprefix(LOOP_NOTE).strip()
        notes.append(f"both runs warned: {loops[0]} (the {labels[0]} run; the {labels[1]} run {figures})")
        own = [[warning for warning in warnings if warning not in loops] for warnings in own]
    for label, warnings in zip(labels, own, strict=True):
        notes.extend(f"the {label} run warned: {warning}" for warning in warnings)
    arms = tuple(_arm_state(label, run) for label, run in zip(labels, (first, second), strict=True))
    return Comparability(differences=tuple(differences), notes=tuple(notes), checked=True, arms=arms)


def _check_prompts(
    first: Run, second: Run, labels: tuple[str, str], differences: list[Difference], notes: list[str]
) -> None:
    """Prompt digests: the same selection with another digest means other prompts (an error)."""
    digest_a, digest_b = first.info.prompts_sha256, second.info.prompts_sha256
    if not digest_a or not digest_b:
        notes.append("no prompt digest in one of the runs: prompts are matched by sample id only")
        return
    if digest_a == digest_b:
        return
    same_selection = all(first.config.get(key) == second.config.get(key) for key in _SELECTION_KEYS)
    if same_selection:
        differences.append(Difference("prompts (sha256)", digest_a[:12], digest_b[:12], ERROR, labels))
    else:
        notes.append("the prompt digests differ because the sample selections differ; samples are paired by id")


def _check_server_start(
    first: Run, second: Run, labels: tuple[str, str], differences: list[Difference], notes: list[str], *,
    refuse: bool, arm: str = "",
) -> None:
    """Servers that started in different states: refused when both runs play one role (`refuse`: the gate's
    reference and candidate, two speculative runs), a warning for a baseline against a speculative run; a drafter
    that was warm is named either way."""
    starts = (first.info.server_start, second.info.server_start)
    states = tuple(start_state(start) for start in starts)
    if UNKNOWN not in states and states[0] != states[1]:
        described = tuple(start.describe() for start in starts if start is not None)
        differences.append(Difference(SERVER_STATE, described[0], described[1], ERROR if refuse else WARNING, labels,
                                      arm=arm))
        return
    for label, start, state in zip(labels, starts, states, strict=True):
        if state == DRAFTED and start is not None:
            notes.append(f"the {label} server's drafter was warm when its run began ({start.describe()}): its "
                         "speedup includes what it remembered of earlier requests; restart it before each run")
    if (states[0] == UNKNOWN) != (states[1] == UNKNOWN):
        missing = labels[states.index(UNKNOWN)]
        notes.append(f"the {missing} run records no server state at its start (no /metrics, or an older file): "
                     "whether its server started fresh could not be checked")


def thinking_differences(first: Run, second: Run, labels: tuple[str, str]) -> list[Difference]:
    """Reasoning runs: another thinking switch (an error: thinking on against off measures other work) and a
    second run that thinks over 10% longer on the same samples (another budget, template or sampling: named)."""
    found = []
    switches = reasoning_mismatch(first, second)
    if switches is not None:
        found.append(Difference("reasoning", switches[0], switches[1], ERROR, labels))
    longer = longer_thinking(first, second)
    if longer is not None:
        found.append(Difference("thinking length (mean tokens over paired samples; another budget, template or "
                                "sampling?)", f"{longer[0]:.0f}", f"{longer[1]:.0f}", WARNING, labels))
    return found


def _check_samples(first: Run, second: Run, labels: tuple[str, str], differences: list[Difference]) -> None:
    keys_a = {result.key for result in first.results}
    keys_b = {result.key for result in second.results}
    shared = keys_a & keys_b
    if not shared:
        differences.append(
            Difference("sample ids", f"{len(keys_a)} samples", f"{len(keys_b)} samples, none in common", ERROR, labels)
        )
        return
    ok_a = {result.key for result in first.results if result.ok}
    ok_b = {result.key for result in second.results if result.ok}
    if not ok_a & ok_b:
        differences.append(
            Difference(
                "successful samples", f"{len(ok_a)} of {len(keys_a)}", f"{len(ok_b)} of {len(keys_b)}, none in common",
                ERROR, labels,
            )
        )
    elif keys_a != keys_b:
        differences.append(
            Difference(
                "sample ids", f"{len(keys_a)} samples", f"{len(keys_b)} samples ({len(shared)} in common)",
                WARNING, labels,
            )
        )


def _arm_state(label: str, run: Run) -> ArmState:
    return ArmState(
        arm=label,
        path=run.path,
        selected=run.selected_samples,
        recorded=len({result.key for result in run.results}),
        failed=sum(1 for result in run.results if not result.ok),
        interrupted=run.info.interrupted,
    )


def _same_file(first: Run, second: Run) -> bool:
    if first.path and second.path:
        try:
            if os.path.samefile(first.path, second.path):
                return True
        except OSError:
            pass
        digests = [_file_digest(run.path) for run in (first, second)]
        if digests[0] is not None and digests[0] == digests[1]:
            return True
        if None not in digests:
            return False
    if first is second:
        return True
    if len(first.results) != len(second.results) or first.results[:1] != second.results[:1]:
        return False  # different contents, seen without serialising both runs
    return _content_digest(first) == _content_digest(second)


def _file_digest(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _content_digest(run: Run) -> str:
    payload = json.dumps(run.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _file_name(path: str | None) -> str:
    return Path(path).name if path else "(in memory)"


def _show(value: object) -> str:
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _engine(run: Run) -> str | None:
    return run.info.engine


def _model(run: Run) -> str | None:
    """The model the server described (file name only), else the model tag or the requested model."""
    model = run.info.server.model or _served_model(run) or run.settings.tags.get("model") or run.settings.model
    return Path(model).name if model else None


def _served_model(run: Run) -> str | None:
    """The first model of the server's OpenAI model list (0.1 files carry no adapter description)."""
    server = run.info.server_info
    models = server.get("models") if isinstance(server, Mapping) else None
    data = models.get("data") if isinstance(models, Mapping) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], Mapping) else {}
    return str(first["id"]) if first.get("id") else None


def _harness(run: Run) -> str | None:
    return run.info.harness if run.info.harness_version else None


def _mode(run: Run) -> str | None:
    return run.settings.tags.get("mode")


def _drafted(run: Run) -> bool:
    return any(result.draft_n > 0 for result in run.results if result.ok)
