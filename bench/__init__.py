"""speedbench: benchmark speculative decoding in LLM servers and report SpeedBench tables you can trust.

The public API is below; modules with a leading underscore are private. Names are imported on first
use so that `speedbench` commands start fast and load only what they need.
"""

from __future__ import annotations

import importlib
from typing import Any

from bench._version import __version__

_EXPORTS = {
    "DEFAULT_THRESHOLD": "bench._constants",
    "MIN_SAMPLES_FOR_CI": "bench._constants",
    "OVERALL": "bench._constants",
    "BenchError": "bench._errors",
    "EmbeddedServer": "bench.server",
    "PromptSet": "bench.prompts",
    "Run": "bench.records",
    "RunConfig": "bench.runner",
    "Sample": "bench.prompts",
    "SampleResult": "bench.records",
    "ServerConfig": "bench.server",
    "command_secrets": "bench._redact",
    "compare_runs": "bench.analysis",
    "comparison_text": "bench.render",
    "forget_secrets": "bench._redact",
    "load_prompts": "bench.prompts",
    "load_run": "bench.records",
    "lossless_check": "bench.analysis",
    "paired_stats": "bench.analysis",
    "read_input": "bench._inputs",
    "redact": "bench._redact",
    "redact_url": "bench._redact",
    "register_secret": "bench._redact",
    "run_benchmark": "bench.runner",
    "save_run": "bench.records",
    "summarize": "bench.records",
    "summary_text": "bench.render",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    """Import a public name from its private module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names."""
    return list(__all__)
