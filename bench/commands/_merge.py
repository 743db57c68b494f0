"""`speedbench merge`: join the run files of a run's N shards (`run --shard I/N`) into the one run."""

from __future__ import annotations

import argparse

from bench._constants import EXIT_OK
from bench._types import Writer

HELP = "join the run files of a run's shards (run --shard I/N) into one run file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench merge`."""
    parser.add_argument("shards", nargs="+", metavar="SHARD", help="the run files of all N shards, in any order")
    parser.add_argument("--output", required=True, help="the merged run file to write")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench merge`: load the shards, merge them (refusing anything but the N slices of one run), save."""
    from bench.records import load_run, merge_shards, save_run

    merged = merge_shards([load_run(path) for path in args.shards])
    save_run(merged, args.output, force=args.force)
    out(f"speedbench: merged {len(args.shards)} shards ({len(merged.results)} results of "
        f"{merged.selected_samples} selected) into {args.output}\n")
    return EXIT_OK
