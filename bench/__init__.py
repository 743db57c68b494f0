"""speedbench: benchmark speculative decoding in LLM servers and report SpeedBench tables you can trust.

The public API is below; modules with a leading underscore are private. Names are imported on first
use so that `speedbench` commands start fast and load only what they need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


# The same names for a type checker, which cannot follow the lazy import below.
if TYPE_CHECKING:
    from bench._constants import (
        DEFAULT_THRESHOLD as DEFAULT_THRESHOLD,
        MIN_SAMPLES_FOR_CI as MIN_SAMPLES_FOR_CI,
        OVERALL as OVERALL,
    )
    from bench._errors import (
        BenchError as BenchError,
    )
    from bench._inputs import (
        read_input as read_input,
    )
    from bench._redact import (
        command_secrets as command_secrets,
        forget_secrets as forget_secrets,
        redact as redact,
        redact_url as redact_url,
        register_secret as register_secret,
    )
    from bench.analysis import (
        compare_runs as compare_runs,
        lossless_check as lossless_check,
        paired_stats as paired_stats,
    )
    from bench.prompts import (
        PromptSet as PromptSet,
        Sample as Sample,
        load_prompts as load_prompts,
    )
    from bench.records import (
        Run as Run,
        SampleResult as SampleResult,
        load_run as load_run,
        save_run as save_run,
        summarize as summarize,
    )
    from bench.render import (
        comparison_text as comparison_text,
        summary_text as summary_text,
    )
    from bench.runner import (
        RunConfig as RunConfig,
        run_benchmark as run_benchmark,
    )
    from bench.server import (
        EmbeddedServer as EmbeddedServer,
        ServerConfig as ServerConfig,
    )


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
