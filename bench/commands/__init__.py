"""The CLI's commands, one module each: `HELP`, `add_arguments(parser)` for its flags and `run(args, out)`.

`run` returns an exit code; bad input is a BenchError, which the CLI turns into one line and exit 2.
"""

from types import ModuleType

from bench.commands import _bench, _compare, _history, _merge, _regress, _report, _run, _serve, _sweep, _tune
from bench.commands._bench_file import read_pairs
from bench.commands._options import add_run_settings_options, given_options, run_settings, track_given_options

COMMANDS: dict[str, ModuleType] = {
    "run": _run,
    "compare": _compare,
    "serve": _serve,
    "bench": _bench,
    "sweep": _sweep,
    "tune": _tune,
    "report": _report,
    "regress": _regress,
    "merge": _merge,
    "history": _history,
}
"""Every `speedbench` subcommand by name, in the order `--help` lists them."""

__all__ = ["COMMANDS", "add_run_settings_options", "given_options", "read_pairs", "run_settings", "track_given_options"]
