"""Engine adapters: what each server (llama.cpp, vLLM, SGLang, TensorRT-LLM, plain OpenAI) returns, read one way."""

from bench.engines._adapters import (
    ENGINE_NAMES,
    ENGINES,
    VLLM,
    AutoEngine,
    Engine,
    LlamaCpp,
    ResponseError,
    SGLang,
    TensorRTLLM,
    TurnStats,
    chunk_token_evidence,
    detect_engine,
    engine_by_name,
)
from bench.engines._prometheus import by_label, parse_prometheus, value_of

__all__ = [
    "ENGINES",
    "ENGINE_NAMES",
    "VLLM",
    "AutoEngine",
    "Engine",
    "LlamaCpp",
    "ResponseError",
    "SGLang",
    "TensorRTLLM",
    "TurnStats",
    "by_label",
    "chunk_token_evidence",
    "detect_engine",
    "engine_by_name",
    "parse_prometheus",
    "value_of",
]
