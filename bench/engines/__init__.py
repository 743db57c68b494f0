"""Engine adapters: what each server (llama.cpp, vLLM, SGLang, TensorRT-LLM, plain OpenAI) returns, read one way."""

from bench.engines._base import Engine, ResponseError, TurnStats, chunk_token_evidence
from bench.engines._detect import (
    ENGINE_NAMES,
    ENGINES,
    detect_engine,
    engine_by_name,
    engine_from_metrics,
    tokenizing_engines,
)
from bench.engines._llamacpp import LlamaCpp
from bench.engines._prometheus import by_label, parse_prometheus, value_of
from bench.engines._sglang import SGLang
from bench.engines._trtllm import TensorRTLLM
from bench.engines._vllm import VLLM

__all__ = [
    "ENGINES",
    "ENGINE_NAMES",
    "VLLM",
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
    "engine_from_metrics",
    "parse_prometheus",
    "tokenizing_engines",
    "value_of",
]
