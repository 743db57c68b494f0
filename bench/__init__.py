"""speedbench: benchmark speculative decoding in LLM servers and report SpeedBench tables you can trust.

The public API is below; modules with a leading underscore are private. Names are imported on first
use so that `speedbench` commands start fast and load only what they need.
"""

from __future__ import annotations

import importlib
from typing import Any

from bench._version import __version__

_EXPORTS = {
    "BenchError": "bench._errors",
    "EmbeddedServer": "bench._server",
    "PromptSet": "bench._prompts",
    "Run": "bench._records",
    "RunConfig": "bench._runner",
    "Sample": "bench._prompts",
    "SampleResult": "bench._records",
    "ServerConfig": "bench._server",
    "compare_runs": "bench._summary",
    "comparison_text": "bench._render",
    "load_prompts": "bench._prompts",
    "load_run": "bench._records",
    "lossless_check": "bench._analysis",
    "paired_stats": "bench._analysis",
    "run_benchmark": "bench._runner",
    "save_run": "bench._records",
    "summarize": "bench._summary",
    "summary_text": "bench._render",
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
