"""The harness version, recorded in every run file."""

__version__ = "0.1.0"
