"""llama.cpp server: per-request `timings` with draft counts, `llamacpp:spec_decode_*` counters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from bench._types import JsonMapping, JsonObject, JsonValue
from bench.engines._base import Engine, TurnStats, checked, count, drafts, openai_fields, spec_decode_counters
from bench.engines._json import object_at
from bench.records import CounterSnapshot, ServerDescription


class LlamaCpp(Engine):
    """llama.cpp server: per-request `timings` (with draft counts) and `llamacpp:spec_decode_*` counters."""

    name = "llamacpp"
    metric_prefix = "llamacpp"

    def parse(self, data: JsonMapping) -> TurnStats:
        """Read usage, text and the `timings` object."""
        fields = openai_fields(data)
        timings = object_at(data, "timings")
        if not timings:
            self.notes.add("llama.cpp responses carry no 'timings': server t/s and acceptance are n/a")
        prompt_n = count(checked(timings, "prompt_n"))
        predicted_n = count(checked(timings, "predicted_n"))
        cache_n = count(timings.get("cache_n"))
        decode_ok = self._agree("usage.completion_tokens", fields["completion_tokens"], "timings.predicted_n",
                                predicted_n, "server decode t/s")
        if not fields["prompt_tokens"] and prompt_n:
            fields["prompt_tokens"] = prompt_n
        if not fields["completion_tokens"] and predicted_n:
            fields["completion_tokens"] = predicted_n
        if not fields["total_tokens"]:
            fields["total_tokens"] = fields["prompt_tokens"] + fields["completion_tokens"]
        return self.seen(TurnStats(
            **fields,
            **drafts(timings, "draft_n", "draft_n_accepted", "timings"),
            prompt_ms=checked(timings, "prompt_ms"),
            predicted_ms=checked(timings, "predicted_ms") if decode_ok else None,
            prompt_per_second=checked(timings, "prompt_per_second"),
            predicted_per_second=checked(timings, "predicted_per_second") if decode_ok else None,
            cache_n=cache_n,
        ))

    def reasoning_fields(self, setting: str) -> JsonObject:
        """llama.cpp reads `chat_template_kwargs` (the template's `enable_thinking`) per request; with thinking on it
        also asks for the thought apart (`reasoning_format` deepseek: `reasoning_content`)."""
        fields = super().reasoning_fields(setting)
        if setting == "on":
            fields["reasoning_format"] = "deepseek"
        return fields

    def _agree(self, usage_name: str, usage: int, timings_name: str, timings: int | None, figure: str) -> bool:
        """Whether a response's usage count and its timings' count agree (both given); a warning when not."""
        if not usage or timings is None or usage == timings:
            return True
        self.notes.add(f"responses contradict themselves ({usage_name} {usage} against {timings_name} {timings}): "
                       f"{figure} withheld for those responses")
        return False

    def acceptance_counters(self, metrics_text: str) -> CounterSnapshot | None:
        """Read the `llamacpp:spec_decode_*` counters."""
        return spec_decode_counters(metrics_text, "llamacpp")

    def info_paths(self) -> dict[str, str]:
        """llama.cpp describes itself at `/props` (build, model path, slots) and `/slots` (speculation per slot)."""
        return {"props": "/props", "slots": "/slots"}

    def late_info_paths(self) -> dict[str, str]:
        """`/slots` names the speculative type only once a slot has served a request: read again after the run."""
        return {"slots": "/slots"}

    def trim_info(self, name: str, data: JsonValue) -> JsonValue:
        """Drop the chat templates from `/props`: large and not a setting of the run; of `/slots` keep what
        describes speculation (each slot's flag and `speculative.*` settings), not the prompts it holds."""
        if name == "slots" and isinstance(data, list):
            return [{"id": slot.get("id"), "n_ctx": slot.get("n_ctx"), "speculative": slot.get("speculative"),
                     "params": _speculative_params(slot.get("params"))}
                    for slot in data if isinstance(slot, dict)]
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if key not in {"chat_template", "chat_template_tool_use"}}
        return data

    def describe(self, info: JsonMapping) -> ServerDescription:
        """`/props` names the build, the model file and the slots."""
        described = super().describe(info)
        props = object_at(info, "props")
        build = props.get("build_info")
        if isinstance(build, str) and build and build != "b0-unknown":
            described = replace(described, build=build)
        model = props.get("model_path")
        if isinstance(model, str) and model:
            described = replace(described, model=model.replace("\\", "/").rsplit("/", 1)[-1])
        slots = props.get("total_slots")
        if isinstance(slots, int) and not isinstance(slots, bool):
            described = replace(described, slots=slots)
        return _with_speculation(described, props, info.get("slots"))

    def tokenize_request(self, text: str) -> tuple[str, JsonObject] | None:
        """llama.cpp's `/tokenize` takes `content`."""
        return "/tokenize", {"content": text}

    def token_count(self, response: JsonValue) -> int | None:
        """Its answer lists the `tokens`."""
        tokens = response.get("tokens") if isinstance(response, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    @classmethod
    def claims(cls, response: JsonMapping | None, metrics_text: str) -> bool:
        """llama.cpp answers with a `timings` object."""
        return super().claims(response, metrics_text) or bool(response and isinstance(response.get("timings"), dict))


def _speculative_params(params: JsonValue) -> JsonObject:
    """The `speculative.*` entries of a slot's (or the default) generation params, keyed as the server names them."""
    if not isinstance(params, Mapping):
        return {}
    return {key: value for key, value in params.items() if isinstance(key, str) and key.startswith("speculative.")}


def _with_speculation(described: ServerDescription, props: JsonMapping, slots: JsonValue) -> ServerDescription:
    """The speculation /slots reports (each slot's `speculative` flag, `speculative.types` once it served) and the
    draft settings beside it; /props' defaults only where the slots say nothing."""
    listed = [slot for slot in slots if isinstance(slot, Mapping)] if isinstance(slots, list) else []
    flags = {slot.get("speculative") for slot in listed if isinstance(slot.get("speculative"), bool)}
    params = next((_speculative_params(slot.get("params")) for slot in listed
                   if _speculative_params(slot.get("params"))), {})
    if not params:
        defaults = props.get("default_generation_settings")
        params = _speculative_params(defaults.get("params") if isinstance(defaults, Mapping) else None)
    said = params.get("speculative.types")
    kind = said if isinstance(said, str) and said else None
    mode: str | None
    if flags == {False}:
        mode = "none"
    elif kind and kind != "none":
        mode = kind
    elif flags == {True}:
        mode = "speculative (type not reported)"
    else:
        mode = kind  # "none" from the defaults alone, or nothing said
    settings = {key: value for key, value in params.items() if key != "speculative.types"}
    return replace(described, speculative=mode, draft_settings=settings)
