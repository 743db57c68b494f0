"""Jobs that join the stages: `run` (one endpoint), `bench` (baseline against speculative), `sweep` (arms across
concurrency or arrival rates).

Each name is imported from its module on first use, so `speedbench run` loads neither pandas nor the comparison
modules the other jobs use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_MODULES: dict[str, tuple[str, ...]] = {
    "_artefacts": ("write_comparison", "write_traffic"),
    "_bench": (
        "PipelineConfig", "check_pipeline", "probe_urls", "run_comparison", "run_pipeline", "validate",
        "workloads",
    ),
    "_job": ("ComparisonJob", "ServerSettings", "ServerSide"),
    "_pairs": ("Pair", "PairsConfig", "pair_comparisons", "run_pairs"),
    "_servers": ("check_command", "check_embedded", "command_server", "ended_on_signals", "side_endpoint"),
    "_gate": ("GateJob", "gate_thresholds", "run_gate", "speculation_change"),
    "_history": (
        "CommitContext", "add_to_history", "commit_context", "history_points", "load_history_analysis", "workload_name",
    ),
    "_rate_sweep": (
        "RateSweepConfig", "is_rate_sweep_folder", "load_rate_sweep", "parse_rates", "run_rate_sweep",
        "summarize_rate_sweep",
    ),
    "_report": ("report_trends", "vetted_comparison"),
    "_run": ("RunJob", "report_run", "run_one", "traffic_report"),
    "_sweep": (
        "ArmDefinition", "SweepConfig", "load_sweep", "parse_embedded_arms", "parse_levels", "parse_url_arms",
        "run_sweep", "write_sweep",
    ),
    "_tune": ("TuneConfig", "measure_config", "parse_grid", "run_tune", "write_tune"),
    "_vet": ("vet",),
}
_HOME = {name: f"bench.pipeline.{module}" for module, names in _MODULES.items() for name in names}

__all__ = sorted(_HOME)


# The same names for a type checker, which cannot follow the lazy import below.
if TYPE_CHECKING:
    from bench.pipeline._artefacts import (
        write_comparison as write_comparison,
        write_traffic as write_traffic,
    )
    from bench.pipeline._bench import (
        PipelineConfig as PipelineConfig,
        check_pipeline as check_pipeline,
        probe_urls as probe_urls,
        run_comparison as run_comparison,
        run_pipeline as run_pipeline,
        validate as validate,
        workloads as workloads,
    )
    from bench.pipeline._gate import (
        GateJob as GateJob,
        gate_thresholds as gate_thresholds,
        run_gate as run_gate,
        speculation_change as speculation_change,
    )
    from bench.pipeline._history import (
        CommitContext as CommitContext,
        add_to_history as add_to_history,
        commit_context as commit_context,
        history_points as history_points,
        load_history_analysis as load_history_analysis,
        workload_name as workload_name,
    )
    from bench.pipeline._job import (
        ComparisonJob as ComparisonJob,
        ServerSettings as ServerSettings,
        ServerSide as ServerSide,
    )
    from bench.pipeline._pairs import (
        Pair as Pair,
        PairsConfig as PairsConfig,
        pair_comparisons as pair_comparisons,
        run_pairs as run_pairs,
    )
    from bench.pipeline._rate_sweep import (
        RateSweepConfig as RateSweepConfig,
        is_rate_sweep_folder as is_rate_sweep_folder,
        load_rate_sweep as load_rate_sweep,
        parse_rates as parse_rates,
        run_rate_sweep as run_rate_sweep,
        summarize_rate_sweep as summarize_rate_sweep,
    )
    from bench.pipeline._report import (
        report_trends as report_trends,
        vetted_comparison as vetted_comparison,
    )
    from bench.pipeline._run import (
        RunJob as RunJob,
        report_run as report_run,
        run_one as run_one,
        traffic_report as traffic_report,
    )
    from bench.pipeline._servers import (
        check_command as check_command,
        check_embedded as check_embedded,
        command_server as command_server,
        ended_on_signals as ended_on_signals,
        side_endpoint as side_endpoint,
    )
    from bench.pipeline._sweep import (
        ArmDefinition as ArmDefinition,
        SweepConfig as SweepConfig,
        load_sweep as load_sweep,
        parse_embedded_arms as parse_embedded_arms,
        parse_levels as parse_levels,
        parse_url_arms as parse_url_arms,
        run_sweep as run_sweep,
        write_sweep as write_sweep,
    )
    from bench.pipeline._tune import (
        TuneConfig as TuneConfig,
        measure_config as measure_config,
        parse_grid as parse_grid,
        run_tune as run_tune,
        write_tune as write_tune,
    )
    from bench.pipeline._vet import (
        vet as vet,
    )


def __getattr__(name: str) -> object:
    """Import the module that defines `name` on first use."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.pipeline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    """The package's public names."""
    return __all__
