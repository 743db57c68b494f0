"""Rich terminal UI: a progress bar that implements the Progress hooks."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from bench.records import SampleResult
from bench.render._escape import terminal_text


class RichProgress:
    """A rich progress bar: done/total, failures, elapsed and ETA."""

    def __init__(self, console: Console | None = None) -> None:
        """Draw on `console` (stderr by default)."""
        self._console = console or Console(stderr=True)
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failed {task.fields[failed]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self._console,
            transient=False,
        )
        self._task: TaskID | None = None
        self._failed = 0

    def start(self, total: int, description: str) -> None:
        """Show the bar."""
        self._failed = 0
        self._progress.start()
        # a label is a name: never rich markup (a [link=...] would make a hyperlink), never a control sequence
        self._task = self._progress.add_task(escape(terminal_text(description)), total=total, failed=0)

    def advance(self, result: SampleResult) -> None:
        """Move the bar by one sample."""
        self._failed += 0 if result.ok else 1
        if self._task is not None:
            self._progress.update(self._task, advance=1, failed=self._failed)

    def message(self, text: str) -> None:
        """Print a notice above the bar."""
        self._progress.console.print(terminal_text(text, keep_lines=True), markup=False, highlight=False)

    def finish(self) -> None:
        """Stop the bar."""
        self._progress.stop()
