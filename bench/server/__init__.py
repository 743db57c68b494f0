"""Embedded servers on loopback: llama.cpp (the `xllamacpp` wheel) in a child process, vLLM from `.venv-vllm`."""

from bench.server._embedded import (
    MODES,
    RESET_BY_RESTART,
    STATEFUL_MODES,
    EmbeddedServer,
    ServerConfig,
    ServerError,
    default_model_path,
    model_path,
)
from bench.server._factory import (
    SERVER_ENGINES,
    ServerRequest,
    engine_display_name,
    folder_prefix,
    make_server,
    server_tags,
    speculative_modes,
)
from bench.server._models import DEFAULT_MODEL, MODELS, SMOLLM2, ModelError, cache_dir, model_name, resolve_model
from bench.server._vllm import VLLM_MODES, VLLM_REQUIREMENT, VllmConfig, VllmServer, vllm_python

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "MODES",
    "RESET_BY_RESTART",
    "SERVER_ENGINES",
    "SMOLLM2",
    "STATEFUL_MODES",
    "VLLM_MODES",
    "VLLM_REQUIREMENT",
    "EmbeddedServer",
    "ModelError",
    "ServerConfig",
    "ServerError",
    "ServerRequest",
    "VllmConfig",
    "VllmServer",
    "cache_dir",
    "default_model_path",
    "engine_display_name",
    "folder_prefix",
    "make_server",
    "model_name",
    "model_path",
    "resolve_model",
    "server_tags",
    "speculative_modes",
    "vllm_python",
]
