"""Running a prompt set against servers: settings, arms, run strategies, the one run path, client and transport."""

from bench.runner._aiohttp_timing import (
    READ_BYTES,
    Arrivals,
    StampedSocket,
    check_internals as aiohttp_internals_missing,
    stamped_socket,
)
from bench.runner._arm import RunStopped, machine_info, prompts_digest, refuse_existing_output
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
from bench.runner._chunks import SampleFailure, StreamChunks
from bench.runner._config import Arm, RunConfig, normalize_base_url, server_root
from bench.runner._endpoint_check import check_endpoints
from bench.runner._execute import RunOptions, execute, run_arms, run_benchmark
from bench.runner._lag import LagMonitor
from bench.runner._limits import NUMBER_RANGES, checked_number, checked_start
from bench.runner._loops import DEFAULT_LOOP, LOOP_ENV, LOOPS, choose_loop, loop_factory, loop_name
from bench.runner._metrics import chunk_token_counts, per_token_itl, server_rates
from bench.runner._pacer import Pacer
from bench.runner._probes import server_token_counter
from bench.runner._progress import LineProgress, Progress, SilentProgress
from bench.runner._sample import run_sample
from bench.runner._schedule import ClosedLoop, OpenLoop, Schedule, seeded_order
from bench.runner._settings import RUN_SETTING_NAMES, RunSettings
from bench.runner._sse import SSEDecoder
from bench.runner._stop import FULL_COLLECTIONS_HELD, Stop, run_loop, stopped_like_ctrl_c
from bench.runner._strategies import (
    LONG_TURN_BATCHES,
    Blocks,
    Concurrent,
    LockStep,
    OpenArrivals,
    Plan,
    Strategy,
    Turn,
    Work,
    fit_trace,
    job_key,
    long_turns,
    strategy_for,
)
from bench.runner._team import Team
from bench.runner._transport import Response, StreamEvent, Transport, TransportError, retry_after_seconds
from bench.runner._turns import RequestSettings, build_payload, send_turn
from bench.runner._worker_count import (
    AUTO,
    PER_PROCESS_IN_FLIGHT,
    PER_PROCESS_REQUESTS_PER_S,
    choose_workers,
    cores,
    worker_shares,
)
from bench.runner._worker_files import left_workers
from bench.runner._workers import spread

__all__ = [
    "ARRIVAL_PROCESSES",
    "AUTO",
    "DEFAULT_LOOP",
    "FULL_COLLECTIONS_HELD",
    "LONG_TURN_BATCHES",
    "LOOPS",
    "LOOP_ENV",
    "NUMBER_RANGES",
    "PER_PROCESS_IN_FLIGHT",
    "PER_PROCESS_REQUESTS_PER_S",
    "READ_BYTES",
    "RUN_SETTING_NAMES",
    "TRACE",
    "Arm",
    "ArrivalSchedule",
    "Arrivals",
    "Block",
    "Blocks",
    "ClosedLoop",
    "Concurrent",
    "LagMonitor",
    "LineProgress",
    "LockStep",
    "OpenArrivals",
    "OpenLoop",
    "Pacer",
    "Plan",
    "Progress",
    "RequestSettings",
    "Response",
    "RunConfig",
    "RunOptions",
    "RunSettings",
    "RunStopped",
    "SSEDecoder",
    "SampleFailure",
    "Schedule",
    "SilentProgress",
    "StampedSocket",
    "Stop",
    "Strategy",
    "StreamChunks",
    "StreamEvent",
    "Team",
    "Transport",
    "TransportError",
    "Turn",
    "Work",
    "aiohttp_internals_missing",
    "arrival_schedule",
    "block_offsets",
    "block_plan",
    "build_payload",
    "check_endpoints",
    "checked_number",
    "checked_start",
    "choose_loop",
    "choose_workers",
    "chunk_token_counts",
    "cores",
    "default_block_size",
    "execute",
    "fit_trace",
    "inter_arrival_cv",
    "job_key",
    "left_workers",
    "load_trace",
    "long_turns",
    "loop_factory",
    "loop_name",
    "machine_info",
    "normalize_base_url",
    "per_token_itl",
    "prompts_digest",
    "refuse_existing_output",
    "retry_after_seconds",
    "run_arms",
    "run_benchmark",
    "run_loop",
    "run_sample",
    "seeded_order",
    "send_turn",
    "server_rates",
    "server_root",
    "server_token_counter",
    "spread",
    "stamped_socket",
    "stopped_like_ctrl_c",
    "strategy_for",
    "worker_shares",
]
