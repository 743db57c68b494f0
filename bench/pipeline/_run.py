"""The `run` job: one endpoint, one prompt set, the summary table, the traffic report and a run file."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from bench._constants import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from bench._redact import one_line, redact
from bench._types import Writer
from bench.prompts import PromptSet
from bench.records import Run
from bench.runner import Progress, RunConfig


@dataclass(frozen=True)
class RunJob:
    """What `speedbench run` runs: the run's settings, where its file goes and how the run is carried out."""

    config: RunConfig
    workers: int | None = None
    """Client processes asked for (None: `auto`, chosen from the load)."""
    output: str | None = None
    """The run file (None: `results/<UTC time>-<label>.json`)."""
    resume: bool = False
    force: bool = False
    shard: str | None = None
    """`I/N`: send only that slice of the run (`speedbench merge` joins them)."""
    start_at: float | None = None
    slo: str | None = None


def _settled(job: RunJob) -> RunConfig:
    """The run's settings with its worker count chosen, validated; a malformed --slo fails here, before a send."""
    from bench.runner import choose_workers

    config = job.config
    single = "--shard" if job.shard is not None else "--start-at" if job.start_at is not None else None
    workers, why = choose_workers(job.workers, concurrency=config.concurrency, request_rate=config.request_rate,
                                  open_loop=config.open_loop, max_concurrency=config.max_concurrency, single=single)
    config = replace(config, workers=workers, workers_auto=why)
    config.validate()
    if job.slo:
        from bench.analysis import parse_slo

        parse_slo(job.slo)
    return config


def _prompts(config: RunConfig, out: Writer) -> PromptSet:
    """The selected prompts; throughput prompts sized with the server's tokenizer when it has one.

    Every URL is checked before anything is sent or written, after the options and prompt names are: a closed
    port, a server that is not HTTP or not an LLM server is one line, exit 2.
    """
    from bench.prompts import HUB_REVISION, load_prompts
    from bench.runner import check_endpoints, normalize_base_url, server_token_counter

    def check() -> None:
        for warning in check_endpoints([normalize_base_url(url) for url in config.urls()], config.api,
                                       config.request_headers()):
            out(f"speedbench: {warning}\n")

    count_tokens = None
    sized_by_server = config.dataset == "categories" and config.bench.startswith("throughput_")
    if sized_by_server:
        check()
        count_tokens = server_token_counter(config.urls()[0], headers=config.request_headers())
        out("speedbench: sizing prompts with " + ("the server's /tokenize\n" if count_tokens else
                                                  "an estimate (the server has no /tokenize)\n"))
    prompts = load_prompts(config.dataset, bench=config.bench, category=config.category, limit=config.limit,
                           revision=config.revision or HUB_REVISION, count_tokens=count_tokens)
    if not sized_by_server:
        check()
    if prompts.skipped:
        out(f"speedbench: skipped {prompts.skipped} rows without usable turns\n")
    out(f"speedbench: loaded {len(prompts.samples)} samples from bench={config.bench} category={config.category}\n")
    return prompts


def run_one(job: RunJob, *, out: Writer, progress: Progress) -> int:
    """Run the job; print the summary and traffic report; return the exit code (every selected sample finished:
    EXIT_OK; interrupted: EXIT_INTERRUPTED; a failed or missing sample, a journal that could not be written:
    EXIT_FAILED)."""
    from bench.prompts import Shard
    from bench.records import default_run_file
    from bench.runner import RunStopped, fit_trace, refuse_existing_output, run_benchmark

    config = _settled(job)
    shard = Shard.parse(job.shard) if job.shard is not None else None
    output = job.output or default_run_file(config.label)
    if not job.resume:
        refuse_existing_output(output, force=job.force)
    prompts = _prompts(config, out)
    prompts, short = fit_trace(prompts, config)
    if short:
        out(f"speedbench: {short}\n")
    try:
        run, interrupted = run_benchmark(prompts, config, output=output, progress=progress, resume=job.resume,
                                         force=job.force, shard=shard, start_at=job.start_at)
    except RunStopped as exc:  # the journal could not be written: what finished is kept, the run is not done
        sys.stderr.write(f"speedbench: error: {redact(str(exc))}\n")
        return EXIT_FAILED
    report_run(run, out, slo=job.slo, plot_stem=Path(output))
    out(f"\nspeedbench: wrote {output}\n")
    return _outcome(run, interrupted, output, out)


def _outcome(run: Run, interrupted: bool, output: str, out: Writer) -> int:
    """The exit code of a finished run, with what the user needs to know about an unfinished one."""
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


def report_run(run: Run, out: Writer, *, slo: str | None, plot_stem: Path | None = None) -> None:
    """The summary table, streaming percentiles and run-to-run variation when the run has them, the traffic report."""
    from bench.render import summary_text

    out(f"\nSummary (elapsed={run.info.elapsed_s or 0.0:.2f}s)\n")
    out(summary_text(run.summary))
    if run.settings.stream or run.settings.repeat >= 2:  # else the analysis stack (numpy, pandas) is not loaded
        from bench.analysis import repeat_cv, stream_latency_stats
        from bench.render import cv_text, stream_text

        streaming = stream_latency_stats(run)
        if streaming:
            out("\n" + stream_text(streaming))
        variation = repeat_cv(run)
        if variation:
            out("\n" + cv_text(variation))
    traffic_report(run, out, slo_text=slo,
                   plot_dir=(plot_stem.parent, plot_stem.stem + ".timeline") if plot_stem is not None else None)


def traffic_report(run: Run, out: Writer, *, slo_text: str | None,
                   plot_dir: tuple[Path, str] | None = None) -> None:
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
    if plot_dir is not None and (run.settings.request_rate or run.settings.trace):
        from bench.render import plot_timeline

        paths = plot_timeline({"run": requests}, plot_dir[0], formats=("png",), stem=plot_dir[1])
        out(f"speedbench: wrote {paths[0]}\n")
