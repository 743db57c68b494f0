"""Jobs that join the stages: `run` (one endpoint), `bench` (baseline against speculative), `sweep` (arms across
concurrency or arrival rates).

Each name is imported from its module on first use, so `speedbench run` loads neither pandas nor the comparison
modules the other jobs use.
"""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
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
