"""The option groups several commands share: a run's settings, its seeds, open-loop arrivals and SLOs.

Each option takes its default and help text from the run settings' one declaration (`bench.records.setting`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypedDict

from bench.commands._common import bounded_number, header_pair, json_object


class _ArgumentOptions(TypedDict, total=False):
    """The `add_argument` options an open-loop option takes besides its declared default and help text."""

    choices: list[str]
    type: Callable[[str], float]


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run (`speedbench run`): server, prompts, request and client settings, each with the
    default and help text the run settings declare (`bench.records.setting`)."""
    from bench.prompts import HUB_REVISION
    from bench.records import setting

    def declared(key: str, **kwargs: Any) -> None:
        item = setting(key)
        kwargs.setdefault("default", item.default)
        parser.add_argument(item.flag, help=kwargs.pop("help", item.help), **kwargs)

    declared("url", action="append", default=None)
    declared("model")
    declared("bench")
    declared("category")
    declared("osl", type=int)
    declared("extra_inputs", type=json_object)
    declared("concurrency", type=int)
    declared("limit", type=int)
    declared("timeout", type=bounded_number("--timeout"))
    declared("dataset")
    declared("revision", help=f"hub dataset revision (default: the pinned {HUB_REVISION[:12]})")
    declared("repeat", type=int)
    declared("warmup", type=int)
    declared("stream", action="store_true")
    declared("engine")
    declared("api", choices=["chat", "completions"])
    parser.add_argument("--api-key", default=None, help="bearer token (default: $OPENAI_API_KEY); never written")
    parser.add_argument("--header", type=header_pair, action="append", default=[], help=setting("headers").help)
    declared("retries", type=int)
    declared("logprobs", action="store_true")
    declared("max_response_bytes", type=int)
    declared("chat_template_kwargs", type=json_object)


def add_seed_options(parser: argparse.ArgumentParser, *seeds: str) -> None:
    """The seeds a command takes (`arrival`, `order`), each `--<name>-seed N`, under the seeds' one help text."""
    from bench.records import SEED_HELP

    for name in seeds:
        parser.add_argument(f"--{name}-seed", type=int, default=0, metavar="N", help=SEED_HELP)


def add_open_loop_options(parser: argparse.ArgumentParser, *, rates: bool = False) -> None:
    """Open-loop arrivals and SLOs (`run`, `bench`, `sweep`): rate, arrival process, cap, trace, SLOs."""
    from bench.records import setting

    if rates:
        parser.add_argument("--request-rate", default=None, metavar="R1,R2,...",
                            help="sweep arrival rates (requests/s) instead of concurrency levels (default: off)")
    else:
        parser.add_argument("--request-rate", type=bounded_number("--request-rate"), default=None, metavar="R",
                            help=setting("request_rate").help)
    options: tuple[tuple[str, _ArgumentOptions], ...] = (
        ("arrival", {"choices": ["poisson", "gamma", "constant"]}),
        ("burstiness", {"type": bounded_number("--burstiness")}),
        ("max_concurrency", {"type": int}),
    )
    for key, kwargs in options:
        parser.add_argument(setting(key).flag, default=setting(key).default, help=setting(key).help, **kwargs)
    if not rates:
        parser.add_argument("--trace", default=None, metavar="FILE", help=setting("trace").help)
    parser.add_argument("--slo", default=None, metavar="ttft=S,tpot=S,e2e=S",
                        help="latency targets in seconds (any subset; e2e alone for non-streamed runs): adds SLO "
                             "attainment and goodput (default: none)")
    parser.add_argument("--slo-target", type=float, default=0.9,
                        help="attainment a rate must reach, by its interval, to meet the SLOs (default: 0.9)")


def add_reasoning_option(parser: argparse.ArgumentParser) -> None:
    """`--reasoning on|off|auto`: the thinking switch of reasoning models, sent per engine and recorded."""
    from bench.records import REASONING_SETTINGS, setting

    item = setting("reasoning")
    parser.add_argument(item.flag, choices=list(REASONING_SETTINGS), default=item.default, help=item.help)
