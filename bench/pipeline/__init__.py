"""Jobs that join the stages: `bench` (baseline against speculative) and `sweep` (arms across concurrency)."""

from bench.pipeline._artefacts import write_comparison, write_traffic
from bench.pipeline._bench import (
    PipelineConfig,
    check_servers,
    probe_urls,
    run_pipeline,
    validate,
    workloads,
)
from bench.pipeline._history import (
    CommitContext,
    add_to_history,
    commit_context,
    history_points,
    workload_name,
)
from bench.pipeline._rate_sweep import (
    RateSweepConfig,
    is_rate_sweep_folder,
    load_rate_sweep,
    parse_rates,
    run_rate_sweep,
    summarize_rate_sweep,
)
from bench.pipeline._sweep import (
    ArmDefinition,
    SweepConfig,
    load_sweep,
    parse_embedded_arms,
    parse_levels,
    parse_url_arms,
    run_sweep,
    write_sweep,
)
from bench.pipeline._tune import TuneConfig, measure_config, parse_grid, run_tune, write_tune

__all__ = [
    "ArmDefinition",
    "CommitContext",
    "PipelineConfig",
    "RateSweepConfig",
    "SweepConfig",
    "TuneConfig",
    "add_to_history",
    "check_servers",
    "commit_context",
    "history_points",
    "is_rate_sweep_folder",
    "load_rate_sweep",
    "load_sweep",
    "measure_config",
    "parse_embedded_arms",
    "parse_grid",
    "parse_levels",
    "parse_rates",
    "parse_url_arms",
    "probe_urls",
    "run_pipeline",
    "run_rate_sweep",
    "run_sweep",
    "run_tune",
    "summarize_rate_sweep",
    "validate",
    "workload_name",
    "workloads",
    "write_comparison",
    "write_sweep",
    "write_traffic",
    "write_tune",
]
