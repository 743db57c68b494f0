"""Errors that carry a one-line message for the user."""


class BenchError(Exception):
    """Bad input or set-up: the CLI prints the message on one line and exits 2."""

    def _render_traceback_(self) -> list[str]:
        """How IPython and Jupyter show the error: its one line, no traceback (the notebook's bad input)."""
        return [f"speedbench: error: {self}"]
