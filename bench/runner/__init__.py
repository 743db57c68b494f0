"""Running a prompt set against a server: transport, per-sample client, the runner and its progress hooks."""

from bench.runner._client import RequestSettings, build_payload, run_sample, send_turn
from bench.runner._interleave import ArmSpec, arm_order, execute_interleaved, run_interleaved
from bench.runner._loops import DEFAULT_LOOP, LOOP_ENV, LOOPS, choose_loop, loop_factory, loop_name
from bench.runner._progress import LineProgress, Progress, SilentProgress
from bench.runner._runner import (
    RunConfig,
    RunStopped,
    machine_info,
    normalize_base_url,
    prompts_digest,
    run_benchmark,
    server_root,
    server_token_counter,
)
from bench.runner._transport import SSEDecoder, Transport, TransportError

__all__ = [
    "DEFAULT_LOOP",
    "LOOPS",
    "LOOP_ENV",
    "ArmSpec",
    "LineProgress",
    "Progress",
    "RequestSettings",
    "RunConfig",
    "RunStopped",
    "SSEDecoder",
    "SilentProgress",
    "Transport",
    "TransportError",
    "arm_order",
    "build_payload",
    "choose_loop",
    "execute_interleaved",
    "loop_factory",
    "loop_name",
    "machine_info",
    "normalize_base_url",
    "prompts_digest",
    "run_benchmark",
    "run_interleaved",
    "run_sample",
    "send_turn",
    "server_root",
    "server_token_counter",
]
