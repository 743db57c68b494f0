"""Errors that carry a one-line message for the user."""


class BenchError(Exception):
    """Bad input or set-up: the CLI prints the message on one line and exits 2."""
