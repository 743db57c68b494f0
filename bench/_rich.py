"""Rich terminal UI: a progress bar that implements the Progress hooks, and a rich summary table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from bench._records import SampleResult
from bench._render import Column, format_value


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
        self._task: Any = None
        self._failed = 0

    def start(self, total: int, description: str) -> None:
        """Show the bar."""
        self._failed = 0
        self._progress.start()
        self._task = self._progress.add_task(description, total=total, failed=0)

    def advance(self, result: SampleResult) -> None:
        """Move the bar by one sample."""
        self._failed += 0 if result.ok else 1
        self._progress.update(self._task, advance=1, failed=self._failed)

    def message(self, text: str) -> None:
        """Print a notice above the bar."""
        self._progress.console.print(text, markup=False, highlight=False)

    def finish(self) -> None:
        """Stop the bar."""
        self._progress.stop()


def rich_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], title: str | None = None) -> Table:
    """The same rows and formats as the text table, as a rich Table."""
    table = Table(title=title)
    for header, _, kind in columns:
        table.add_column(header, justify="left" if kind == "" else "right")
    for row in rows:
        table.add_row(*(format_value(row.get(key), kind) for _, key, kind in columns))
    return table
