"""SGLang: `sglext.spec_tokens_details` per request and `sglang:spec_*` gauges."""

from __future__ import annotations

from bench._types import JsonMapping, JsonObject
from bench.engines._base import Engine, TurnStats, acceptance_gauges_of, count, drafts, openai_fields
from bench.engines._json import object_at


class SGLang(Engine):
    """SGLang: asks for `return_spec_tokens_details`, reads `sglext.spec_tokens_details` and its gauges."""

    name = "sglang"
    metric_prefix = "sglang"

    def request_fields(self) -> JsonObject:
        """Ask SGLang for per-request speculative details."""
        return {"return_spec_tokens_details": True}

    def reasoning_fields(self, setting: str) -> JsonObject:
        """SGLang: the template's `enable_thinking` via `chat_template_kwargs`; with thinking on, the thought returned
        apart (`separate_reasoning`)."""
        fields = super().reasoning_fields(setting)
        if setting == "on":
            fields["separate_reasoning"] = True
        return fields

    def parse(self, data: JsonMapping) -> TurnStats:
        """Read usage, text and `sglext.spec_tokens_details`."""
        fields = openai_fields(data)
        spec = object_at(object_at(data, "sglext"), "spec_tokens_details")
        if not spec:
            self.notes.add("SGLang responses carry no sglext.spec_tokens_details: per-request acceptance is n/a")
        return self.seen(TurnStats(
            **fields,
            **drafts(spec, "spec_num_proposed_drafts", "spec_num_correct_drafts", "sglext.spec_tokens_details"),
            spec_steps=count(spec.get("spec_verify_ct")),
        ))

    def acceptance_gauges(self, metrics_text: str) -> dict[str, float | None] | None:
        """Read `sglang:spec_accept_length` and `sglang:spec_accept_rate` (time-averaged)."""
        return acceptance_gauges_of(metrics_text, "sglang")

    @classmethod
    def claims(cls, response: JsonMapping | None, metrics_text: str) -> bool:
        """SGLang exposes `sglang:` metrics or answers with `sglext`."""
        return super().claims(response, metrics_text) or bool(response and "sglext" in response)
