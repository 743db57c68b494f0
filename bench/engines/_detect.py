"""Which adapter speaks for a server: chosen by name, or detected from /metrics or a first response."""

from __future__ import annotations

from bench._types import JsonMapping
from bench.engines._base import Engine
from bench.engines._llamacpp import LlamaCpp
from bench.engines._sglang import SGLang
from bench.engines._trtllm import TensorRTLLM
from bench.engines._vllm import VLLM

ENGINES: dict[str, type[Engine]] = {
    engine.name: engine for engine in (LlamaCpp, VLLM, SGLang, TensorRTLLM, Engine)
}
"""Known adapters by name; `auto` picks one with `detect_engine`."""
ENGINE_NAMES = ("auto", *ENGINES)
_DETECTION_ORDER = (LlamaCpp, SGLang, VLLM, TensorRTLLM)


def engine_by_name(name: str) -> Engine:
    """The adapter called `name` (not `auto`)."""
    return ENGINES[name]()


def engine_from_metrics(metrics_text: str) -> Engine | None:
    """The adapter whose metric prefix the /metrics text carries, or None when it names no engine."""
    for engine in _DETECTION_ORDER:
        if engine.claims(None, metrics_text):
            return engine()
    return None


def detect_engine(response: JsonMapping | None, metrics_text: str) -> Engine:
    """Pick the adapter that claims the /metrics text or a first response; plain OpenAI otherwise."""
    found = engine_from_metrics(metrics_text)
    if found is not None:
        return found
    for engine in _DETECTION_ORDER:
        if engine.claims(response, ""):
            return engine()
    return Engine()


def tokenizing_engines() -> list[Engine]:
    """One instance of every adapter that can count tokens on its server."""
    return [engine() for engine in _DETECTION_ORDER if engine().tokenize_request("") is not None]
