"""vLLM: per-request `metrics.speculative_decoding` and `vllm:spec_decode_*` counters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.engines._base import Engine, TurnStats, count, drafts, openai_fields, spec_decode_counters


class VLLM(Engine):
    """vLLM: per-request `metrics.speculative_decoding` and `vllm:spec_decode_*` counters."""

    name = "vllm"
    metric_prefix = "vllm"

    def parse(self, data: Mapping[str, Any]) -> TurnStats:
        """Read usage, text and `metrics.speculative_decoding` when the server sends it."""
        fields = openai_fields(data)
        metrics = data.get("metrics") if isinstance(data.get("metrics"), dict) else {}
        spec = metrics.get("speculative_decoding") if isinstance(metrics.get("speculative_decoding"), dict) else {}
        if not spec:
            self.notes.add(
                "vLLM responses carry no metrics.speculative_decoding (start vLLM with "
                "--per-request-spec-decode-metrics): per-request acceptance is n/a"
            )
        return TurnStats(
            **fields,
            **drafts(spec, "num_draft_tokens", "num_accepted_draft_tokens", "metrics.speculative_decoding"),
            spec_steps=count(spec.get("num_spec_steps")),
        )

    def acceptance_counters(self, metrics_text: str) -> dict[str, Any] | None:
        """Read the `vllm:spec_decode_*` counters."""
        return spec_decode_counters(metrics_text, "vllm")

    @classmethod
    def claims(cls, response: Mapping[str, Any] | None, metrics_text: str) -> bool:
        """vLLM exposes `vllm:` metrics or per-request `metrics.speculative_decoding`."""
        metrics = response.get("metrics") if response else None
        return super().claims(response, metrics_text) or (
            isinstance(metrics, dict) and "speculative_decoding" in metrics
        )
