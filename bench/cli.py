"""The `speedbench` command line: parse arguments, call the command, map outcomes to exit codes.

Each subcommand lives in `bench.commands` (its flags and what it runs); this module builds the parser from
them and turns errors into one line and an exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from bench._constants import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from bench._errors import BenchError
from bench._redact import one_line, redacting_std_streams
from bench.commands import COMMANDS

__all__ = ["EXIT_BAD_INPUT", "EXIT_BROKEN_PIPE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "build_parser", "main"]


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already names it or there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "default" in text.lower()
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
            or action.required
        ):
            return text
        shown = json.dumps(default) if isinstance(default, dict) else "%(default)s"
        return f"{text} (default: {shown})"


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors reported on one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        """Print `speedbench <command>: error: ...` and exit 2."""
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand; every option says what it does and its default."""
    from bench._version import __version__

    parser = _Parser(prog="speedbench", description="Benchmark speculative decoding in LLM servers.",
                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"speedbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS.items():
        child = sub.add_parser(name, help=command.HELP, description=command.HELP, formatter_class=_HelpFormatter)
        command.add_arguments(child)
        child.set_defaults(handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run a subcommand; bad input exits 2 with one line, never a traceback."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already reported on one line
        return int(exc.code or 0)
    try:
        with redacting_std_streams():  # no registered secret reaches the terminal, whoever writes
            code = args.handler(args, sys.stdout.write)
    except BrokenPipeError:  # `speedbench compare ... | head`: the reader left; stop quietly
        return _stdout_gone()
    except BenchError as exc:
        sys.stderr.write(f"speedbench: error: {one_line(str(exc), 2000)}\n")
        code = EXIT_BAD_INPUT
    except OSError as exc:  # an output path that cannot be written, a folder that cannot be made
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"speedbench: error: {one_line(where + str(exc.strerror or exc), 2000)}\n")
        code = EXIT_BAD_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("speedbench: interrupted\n")
        code = EXIT_INTERRUPTED
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_gone()
    return code


EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a writer whose reader left (as `yes | head` does)."""


def _stdout_gone() -> int:
    """Stdout's reader closed the pipe: point stdout at /dev/null so the exit flush is silent too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    raise SystemExit(main())
