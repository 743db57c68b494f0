"""Option parity: every `run` option a comparison can use works on `bench`, `sweep` and `tune` with the same default,
or a stated reason says why not; and the run settings are built from the command line in one place."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from bench.cli import build_parser
from bench.commands import add_run_settings_options, given_options, run_settings, track_given_options
from bench.records import setting
from bench.runner import RUN_SETTING_NAMES, RunConfig, RunSettings

COMPARISONS = ("bench", "sweep", "tune")
RUN_ONLY = {
    "--url": "a comparison's servers are its sides: --base-url/--spec-url or --base-cmd/--spec-cmd",
    "--output": "a comparison writes a results folder, never one run file",
    "--shard": "a slice of one run; a comparison's arms must see the same samples",
    "--start-at": "the shared start of a run's shards",
    "--force": "a comparison writes a new folder (or continues one with --resume)",
    "--loop": "the client's event loop: $SPEEDBENCH_LOOP sets it for every command",
}
"""`run` options no comparison takes, and why."""
NOT_ON = {
    ("sweep", "--trace"): "a rate sweep draws its arrivals at each rate; a trace is one schedule",
    ("bench", "--trace"): "",  # present, refused with its reason in one line (bench --trace)
    **{("tune", option): "tune compares draft lengths at closed-loop load levels (--concurrency)"
       for option in ("--request-rate", "--arrival", "--burstiness", "--max-concurrency", "--arrival-seed", "--trace",
                      "--slo", "--slo-target")},
    ("tune", "--workers"): "each configuration runs in step in one client process",
}
"""Options one comparison lacks, and why."""
OTHER_DEFAULT = {
    "--logprobs": ("bench", "a comparison's lossless check classifies each divergence by the top-2 log-probabilities"),
    "--no-logprobs": ("bench", "the same option's negative form"),
    "--concurrency": ("sweep tune", "a list of load levels, one comparison each (run: the one level)"),
    "--resume": ("bench sweep tune", "the folder to continue (run: a flag, its output's journal)"),
}
"""Options a comparison takes with another default or form, and why."""


def _options(command: str) -> dict[str, argparse.Action]:
    sub = next(action for action in build_parser()._actions if action.dest == "command")
    return {flag: action for action in sub.choices[command]._actions for flag in action.option_strings
            if flag.startswith("--") and flag != "--help"}


def test_every_reason_is_stated() -> None:
    assert all(RUN_ONLY.values()) and all(reason for _, reason in OTHER_DEFAULT.values())


@pytest.mark.parametrize("command", COMPARISONS)
def test_every_run_option_is_on_each_comparison_with_the_same_default(command: str) -> None:
    run, theirs = _options("run"), _options(command)
    missing = [flag for flag in run if flag not in theirs and flag not in RUN_ONLY and (command, flag) not in NOT_ON]
    assert missing == [], f"{command} lacks {missing} with no stated reason"
    differing = [(flag, run[flag].default, theirs[flag].default) for flag in run
                 if flag in theirs and run[flag].default != theirs[flag].default
                 and command not in OTHER_DEFAULT.get(flag, ("",))[0].split()]
    assert differing == [], f"{command}: {differing}"
    stale = [flag for flag in RUN_ONLY if flag in theirs]
    assert stale == [], f"{command} takes {stale}: no longer run-only"


def test_every_run_setting_has_one_option_in_the_group() -> None:
    parser = argparse.ArgumentParser()
    add_run_settings_options(parser)
    declared = {action.dest for action in parser._actions}
    open_loop = {"request_rate", "arrival", "burstiness", "max_concurrency", "arrival_seed"}  # their own group
    assert set(RUN_SETTING_NAMES) - open_loop - {"headers"} <= declared
    assert "header" in declared
    for name in ("osl", "limit", "timeout", "dataset", "engine", "max_response_bytes"):
        assert parser.get_default(name) == setting(name).default


def test_run_settings_are_built_from_the_command_line_in_one_place(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env-1234")
    args = build_parser().parse_args(["bench", "--dataset", "rows.jsonl", "--header", "X-A: 1", "--osl", "32",
                                      "--chat-template-kwargs", '{"enable_thinking": false}', "--retries", "2"])
    settings = run_settings(args)
    assert isinstance(settings, RunSettings)
    assert (settings.dataset, settings.osl, settings.retries) == ("rows.jsonl", 32, 2)
    assert settings.api_key == "from-env-1234" and dict(settings.headers) == {"X-A": "1"}
    assert settings.chat_template_kwargs == {"enable_thinking": False}
    assert run_settings(args, concurrency=4).concurrency == 4


def test_a_run_config_is_the_settings_plus_its_own_fields() -> None:
    settings = RunSettings(osl=12, dataset="x.jsonl", api_key="k-123456")
    config = RunConfig.from_settings(settings, url="http://h:1", label="baseline")
    assert isinstance(config, RunSettings) and config.settings() == settings
    own = {item.name for item in fields(RunConfig)} - set(RUN_SETTING_NAMES)
    assert own == {"url", "label", "per_sample_metrics", "tags", "trace", "workers", "workers_auto", "loop"}
    assert "api_key" not in config.recorded()


def test_options_given_on_the_command_line_are_known_even_at_their_default() -> None:
    parser = argparse.ArgumentParser()
    add_run_settings_options(parser)
    track_given_options(parser)
    args = parser.parse_args(["--osl", str(setting("osl").default), "--stream"])
    assert given_options(args) == {"osl", "stream"}
    assert given_options(parser.parse_args([])) == frozenset()
