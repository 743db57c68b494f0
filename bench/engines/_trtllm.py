"""TensorRT-LLM: client timing per request, acceptance from its `trtllm:spec_*` gauges."""

from __future__ import annotations

from bench.engines._base import Engine, acceptance_gauges_of


class TensorRTLLM(Engine):
    """TensorRT-LLM: client timing per request, acceptance from its `trtllm:spec_*` gauges."""

    name = "trtllm"
    metric_prefix = "trtllm"

    def acceptance_gauges(self, metrics_text: str) -> dict[str, float | None] | None:
        """Read `trtllm:spec_accept_length` and `trtllm:spec_accept_rate`."""
        return acceptance_gauges_of(metrics_text, "trtllm")
