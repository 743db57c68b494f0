"""The option groups several commands share: a run's settings, its seeds, open-loop arrivals and SLOs.

Each option takes its default and help text from the run settings' one declaration (`bench.records.setting`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict, Unpack

from bench.commands._common import bounded_number, header_pair, json_object

if TYPE_CHECKING:
    from bench.records import SettingValue
    from bench.runner import RunSettings


class _ArgumentOptions(TypedDict, total=False):
    """The `add_argument` options an open-loop option takes besides its declared default and help text."""

    choices: list[str]
    type: Callable[[str], float]


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run (`speedbench run`): its server URL, then the run settings (`add_run_settings_options`)."""
    from bench.records import setting

    item = setting("url")
    parser.add_argument(item.flag, action="append", default=None, help=item.help)
    add_run_settings_options(parser)


class _OptionArguments(TypedDict, total=False):
    """What a run setting's option gives `add_argument` besides its flag and help text."""

    type: Callable[[str], object]
    action: str | type[argparse.Action]
    choices: Sequence[str]
    default: object


def add_run_settings_options(parser: argparse.ArgumentParser, *, levels: bool = False,
                             logprobs: bool | None = None) -> None:
    """The run settings' options, declared once for every command that runs requests (run, bench, sweep, tune):
    prompts, request and client settings, each with the default and help text the run settings declare
    (`bench.records.setting`). `levels`: the command takes its own `--concurrency` list instead; `logprobs`: the
    command's own default for `--logprobs` (a comparison's lossless check classifies divergences by them)."""
    from bench.prompts import HUB_REVISION
    from bench.records import REASONING_SETTINGS, setting

    def declared(key: str, help: str | None = None, **kwargs: Unpack[_OptionArguments]) -> None:
        item = setting(key)
        kwargs.setdefault("default", item.default)
        parser.add_argument(item.flag, help=item.help if help is None else help, **kwargs)

    declared("model")
    declared("bench")
    declared("category")
    declared("osl", type=int)
    declared("extra_inputs", type=json_object)
    if not levels:
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
    asked = setting("logprobs").default if logprobs is None else logprobs
    declared("logprobs", action=argparse.BooleanOptionalAction, default=asked,
             help=f"{setting('logprobs').help} (default: {'on' if asked else 'off'})")
    declared("max_response_bytes", type=int)
    declared("chat_template_kwargs", type=json_object)
    declared("reasoning", choices=list(REASONING_SETTINGS))


def run_settings(args: argparse.Namespace, **fixed: SettingValue) -> RunSettings:
    """The run settings of parsed options (`add_run_settings_options`, the open-loop options, the seeds): the one
    place the command line becomes a `RunSettings`; `fixed` values win (a level's concurrency, say)."""
    from bench.runner import RunSettings

    values = {"api_key": args.api_key or os.environ.get("OPENAI_API_KEY"), "headers": dict(args.header), **fixed}
    return RunSettings.from_values(vars(args), **values)


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


GIVEN = "given_options"
"""The parsed namespace's attribute naming the options given on the command line (`track_given_options`)."""


def track_given_options(parser: argparse.ArgumentParser) -> None:
    """Make the parser record, in `args.given_options`, the destination of every option the command line gives
    (so a config file's value yields to an option given, even one given its default)."""
    parser.set_defaults(**{GIVEN: frozenset()})
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            action.__class__ = _recording(type(action))


_RECORDING: dict[type[argparse.Action], type[argparse.Action]] = {}
"""Each action class's recording subclass, made once."""


def _recording(base: type[argparse.Action]) -> type[argparse.Action]:
    """`base` that also adds its destination to the namespace's given options when it is called."""
    known = _RECORDING.get(base)
    if known is not None:
        return known

    def record(self: argparse.Action, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
               values: str | Sequence[object] | None, option_string: str | None = None) -> None:
        """Add the destination to the given options, then act as `base` does."""
        setattr(namespace, GIVEN, getattr(namespace, GIVEN, frozenset()) | {self.dest})
        base.__call__(self, parser, namespace, values, option_string)

    recording = type(base.__name__, (base,), {"__call__": record})
    _RECORDING[base] = recording
    return recording


def given_options(args: argparse.Namespace) -> frozenset[str]:
    """The destinations of the options the command line gave (empty unless `track_given_options` was used)."""
    return frozenset(getattr(args, GIVEN, frozenset()))
