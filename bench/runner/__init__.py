"""Running a prompt set against a server: transport, per-sample client, the runner and its progress hooks."""

from bench.runner._arrivals import (
    ARRIVAL_PROCESSES,
    TRACE,
    ArrivalSchedule,
    Block,
    arrival_schedule,
    block_offsets,
    block_plan,
    default_block_size,
    inter_arrival_cv,
    load_trace,
)
from bench.runner._client import RequestSettings, build_payload, run_sample, send_turn
from bench.runner._interleave import ArmSpec, arm_order, execute_interleaved, run_interleaved
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
    "ARRIVAL_PROCESSES",
    "TRACE",
    "ArmSpec",
    "ArrivalSchedule",
    "Block",
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
    "arrival_schedule",
    "block_offsets",
    "block_plan",
    "build_payload",
    "default_block_size",
    "execute_interleaved",
    "inter_arrival_cv",
    "load_trace",
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
