"""`speedbench serve`: an embedded llama.cpp server until Ctrl-C."""

from __future__ import annotations

import argparse
import sys

from bench._constants import EXIT_FAILED, EXIT_OK
from bench._errors import BenchError
from bench._types import Writer
from bench.commands._common import SERVER_MODEL_HELP

HELP = "serve a GGUF with the embedded llama.cpp server"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench serve`."""
    parser.add_argument("--mode", default="baseline", help="baseline, ngram-mod, ngram-simple or draft")
    parser.add_argument("--model", default=None, help=SERVER_MODEL_HELP)
    parser.add_argument("--draft-model", default=None, help="draft GGUF for --mode draft (default: the model)")
    parser.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    parser.add_argument("--threads", type=int, default=1, help="server CPU threads")
    parser.add_argument("--ctx-size", type=int, default=None,
                        help="total KV context in tokens, shared by the slots (default: 4096 per slot)")
    parser.add_argument("--slots", type=int, default=1,
                        help="requests the server decodes at once (llama.cpp n_parallel); more wait in its queue "
                             "(default: 1)")


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench serve`: run an embedded llama.cpp server until Ctrl-C."""
    import signal
    import threading

    from bench.server import EmbeddedServer, ServerConfig, ServerError

    try:
        config = ServerConfig(
            mode=args.mode,
            model_path=args.model,  # a GGUF path or a model name
            draft_model_path=args.draft_model,
            n_threads=args.threads,
            port=args.port,
            ctx_size=args.ctx_size if args.ctx_size is not None else 4096 * max(1, args.slots),
            n_parallel=args.slots,
        )
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    stopped = threading.Event()
    try:
        with EmbeddedServer(config) as server:
            # handlers before the ready line: once it is out, Ctrl-C means "stop cleanly" (exit 0)
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, lambda *_: stopped.set())
            slots = f", {args.slots} slots" if args.slots != 1 else ""
            out(f"speedbench: {args.mode} server at {server.url}{slots} (Ctrl-C to stop)\n")
            sys.stdout.flush()
            while not stopped.wait(0.5):
                if not server.is_running():
                    sys.stderr.write("speedbench: server died:\n" + "\n".join(server.log_tail()) + "\n")
                    return EXIT_FAILED
    except ServerError as exc:
        raise BenchError(str(exc)) from None
    return EXIT_OK
